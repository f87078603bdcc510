package drivertest

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/clientx"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/internal/wire"
)

// testLockAll: a lock on several keys at once (Client.LockAll).
func (s *suite) testLockAll(t *testing.T) {
	t.Run("AllKeys", s.testLockAllKeys)
	t.Run("AllOrNothing", s.testLockAllOrNothing)
	t.Run("Overlapping", s.testLockAllOverlapping)
	t.Run("Invalid", s.testLockAllInvalid)
	t.Run("ClusterNode", s.testLockAllCluster)
}

// testLockAllKeys: every key holds the lock's token on every node, the
// fence exceeds every earlier fence of any of the keys, and Extend and
// Release act on all of them.
func (s *suite) testLockAllKeys(t *testing.T) {
	cl := startCluster(t, 3, false)
	c := s.client(t, cl.urls(), nil)
	ctx, base := ctxT(t), keyFor(t)
	a, b, d := base+":a", base+":b", base+":c"

	// An earlier owner of b alone: its fence is the one to beat.
	lb, err := c.TryLock(ctx, b, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := lb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Release returns once a quorum confirmed; the last node's release
	// may still be on its way, and would make that node refuse b.
	cl.awaitNoKey(t, b, 5*time.Second)

	// The lock is taken again until every node has it (see onAll).
	l := onAll(t, ctx, cl.servers, 2500*time.Millisecond,
		func() (*redlock.Lock, error) { return c.TryLockAll(ctx, []string{d, a, b, a}, 10*time.Second) },
		(*redlock.Lock).Keys)
	if got, want := l.Keys(), []string{a, b, d}; !slices.Equal(got, want) {
		t.Errorf("Keys() = %q, want %q", got, want)
	}
	if l.Key() != strings.Join([]string{a, b, d}, ",") {
		t.Errorf("Key() = %q", l.Key())
	}
	if l.Fence() <= lb.Fence() {
		t.Errorf("fence %d is not above the earlier owner's %d of one of the keys", l.Fence(), lb.Fence())
	}
	// Each node drew one fence for all the keys and wrote it to each of
	// their counters. (A node that answered after the quorum may have
	// drawn a higher one than the lock's.)
	for i, srv := range cl.servers {
		fences := map[string]bool{}
		for _, key := range l.Keys() {
			v, _ := srv.MustDo(t, "HGET", wire.MarkerKey(key), wire.MarkerFence).(string)
			fences[v] = true
		}
		if len(fences) != 1 {
			t.Errorf("node %d: the keys' fence counters differ: %v", i, fences)
		}
	}

	if err := l.Extend(ctx, time.Minute); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	// Extend, too, returns once a quorum confirmed: the last node's
	// extension may take a moment.
	for _, key := range l.Keys() {
		for i, srv := range cl.servers {
			pttl := srv.MustDo(t, "PTTL", key).(int64)
			for deadline := time.Now().Add(5 * time.Second); pttl <= 10000 && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				pttl = srv.MustDo(t, "PTTL", key).(int64)
			}
			if pttl <= 10000 {
				t.Errorf("node %d: %s has PTTL %dms after an extension to a minute", i, key, pttl)
			}
		}
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	for _, key := range l.Keys() {
		cl.awaitNoKey(t, key, 5*time.Second)
	}

	// A lock on several keys is lost when one of them is lost on a
	// majority: Extend says so.
	l = onAll(t, ctx, cl.servers, 2500*time.Millisecond,
		func() (*redlock.Lock, error) { return c.TryLockAll(ctx, []string{a, b}, 10*time.Second) },
		(*redlock.Lock).Keys)
	for _, srv := range cl.servers[:2] {
		srv.MustDo(t, "DEL", b)
	}
	if err := l.Extend(ctx, 10*time.Second); !errors.Is(err, redlock.ErrLockLost) {
		t.Errorf("Extend with one key gone on a majority: %v, want ErrLockLost", err)
	}
	l.Release(ctx)
}

// testLockAllOrNothing: when one key is held by another owner, LockAll
// takes none of them and leaves nothing behind; it waits, and a release
// of that key wakes it.
func (s *suite) testLockAllOrNothing(t *testing.T) {
	cl := startCluster(t, 3, false)
	// Waiters poll once an hour: only a release's announcement wakes one.
	c := s.client(t, cl.urls(), &redlock.Options{RetryDelay: time.Hour})
	other := s.client(t, cl.urls(), nil)
	ctx, base := ctxT(t), keyFor(t)
	a, b, d := base+":a", base+":b", base+":c"

	lb := lockOnAll(t, ctx, other, b, 10*time.Second, cl.servers)
	_, err := c.TryLockAll(ctx, []string{a, b, d}, 10*time.Second)
	if !errors.Is(err, redlock.ErrTaken) {
		t.Fatalf("TryLockAll with one key held elsewhere: %v, want ErrTaken", err)
	}
	if oe := mustOpError(t, err, redlock.ErrTaken); !slices.Equal(oe.Keys, slices.Sorted(slices.Values([]string{a, b, d}))) {
		t.Errorf("the error's Keys %q, want the keys sorted", oe.Keys)
	}
	cl.expectNoKey(t, a)
	cl.expectNoKey(t, d)
	if got := cl.countValue(t, b, lb.Token()); got != len(cl.servers) {
		t.Fatalf("the other owner's key is on %d nodes after the failed attempt, want all", got)
	}

	got := make(chan error, 1)
	var fence atomic.Int64
	go func() {
		l, err := c.LockAll(ctx, []string{a, b, d}, 10*time.Second)
		if err == nil {
			fence.Store(l.Fence())
			err = l.Release(ctx)
		}
		got <- err
	}()
	time.Sleep(100 * time.Millisecond) // let LockAll fail once and subscribe
	select {
	case err := <-got:
		t.Fatalf("LockAll returned while b was held: %v", err)
	default:
	}
	if err := lb.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("LockAll after the release: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("LockAll was not woken by the release of the key it waited for")
	}
	if fence.Load() <= lb.Fence() {
		t.Errorf("LockAll's fence %d is not above the earlier owner's %d", fence.Load(), lb.Fence())
	}
}

// testLockAllOverlapping: clients whose key sets overlap, and a client
// that locks the shared key alone, take turns without deadlock, and never
// hold the shared key together.
func (s *suite) testLockAllOverlapping(t *testing.T) {
	cl := startCluster(t, 3, false)
	ctx, base := ctxT(t), keyFor(t)
	a, b, d := base+":a", base+":b", base+":c"
	sets := [][]string{{a, b}, {b, d}, {d, b, a}, {b}}
	var holders atomic.Int32
	var overlaps, done atomic.Int32
	var wg sync.WaitGroup
	for _, set := range sets {
		c := s.client(t, cl.urls(), nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 15 {
				lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				var l *redlock.Lock
				var err error
				if len(set) == 1 {
					l, err = c.Lock(lctx, set[0], 2*time.Second)
				} else {
					l, err = c.LockAll(lctx, set, 2*time.Second)
				}
				cancel()
				if err != nil {
					t.Errorf("%q: %v", set, err)
					return
				}
				if holders.Add(1) != 1 {
					overlaps.Add(1)
				}
				time.Sleep(time.Millisecond)
				holders.Add(-1)
				if !valid(l) {
					t.Errorf("%q: the lock's validity ended within the hold", set)
				}
				if err := l.Release(ctx); err != nil {
					t.Errorf("%q: Release: %v", set, err)
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	if overlaps.Load() > 0 {
		t.Fatalf("%d holds of the shared key overlapped", overlaps.Load())
	}
	if done.Load() != int32(15*len(sets)) {
		t.Fatalf("%d of %d holds done", done.Load(), 15*len(sets))
	}
}

// testLockAllInvalid: bad key sets are refused before any request.
func (s *suite) testLockAllInvalid(t *testing.T) {
	cl := startCluster(t, 1, false)
	c := s.client(t, cl.urls(), nil)
	ctx := ctxT(t)
	many := make([]string, clientx.Limits.Keys+1)
	for i := range many {
		many[i] = "k" + strconv.Itoa(i)
	}
	for _, keys := range [][]string{nil, {}, {"a", ""}, {"a", "redlock:node"}, {"a", wire.MarkerKey("b")}, many} {
		if _, err := c.TryLockAll(ctx, keys, time.Second); !errors.Is(err, redlock.ErrInvalid) {
			t.Errorf("TryLockAll(%d keys %.40q): %v, want ErrInvalid", len(keys), keys, err)
		}
	}
	if _, err := c.TryLockAll(ctx, []string{"a", "b"}, time.Millisecond); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("TryLockAll with a 1ms TTL: %v, want ErrInvalid", err)
	}
	// One key given twice is a lock on one key.
	l, err := c.TryLockAll(ctx, []string{"once", "once"}, time.Second)
	if err != nil || l.Key() != "once" || len(l.Keys()) != 1 {
		t.Fatalf("TryLockAll of one key twice: %v, key %q", err, l.Key())
	}
	l.Release(ctx)
}

// testLockAllCluster: on a Redis Cluster node, keys with one hash tag are
// locked together; keys in several slots are refused (CROSSSLOT) at once.
func (s *suite) testLockAllCluster(t *testing.T) {
	rc := redistest.StartCluster(t, 3, redistest.Config{})
	c := s.client(t, []string{rc.URL()}, nil)
	ctx, base := ctxT(t), keyFor(t)
	tagged := []string{"{" + base + "}:items", "{" + base + "}:invoice", "{" + base + "}:stock"}
	l, err := c.TryLockAll(ctx, tagged, 5*time.Second)
	if err != nil {
		t.Fatalf("TryLockAll of keys with one hash tag on a cluster: %v", err)
	}
	master, err := rc.MasterOf(tagged[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range tagged {
		if v, _ := master.MustDo(t, "GET", key).(string); tokenOf(v) != nodeToken(l.Token()) {
			t.Errorf("%s on the slot's master: %v, want the token", key, v)
		}
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	spread := []string{base + ":x", base + ":y", base + ":z", base + ":w"}
	_, err = c.LockAll(ctx, spread, 5*time.Second)
	mustRefuse(t, err, "CROSSSLOT")
}
