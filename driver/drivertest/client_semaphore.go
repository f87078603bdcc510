package drivertest

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/wire"
)

// testSemaphore: a counting semaphore with expiring, fenced permits
// (Client.Semaphore).
func (s *suite) testSemaphore(t *testing.T) {
	t.Run("Permits", s.testSemaphorePermits)
	t.Run("AtMostN", s.testSemaphoreAtMostN)
	t.Run("NotifiedWaiting", s.testSemaphoreWaiting)
	t.Run("SplitGrants", s.testSemaphoreSplit)
	t.Run("ExtendAndLoss", s.testSemaphoreExtend)
	t.Run("Invalid", s.testSemaphoreInvalid)
	t.Run("InspectAndForceRelease", s.testSemaphoreOperator)
}

// testSemaphorePermits: n permits are granted, each on its own slot held
// on every node; the next is refused; a released slot is granted again
// with a higher fence; a permit whose holder is gone frees its slot at its
// expiry.
func (s *suite) testSemaphorePermits(t *testing.T) {
	cl := startCluster(t, 3, false)
	c := s.client(t, cl.urls(), nil)
	ctx, key := ctxT(t), keyFor(t)
	sem := c.Semaphore(key, 3)
	var held []*redlock.Permit
	slots := map[int]bool{}
	for range 3 {
		// TryAcquire with a slot free, until its slot holds the permit on
		// every node (see onAll).
		p := cl.permitOnAll(t, ctx, sem, 10*time.Second)
		if p.Slot < 0 || p.Slot >= 3 || slots[p.Slot] {
			t.Fatalf("slot %d, with %v taken already", p.Slot, slots)
		}
		slots[p.Slot] = true
		held = append(held, p)
	}
	_, err := sem.TryAcquire(ctx, 10*time.Second)
	if oe := mustOpError(t, err, redlock.ErrTaken); len(oe.Nodes) != 3 {
		t.Errorf("the refusal names %d nodes", len(oe.Nodes))
	}
	// A permit holds its own slot, and no other.
	for i := range 3 {
		if got := cl.countValue(t, wire.PermitKey(key, i), held[0].Token()); i != held[0].Slot && got != 0 {
			t.Errorf("the permit of slot %d is also in slot %d, on %d nodes", held[0].Slot, i, got)
		}
	}

	// A released slot is granted again, with a fence above its last
	// holder's.
	first := held[0]
	if err := first.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	cl.awaitNoKey(t, wire.PermitKey(key, first.Slot), 5*time.Second)
	// The TryAcquire after the release, until its permit is on every
	// node (see onAll): the node timeout of a 300ms permit is 30ms, a
	// stall that a loaded machine has; and the permit must have landed
	// everywhere before the sleep that lets it expire.
	p := cl.permitOnAll(t, ctx, sem, 300*time.Millisecond)
	if p.Slot != first.Slot {
		t.Errorf("slot %d granted, want the released slot %d", p.Slot, first.Slot)
	}
	if p.Fence() <= first.Fence() {
		t.Errorf("fence %d is not above the slot's last holder's %d", p.Fence(), first.Fence())
	}
	// Its holder goes away without a release: the slot frees itself.
	time.Sleep(400 * time.Millisecond)
	// A round that a loaded machine stalls past the node timeout fails
	// for want of a quorum, and says nothing of the slot: try again.
	q, err := sem.TryAcquire(ctx, 10*time.Second)
	for try := 1; errors.Is(err, redlock.ErrNoQuorum) && try < 3; try++ {
		q, err = sem.TryAcquire(ctx, 10*time.Second)
	}
	if err != nil {
		t.Fatalf("TryAcquire after a permit expired: %v", err)
	}
	if q.Slot != p.Slot || q.Fence() <= p.Fence() {
		t.Errorf("slot %d with fence %d after slot %d expired with fence %d", q.Slot, q.Fence(), p.Slot, p.Fence())
	}
	for _, p := range append(held[1:], q) {
		if err := p.Release(ctx); err != nil {
			t.Errorf("Release: %v", err)
		}
	}
	for i := range 3 {
		cl.awaitNoKey(t, wire.PermitKey(key, i), 5*time.Second)
	}
}

