package redlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/quorumlock/redlock/driver"
	"github.com/quorumlock/redlock/internal/wire"
)

// A Semaphore hands out at most n permits on a key at once: a counting
// semaphore over the Client's nodes, with the guarantees of a Lock.
//
// The permits are n slots, each a lock on a key of its own, in the hash
// slot of the semaphore's key. To acquire a permit is to lock one free slot: each node
// takes the first free slot in an order the round names, so that nodes
// that agree on which slots are held grant the same one, and the permit
// is the slot that a quorum granted. Since a slot is a lock, two valid permits never share a
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
// Every user of a semaphore must give it the same n. The nodes record n
// beside the permits, and while permits of one n are held, a round that
// asks for another is refused with an error wrapping ErrInvalid that names
// both.
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
// to any node. n is from 1 to 128. A bad key or n makes Acquire and
// TryAcquire fail with an error wrapping ErrInvalid.
func (c *Client) Semaphore(key string, n int) *Semaphore {
	return &Semaphore{c: c, key: key, n: n}
}

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
	ks := keyset{Set: wire.Set{Name: s.key, Permits: s.n, Slot: -1}}
	l, err := s.c.obtain(ctx, ks, checkSemaphore(s.key, s.n), ttl, wait)
	if err != nil {
		if held, ok := sizeHeld(err); ok {
			var e *OpError
			errors.As(err, &e)
			e.Err, e.ctxErr = invalidf("the nodes hold permits of a semaphore of %d on the key, not of %d", held, s.n), nil
		}
		return nil, err
	}
	return &Permit{Lock: l, Slot: l.ks.Slot}, nil
}

// sizeHeld returns the size of a semaphore that the nodes hold permits of,
// when err is an *OpError in which a node refused a permit because of it
// (see lua/acquire_permit.lua).
func sizeHeld(err error) (int, bool) {
	var e *OpError
	if !errors.As(err, &e) {
		return 0, false
	}
	for _, res := range e.Nodes {
		var reply *driver.ReplyError
		var held, asked int
		if errors.As(res.Err, &reply) {
			if _, err := fmt.Sscanf(reply.Msg, "INVALID redlock: semaphore size %d held, %d asked", &held, &asked); err == nil {
				return held, true
			}
		}
	}
	return 0, false
}

// A Permit is one held permit of a Semaphore: a Lock on the permit's slot,
// whose methods act on that slot. Its Token is the value of the slot's
// key, and its Fence is greater than the fence of every earlier holder of
// the same slot, under the assumptions of Lock.Fence.
type Permit struct {
	*Lock
	// Slot is the permit's slot, from 0 to n-1. No two valid permits
	// share a slot.
	Slot int
}
