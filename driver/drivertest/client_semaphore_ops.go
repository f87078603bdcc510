package drivertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/admin"
	"github.com/quorumlock/redlock/internal/wire"
)

// testSemaphoreOperator: Semaphore.Inspect shows each slot's holder and
// owner; Semaphore.ForceRelease frees the slot of a permit whose holder is
// gone, raises the slot's fence floor, tells the removed holder at its
// next extension, and lets a waiter have the slot long before the removed
// permit would have expired.
func (s *suite) testSemaphoreOperator(t *testing.T) {
	cl := startCluster(t, 3, false)
	holder := s.client(t, cl.urls(), &redlock.Options{Owner: "stuck-worker"})
	op := s.client(t, cl.urls(), &redlock.Options{Owner: "operator"})
	waiter := s.client(t, cl.urls(), nil)
	ctx, key := ctxT(t), keyFor(t)
	const n = 3
	sem := holder.Semaphore(key, n)

	slots, err := admin.New(op).InspectSemaphore(ctx, op.Semaphore(key, n))
	if err != nil {
		t.Fatalf("Inspect of a free semaphore: %v", err)
	}
	if len(slots) != n {
		t.Fatalf("Inspect returned %d slots, want %d", len(slots), n)
	}
	for i, ins := range slots {
		if ins.Key != wire.PermitKey(key, i) || ins.State != admin.KeyFree {
			t.Errorf("slot %d of a free semaphore: key %q state %v, want %q free", i, ins.Key, ins.State, wire.PermitKey(key, i))
		}
	}

	// The permits outlive the test by far: only ForceRelease can free one.
	const ttl = 2 * time.Minute
	held := make([]*redlock.Permit, n)
	for range n {
		p, err := sem.TryAcquire(ctx, ttl)
		if err != nil {
			t.Fatalf("TryAcquire with a slot free: %v", err)
		}
		cl.settle(t, wire.PermitKey(key, p.Slot), p.Token())
		held[p.Slot] = p
	}
	slots, err = admin.New(op).InspectSemaphore(ctx, op.Semaphore(key, n))
	if err != nil {
		t.Fatal(err)
	}
	for i, ins := range slots {
		p := held[i]
		if ins.State != admin.KeyHeld || ins.Holder != p.ID() || ins.Owner != "stuck-worker" || ins.Fence < p.Fence() {
			t.Errorf("slot %d: %v held by %q (%q), fence %d; want held by %q (stuck-worker), fence ≥ %d",
				i, ins.State, ins.Holder, ins.Owner, ins.Fence, p.ID(), p.Fence())
		}
	}

	// A waiter queues for a permit; the operator frees slot 1.
	got := make(chan *redlock.Permit, 1)
	errc := make(chan error, 1)
	wctx, cancel := context.WithTimeout(ctx, ttl/2)
	defer cancel()
	go func() {
		p, err := waiter.Semaphore(key, n).Acquire(wctx, 10*time.Second)
		if err != nil {
			errc <- err
			return
		}
		got <- p
	}()
	removed := held[1]
	views, err := admin.New(op).ForceReleasePermit(ctx, op.Semaphore(key, n), 1)
	if err != nil {
		t.Fatalf("ForceRelease of slot 1: %v", err)
	}
	for _, v := range views {
		if v.Err != nil || !v.Held || v.Holder != removed.ID() || v.Owner != "stuck-worker" {
			t.Errorf("removed on %s: %+v, want stuck-worker's permit %s", v.Node, v, removed.ID())
		}
	}
	select {
	case p := <-got:
		if p.Slot != 1 {
			t.Errorf("the waiter got slot %d, want the freed slot 1", p.Slot)
		}
		if p.Fence() <= removed.Fence() {
			t.Errorf("the waiter's fence %d is not above the removed permit's %d", p.Fence(), removed.Fence())
		}
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
	case err := <-errc:
		t.Fatalf("the waiter, with slot 1 freed and %v of the removed permit's TTL left: %v", ttl/2, err)
	}
	if err := removed.Extend(ctx, ttl); !errors.Is(err, redlock.ErrLockLost) {
		t.Errorf("the removed holder's Extend: %v, want ErrLockLost", err)
	}
	for _, i := range []int{0, 2} {
		if !valid(held[i].Lock) {
			t.Errorf("the permit of slot %d is no longer valid after slot 1 was freed", i)
		}
	}

	for _, bad := range []int{-1, n} {
		if _, err := admin.New(op).ForceReleasePermit(ctx, op.Semaphore(key, n), bad); !errors.Is(err, redlock.ErrInvalid) {
			t.Errorf("ForceRelease of slot %d of %d: %v, want ErrInvalid", bad, n, err)
		}
	}
	if _, err := admin.New(op).InspectSemaphore(ctx, op.Semaphore(key, 0)); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("Inspect of a semaphore of 0 permits: %v, want ErrInvalid", err)
	}
	if _, err := admin.New(op).InspectSemaphore(ctx, op.Semaphore(wire.ReadersKey(key), n)); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("Inspect of a semaphore on a reserved key: %v, want ErrInvalid", err)
	}
}
