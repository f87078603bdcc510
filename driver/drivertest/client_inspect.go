package drivertest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/admin"
	"github.com/quorumlock/redlock/internal/clientx"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/internal/wire"
	"github.com/quorumlock/redlock/observe"
)

// LeastPrivilege is the ACL rule set, for ACL SETUSER, with which a user
// can do everything the lock client does (Lock, Extend, Release,
// AutoExtend, notified waiting, Probe, Inspect, ForceRelease, semaphores,
// elections, read-write locks and Adopt) on keys that start with "locks:",
// and nothing else: no FLUSHALL, CONFIG or KEYS, and no other keys. The
// commands from +exists on are those of read-write locks and Adopt; a
// user without them still does everything else, and Inspect shows it no
// readers.
var LeastPrivilege = []string{
	"resetkeys", "~locks:*", "~redlock:*",
	"resetchannels", "&redlock:released:*", "&redlock:leader:*",
	"-@all", "+hello", "+ping", "+evalsha", "+eval", "+subscribe", "+unsubscribe",
	"+get", "+set", "+del", "+pexpire", "+pttl", "+hget", "+hmget", "+hset",
	"+time", "+info", "+lastsave", "+publish",
	"+exists", "+mget", "+zadd", "+zrem", "+zscore", "+zrange", "+zrangebyscore",
	"+zremrangebyscore", "+zcount", "+zcard",
}

// testOperations: what operators see of a lock and how they clear it.
func (s *suite) testOperations(t *testing.T) {
	t.Run("InspectStates", s.testInspectStates)
	t.Run("InspectRefusedAndUnreachable", s.testInspectErrors)
	t.Run("ForceRelease", s.testForceRelease)
	t.Run("OwnerLabel", s.testOwnerLabel)
	t.Run("LeastPrivilegeACL", s.testLeastPrivilege)
}

