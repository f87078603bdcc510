package drivertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/admin"
	"github.com/quorumlock/redlock/internal/clientx"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/internal/wire"
)

// testRWLock: read-write locks (Client.RWLock) on real servers.
func (s *suite) testRWLock(t *testing.T) {
	t.Run("ReadersShareN3", func(t *testing.T) { s.testRWShare(t, 3) })
	t.Run("ReadersShareN5", func(t *testing.T) { s.testRWShare(t, 5) })
	t.Run("WriterExcludesReaders", s.testRWWriterExcludes)
	t.Run("IntentBlocksNewReaders", s.testRWIntent)
	t.Run("GivenUpWriterStopsBlocking", s.testRWGiveUp)
	t.Run("CrashedWriterIntentExpires", s.testRWCrashedIntent)
	t.Run("ReaderExpiresAlone", s.testRWReaderExpires)
	t.Run("ExtendOneReader", s.testRWExtendOne)
	t.Run("Fences", s.testRWFences)
	t.Run("Quarantine", s.testRWQuarantine)
	t.Run("InspectAndForceRelease", s.testRWOperator)
	t.Run("Invalid", s.testRWInvalid)
	t.Run("ClusterNode", s.testRWCluster)
	t.Run("LeastPrivilegeACL", s.testRWLeastPrivilege)
}

// testRWLeastPrivilege: a user with LeastPrivilege uses read-write locks
// and Adopt; a user with the rules of before them, without the
// sorted-set commands, still inspects and force-releases a lock.
func (s *suite) testRWLeastPrivilege(t *testing.T) {
	srvs := redistest.StartN(t, 3, redistest.Config{})
	const oldUser = "redlock-before-rw"
	before := LeastPrivilege[:slices.Index(LeastPrivilege, "+exists")]
	urls, oldURLs := make([]string, len(srvs)), make([]string, len(srvs))
	for i, srv := range srvs {
		srv.MustDo(t, append([]string{"ACL", "SETUSER", ACLUser, "on", ">" + ACLPassword}, LeastPrivilege...)...)
		srv.MustDo(t, append([]string{"ACL", "SETUSER", oldUser, "on", ">" + ACLPassword}, before...)...)
		urls[i], oldURLs[i] = aclURL(srv, ACLUser, ACLPassword), aclURL(srv, oldUser, ACLPassword)
	}
	c := s.client(t, urls, nil)
	ctx, key := ctxT(t), "locks:"+keyFor(t)
	rw := c.RWLock(key)
	r, err := rw.RLock(ctx, 2*time.Second)
	if err != nil {
		t.Fatalf("RLock: %v", err)
	}
	if err := r.Extend(ctx, 2*time.Second); err != nil {
		t.Fatalf("Extend of a reader: %v", err)
	}
	// A writer that waits, and is woken by the reader's release.
	got := make(chan error, 1)
	go func() {
		w, err := s.client(t, urls, &redlock.Options{RetryDelay: 5 * time.Second}).RWLock(key).Lock(ctx, 2*time.Second)
		if err == nil {
			err = w.Release(ctx)
		}
		got <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); (&cluster{servers: srvs}).intents(t, key) < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the writer's intent never showed")
		}
	}
	if ins, err := admin.New(c).Inspect(ctx, key); err != nil || ins.State != admin.KeyShared {
		t.Fatalf("Inspect: %+v, %v", ins, err)
	}
	a, err := c.Adopt(ctx, key, r.Token())
	if err != nil {
		t.Fatalf("Adopt: %v", err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the waiting writer: %v", err)
	}
	// The writer's release returned on a quorum: wait for the last node.
	(&cluster{servers: srvs}).awaitNoKey(t, key, 5*time.Second)
	if _, err := c.Adopt(ctx, key, r.Token()); !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Adopt of a released reader: %v", err)
	}

	old := s.client(t, oldURLs, nil)
	l, err := old.Lock(ctx, key, 2*time.Second)
	if err != nil {
		t.Fatalf("Lock with the rules of before: %v", err)
	}
	ins, err := admin.New(old).Inspect(ctx, key)
	if err != nil || ins.State != admin.KeyHeld || ins.Holder != l.ID() {
		t.Fatalf("Inspect with the rules of before: %+v, %v", ins, err)
	}
	for _, v := range ins.Nodes {
		if v.Err != nil {
			t.Errorf("node %s: %v", v.Node, v.Err)
		}
	}
	if _, err := admin.New(old).ForceRelease(ctx, key); err != nil {
		t.Fatalf("ForceRelease with the rules of before: %v", err)
	}
}

