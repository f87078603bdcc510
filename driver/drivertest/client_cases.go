package drivertest

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/admin"
	"github.com/quorumlock/redlock/driver"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/internal/wire"
	"github.com/quorumlock/redlock/observe"
)

// testScripts checks the single-node building blocks through the adapter:
// the acquire script grants once with a fence, finds its own grant again
// on a retry and refuses other tokens; release and extend touch only their
// own token and never create a key; release raises the fence counter.
func (s *suite) testScripts(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	node := s.dial(t, srv.URL())
	ctx, key := ctxT(t), keyFor(t)
	marker := wire.MarkerKey(key)
	acquire, release, extend := Script(t, "acquire"), Script(t, "release"), Script(t, "extend")
	eval := func(sc *driver.Script, keys []string, args ...string) any {
		t.Helper()
		v, err := node.Eval(ctx, sc, keys, args)
		if err != nil {
			t.Fatalf("%s %v: %v", sc.Name(), args, err)
		}
		if a, ok := v.([]int64); ok { // as an adapter may return an array of integers
			v = make([]any, len(a))
			for i, e := range a {
				v.([]any)[i] = e
			}
		}
		return v
	}
	acq := func(token string) []int64 {
		t.Helper()
		v := eval(acquire, []string{key, marker}, token, "10000", "0")
		a, ok := v.([]any)
		if !ok || len(a) != 4 {
			t.Fatalf("acquire reply %#v, want 4 integers", v)
		}
		out := make([]int64, 4)
		for i := range a {
			if out[i], ok = a[i].(int64); !ok {
				t.Fatalf("acquire reply %#v, want 4 integers", v)
			}
		}
		return out
	}
	expect := func(what string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: got %#v, want %#v", what, got, want)
		}
	}
	first := acq("tokA")
	nodeTime := time.Now().UnixMicro()
	if first[0] != 1 || first[1] < nodeTime-60e6 || first[1] > nodeTime+60e6 {
		t.Fatalf("first acquire %v: want a grant whose fence is the node's clock in µs (about %d)", first, nodeTime)
	}
	if first[3] != 10000 {
		t.Fatalf("acquire reports maxttl %d, want 10000", first[3])
	}
	expect("fence counter", srv.MustDo(t, "HGET", marker, wire.MarkerFence), strconv.FormatInt(first[1], 10))
	// The counter is the slot's, in the marker, which has no expiry:
	// the released lock leaves no record of its key.
	expect("retried acquire with the same token", acq("tokA")[:2], first[:2])
	refused := acq("tokB")
	if refused[0] != 0 || refused[1] <= 0 || refused[1] > 10000 {
		t.Fatalf("acquire with another token: %v, want {0, pttl in (0, 10000]}", refused)
	}
	expect("release with another token", eval(release, []string{key, marker}, "tokB", "0"), []any{int64(-1), int64(0)})
	expect("extend with another token", eval(extend, []string{key, marker}, "tokB", "20000"), int64(-1))
	expect("key after foreign release and extend", srv.MustDo(t, "GET", key), "tokA")
	expect("extend", eval(extend, []string{key, marker}, "tokA", "20000"), int64(1))
	if pttl := srv.MustDo(t, "PTTL", key).(int64); pttl <= 10000 {
		t.Fatalf("PTTL after extend to 20s is %d ms", pttl)
	}
	// The extension's end is recorded: a grant of 20s is no longer than a
	// minute, and joins the rest (until2, ttl2; see wire/lua/node.lua).
	expect("ttl2 after a longer extension", srv.MustDo(t, "HGET", marker, "ttl2"), "20000")
	raised := strconv.FormatInt(first[1]+1000, 10)
	expect("release", eval(release, []string{key, marker}, "tokA", raised), []any{int64(1), int64(0)})
	expect("fence counter after release", srv.MustDo(t, "HGET", marker, wire.MarkerFence), raised)
	expect("second release", eval(release, []string{key, marker}, "tokA", "5"), []any{int64(0), int64(0)})
	expect("a release never lowers the counter", srv.MustDo(t, "HGET", marker, wire.MarkerFence), raised)
	expect("extend of an absent key", eval(extend, []string{key, marker}, "tokA", "20000"), int64(0))
	expect("EXISTS after extending an absent key", srv.MustDo(t, "EXISTS", key), int64(0))
	if next := acq("tokC"); next[0] != 1 || next[1] <= first[1]+1000 {
		t.Fatalf("next grant %v: fence not above the raised counter %s", next, raised)
	}
}