// testInspectStates: a free key, a held one, a split one and one that has
// expired, as Inspect reads them.
func (s *suite) testInspectStates(t *testing.T) {
	cl := startCluster(t, 3, false)
	c := s.client(t, cl.urls(), &redlock.Options{Owner: "inspector-test"})
	ctx, key := ctxT(t), keyFor(t)

	ins := inspect(t, c, key)
	if ins.State != admin.KeyFree || ins.Holder != "" || len(ins.Nodes) != 3 {
		t.Fatalf("a key never locked: %+v", ins)
	}
	for _, v := range ins.Nodes {
		if v.Err != nil || v.Held {
			t.Errorf("node %s of a free key: %+v", v.Node, v)
		}
	}

	l := lockOnAll(t, ctx, c, key, 10*time.Second, cl.servers)
	ins = inspect(t, c, key)
	if ins.State != admin.KeyHeld || ins.Holder != l.ID() || ins.Owner != "inspector-test" || ins.Fence < l.Fence() {
		t.Fatalf("a held key: %+v, want held by %s (inspector-test) with fence >= %d", ins, l.ID(), l.Fence())
	}
	if strings.Contains(ins.Holder, nodeToken(l.Token())) || strings.Contains(ins.Owner, nodeToken(l.Token())) {
		t.Fatalf("Inspect reveals the token")
	}
	if end := ins.Ends; end.Before(time.Now()) || end.After(time.Now().Add(10*time.Second)) {
		t.Errorf("Ends %v is not within the lock's 10s", end)
	}
	for _, v := range ins.Nodes {
		if !v.Held || v.Holder != l.ID() || v.TTL <= 0 || v.TTL > 10*time.Second || v.Fence <= 0 {
			t.Errorf("node %s of a held key: %+v", v.Node, v)
		}
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Release returns on a quorum; the third node's release may still be
	// on its way.
	cl.awaitNoKey(t, key, 5*time.Second) // TTL 10s

	// Split: two owners on one node each, the third node empty.
	cl.servers[0].MustDo(t, "SET", key, "tokenA ownerA", "PX", "10000")
	cl.servers[1].MustDo(t, "SET", key, "tokenB", "PX", "10000")
	ins = inspect(t, c, key)
	if ins.State != admin.KeySplit || ins.Holder != "" {
		t.Fatalf("a split key: %+v", ins)
	}
	if v := ins.Nodes[0]; v.Owner != "ownerA" || v.Holder == "" || v.Holder == ins.Nodes[1].Holder {
		t.Errorf("nodes of a split key: %+v", ins.Nodes)
	}
	if v := ins.Nodes[1]; v.Owner != "" || !v.Held {
		t.Errorf("a value of an older client (a token alone): %+v", v)
	}

	// Expired: a lock whose TTL has run out is gone from every node.
	short, err := c.TryLock(ctx, key+":short", 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	cl.awaitNoKey(t, key+":short", 5*time.Second)
	ins = inspect(t, c, key+":short")
	if ins.State != admin.KeyFree || ins.Fence < short.Fence() {
		t.Errorf("an expired key: %+v, want free with fence >= %d", ins, short.Fence())
	}
}

// testInspectErrors: a node that holds another type under the key, and a
// node that does not answer, are shown as such; the verdict rests on the
// others, and is unknown without a quorum of answers.
func (s *suite) testInspectErrors(t *testing.T) {
	cl := startCluster(t, 3, false)
	c := s.client(t, cl.urls(), nil)
	ctx, key := ctxT(t), keyFor(t)
	l := lockOnAll(t, ctx, c, key, 10*time.Second, cl.servers)
	cl.servers[0].MustDo(t, "DEL", key)
	cl.servers[0].MustDo(t, "HSET", key, "f", "v")
	if err := cl.servers[2].Kill(); err != nil {
		t.Fatal(err)
	}
	ins := inspect(t, c, key)
	if ins.State != admin.KeyUnknown {
		t.Errorf("one answer of three: %v, want unknown", ins.State)
	}
	wrong, dead := ins.Nodes[0], ins.Nodes[2]
	if wrong.Outcome != observe.OutcomeRefused || !strings.Contains(errString(wrong.Err), "WRONGTYPE") {
		t.Errorf("node with a hash: %+v, want refused with WRONGTYPE", wrong)
	}
	if dead.Err == nil || dead.Outcome == observe.OutcomeRefused || dead.Outcome == observe.OutcomeOK {
		t.Errorf("killed node: %+v, want an error that is not a refusal", dead)
	}
	if v := ins.Nodes[1]; !v.Held || v.Holder != l.ID() {
		t.Errorf("the node that holds the lock: %+v", v)
	}
	if _, err := admin.New(c).Inspect(ctx, "redlock:node"); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("Inspect of a reserved key: %v, want ErrInvalid", err)
	}
}

// testForceRelease: an operator removes a lock whose owner is gone. The
// next owner's fence exceeds the removed one's on every node, the removed
// owner learns of the loss, and its Release finds nothing.
func (s *suite) testForceRelease(t *testing.T) {
	cl := startCluster(t, 3, false)
	holder := s.client(t, cl.urls(), &redlock.Options{Owner: "stuck-worker"})
	op := s.client(t, cl.urls(), &redlock.Options{Owner: "operator"})
	ctx, key := ctxT(t), keyFor(t)
	l := lockOnAll(t, ctx, holder, key, 30*time.Second, cl.servers)
	// The holder's fence is the largest its nodes gave. One node loses
	// its counter, as after its expiry: the floor that ForceRelease raises
	// every counter to must still cover the removed owner's fence, from
	// that node's clock if that node gave it.
	cl.servers[2].MustDo(t, "HDEL", wire.MarkerKey(key), wire.MarkerFence)

	views, err := admin.New(op).ForceRelease(ctx, key)
	if err != nil {
		t.Fatalf("ForceRelease: %v", err)
	}
	for _, v := range views {
		if v.Err != nil || !v.Held || v.Holder != l.ID() || v.Owner != "stuck-worker" || v.TTL <= 0 {
			t.Errorf("removed on %s: %+v, want stuck-worker's lock %s", v.Node, v, l.ID())
		}
	}
	cl.expectNoKey(t, key)
	for i, srv := range cl.servers {
		n, err := strconv.ParseInt(srv.MustDo(t, "HGET", wire.MarkerKey(key), wire.MarkerFence).(string), 10, 64)
		if err != nil || n < l.Fence() {
			t.Errorf("node %d: fence counter %d after ForceRelease, below the removed lock's %d", i, n, l.Fence())
		}
	}
	// The removed owner finds out at its next extension.
	if err := l.Extend(ctx, 30*time.Second); !errors.Is(err, redlock.ErrLockLost) {
		t.Errorf("the removed owner's Extend: %v, want ErrLockLost", err)
	}
	select {
	case <-l.Context().Done():
	default:
		t.Error("the removed owner's Context is not done after a failed Extend")
	}
	next, err := op.TryLock(ctx, key, 5*time.Second)
	if err != nil {
		t.Fatalf("the next owner: %v", err)
	}
	if next.Fence() <= l.Fence() {
		t.Errorf("the next owner's fence %d is not above the removed owner's %d", next.Fence(), l.Fence())
	}
	if err := next.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Release returns on a quorum: the last node's grant and release may
	// still be on their way, and ForceRelease would find that node held.
	// Close waits for them (the client stays usable); a grant that landed
	// so late that its release was cut off by ReleaseTimeout expires with
	// its TTL.
	op.Close()
	cl.settle(t, key, "")
	// Nothing left: ForceRelease of a free key removes nothing.
	views, err = admin.New(op).ForceRelease(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range views {
		if v.Held {
			t.Errorf("ForceRelease of a free key removed %+v", v)
		}
	}
	// With two nodes down, too few confirm.
	for _, srv := range cl.servers[:2] {
		if err := srv.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.New(op).ForceRelease(ctx, key); !errors.Is(err, redlock.ErrNoQuorum) {
		t.Errorf("ForceRelease with one node of three: %v, want ErrNoQuorum", err)
	}
}

// testOwnerLabel: the default label names the host and process, a label
// can be set, and a bad one is refused.
func (s *suite) testOwnerLabel(t *testing.T) {
	cl := startCluster(t, 1, false)
	c := s.client(t, cl.urls(), nil)
	ctx, key := ctxT(t), keyFor(t)
	l, err := c.TryLock(ctx, key, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	ins := inspect(t, c, key)
	if want := ":" + strconv.Itoa(os.Getpid()); !strings.HasSuffix(ins.Owner, want) || len(ins.Owner) <= len(want) {
		t.Errorf("default owner %q, want host%s", ins.Owner, want)
	}
	for _, bad := range []string{strings.Repeat("x", clientx.Limits.OwnerLen+1), "tab\there", "\xff"} {
		if _, err := redlock.New([]redlock.Node{s.dial(t, cl.urls()[0])}, &redlock.Options{Owner: bad}); !errors.Is(err, redlock.ErrInvalid) {
			t.Errorf("Owner %q: %v, want ErrInvalid", bad, err)
		}
	}
	u := "ünïcode owner with spaces"
	c2 := s.client(t, cl.urls(), &redlock.Options{Owner: u})
	l2, err := c2.TryLock(ctx, key+":2", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Release(ctx)
	if got := inspect(t, c, key+":2").Owner; got != u {
		t.Errorf("owner %q, want %q", got, u)
	}
}

// testLeastPrivilege: a user with LeastPrivilege does all the client
// does; without a rule of it, the client is refused.
func (s *suite) testLeastPrivilege(t *testing.T) {
	srvs := redistest.StartN(t, 3, redistest.Config{})
	urls := make([]string, len(srvs))
	for i, srv := range srvs {
		srv.MustDo(t, append([]string{"ACL", "SETUSER", ACLUser, "on", ">" + ACLPassword}, LeastPrivilege...)...)
		urls[i] = aclURL(srv, ACLUser, ACLPassword)
	}
	c := s.quarantineClient(t, urls, &redlock.Options{Quarantine: 100 * time.Millisecond})
	c2 := s.quarantineClient(t, urls, &redlock.Options{Quarantine: 100 * time.Millisecond})
	ctx, key := ctxT(t), "locks:"+keyFor(t)
	time.Sleep(time.Second) // let the servers outlive the quarantine (whole seconds of uptime)
	if st := admin.New(c).Probe(ctx); st[0].Err != nil {
		t.Fatalf("Probe: %v", st[0].Err)
	}
	l, err := c.Lock(ctx, key, 2*time.Second)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	// A waiter, woken by the release's notification.
	got := make(chan error, 1)
	go func() {
		l2, err := c2.Lock(ctx, key, 2*time.Second)
		if err == nil {
			err = l2.Release(ctx)
		}
		got <- err
	}()
	if err := l.Extend(ctx, 2*time.Second); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if _, err := admin.New(c).Inspect(ctx, key); err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiter: %v", err)
	}
	l, err = c.Lock(ctx, key, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.New(c2).ForceRelease(ctx, key); err != nil {
		t.Fatalf("ForceRelease: %v", err)
	}
	if err := l.Release(ctx); !errors.Is(err, redlock.ErrLockLost) {
		t.Errorf("Release after ForceRelease: %v, want ErrLockLost", err)
	}
	// A permit of a semaphore, and an election's leadership.
	p, err := c.Semaphore(key+":sem", 2).Acquire(ctx, 2*time.Second)
	if err != nil {
		t.Fatalf("Semaphore.Acquire: %v", err)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatalf("Permit.Release: %v", err)
	}
	e := c.Election(key+":elect", 2*time.Second)
	lead, err := e.Campaign(ctx, "me")
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	if info, err := c2.Election(key+":elect", 2*time.Second).Leader(ctx); err != nil || info.Term != lead.Fence() {
		t.Errorf("Leader: %+v, %v; want term %d", info, err, lead.Fence())
	}
	if err := lead.Release(ctx); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	// What the user cannot do.
	for _, cmd := range [][]string{{"FLUSHALL"}, {"CONFIG", "GET", "maxmemory"}, {"KEYS", "*"}, {"GET", "other:key"}} {
		if err := s.rawAs(t, srvs[0], cmd); err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("%v as the least-privileged user: %v, want NOPERM", cmd, err)
		}
	}
	// Each rule matters to the scripts: without INFO, the acquire script
	// is refused.
	srvs[0].MustDo(t, "ACL", "SETUSER", ACLUser, "-info")
	srvs[1].MustDo(t, "ACL", "SETUSER", ACLUser, "-info")
	if _, err := c.TryLock(ctx, key+":x", time.Second); !errors.Is(err, redlock.ErrRefused) || !strings.Contains(err.Error(), "can't run this command") {
		t.Errorf("without +info: %v, want a refusal that says the script cannot run a command", err)
	}
}

// rawAs sends cmd to srv as the ACL user, on a connection of its own,
// and returns the error reply if there is one.
func (s *suite) rawAs(t *testing.T, srv *redistest.Server, cmd []string) error {
	t.Helper()
	conn, err := net.DialTimeout(srv.Network(), srv.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	for _, c := range [][]string{{"AUTH", ACLUser, ACLPassword}, cmd} {
		fmt.Fprintf(&b, "*%d\r\n", len(c))
		for _, a := range c {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
	}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	var last string
	for range 2 { // the first line of each reply is enough to tell an error
		if last, err = r.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(last, "-") {
			return errors.New(strings.TrimSpace(last[1:]))
		}
	}
	return nil
}

// inspect calls c.Inspect and fails t on an error.
func inspect(t *testing.T, c *redlock.Client, key string) *admin.Inspection {
	t.Helper()
	ins, err := admin.New(c).Inspect(ctxT(t), key)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	return ins
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