// testSemaphoreAtMostN: clients contend for 2 permits; never more than 2
// are held at once, never two on one slot, and every client gets its
// turns.
func (s *suite) testSemaphoreAtMostN(t *testing.T) {
	cl := startCluster(t, 3, false)
	ctx, key := ctxT(t), keyFor(t)
	const n, clients, rounds = 2, 5, 8
	var inside atomic.Int32
	var most atomic.Int32
	var bySlot [n]atomic.Int32
	var wg sync.WaitGroup
	for range clients {
		sem := s.client(t, cl.urls(), nil).Semaphore(key, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				p, err := sem.Acquire(ctx, 2*time.Second)
				if err != nil {
					t.Errorf("Acquire: %v", err)
					return
				}
				now := inside.Add(1)
				for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
				}
				if bySlot[p.Slot].Add(1) != 1 {
					t.Errorf("two holders of slot %d at once", p.Slot)
				}
				time.Sleep(2 * time.Millisecond)
				bySlot[p.Slot].Add(-1)
				inside.Add(-1)
				if err := p.Release(ctx); err != nil {
					t.Errorf("Release: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := most.Load(); got > n || got < 1 {
		t.Errorf("%d permits held at once, want at most %d", got, n)
	}
}

// testSemaphoreWaiting: a waiter for a full semaphore is woken by a
// release, not by polling.
func (s *suite) testSemaphoreWaiting(t *testing.T) {
	cl := startCluster(t, 3, false)
	ctx, key := ctxT(t), keyFor(t)
	holder := s.client(t, cl.urls(), nil).Semaphore(key, 1)
	waiter := s.client(t, cl.urls(), &redlock.Options{RetryDelay: time.Hour}).Semaphore(key, 1)
	p, err := holder.TryAcquire(ctx, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		q, err := waiter.Acquire(ctx, 10*time.Second)
		if err == nil {
			err = q.Release(ctx)
		}
		got <- err
	}()
	time.Sleep(100 * time.Millisecond) // let Acquire fail once and subscribe
	select {
	case err := <-got:
		t.Fatalf("Acquire returned while the only permit was held: %v", err)
	default:
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("Acquire after the release: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Acquire was not woken by the release")
	}
}

// testSemaphoreSplit: when the nodes grant a round different slots, the
// permit is the slot a quorum granted, and its release also frees the
// other slot that a node granted the same round.
func (s *suite) testSemaphoreSplit(t *testing.T) {
	cl := startCluster(t, 3, false)
	// A generous node timeout: the test waits for every node's grant,
	// node 0's above all, and on a loaded machine the default for a 10s
	// permit, 250ms, cut off a request to node 0, whose grant never came.
	c := s.client(t, cl.urls(), &redlock.Options{NodeTimeout: 2 * time.Second})
	ctx, key := ctxT(t), keyFor(t)
	sem := c.Semaphore(key, 2)
	// Slot 0 is held on node 0 alone: node 0 grants slot 1 whatever slot
	// a round looks at first; the others grant the slot it names.
	cl.servers[0].MustDo(t, "SET", wire.PermitKey(key, 0), "someone else", "PX", "20000")
	var p *redlock.Permit
	for try := 0; p == nil; try++ {
		if try == 50 {
			t.Fatal("no round granted slot 0 on a quorum in 50 tries")
		}
		q, err := sem.TryAcquire(ctx, 10*time.Second)
		if err != nil {
			t.Fatalf("TryAcquire: %v", err)
		}
		if q.Slot == 0 {
			p = q
			continue
		}
		if err := q.Release(ctx); err != nil {
			t.Fatal(err)
		}
		// Release returns on a quorum: the next try must not find the
		// third node's slot 1 still held, or no slot has a quorum.
		cl.awaitNoKey(t, wire.PermitKey(key, 1), 5*time.Second)
	}
	for deadline := time.Now().Add(5 * time.Second); cl.countValue(t, wire.PermitKey(key, 0), p.Token()) < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("slot 0 holds the permit on %d nodes, want 2", cl.countValue(t, wire.PermitKey(key, 0), p.Token()))
		}
	}
	for deadline := time.Now().Add(5 * time.Second); cl.values(t, wire.PermitKey(key, 1))[0] != nodeToken(p.Token()); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("node 0 did not grant slot 1 to the round: %q", cl.values(t, wire.PermitKey(key, 1)))
		}
	}
	if err := p.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	for deadline := time.Now().Add(5 * time.Second); cl.countValue(t, wire.PermitKey(key, 1), p.Token()) > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the release left node 0's grant of slot 1")
		}
	}
	if v := cl.values(t, wire.PermitKey(key, 0))[0]; v != "someone else" {
		t.Errorf("node 0's slot 0 holds %q after the release, want the other owner's value", v)
	}
}