// testRWCluster: every script of a read-write lock and Adopt runs on a
// Redis Cluster node as one call in the key's slot, whatever braces the
// key has (CROSSSLOT would refuse it otherwise).
func (s *suite) testRWCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3, redistest.Config{})
	c := s.client(t, []string{cl.URL()}, &redlock.Options{NodeTimeout: 2 * time.Second})
	ctx := ctxT(t)
	for _, key := range clusterKeys {
		key := key + ":" + t.Name()
		master, err := cl.MasterOf(key)
		if err != nil {
			t.Fatal(err)
		}
		rw := c.RWLock(key)
		r1, err := rw.TryRLock(ctx, 10*time.Second)
		if err != nil {
			t.Fatalf("TryRLock(%q): %v", key, err)
		}
		r2, err := rw.TryRLock(ctx, 10*time.Second)
		if err != nil {
			t.Fatalf("a second TryRLock(%q): %v", key, err)
		}
		if n := master.MustDo(t, "ZCARD", wire.ReadersKey(key)); n != int64(2) {
			t.Fatalf("key %q: %v readers on the master of its slot", key, n)
		}
		if _, err := rw.TryLock(ctx, 10*time.Second); !errors.Is(err, redlock.ErrTaken) {
			t.Fatalf("TryLock(%q) beside readers: %v", key, err)
		}
		if err := r1.Extend(ctx, 20*time.Second); err != nil {
			t.Fatalf("Extend of a reader of %q: %v", key, err)
		}
		ins, err := admin.New(c).Inspect(ctx, key)
		if err != nil || ins.State != admin.KeyShared || len(ins.Readers) != 2 {
			t.Fatalf("Inspect(%q): %+v, %v", key, ins, err)
		}
		a, err := c.Adopt(ctx, key, r2.Token())
		if err != nil {
			t.Fatalf("Adopt(%q): %v", key, err)
		}
		for _, l := range []*redlock.Lock{r1, a} {
			if err := l.Release(ctx); err != nil {
				t.Fatalf("Release of a reader of %q: %v", key, err)
			}
		}
		w, err := rw.Lock(ctx, 10*time.Second)
		if err != nil {
			t.Fatalf("Lock(%q): %v", key, err)
		}
		if got, _ := master.MustDo(t, "GET", key).(string); tokenOf(got) != nodeToken(w.Token()) {
			t.Fatalf("key %q holds %#v, want the writer's token", key, got)
		}
		if _, err := admin.New(c).ForceRelease(ctx, key); err != nil {
			t.Fatalf("ForceRelease(%q): %v", key, err)
		}
		if _, err := c.Adopt(ctx, key, w.Token()); !errors.Is(err, redlock.ErrLockLost) {
			t.Fatalf("Adopt(%q) after ForceRelease: %v", key, err)
		}
	}
}

// readerScores returns, for each server, the expiry (µs of the node's
// clock) of token among the readers of key; 0 where it is not there.
func (c *cluster) readerScores(t *testing.T, key, token string) []int64 {
	t.Helper()
	token = nodeToken(token)
	out := make([]int64, len(c.servers))
	for i, srv := range c.servers {
		if !srv.Running() {
			continue
		}
		if v := readerScore(t, srv, key, token); v != "" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("ZSCORE = %q: %v", v, err)
			}
			out[i] = int64(f)
		}
	}
	return out
}