// testLockRelease obtains and releases a lock on n nodes and checks the
// keys on every node at each step.
func (s *suite) testLockRelease(t *testing.T, n int, unix bool) {
	cl := startCluster(t, n, unix)
	// The grant must reach every node for b's round to find the key taken
	// on each: a generous node timeout, so that a loaded machine does not
	// cut off the request to the last node (the default for a 10s lock is
	// 250ms).
	opts := &redlock.Options{NodeTimeout: 2 * time.Second}
	a, b := s.client(t, cl.urls(), opts), s.client(t, cl.urls(), opts)
	ctx, key := ctxT(t), keyFor(t)
	if admin.New(a).Quorum() != n/2+1 {
		t.Fatalf("Quorum() = %d, want %d", admin.New(a).Quorum(), n/2+1)
	}
	before := time.Now()
	l, err := a.TryLock(ctx, key, 10*time.Second)
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	if l.Key() != key || len(l.Token()) < 27 {
		t.Fatalf("lock has key %q token %q", l.Key(), l.Token())
	}
	if u := l.Until(); !u.After(before) || u.After(before.Add(10*time.Second)) || !valid(l) {
		t.Fatalf("Until %v is not within (start, start+ttl], or lock not Valid", u)
	}
	if got := cl.countValue(t, key, l.Token()); got < admin.New(a).Quorum() {
		t.Fatalf("token on %d nodes, want at least %d", got, admin.New(a).Quorum())
	}
	cl.settle(t, key, l.Token()) // the grants beyond the quorum follow
	_, err = b.TryLock(ctx, key, 10*time.Second)
	oe := mustOpError(t, err, redlock.ErrTaken)
	for i, nr := range oe.Nodes {
		if nr.Outcome != observe.OutcomeTaken && nr.Outcome != observe.OutcomeNoAnswer {
			t.Errorf("node %d (%s): outcome %v, want taken", i, nr.Node, nr.Outcome)
		}
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	cl.awaitNoKey(t, key, 5*time.Second) // TTL 10s
	if valid(l) {
		t.Fatal("Valid() after Release")
	}
	if err := l.Release(ctx); !errors.Is(err, redlock.ErrReleased) {
		t.Fatalf("second Release: %v, want ErrReleased", err)
	}
	if err := l.Extend(ctx, 10*time.Second); !errors.Is(err, redlock.ErrReleased) {
		t.Fatalf("Extend after Release: %v, want ErrReleased", err)
	}
	l2, err := b.TryLock(ctx, key, 10*time.Second)
	if err != nil {
		t.Fatalf("TryLock after release: %v", err)
	}
	if l2.Token() == l.Token() {
		t.Fatal("two acquisitions share a token")
	}
	if err := l2.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// testSubsetsDown kills and restarts real servers so that every subset of
// the n nodes is down once (in Gray-code order, one kill or restart per
// step), and checks that a lock is obtained exactly when a quorum is up.
func (s *suite) testSubsetsDown(t *testing.T, n int) {
	cl := startCluster(t, n, false)
	c := s.client(t, cl.urls(), &redlock.Options{NodeTimeout: 500 * time.Millisecond})
	ctx := ctxT(t)
	down := 0 // bit i set: server i is down
	for step := 0; step < 1<<n; step++ {
		want := step ^ step>>1
		for i := 0; i < n; i++ {
			bit := 1 << i
			switch {
			case want&bit != 0 && down&bit == 0:
				if err := cl.servers[i].Kill(); err != nil {
					t.Fatal(err)
				}
			case want&bit == 0 && down&bit != 0:
				if err := cl.servers[i].Restart(); err != nil {
					t.Fatal(err)
				}
			}
		}
		down = want
		up := n
		for i := 0; i < n; i++ {
			if down&(1<<i) != 0 {
				up--
			}
		}
		key := keyFor(t)
		if up >= admin.New(c).Quorum() {
			// Lock, not TryLock: a client library may take a moment to
			// dial a node that has just come back (go-redis stops
			// dialling for up to a second after repeated failures).
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			l, err := c.Lock(wctx, key, 10*time.Second)
			cancel()
			if err != nil {
				t.Fatalf("down=%0*b: %d of %d up, Lock: %v", n, down, up, n, err)
			}
			if err := l.Release(ctx); err != nil {
				t.Fatalf("down=%0*b: Release: %v", n, down, err)
			}
		} else {
			_, err := c.TryLock(ctx, key, 10*time.Second)
			oe := mustOpError(t, err, redlock.ErrNoQuorum)
			for i, nr := range oe.Nodes {
				if down&(1<<i) != 0 && nr.Outcome != observe.OutcomeFailed {
					t.Errorf("down=%0*b: killed node %d has outcome %v", n, down, i, nr.Outcome)
				}
			}
		}
		cl.awaitNoKey(t, key, 5*time.Second) // TTL 10s
	}
}

// testTaken checks that a held lock is refused to others, that Lock with a
// bound on tries gives up after that many rounds, and that a refused round
// leaves nothing behind.
func (s *suite) testTaken(t *testing.T) {
	cl := startCluster(t, 3, false)
	a := s.client(t, cl.urls(), nil)
	b := s.client(t, cl.urls(), &redlock.Options{Tries: 3})
	ctx, key := ctxT(t), keyFor(t)
	l := lockOnAll(t, ctx, a, key, 10*time.Second, cl.servers)
	_, err := b.Lock(ctx, key, 10*time.Second)
	oe := mustOpError(t, err, redlock.ErrTaken)
	if oe.Rounds != 3 || oe.Op != "acquire" || oe.Key != key || oe.Quorum != 2 {
		t.Fatalf("OpError %+v, want 3 rounds of acquire on %q with quorum 2", oe, key)
	}
	for _, nr := range oe.Nodes {
		if nr.Outcome != observe.OutcomeTaken || nr.TTL <= 0 || nr.TTL > 10*time.Second {
			t.Errorf("node %s: %v with TTL %v, want taken with the holder's TTL", nr.Node, nr.Outcome, nr.TTL)
		}
	}
	if !strings.Contains(err.Error(), "taken") || !strings.Contains(err.Error(), "after 3 rounds") {
		t.Errorf("error text %q does not say what happened", err)
	}
	if got := cl.countValue(t, key, l.Token()); got != 3 {
		t.Fatalf("holder's token on %d of 3 nodes after refused rounds", got)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// runs returns a proxy matcher for the commands that run the named script.
func runs(name string) func(args []string) bool {
	sc, err := script(name)
	if err != nil {
		panic(err)
	}
	return func(args []string) bool { return Runs(args, sc) }
}

var isAcquire = runs("acquire")

// testLostReply drops the reply to an acquire that the node applied: the
// client sees a failure there, the round fails, and the clean-up must
// delete the key on that node too.
func (s *suite) testLostReply(t *testing.T) {
	cl := startCluster(t, 3, false)
	proxy := redistest.StartProxy(t, cl.servers[0])
	urls := cl.urls()
	urls[0] = proxy.URL()
	c := s.client(t, urls, nil)
	ctx, key := ctxT(t), keyFor(t)
	cl.servers[1].MustDo(t, "SET", key, "someone-else", "PX", "10000")
	proxy.DropReplies(1, isAcquire)

	_, err := c.TryLock(ctx, key, 10*time.Second)
	oe := mustOpError(t, err, redlock.ErrTaken)
	if proxy.Dropped() != 1 {
		t.Fatalf("proxy dropped %d replies, want 1", proxy.Dropped())
	}
	if got := outcomes(oe); got != "failed,taken,ok" {
		t.Fatalf("outcomes %s, want failed,taken,ok", got)
	}
	if got := cl.values(t, key); !reflect.DeepEqual(got, []string{"", "someone-else", ""}) {
		t.Fatalf("keys after the failed round: %q; the applied grant behind the lost reply was not released", got)
	}
}

// testLostReplyN1 is the lost reply on a single node.
func (s *suite) testLostReplyN1(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	proxy := redistest.StartProxy(t, srv)
	c := s.client(t, []string{proxy.URL()}, nil)
	ctx, key := ctxT(t), keyFor(t)
	proxy.DropReplies(1, isAcquire)
	_, err := c.TryLock(ctx, key, 10*time.Second)
	mustOpError(t, err, redlock.ErrNoQuorum)
	if proxy.Dropped() != 1 {
		t.Fatalf("proxy dropped %d replies, want 1", proxy.Dropped())
	}
	if v := srv.MustDo(t, "GET", key); v != nil {
		t.Fatalf("key %q left behind after the lost reply", v)
	}
}

// testMutualExclusion runs many contenders, each with its own connections,
// on one key. Under the lock each does a read, a pause and a write of a
// shared counter; a lost update or two holders at once fails the test.
func (s *suite) testMutualExclusion(t *testing.T) {
	cl := startCluster(t, 3, false)
	ctx, key := ctxT(t), keyFor(t)
	clients := make([]*redlock.Client, 8)
	for i := range clients {
		clients[i] = s.client(t, cl.urls(), &redlock.Options{RetryDelay: 2 * time.Millisecond})
	}
	contend(t, ctx, key, 5*time.Second, 12, clients, nil)
	cl.awaitNoKey(t, key, 2*time.Second) // TTL 5s
}

func (s *suite) testExtend(t *testing.T) {
	cl, c, ctx, key, l := s.held(t, 10*time.Second)
	u1 := l.Until()
	if err := l.Extend(ctx, 20*time.Second); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if u2 := l.Until(); !u2.After(u1) {
		t.Fatalf("Until did not move: %v then %v", u1, u2)
	}
	// The nodes that made the quorum have applied the new expiry; the
	// others follow.
	extended := func() (n int) {
		for _, srv := range cl.servers {
			if srv.MustDo(t, "PTTL", key).(int64) > 10000 {
				n++
			}
		}
		return n
	}
	if n := extended(); n < admin.New(c).Quorum() {
		t.Fatalf("%d nodes have a PTTL above 10s after extending to 20s; want at least a quorum", n)
	}
	for deadline := time.Now().Add(10 * time.Second); extended() < 3; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of 3 nodes extended after 10s", extended())
		}
	}
	if err := l.Extend(ctx, 0); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("Extend with ttl 0: %v, want ErrInvalid", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func (s *suite) testExtendNeverRecreates(t *testing.T) {
	cl, _, ctx, key, l := s.held(t, 10*time.Second)
	cl.servers[0].MustDo(t, "DEL", key)
	if err := l.Extend(ctx, 10*time.Second); err != nil {
		t.Fatalf("Extend with 2 of 3 nodes holding: %v", err)
	}
	if n := cl.servers[0].MustDo(t, "EXISTS", key); n != int64(0) {
		t.Fatal("Extend re-created the key on the node that had lost it")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func (s *suite) testExpired(t *testing.T) {
	cl := startCluster(t, 3, false)
	c := s.client(t, cl.urls(), &redlock.Options{NodeTimeout: 50 * time.Millisecond})
	ctx, key := ctxT(t), keyFor(t)
	l, err := c.Lock(ctx, key, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(l.Until()) + 150*time.Millisecond)
	if valid(l) {
		t.Fatal("Valid() past the deadline")
	}
	mustOpError(t, l.Extend(ctx, time.Second), redlock.ErrExpired)
	cl.expectNoKey(t, key)
	mustOpError(t, l.Release(ctx), redlock.ErrExpired)
	cl.expectNoKey(t, key)
}

func (s *suite) testExpiredTakenOver(t *testing.T) {
	cl := startCluster(t, 3, false)
	c := s.client(t, cl.urls(), &redlock.Options{NodeTimeout: 50 * time.Millisecond})
	ctx, key := ctxT(t), keyFor(t)
	old, err := c.Lock(ctx, key, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(old.Until()) + 150*time.Millisecond)
	// Another client takes the lock over, with TryLock, until its grant
	// is on every node. A round returns on a quorum, and on a loaded
	// machine the 50ms node timeout the first lock needs can cut off the
	// request to the last node, whose grant then never comes.
	cur := lockOnAll(t, ctx, s.client(t, cl.urls(), nil), key, 10*time.Second, cl.servers)
	oe := mustOpError(t, old.Release(ctx), redlock.ErrExpired)
	if got := outcomes(oe); got != "taken,taken,taken" {
		t.Errorf("old holder's release saw %s, want taken on every node", got)
	}
	if got := cl.countValue(t, key, cur.Token()); got != 3 {
		t.Fatalf("the stale release touched the new holder's keys: its token is on %d of 3 nodes", got)
	}
	if err := cur.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func (s *suite) testLockLost(t *testing.T) {
	cl, _, ctx, key, l := s.held(t, 10*time.Second)
	cl.servers[0].MustDo(t, "DEL", key)
	cl.servers[1].MustDo(t, "SET", key, "intruder", "PX", "10000")
	mustOpError(t, l.Extend(ctx, 10*time.Second), redlock.ErrLockLost)
	mustOpError(t, l.Release(ctx), redlock.ErrLockLost)
	if got := cl.values(t, key); !reflect.DeepEqual(got, []string{"", "intruder", ""}) {
		t.Fatalf("keys after releasing a lost lock: %q", got)
	}
}

func (s *suite) testCancelWhileWaiting(t *testing.T) {
	cl := startCluster(t, 3, false)
	a, b := s.client(t, cl.urls(), nil), s.client(t, cl.urls(), nil)
	key := keyFor(t)
	l := lockOnAll(t, ctxT(t), a, key, 10*time.Second, cl.servers)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	_, err := b.Lock(ctx, key, 10*time.Second)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock with an expiring context: %v, want DeadlineExceeded", err)
	}
	mustOpError(t, err, redlock.ErrTaken)
	if got := cl.countValue(t, key, l.Token()); got != 3 {
		t.Fatalf("holder's token on %d of 3 nodes", got)
	}
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

func (s *suite) testCancelledBeforeStart(t *testing.T) {
	cl := startCluster(t, 3, false)
	c := s.client(t, cl.urls(), nil)
	key := keyFor(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.TryLock(ctx, key, 10*time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("TryLock with a cancelled context: %v", err)
	}
	if _, err := c.Lock(ctx, key, 10*time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock with a cancelled context: %v", err)
	}
	cl.expectNoKey(t, key)
}

// testCleanUpIgnoresCancellation: the caller's context ends while a round
// waits for a silent node; the grant on the fast node must still be
// released.
func (s *suite) testCleanUpIgnoresCancel(t *testing.T) {
	cl := startCluster(t, 3, false)
	proxy := redistest.StartProxy(t, cl.servers[2])
	urls := cl.urls()
	urls[2] = proxy.URL()
	c := s.client(t, urls, &redlock.Options{NodeTimeout: 2 * time.Second, ReleaseTimeout: 300 * time.Millisecond})
	key := keyFor(t)
	cl.servers[1].MustDo(t, "SET", key, "someone-else", "PX", "10000")
	proxy.SetBlackhole(true)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := c.TryLock(ctx, key, 10*time.Second)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("TryLock: %v, want DeadlineExceeded", err)
	}
	if v := cl.servers[0].MustDo(t, "GET", key); v != nil {
		t.Fatalf("grant %q on the fast node survived the cancelled round", v)
	}
}

// countingNode wraps a Node and counts its calls in flight.
type countingNode struct {
	redlock.Node
	inFlight atomic.Int32
}

func (n *countingNode) Eval(ctx context.Context, s *driver.Script, keys, args []string) (any, error) {
	n.inFlight.Add(1)
	defer n.inFlight.Add(-1)
	return n.Node.Eval(ctx, s, keys, args)
}

// testSlowNode: a silent node must not hold up an acquisition that a
// quorum has already granted, nor its release.
func (s *suite) testSlowNode(t *testing.T) {
	cl := startCluster(t, 3, false)
	proxy := redistest.StartProxy(t, cl.servers[2])
	slow := &countingNode{Node: s.dial(t, proxy.URL())}
	nodes := []redlock.Node{s.dial(t, cl.servers[0].URL()), s.dial(t, cl.servers[1].URL()), slow}
	c, err := redlock.New(nodes, &redlock.Options{NodeTimeout: 5 * time.Second, ReleaseTimeout: 200 * time.Millisecond, DisableQuarantine: true})
	if err != nil {
		t.Fatal(err)
	}
	proxy.SetBlackhole(true)
	ctx, key := ctxT(t), keyFor(t)
	l, err := c.TryLock(ctx, key, 20*time.Second)
	if err != nil {
		t.Fatalf("TryLock with one silent node: %v", err)
	}
	// The acquisition's request is in flight, and so is the client's first
	// probe of the node (see identity.go), which nothing waits for either.
	if slow.inFlight.Load() == 0 {
		t.Fatal("TryLock returned only after the silent node's requests ended")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release with one silent node: %v", err)
	}
	if cl.countValue(t, key, l.Token()) != 0 {
		t.Fatal("key left on a healthy node")
	}
}

// testLatencyEatsValidity: every node answers later than the round may
// wait, but applies the grant; the round fails and nothing is left behind.
func (s *suite) testLatencyEatsValidity(t *testing.T) {
	cl := startCluster(t, 3, false)
	urls := make([]string, 3)
	for i, srv := range cl.servers {
		p := redistest.StartProxy(t, srv)
		p.SetDelay(150 * time.Millisecond)
		urls[i] = p.URL()
	}
	c := s.client(t, urls, &redlock.Options{NodeTimeout: 60 * time.Millisecond})
	ctx, key := ctxT(t), keyFor(t)
	_, err := c.TryLock(ctx, key, 100*time.Millisecond)
	mustOpError(t, err, redlock.ErrNoQuorum)
	cl.expectNoKey(t, key)
}

func (s *suite) testEvenN(t *testing.T) {
	cl := startCluster(t, 4, false)
	c := s.client(t, cl.urls(), nil)
	if admin.New(c).Quorum() != 3 {
		t.Fatalf("Quorum() with 4 nodes = %d, want 3", admin.New(c).Quorum())
	}
	ctx, key := ctxT(t), keyFor(t)
	if err := cl.servers[3].Kill(); err != nil {
		t.Fatal(err)
	}
	l, err := c.TryLock(ctx, key, 10*time.Second)
	if err != nil {
		t.Fatalf("TryLock with 3 of 4 up: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cl.servers[2].Kill(); err != nil {
		t.Fatal(err)
	}
	_, err = c.TryLock(ctx, key, 10*time.Second)
	mustOpError(t, err, redlock.ErrNoQuorum)
}

// testLostReleaseReply drops the reply to a release that the node applied.
// The client tries once more, finds the key gone, and counts the node as
// released rather than as a lost lock.
func (s *suite) testLostReleaseReply(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	proxy := redistest.StartProxy(t, srv)
	c := s.client(t, []string{proxy.URL()}, nil)
	ctx, key := ctxT(t), keyFor(t)
	l, err := c.TryLock(ctx, key, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	proxy.DropReplies(1, runs("release"))
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release after a lost reply: %v", err)
	}
	if proxy.Dropped() != 1 {
		t.Fatalf("proxy dropped %d replies, want 1", proxy.Dropped())
	}
	if v := srv.MustDo(t, "GET", key); v != nil {
		t.Fatalf("key %q left behind", v)
	}
}

// testCloseWaits: Release returns once a quorum has confirmed; Close waits
// for the rest, so that a program that closes its nodes after Close
// leaves no key behind.
func (s *suite) testCloseWaits(t *testing.T) {
	cl := startCluster(t, 3, false)
	proxy := redistest.StartProxy(t, cl.servers[2])
	urls := cl.urls()
	urls[2] = proxy.URL()
	// A generous ReleaseTimeout: Close waits for the slow node's release
	// at most that long.
	c := s.client(t, urls, &redlock.Options{ReleaseTimeout: 10 * time.Second})
	ctx, key := ctxT(t), keyFor(t)
	// The slow node must still hold the key when Release returns, or the
	// test proves nothing. Its delay is what the quorum's answers must
	// beat; on a loaded machine they may not, and the test takes the lock
	// and releases it again.
	for try := 1; ; try++ {
		l := lockOnAll(t, ctx, c, key, 20*time.Second, cl.servers)
		proxy.SetDelay(100 * time.Millisecond) // each command, in order: rueidis may have pings queued ahead
		start := time.Now()
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		got := cl.values(t, key)[2]
		if got == nodeToken(l.Token()) {
			break
		}
		if try == 3 {
			t.Fatalf("in 3 tries, the slow node's key was %q when Release returned (after %v); want the token still there, or the test proves nothing", got, took)
		}
		cl.settle(t, key, "")
		proxy.SetDelay(0)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	cl.expectNoKey(t, key)
}