// testSemaphoreExtend: a permit is extended as a lock is, never
// re-created, and reports its loss.
func (s *suite) testSemaphoreExtend(t *testing.T) {
	cl := startCluster(t, 3, false)
	c := s.client(t, cl.urls(), nil)
	ctx, key := ctxT(t), keyFor(t)
	p := cl.permitOnAll(t, ctx, c.Semaphore(key, 2), 2*time.Second)
	slotKey := wire.PermitKey(key, p.Slot)
	before := p.Until()
	if err := p.Extend(ctx, time.Minute); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if !p.Until().After(before.Add(30 * time.Second)) {
		t.Errorf("Until moved from %v to %v after an extension to a minute", before, p.Until())
	}
	// Extend returns once a quorum confirmed: the last node's extension
	// may take a moment.
	for _, srv := range cl.servers[:2] {
		pttl := srv.MustDo(t, "PTTL", slotKey).(int64)
		for deadline := time.Now().Add(5 * time.Second); pttl <= 10000 && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			pttl = srv.MustDo(t, "PTTL", slotKey).(int64)
		}
		if pttl <= 10000 {
			t.Errorf("the slot's key has PTTL %dms after an extension to a minute", pttl)
		}
		srv.MustDo(t, "DEL", slotKey)
	}
	if err := p.Extend(ctx, time.Minute); !errors.Is(err, redlock.ErrLockLost) {
		t.Errorf("Extend with the slot gone on a majority: %v, want ErrLockLost", err)
	}
	select {
	case <-p.Context().Done():
	default:
		t.Error("the permit's Context is not done after it was found lost")
	}
	if got := cl.countValue(t, slotKey, p.Token()); got > 1 {
		t.Errorf("the lost permit's slot was re-created: on %d nodes", got)
	}
}

// testSemaphoreInvalid: a semaphore without permits, with too many, or on
// a reserved key is refused before any node is asked.
func (s *suite) testSemaphoreInvalid(t *testing.T) {
	cl := startCluster(t, 1, false)
	c := s.client(t, cl.urls(), nil)
	ctx, key := ctxT(t), keyFor(t)
	for _, bad := range []struct {
		key string
		n   int
	}{
		{key, 0},
		{key, -1},
		{key, wire.MaxPermits + 1},
		{"", 2},
		{wire.PermitKey(key, 0), 2},
	} {
		sem := c.Semaphore(bad.key, bad.n)
		if _, err := sem.TryAcquire(ctx, time.Second); !errors.Is(err, redlock.ErrInvalid) {
			t.Errorf("Semaphore(%q, %d): %v, want ErrInvalid", bad.key, bad.n, err)
		}
		if _, err := sem.Acquire(ctx, time.Second); !errors.Is(err, redlock.ErrInvalid) {
			t.Errorf("Semaphore(%q, %d).Acquire: %v, want ErrInvalid", bad.key, bad.n, err)
		}
	}
	if _, err := c.Semaphore(key, 2).TryAcquire(ctx, 0); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("a TTL of 0: %v, want ErrInvalid", err)
	}
}