// readerScore returns the score of the reader whose value holds token
// (see tokenOf) among the readers of key on srv; "" if there is none.
func readerScore(t *testing.T, srv *redistest.Server, key, token string) string {
	t.Helper()
	all, _ := srv.MustDo(t, "ZRANGE", wire.ReadersKey(key), "0", "-1", "WITHSCORES").([]any)
	for i := 0; i+1 < len(all); i += 2 {
		if m, _ := all[i].(string); tokenOf(m) == token {
			s, _ := all[i+1].(string)
			return s
		}
	}
	return ""
}

// readerOnAll has rw grant a reader for ttl, with TryRLock, until the
// reader is on every server of c (see onAll).
func (c *cluster) readerOnAll(t *testing.T, ctx context.Context, rw *redlock.RWLock, ttl time.Duration) *redlock.Lock {
	t.Helper()
	for try := 1; ; try++ {
		l, err := rw.TryRLock(ctx, ttl)
		if err != nil {
			if try < 3 && (errors.Is(err, redlock.ErrNoQuorum) || errors.Is(err, redlock.ErrExpired)) {
				continue
			}
			t.Fatalf("try %d of TryRLock: %v", try, err)
		}
		for deadline := time.Now().Add(ttl / 4); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if c.countReader(t, l.Key(), l.Token()) == len(c.servers) {
				return l
			}
		}
		if try == 3 {
			t.Fatalf("in 3 tries, the reader never reached all %d nodes", len(c.servers))
		}
		l.Release(ctx)
		c.awaitReaderGone(t, l.Key(), l.Token())
	}
}

// countReader returns on how many servers token is a live reader of key:
// in the set, with an expiry ahead of the server's clock.
func (c *cluster) countReader(t *testing.T, key, token string) int {
	t.Helper()
	n := 0
	for i, s := range c.readerScores(t, key, token) {
		if s != 0 && s > serverMicros(t, c.servers[i]) {
			n++
		}
	}
	return n
}

// awaitReaderGone waits until token is a reader of key on no server.
func (c *cluster) awaitReaderGone(t *testing.T, key, token string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); c.countReader(t, key, token) > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("reader still on %d servers after 10s", c.countReader(t, key, token))
		}
	}
}

// intents returns on how many servers key has a live writer's intent.
func (c *cluster) intents(t *testing.T, key string) int {
	t.Helper()
	n := 0
	for _, srv := range c.servers {
		if !srv.Running() {
			continue
		}
		now := serverMicros(t, srv)
		if srv.MustDo(t, "ZCOUNT", wire.IntentKey(key), "("+strconv.FormatInt(now, 10), "+inf") != int64(0) {
			n++
		}
	}
	return n
}

// serverMicros returns srv's clock in µs.
func serverMicros(t *testing.T, srv *redistest.Server) int64 {
	t.Helper()
	tm, ok := srv.MustDo(t, "TIME").([]any)
	if !ok || len(tm) != 2 {
		t.Fatalf("TIME = %#v", tm)
	}
	sec, _ := strconv.ParseInt(tm[0].(string), 10, 64)
	us, _ := strconv.ParseInt(tm[1].(string), 10, 64)
	return sec*1e6 + us
}

