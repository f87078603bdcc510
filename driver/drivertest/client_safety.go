package drivertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/admin"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/internal/wire"
	"github.com/quorumlock/redlock/observe"
)

// fenceLog checks that the fences it is given strictly increase.
type fenceLog struct {
	t    *testing.T
	mu   sync.Mutex
	last int64
	n    int
}

// check records the fence of l, or says why it does not follow the last.
// It may be called from any goroutine.
func (f *fenceLog) check(what string, l *redlock.Lock) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l.Fence() <= f.last {
		return fmt.Errorf("%s: fence %d after %d: fences must strictly increase", what, l.Fence(), f.last)
	}
	f.last = l.Fence()
	f.n++
	return nil
}

// add is check on the test's own goroutine.
func (f *fenceLog) add(what string, l *redlock.Lock) {
	f.t.Helper()
	if err := f.check(what, l); err != nil {
		f.t.Fatal(err)
	}
}

// testFences takes the lock many times on n nodes, in every way an owner
// can end (release, expiry) and across lost counters (FLUSHALL, restarts),
// and requires every fence to exceed the one before.
func (s *suite) testFences(t *testing.T, n int) {
	cl := startCluster(t, n, false)
	// The 100ms locks need a short node timeout. A release is bounded by
	// ReleaseTimeout instead, whose default of a second is a stall that a
	// loaded machine can have while the clients reconnect to restarted
	// nodes; what the test checks is the fences.
	opts := &redlock.Options{NodeTimeout: 50 * time.Millisecond, ReleaseTimeout: 5 * time.Second}
	a, b := s.client(t, cl.urls(), opts), s.client(t, cl.urls(), opts)
	ctx, key := ctxT(t), keyFor(t)
	fences := &fenceLog{t: t}
	take := func(what string, c *redlock.Client, ttl time.Duration) *redlock.Lock {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		l, err := c.Lock(wctx, key, ttl)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		fences.add(what, l)
		return l
	}
	takeRelease := func(what string, c *redlock.Client, ttl time.Duration) {
		t.Helper()
		if err := take(what, c, ttl).Release(ctx); err != nil {
			t.Fatalf("%s: Release: %v", what, err)
		}
	}
	for i, c := range []*redlock.Client{a, b, a, b, b, a} {
		takeRelease(fmt.Sprintf("sequential holder %d", i), c, 10*time.Second)
	}
	for i := range 3 {
		l := take(fmt.Sprintf("holder %d that lets the lock expire", i), []*redlock.Client{a, b}[i%2], 100*time.Millisecond)
		time.Sleep(time.Until(l.Until()) + 20*time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // the last one's keys expire too
	takeRelease("after expiries", a, 10*time.Second)
	for _, srv := range cl.servers {
		srv.MustDo(t, "FLUSHALL")
	}
	takeRelease("after FLUSHALL on every node", b, 10*time.Second)
	if err := cl.servers[0].Kill(); err != nil {
		t.Fatal(err)
	}
	if err := cl.servers[0].Restart(); err != nil {
		t.Fatal(err)
	}
	takeRelease("after a node restart", a, 10*time.Second)
	for _, srv := range cl.servers {
		if err := srv.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	takeRelease("after every node restarted", b, 10*time.Second)

	// Contention: holders in turn record their fence while they hold the
	// lock; mutual exclusion orders the records.
	clients := make([]*redlock.Client, 4)
	for i := range clients {
		clients[i] = s.client(t, cl.urls(), &redlock.Options{RetryDelay: 2 * time.Millisecond})
	}
	contend(t, ctx, key, 5*time.Second, 8, clients, func(l *redlock.Lock) error {
		return fences.check("contended holder", l)
	})
	if fences.n != 6+3+1+1+1+1+32 {
		t.Fatalf("%d fences checked", fences.n)
	}
}

// testQuarantine: A holds the lock on all three nodes; two of them are
// killed and restarted at once, empty. B, with a TTL smaller than A's,
// must not obtain the lock while A's lock is valid: the restarted nodes
// are quarantined for the largest TTL the surviving node reports. With
// quarantine disabled, the same scenario hands the lock out twice, which
// shows that the test can fail.
//
// Learning A's TTL relies on the survivor answering B within B's node
// timeout (see Options.Quarantine); B's is generous so that a stall of
// this shared machine does not stand for an unreachable survivor.
//
// With snapshot, the nodes are saved (SAVE) after their markers exist but
// before A locks, and the restarted nodes come back from that snapshot:
// with their markers, without A's keys.
func (s *suite) testQuarantine(t *testing.T, disabled, snapshot bool) {
	cl := startCluster(t, 3, false)
	const ttlA, ttlB = time.Second, 600 * time.Millisecond
	// The node that survives must have run for longer than A's TTL, as a
	// node in service would have; a younger one is in quarantine itself.
	// (uptime_in_seconds counts whole seconds.)
	time.Sleep(2*ttlA + 100*time.Millisecond)
	// A generous node timeout: the test needs A's grant on all three
	// nodes within A's TTL, even on a loaded machine.
	a := s.quarantineClient(t, cl.urls(), &redlock.Options{NodeTimeout: 500 * time.Millisecond})
	b := s.quarantineClient(t, cl.urls(), &redlock.Options{DisableQuarantine: disabled, NodeTimeout: 500 * time.Millisecond})
	// The key is in the hash slot whose records Probe reads, so that
	// Probe reports the TTL A used.
	ctx, key := ctxT(t), probedSlotKey(t)
	if snapshot {
		// Write the markers of the key's slot (a lock taken and given
		// back), then save them. (The test harness runs redis-server with
		// --save "", but a server loads dump.rdb at start whenever there
		// is one.) TryLock and Release return on a quorum: the test takes
		// the lock until the third node's grant, which writes its marker,
		// is there too (see onAll), and waits for every node's release,
		// or a snapshot could miss the marker or keep the key.
		l := lockOnAll(t, ctx, b, key, ttlA, cl.servers)
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		cl.settle(t, key, "")
		for _, srv := range cl.servers {
			srv.MustDo(t, "SAVE")
		}
	}
	la := lockOnAll(t, ctx, a, key, ttlA, cl.servers)
	// The two nodes restart at once: the restarts take from A's validity
	// the time in which B tries, and on a loaded machine two in turn took
	// all of it.
	restarting := time.Now() // the restarted nodes are no older than this
	for _, srv := range cl.servers[:2] {
		if err := srv.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	restartErrs := make([]error, 2)
	var wg sync.WaitGroup
	for i, srv := range cl.servers[:2] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			restartErrs[i] = srv.Restart()
		}()
	}
	wg.Wait()
	if err := errors.Join(restartErrs...); err != nil {
		t.Fatal(err)
	}
	restarted := time.Since(restarting)
	for _, srv := range cl.servers[:2] {
		if snapshot && srv.MustDo(t, "EXISTS", wire.MarkerKey(key)) != int64(1) {
			t.Fatal("the restarted node did not load its marker from the snapshot")
		}
	}
	// B tries until A's validity ends. A client library may need a round
	// or two to reconnect to the restarted nodes; those rounds fail.
	var doubles, tries, refused int
	seen := map[string]int{} // how B's failed rounds ended, for the failure message
	for time.Now().Before(la.Until()) {
		tries++
		lb, err := b.TryLock(ctx, key, ttlB)
		if err == nil {
			if time.Now().Before(la.Until()) {
				doubles++
			}
			if err := lb.Release(ctx); err != nil && !errors.Is(err, redlock.ErrExpired) {
				t.Fatal(err)
			}
			continue
		}
		var oe *redlock.OpError
		if !errors.As(err, &oe) {
			seen[err.Error()]++
		} else if seen[outcomes(oe)]++; outcomes(oe) == "quarantined,quarantined,taken" {
			if !errors.Is(err, redlock.ErrNoQuorum) {
				t.Fatalf("a round refused by quarantine: %v, want ErrNoQuorum", err)
			}
			refused++
		}
		time.Sleep(20 * time.Millisecond)
	}
	if disabled {
		if doubles == 0 {
			t.Fatalf("without quarantine B never obtained the lock during A's validity in %d tries (%v; the restarts took %v of it): the scenario shows nothing", tries, seen, restarted)
		}
		return
	}
	if doubles > 0 {
		t.Fatalf("B obtained the lock %d times while A held it", doubles)
	}
	if refused == 0 {
		t.Fatalf("none of B's %d rounds was refused by quarantine (quarantined, quarantined, taken): %v; the restarts took %v of A's validity", tries, seen, restarted)
	}
	st := admin.New(b).States()
	for i, want := range []observe.NodeHealth{observe.NodeQuarantined, observe.NodeQuarantined, observe.NodeHealthy} {
		if st[i].Health != want {
			t.Errorf("node %d: %v, want %v", i, st[i].Health, want)
		}
	}
	// The quarantine outlasts the lock the restarted nodes lost. (The
	// loop ends some time after A's validity, by how long its last round
	// and pause took: that the quarantine is still on then depends on
	// the machine's speed.)
	if st[0].Health == observe.NodeQuarantined && st[0].Until.Before(la.Until()) {
		t.Errorf("quarantined node's Until %v is before the end of A's lock, %v", st[0].Until, la.Until())
	}
	probed := admin.New(b).Probe(ctx)
	sinceRestart := time.Since(restarting)
	if probed[0].Age > sinceRestart || probed[2].Age < probed[0].Age || probed[2].MaxTTL > ttlA {
		t.Errorf("Probe: restarted node age %v (restarted %v ago), survivor age %v maxttl %v", probed[0].Age, sinceRestart, probed[2].Age, probed[2].MaxTTL)
	}
	if off := probed[1].ClockOffset; off < -5*time.Second || off > 5*time.Second {
		t.Errorf("clock offset of a node on this machine is %v", off)
	}
	// Liveness: once the restarted nodes have run for A's TTL, B gets in.
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	lb, err := b.Lock(wctx, key, ttlB)
	if err != nil {
		t.Fatalf("B after the quarantine: %v", err)
	}
	if err := lb.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// testLostContext: a holder with automatic extension whose key is deleted
// on a majority learns it at the next extension; its context ends with a
// cause that wraps ErrLockLost and carries the nodes' answers.
func (s *suite) testLostContext(t *testing.T) {
	cl, _, ctx, key, l := s.held(t, 3*time.Second)
	lctx := l.Context()
	l.AutoExtend(0)
	cl.servers[0].MustDo(t, "DEL", key)
	cl.servers[1].MustDo(t, "DEL", key)
	select {
	case <-lctx.Done():
	case <-ctx.Done():
		t.Fatal("the lock's context did not end after its key was deleted on a majority")
	}
	var oe *redlock.OpError
	cause := context.Cause(lctx)
	if !errors.Is(cause, redlock.ErrLockLost) || !errors.As(cause, &oe) || oe.Op != "extend" {
		t.Fatalf("cause %v: want the extension's *OpError wrapping ErrLockLost (a loss seen, not the deadline)", cause)
	}
	if valid(l) {
		t.Fatal("Valid() after the loss")
	}
	mustOpError(t, l.Extend(ctx, time.Second), redlock.ErrLockLost)
	mustOpError(t, l.Release(ctx), redlock.ErrLockLost)
	cl.expectNoKey(t, key)
	if k := keepAliveGoroutines(); k != 0 {
		t.Fatalf("%d watchdog goroutines left", k)
	}
}

// testContextDeadline: without extension the context ends at the validity
// deadline, with a cause that wraps ErrLockLost.
func (s *suite) testContextDeadline(t *testing.T) {
	cl := startCluster(t, 3, false)
	c := s.client(t, cl.urls(), &redlock.Options{NodeTimeout: 50 * time.Millisecond})
	ctx, key := ctxT(t), keyFor(t)
	l, err := c.Lock(ctx, key, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	lctx := l.Context()
	<-lctx.Done()
	if now := time.Now(); now.Before(l.Until()) {
		t.Fatalf("context ended %v before the deadline", l.Until().Sub(now))
	}
	if cause := context.Cause(lctx); !errors.Is(cause, redlock.ErrLockLost) {
		t.Fatalf("cause %v, want ErrLockLost", cause)
	}
	mustOpError(t, l.Release(ctx), redlock.ErrExpired)
	// Context on a lock that has ended is done at once.
	if err := l.Context().Err(); err == nil {
		t.Fatal("Context() of an ended lock is not done")
	}
}

// testAutoExtend: a holder with automatic extension keeps the lock for
// three TTLs while a contender keeps trying; Release stops the watchdog
// and ends the context with ErrReleased, and the contender then gets in.
func (s *suite) testAutoExtend(t *testing.T) {
	cl := startCluster(t, 3, false)
	a, b := s.client(t, cl.urls(), nil), s.client(t, cl.urls(), nil)
	ctx, key := ctxT(t), keyFor(t)
	// The watchdog extends every third of the TTL, so a stall of two
	// thirds (670ms) on this shared machine is what it tolerates.
	const ttl = time.Second
	l, err := a.Lock(ctx, key, ttl)
	if err != nil {
		t.Fatal(err)
	}
	lctx := l.Context()
	l.AutoExtend(0)
	l.AutoExtend(0) // no effect
	first := l.Until()
	end := time.Now().Add(3 * ttl)
	tries, taken := 0, 0
	for time.Now().Before(end) {
		tries++
		lb, err := b.TryLock(ctx, key, ttl)
		if err == nil {
			t.Fatalf("contender obtained the lock (fence %d) while the holder kept it alive", lb.Fence())
		}
		if errors.Is(err, redlock.ErrTaken) {
			taken++
		}
		time.Sleep(10 * time.Millisecond)
	}
	if taken == 0 {
		t.Fatalf("none of the contender's %d tries found the lock taken", tries)
	}
	if lctx.Err() != nil || !valid(l) || !l.Until().After(first) {
		t.Fatalf("after 3 TTLs: context %v, valid %v, deadline moved %v", context.Cause(lctx), valid(l), l.Until().Sub(first))
	}
	if keepAliveGoroutines() != 1 {
		t.Fatal("no watchdog goroutine while AutoExtend runs")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if k := keepAliveGoroutines(); k != 0 {
		t.Fatalf("%d watchdog goroutines left after Release", k)
	}
	if cause := context.Cause(lctx); cause != redlock.ErrReleased {
		t.Fatalf("context cause after Release: %v", cause)
	}
	lb, err := b.TryLock(ctx, key, ttl)
	if err != nil {
		t.Fatalf("contender after Release (%d tries before): %v", tries, err)
	}
	if lb.Fence() <= l.Fence() {
		t.Fatalf("contender's fence %d is not above the holder's %d", lb.Fence(), l.Fence())
	}
	if err := lb.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// testAutoExtendLimit: with a limit, the watchdog stops extending and the
// lock ends at its deadline.
func (s *suite) testAutoExtendLimit(t *testing.T) {
	cl := startCluster(t, 3, false)
	c := s.client(t, cl.urls(), nil)
	ctx, key := ctxT(t), keyFor(t)
	l, err := c.Lock(ctx, key, 600*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	first := l.Until()
	lctx := l.Context()
	l.AutoExtend(2)
	select {
	case <-lctx.Done():
	case <-ctx.Done():
		t.Fatal("a lock with at most 2 extensions never ended")
	}
	if !errors.Is(context.Cause(lctx), redlock.ErrLockLost) || !l.Until().After(first) {
		t.Fatalf("cause %v, deadline moved %v", context.Cause(lctx), l.Until().Sub(first))
	}
	if k := keepAliveGoroutines(); k != 0 {
		t.Fatalf("%d watchdog goroutines left after the limit", k)
	}
	mustOpError(t, l.Release(ctx), redlock.ErrExpired)
}

// keepAliveGoroutines counts the goroutines running a Lock's watchdog.
func keepAliveGoroutines() int {
	var buf bytes.Buffer
	pprof.Lookup("goroutine").WriteTo(&buf, 1)
	return bytes.Count(buf.Bytes(), []byte("redlock.(*Lock).keepAlive"))
}

// testNotifiedWaiting: a waiter whose polling is as good as off (an hour
// between rounds) still gets the lock soon after its release, because the
// release is announced to it.
func (s *suite) testNotifiedWaiting(t *testing.T) {
	cl := startCluster(t, 3, false)
	a := s.client(t, cl.urls(), nil)
	b := s.client(t, cl.urls(), &redlock.Options{RetryDelay: time.Hour})
	ctx, key := ctxT(t), keyFor(t)
	la, err := a.TryLock(ctx, key, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := lockInBackground(ctx, b, key)
	time.Sleep(100 * time.Millisecond) // B fails a round or two and waits
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the waiter did not wake on the release")
	}
}

// lockInBackground starts c.Lock of key, released at once, and returns
// its error when it is done.
func lockInBackground(ctx context.Context, c *redlock.Client, key string) <-chan error {
	got := make(chan error, 1)
	go func() {
		l, err := c.Lock(ctx, key, 30*time.Second)
		if err == nil {
			err = l.Release(ctx)
		}
		got <- err
	}()
	return got
}

// testWakeAfterSplitVote: a contender whose round won a node but no
// quorum (a split vote) frees that node with its clean-up, and the clean-
// up tells the waiters that node had turned away, in another Client: with
// a RetryDelay of an hour, the waiter gets the lock only because of that
// announcement. B waits, told "taken" by nodes 0 and 1, whose keys are then
// deleted behind its back (a DEL announces nothing); C, a client of node 1
// and of two servers of its own that hold the key for others, wins node 1
// alone and cleans up.
//
// A clean-up that announced nothing left B asleep for its RetryDelay,
// and every split vote among separate clients cost one.
func (s *suite) testWakeAfterSplitVote(t *testing.T) {
	cl := startCluster(t, 3, false)
	others := startCluster(t, 2, false)
	ctx, key := ctxT(t), keyFor(t)
	for _, srv := range []*redistest.Server{cl.servers[0], cl.servers[1], others.servers[0], others.servers[1]} {
		srv.MustDo(t, "SET", key, "someone-else x", "PX", "60000")
	}
	b := s.client(t, cl.urls(), &redlock.Options{RetryDelay: time.Hour})
	c := s.client(t, []string{cl.servers[1].URL(), others.servers[0].URL(), others.servers[1].URL()}, nil)
	got := lockInBackground(ctx, b, key)
	time.Sleep(200 * time.Millisecond) // B fails its first two rounds and waits
	cl.servers[0].MustDo(t, "DEL", key)
	cl.servers[1].MustDo(t, "DEL", key)
	select {
	case err := <-got:
		t.Fatalf("the waiter returned before any announcement: %v", err)
	default:
	}
	if _, err := c.TryLock(ctx, key, 30*time.Second); !errors.Is(err, redlock.ErrTaken) {
		t.Fatalf("C's split vote: %v, want ErrTaken", err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the waiter did not wake on the clean-up of C's split vote")
	}
}

// testCoalescedWaiters: goroutines of one client that want the same key
// take turns through the client's queue and the release announcements,
// with polling as good as off.
func (s *suite) testCoalescedWaiters(t *testing.T) {
	cl := startCluster(t, 3, false)
	c := s.client(t, cl.urls(), &redlock.Options{RetryDelay: time.Hour})
	contend(t, ctxT(t), keyFor(t), 10*time.Second, 5, slices.Repeat([]*redlock.Client{c}, 6), nil)
}

// testHandOffInProcess checks that goroutines of one Client hand the lock
// to each other without the nodes' announcements of releases: over nodes
// that cannot announce them (plain Nodes, no driver.Notifier) and with a
// RetryDelay of an hour, a waiter wakes only because a goroutine of its
// own Client released the key.
func (s *suite) testHandOffInProcess(t *testing.T) {
	cl := startCluster(t, 3, false)
	nodes := make([]redlock.Node, 3)
	for i, u := range cl.urls() {
		nodes[i] = plainNode{s.dial(t, u)}
	}
	c, err := redlock.New(nodes, &redlock.Options{RetryDelay: time.Hour, DisableQuarantine: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	contend(t, ctxT(t), keyFor(t), 10*time.Second, 5, slices.Repeat([]*redlock.Client{c}, 6), nil)
}

// plainNode hides every optional interface of the Node it wraps.
type plainNode struct{ redlock.Node }

// probedSlotKey returns a key for the test in the hash slot whose records
// [redlock.Client.Probe] reads: the key has the tag of that slot's marker.
func probedSlotKey(t *testing.T) string {
	m := wire.MarkerKey("")
	return m[strings.IndexByte(m, '{'):] + keyFor(t)
}

// testReleaseLeavesNoRecord checks that a released lock leaves no record of its
// key on the nodes: the fence counter is the slot's, in the marker, so
// that a node keeps at most its markers and their format strings however
// many keys were locked, and the next owner's fence still exceeds the
// last one's.
func (s *suite) testReleaseLeavesNoRecord(t *testing.T) {
	cl := startCluster(t, 3, false)
	ctx := ctxT(t)
	c := s.client(t, cl.urls(), &redlock.Options{NodeTimeout: time.Second})
	base := keyFor(t)
	var last int64
	// The client's identity probe (identity.go) writes the marker of the
	// slot it reads, once per node.
	markers := map[string]bool{wire.MarkerKey(""): true}
	for i := range 50 {
		key := fmt.Sprintf("%s:%d", base, i)
		markers[wire.MarkerKey(key)] = true
		l := lockOnAll(t, ctx, c, key, 5*time.Second, cl.servers)
		if l.Fence() <= last {
			t.Errorf("fence %d not above an earlier lock's %d", l.Fence(), last)
		}
		last = max(last, l.Fence())
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release: %v", err)
		}
		cl.settle(t, key, "")
	}
	for i, srv := range cl.servers {
		// Each marker, and where earlier formats kept theirs, a string.
		if n := srv.MustDo(t, "DBSIZE").(int64); n != int64(2*len(markers)) {
			t.Errorf("node %d holds %d keys after 50 locks on 50 keys were released, want %d (the markers and their format strings)", i, n, 2*len(markers))
		}
	}
}
