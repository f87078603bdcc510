package redlock

import (
	"context"
	"sync"
	"time"
)

// MaxPermits is the largest number of permits a Semaphore has.
const MaxPermits = 128

// A Semaphore hands out at most n permits on a key at once: a counting
// semaphore over the Client's nodes, with the guarantees of a Lock.
//
// The permits are n slots, each a lock on its own key (see PermitKey). To
// acquire a permit is to lock one free slot: each node takes the first
// free slot in an order the round names, so that nodes that agree on which
// slots are held grant the same one, and the permit is the slot that a
// quorum granted. Since a slot is a lock, two valid permits never share a
// slot, and at most n permits are valid at any moment, under the lock's
// assumptions (see the package documentation). A permit counts on a node
// only until its own expiry: the slot of a holder that is gone frees
// itself, with no one to clean up.
//
// A permit's fence (Permit.Fence) rises from each holder of its slot to
// the next, as a lock's does; a resource that admits n writers keeps the
// largest fence it has seen per slot (Permit.Slot) and turns away the
// writes of a holder whose slot has since been taken again.
//
// Every user of a semaphore must give it the same n: a Client that asks
// for more permits uses slots the others do not look at.
//
// A Semaphore is safe for concurrent use. Acquire waits as Lock does: a
// release of a slot wakes the waiters, and one Client's goroutines queue
// for the semaphore in the process, one of them contending at a time.
type Semaphore struct {
	c   *Client
	key string
	n   int
}

// Semaphore returns the semaphore on key with n permits. It does not talk
// to any node. A bad key or n makes Acquire and TryAcquire fail with an
// error wrapping ErrInvalid.
func (c *Client) Semaphore(key string, n int) *Semaphore {
	return &Semaphore{c: c, key: key, n: n}
}

// Key returns the semaphore's key.
func (s *Semaphore) Key() string { return s.key }

// Permits returns the number of permits, n.
func (s *Semaphore) Permits() int { return s.n }

// Acquire obtains a permit for ttl, waiting until one is free, or until
// ctx is done, as Lock waits for a lock. The errors are those of Lock:
// ErrTaken when every slot is held (and Options.Tries is spent), and so
// on.
func (s *Semaphore) Acquire(ctx context.Context, ttl time.Duration) (*Permit, error) {
	return s.obtain(ctx, ttl, true)
}

// TryAcquire makes one attempt to obtain a permit for ttl; see TryLock.
// It fails with an error wrapping ErrTaken when every slot is held, or
// when the nodes granted different slots and none of them got a quorum.
func (s *Semaphore) TryAcquire(ctx context.Context, ttl time.Duration) (*Permit, error) {
	return s.obtain(ctx, ttl, false)
}

func (s *Semaphore) obtain(ctx context.Context, ttl time.Duration, wait bool) (*Permit, error) {
	l, err := s.c.obtainSet(ctx, keyset{name: s.key, permits: s.n, slot: -1}, s.check(), ttl, wait)
	if err != nil {
		return nil, err
	}
	return &Permit{l: l, sem: s}, nil
}

// check returns why the semaphore's key or n is invalid, or nil.
func (s *Semaphore) check() error {
	if err := checkKey(s.key); err != nil {
		return err
	}
	if s.n < 1 || s.n > MaxPermits {
		return invalidf("a semaphore of %d permits; it must have from 1 to %d", s.n, MaxPermits)
	}
	return nil
}

// Inspect reads every slot of the semaphore as Client.Inspect reads a
// lock, all slots at once, and changes nothing. It returns one Inspection
// per slot, slot 0 first, each with Key set to the slot's key (PermitKey):
// a slot held on a quorum is a permit in use, whose Holder is the permit's
// ID (Permit.ID) and Owner its owner's label. It returns an error only for
// an invalid key or n; a node that does not answer has Err set in its
// KeyView, slot by slot.
func (s *Semaphore) Inspect(ctx context.Context) ([]*Inspection, error) {
	if err := s.check(); err != nil {
		return nil, &OpError{Op: "inspect", Key: s.key, Err: err}
	}
	out := make([]*Inspection, s.n)
	var wg sync.WaitGroup
	wg.Add(s.n)
	for i := range s.n {
		go func() {
			defer wg.Done()
			key := PermitKey(s.key, i)
			ctx, ev := s.c.begin(ctx, "inspect", key)
			out[i] = s.c.inspect(ctx, key)
			s.c.end(ctx, ev, nil)
		}()
	}
	wg.Wait()
	return out, nil
}

// ForceRelease deletes the permit in slot (from 0 to n-1) from every
// node, whatever token holds it, and wakes the semaphore's waiters: it is
// Client.ForceRelease for a permit whose holder is gone, with the same
// fence floor, risk and results. Inspect shows the slots and who holds
// them.
func (s *Semaphore) ForceRelease(ctx context.Context, slot int) ([]KeyView, error) {
	err := s.check()
	if err == nil && (slot < 0 || slot >= s.n) {
		err = invalidf("slot %d of a semaphore of %d permits; slots are 0 to %d", slot, s.n, s.n-1)
	}
	if err != nil {
		return nil, &OpError{Op: "force-release", Key: s.key, Err: err}
	}
	return s.c.forceRelease(ctx, PermitKey(s.key, slot), s.key)
}

// A Permit is one held permit of a Semaphore. It has the shape of a Lock,
// and its methods do what theirs do, on the permit's slot.
type Permit struct {
	l   *Lock
	sem *Semaphore
}

// Semaphore returns the semaphore the permit belongs to.
func (p *Permit) Semaphore() *Semaphore { return p.sem }

// Slot returns the permit's slot, from 0 to n-1. No two valid permits
// share a slot.
func (p *Permit) Slot() int { return p.l.ks.slot }

// ID returns a short, stable identifier of the permit; see Lock.ID.
func (p *Permit) ID() string { return p.l.ID() }

// Token returns the value that marks this permit on the nodes, in the key
// of its slot (PermitKey); see Lock.Token. Show ID instead.
func (p *Permit) Token() string { return p.l.Token() }

// Fence returns the permit's fencing token: greater than the fence of every
// earlier holder of the same slot, under the assumptions of Lock.Fence.
func (p *Permit) Fence() int64 { return p.l.Fence() }

// TTL returns the time to live the permit was obtained with.
func (p *Permit) TTL() time.Duration { return p.l.TTL() }

// Until returns the permit's validity deadline; see Lock.Until.
func (p *Permit) Until() time.Time { return p.l.Until() }

// Valid reports whether the permit is within its validity, not lost and
// not released.
func (p *Permit) Valid() bool { return p.l.Valid() }

// Context returns a context that is done when the permit ends; see
// Lock.Context.
func (p *Permit) Context() context.Context { return p.l.Context() }

// Extend sets the permit's time to live to ttl from now; see Lock.Extend.
func (p *Permit) Extend(ctx context.Context, ttl time.Duration) error { return p.l.Extend(ctx, ttl) }

// AutoExtend keeps the permit alive in the background; see Lock.AutoExtend.
func (p *Permit) AutoExtend(limit int) { p.l.AutoExtend(limit) }

// Release gives the permit back; see Lock.Release.
func (p *Permit) Release(ctx context.Context) error { return p.l.Release(ctx) }