// testRWShare: two readers hold at once, each on every node; a writer is
// refused, and so is a plain lock, while they hold; once both released,
// the writer gets in.
func (s *suite) testRWShare(t *testing.T, n int) {
	cl := startCluster(t, n, false)
	c := s.client(t, cl.urls(), nil)
	ctx, key := ctxT(t), keyFor(t)
	rw := c.RWLock(key)
	r1 := cl.readerOnAll(t, ctx, rw, 10*time.Second)
	r2 := cl.readerOnAll(t, ctx, s.client(t, cl.urls(), nil).RWLock(key), 10*time.Second)
	if !valid(r1) || !valid(r2) || r1.Token() == r2.Token() {
		t.Fatalf("two readers: valid %v and %v, tokens equal %v", valid(r1), valid(r2), r1.Token() == r2.Token())
	}
	_, err := rw.TryLock(ctx, 10*time.Second)
	if oe := mustOpError(t, err, redlock.ErrTaken); len(oe.Nodes) != n {
		t.Errorf("the refusal names %d nodes", len(oe.Nodes))
	}
	// A writer that tried once leaves no intent: readers still come in.
	cl.awaitNoIntent(t, key)
	r3, err := rw.TryRLock(ctx, 10*time.Second)
	if err != nil {
		t.Fatalf("a third reader after a failed TryLock: %v", err)
	}
	for _, r := range []*redlock.Lock{r1, r2, r3} {
		if err := r.Release(ctx); err != nil {
			t.Fatalf("Release of a reader: %v", err)
		}
	}
	for _, r := range []*redlock.Lock{r1, r2, r3} {
		cl.awaitReaderGone(t, key, r.Token())
	}
	w, err := rw.TryLock(ctx, 10*time.Second)
	if err != nil {
		t.Fatalf("TryLock after the readers released: %v", err)
	}
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// awaitNoIntent waits until no server has a live intent on key.
func (c *cluster) awaitNoIntent(t *testing.T, key string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); c.intents(t, key) > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("an intent is still live on %d servers after 10s", c.intents(t, key))
		}
	}
}

// testRWWriterExcludes: while a writer holds, readers and a plain lock
// are refused; the writer's hold is the lock key holding its token; its
// release lets a reader in.
func (s *suite) testRWWriterExcludes(t *testing.T) {
	cl := startCluster(t, 3, false)
	c := s.client(t, cl.urls(), nil)
	ctx, key := ctxT(t), keyFor(t)
	rw := c.RWLock(key)
	w := onAll(t, ctx, cl.servers, 10*time.Second/4,
		func() (*redlock.Lock, error) { return rw.TryLock(ctx, 10*time.Second) },
		func(l *redlock.Lock) []string { return l.Keys() })
	if _, err := rw.TryRLock(ctx, 10*time.Second); !errors.Is(err, redlock.ErrTaken) {
		t.Fatalf("TryRLock while a writer holds: %v, want ErrTaken", err)
	}
	if _, err := c.TryLock(ctx, key, 10*time.Second); !errors.Is(err, redlock.ErrTaken) {
		t.Fatalf("TryLock of the key while a writer holds: %v, want ErrTaken", err)
	}
	if _, err := rw.TryLock(ctx, 10*time.Second); !errors.Is(err, redlock.ErrTaken) {
		t.Fatalf("a second writer: %v, want ErrTaken", err)
	}
	// A plain lock excludes a writer too.
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
	cl.awaitNoKey(t, key, 5*time.Second)
	l := lockOnAll(t, ctx, c, key, 10*time.Second, cl.servers)
	if _, err := rw.TryLock(ctx, 10*time.Second); !errors.Is(err, redlock.ErrTaken) {
		t.Fatalf("a writer while a plain lock holds: %v, want ErrTaken", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	cl.awaitNoKey(t, key, 5*time.Second)
	cl.awaitNoIntent(t, key)
	r, err := rw.RLock(ctx, 10*time.Second)
	if err != nil {
		t.Fatalf("RLock after the writer released: %v", err)
	}
	if err := r.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// testRWIntent: a writer that waits for a reader keeps new readers out;
// the reader's release wakes it, and it gets in; its grant takes its
// intent back.
func (s *suite) testRWIntent(t *testing.T) {
	cl := startCluster(t, 3, false)
	ctx, key := ctxT(t), keyFor(t)
	rw := s.client(t, cl.urls(), nil).RWLock(key)
	r1 := cl.readerOnAll(t, ctx, rw, 20*time.Second)

	// The writer, on a client of its own, with rounds far apart: it is
	// the release that must wake it.
	wrw := s.client(t, cl.urls(), &redlock.Options{RetryDelay: 5 * time.Second}).RWLock(key)
	type result struct {
		l   *redlock.Lock
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := wrw.Lock(ctx, 10*time.Second)
		got <- result{l, err}
	}()
	for deadline := time.Now().Add(10 * time.Second); cl.intents(t, key) < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the waiting writer's intent is on %d nodes after 10s", cl.intents(t, key))
		}
	}
	_, err := rw.TryRLock(ctx, 10*time.Second)
	mustOpError(t, err, redlock.ErrTaken)
	select {
	case res := <-got:
		t.Fatalf("the writer got in beside a reader: %v, %v", res.l, res.err)
	default:
	}
	if err := r1.Release(ctx); err != nil {
		t.Fatal(err)
	}
	res := <-got
	if res.err != nil {
		t.Fatalf("the waiting writer: %v", res.err)
	}
	if res.l.Fence() <= r1.Fence() {
		t.Errorf("writer's fence %d is not above the reader's %d", res.l.Fence(), r1.Fence())
	}
	// Its grant took its intent back where it was granted; the drop after
	// it, or the intent's expiry, everywhere else.
	if err := res.l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	cl.awaitNoIntent(t, key)
}

// testRWGiveUp: a writer whose context ends while it waits takes its
// intent back: readers come in at once after it returns.
func (s *suite) testRWGiveUp(t *testing.T) {
	cl := startCluster(t, 3, false)
	ctx, key := ctxT(t), keyFor(t)
	c := s.client(t, cl.urls(), nil)
	rw := c.RWLock(key)
	r1 := cl.readerOnAll(t, ctx, rw, 20*time.Second)
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err := s.client(t, cl.urls(), nil).RWLock(key).Lock(wctx, 10*time.Second)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, redlock.ErrTaken) {
		t.Fatalf("a writer that gave up: %v, want DeadlineExceeded and ErrTaken", err)
	}
	// The drop returns on a quorum; the last node may still be on its way.
	cl.awaitNoIntent(t, key)
	r2, err := rw.TryRLock(ctx, 10*time.Second)
	if err != nil {
		t.Fatalf("a reader after the writer gave up: %v", err)
	}
	for _, r := range []*redlock.Lock{r1, r2} {
		if err := r.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// testRWCrashedIntent: a writer that crashed while it waited leaves its
// intent, which keeps readers out no longer than Client.IntentTTL. The
// crash is the writer's round run on every node, and no drop after it.
func (s *suite) testRWCrashedIntent(t *testing.T) {
	cl := startCluster(t, 3, false)
	ctx, key := ctxT(t), keyFor(t)
	opts := &redlock.Options{NodeTimeout: 50 * time.Millisecond, ReleaseTimeout: 200 * time.Millisecond}
	c := s.client(t, cl.urls(), opts)
	rw := c.RWLock(key)
	const ttl = 500 * time.Millisecond
	bound := clientx.Of(c).IntentTTL(ttl)
	if bound < ttl || bound > time.Second {
		t.Fatalf("IntentTTL(%v) = %v with these options", ttl, bound)
	}
	r1 := cl.readerOnAll(t, ctx, rw, 20*time.Second)
	boundMs := strconv.FormatInt(bound.Milliseconds(), 10)
	for _, srv := range cl.servers {
		// The arguments of a writer's round (see wire.Set.Acquire).
		n := s.dial(t, srv.URL())
		call := wire.Set{Name: key, Kind: wire.Writer, Intent: "crashed", IntentTTL: bound}.Acquire("tok", ttl, 0)
		v, err := n.Eval(ctx, call.Script, call.Keys, call.Args)
		if st, ok := Status(v); err != nil || !ok || st != 0 {
			t.Fatalf("the writer's round = %#v, %v; want a refusal", v, err)
		}
		if call.Args[len(call.Args)-1] != boundMs {
			t.Fatalf("the round's intent TTL is %s ms, want %s", call.Args[len(call.Args)-1], boundMs)
		}
	}
	recorded := time.Now()
	// Within the bound, and no longer: every intent expires by then.
	for _, srv := range cl.servers {
		now := serverMicros(t, srv)
		sc, _ := srv.MustDo(t, "ZSCORE", wire.IntentKey(key), "crashed").(string)
		exp, _ := strconv.ParseFloat(sc, 64)
		if left := time.Duration(int64(exp)-now) * time.Microsecond; left <= 0 || left > bound {
			t.Fatalf("the intent has %v left; the bound is %v", left, bound)
		}
		if pttl := srv.MustDo(t, "PTTL", wire.IntentKey(key)).(int64); pttl <= 0 || pttl > bound.Milliseconds() {
			t.Errorf("the intents' PTTL is %d ms; the bound is %v", pttl, bound)
		}
	}
	if _, err := rw.TryRLock(ctx, 10*time.Second); !errors.Is(err, redlock.ErrTaken) {
		t.Fatalf("a reader beside a crashed writer's intent: %v, want ErrTaken", err)
	}
	time.Sleep(time.Until(recorded.Add(bound + 50*time.Millisecond)))
	r2, err := rw.TryRLock(ctx, 10*time.Second)
	if err != nil {
		t.Fatalf("a reader after the bound: %v", err)
	}
	for _, r := range []*redlock.Lock{r1, r2} {
		if err := r.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// testRWReaderExpires: a reader that is not extended ends at its own TTL,
// and the other reader holds on: it still extends, and a writer is still
// refused.
func (s *suite) testRWReaderExpires(t *testing.T) {
	cl := startCluster(t, 3, false)
	ctx, key := ctxT(t), keyFor(t)
	rw := s.client(t, cl.urls(), nil).RWLock(key)
	long := cl.readerOnAll(t, ctx, rw, 20*time.Second)
	short := cl.readerOnAll(t, ctx, rw, 400*time.Millisecond)
	cl.awaitReaderGone(t, key, short.Token()) // its own expiry, on every node
	if err := short.Extend(ctx, time.Second); !errors.Is(err, redlock.ErrExpired) && !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Extend of an expired reader: %v", err)
	}
	if err := long.Extend(ctx, 20*time.Second); err != nil {
		t.Fatalf("Extend of the other reader: %v", err)
	}
	if _, err := rw.TryLock(ctx, time.Second); !errors.Is(err, redlock.ErrTaken) {
		t.Fatalf("a writer beside the remaining reader: %v, want ErrTaken", err)
	}
	if err := long.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// testRWExtendOne: extending one reader moves its expiry on every node
// and leaves the other's as it was.
func (s *suite) testRWExtendOne(t *testing.T) {
	cl := startCluster(t, 3, false)
	ctx, key := ctxT(t), keyFor(t)
	rw := s.client(t, cl.urls(), nil).RWLock(key)
	a := cl.readerOnAll(t, ctx, rw, 10*time.Second)
	b := cl.readerOnAll(t, ctx, rw, 10*time.Second)
	beforeA, beforeB := cl.readerScores(t, key, a.Token()), cl.readerScores(t, key, b.Token())
	if err := a.Extend(ctx, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		afterA := cl.readerScores(t, key, a.Token())
		moved := 0
		for i := range afterA {
			if afterA[i] > beforeA[i]+40e6 { // 40s of the extra 50s
				moved++
			}
		}
		if moved == len(afterA) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the extended reader's expiries %v (before %v)", afterA, beforeA)
		}
	}
	if afterB := cl.readerScores(t, key, b.Token()); fmt.Sprint(afterB) != fmt.Sprint(beforeB) {
		t.Errorf("the other reader's expiries changed: %v, before %v", afterB, beforeB)
	}
	// The set lives as long as its latest reader.
	for i, srv := range cl.servers {
		if pttl := srv.MustDo(t, "PTTL", wire.ReadersKey(key)).(int64); pttl < 40000 {
			t.Errorf("server %d: the readers' PTTL is %d ms, below the extended reader's", i, pttl)
		}
	}
	for _, r := range []*redlock.Lock{a, b} {
		if err := r.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// testRWFences: a reader's fence is at least the last writer's; a
// writer's fence is above every earlier writer's and reader's.
func (s *suite) testRWFences(t *testing.T) {
	cl := startCluster(t, 3, false)
	ctx, key := ctxT(t), keyFor(t)
	c := s.client(t, cl.urls(), nil)
	rw := c.RWLock(key)
	var last int64 // the greatest fence so far
	for round := range 3 {
		w, err := rw.Lock(ctx, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if w.Fence() <= last {
			t.Fatalf("round %d: writer's fence %d is not above the earlier %d", round, w.Fence(), last)
		}
		wf := w.Fence()
		last = wf
		if err := w.Release(ctx); err != nil {
			t.Fatal(err)
		}
		cl.awaitNoKey(t, key, 5*time.Second)
		var readers []*redlock.Lock
		for range 2 {
			r, err := rw.RLock(ctx, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if r.Fence() < wf {
				t.Fatalf("round %d: reader's fence %d is below the last writer's %d", round, r.Fence(), wf)
			}
			last = max(last, r.Fence())
			readers = append(readers, r)
		}
		for _, r := range readers {
			if err := r.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range readers {
			cl.awaitReaderGone(t, key, r.Token())
		}
	}
	// A plain lock on the key follows the same counter.
	l, err := c.Lock(ctx, key, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l.Fence() <= last {
		t.Errorf("a plain lock's fence %d is not above the RW lock's %d", l.Fence(), last)
	}
	l.Release(ctx)
}

// testRWQuarantine: after two of three nodes restart empty, neither a
// reader nor a writer is granted beside a writer that still holds on the
// third: the restarted nodes sit out their quarantine.
func (s *suite) testRWQuarantine(t *testing.T) {
	cl := startCluster(t, 3, false)
	const ttl = time.Second
	time.Sleep(2*ttl + 100*time.Millisecond) // older than the TTL, as a node in service
	a := s.quarantineClient(t, cl.urls(), &redlock.Options{NodeTimeout: 500 * time.Millisecond})
	b := s.quarantineClient(t, cl.urls(), &redlock.Options{NodeTimeout: 500 * time.Millisecond})
	ctx, key := ctxT(t), keyFor(t)
	w := onAll(t, ctx, cl.servers, ttl/4,
		func() (*redlock.Lock, error) { return a.RWLock(key).TryLock(ctx, ttl) },
		func(l *redlock.Lock) []string { return l.Keys() })
	// b learns the TTL in use from the node that keeps its records.
	for _, srv := range cl.servers[:2] {
		if err := srv.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, srv := range cl.servers[:2] {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = srv.Restart() }()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	rw := b.RWLock(key)
	sawQuarantine := false
	seen := map[string]int{}
	for time.Now().Before(w.Until()) {
		for _, try := range []func(context.Context, time.Duration) (*redlock.Lock, error){rw.TryRLock, rw.TryLock} {
			l, err := try(ctx, 600*time.Millisecond)
			if err == nil {
				if time.Now().Before(w.Until()) {
					t.Fatalf("granted beside a valid writer after a restart: fence %d", l.Fence())
				}
				l.Release(ctx)
				continue
			}
			var oe *redlock.OpError
			if !errors.As(err, &oe) {
				seen[err.Error()]++
				continue
			}
			seen[outcomes(oe)]++
			if strings.Count(outcomes(oe), "quarantined") == 2 {
				sawQuarantine = true
				if !errors.Is(err, redlock.ErrNoQuorum) {
					t.Fatalf("a round refused by quarantine: %v, want ErrNoQuorum", err)
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !sawQuarantine {
		t.Errorf("no round saw both restarted nodes in quarantine: %v", seen)
	}
}

// testRWOperator: Inspect shows the readers by ID, never a token, and
// ForceRelease removes readers and intents.
func (s *suite) testRWOperator(t *testing.T) {
	cl := startCluster(t, 3, false)
	ctx, key := ctxT(t), keyFor(t)
	c := s.client(t, cl.urls(), nil)
	rw := c.RWLock(key)
	r1 := cl.readerOnAll(t, ctx, rw, 20*time.Second)
	r2 := cl.readerOnAll(t, ctx, rw, 10*time.Second)
	ins, err := admin.New(c).Inspect(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if ins.State != admin.KeyShared || len(ins.Readers) != 2 {
		t.Fatalf("Inspect: state %v with %d readers, want shared with 2", ins.State, len(ins.Readers))
	}
	if ins.Readers[0].ID != r2.ID() || ins.Readers[1].ID != r1.ID() {
		t.Errorf("readers %+v, want %s then %s", ins.Readers, r2.ID(), r1.ID())
	}
	for _, v := range ins.Nodes {
		if len(v.Readers) != 2 || v.Held {
			t.Errorf("node %s: %+v", v.Node, v)
		}
	}
	if text := fmt.Sprintf("%+v", ins); strings.Contains(text, nodeToken(r1.Token())) || strings.Contains(text, nodeToken(r2.Token())) {
		t.Errorf("Inspect shows a token: %s", text)
	}
	// A writer that waits shows as an intent; ForceRelease removes it too.
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := s.client(t, cl.urls(), &redlock.Options{RetryDelay: 5 * time.Second}).RWLock(key).Lock(wctx, time.Second)
		done <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); cl.intents(t, key) < 3; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("intent on %d nodes", cl.intents(t, key))
		}
	}
	if ins, err = admin.New(c).Inspect(ctx, key); err != nil || ins.WaitingWriters != 1 {
		t.Errorf("Inspect with a waiting writer: %d waiting, %v", ins.WaitingWriters, err)
	}
	if _, err := admin.New(c).ForceRelease(ctx, key); err != nil {
		t.Fatal(err)
	}
	// The removal woke the writer; its round finds the key free.
	if err := <-done; err != nil {
		t.Fatalf("the waiting writer after ForceRelease: %v", err)
	}
	cancel()
	if err := r1.Extend(ctx, 20*time.Second); !errors.Is(err, redlock.ErrLockLost) {
		t.Errorf("Extend of a removed reader: %v, want ErrLockLost", err)
	}
}

// testRWInvalid: bad keys and TTLs are refused before any node is asked.
func (s *suite) testRWInvalid(t *testing.T) {
	cl := startCluster(t, 1, false)
	c := s.client(t, cl.urls(), nil)
	ctx := ctxT(t)
	for _, key := range []string{"", wire.ReadersKey("x"), wire.IntentKey("x"), wire.MarkerKey("x")} {
		rw := c.RWLock(key)
		for _, f := range []func(context.Context, time.Duration) (*redlock.Lock, error){rw.RLock, rw.TryRLock, rw.Lock, rw.TryLock} {
			if _, err := f(ctx, time.Second); !errors.Is(err, redlock.ErrInvalid) {
				t.Errorf("key %q: %v, want ErrInvalid", key, err)
			}
		}
	}
	rw := c.RWLock(keyFor(t))
	for _, f := range []func(context.Context, time.Duration) (*redlock.Lock, error){rw.RLock, rw.TryRLock, rw.Lock, rw.TryLock} {
		if _, err := f(ctx, time.Microsecond); !errors.Is(err, redlock.ErrInvalid) {
			t.Errorf("a TTL of 1µs: %v, want ErrInvalid", err)
		}
	}
}
