package redlock

import (
	"context"
	"strconv"
	"sync"
	"time"
)

// A Lock is a held lock, as returned by Client.Lock and Client.TryLock.
//
// A Lock is valid until its deadline (Until), measured on the client's
// monotonic clock from the moment before the acquiring round sent its first
// request. Work protected by the lock must finish before the deadline or
// extend the lock in time; past the deadline another owner may hold it.
//
// A Lock is safe for concurrent use; Extend and Release calls on one Lock
// run one at a time.
type Lock struct {
	c     *Client
	key   string
	token string
	ttl   time.Duration

	// settled is closed when every request of the acquiring round has
	// returned; settledBy is when the round stopped waiting for them.
	settled   <-chan struct{}
	settledBy time.Time

	op sync.Mutex // serialises Extend and Release

	mu       sync.Mutex // guards until and released
	until    time.Time
	released bool
}

// Key returns the lock's key.
func (l *Lock) Key() string { return l.key }

// Token returns the random token that marks this acquisition on the nodes.
func (l *Lock) Token() string { return l.token }

// TTL returns the time to live the lock was obtained with.
func (l *Lock) TTL() time.Duration { return l.ttl }

// Fence returns the lock's fencing token. Fencing tokens are not issued
// yet: Fence returns 0.
func (l *Lock) Fence() int64 { return 0 }

// Until returns the lock's validity deadline. The returned time carries a
// monotonic clock reading; compare it with time.Now, not with wall-clock
// times from elsewhere.
func (l *Lock) Until() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

// Valid reports whether the lock is within its validity and not released.
func (l *Lock) Valid() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.released && time.Now().Before(l.until)
}

// Extend pushes the lock's deadline out to ttl after the start of the
// extension round, less the drift allowance. It succeeds only if a quorum
// of nodes still holds the lock's token and agrees before the current
// deadline. A key that has expired on a node is never re-created.
//
// On failure the error is an *OpError wrapping
//   - ErrLockLost when a quorum no longer holds the token: the lock is gone;
//   - ErrExpired when the deadline passed first: call Release;
//   - ErrNoQuorum when too few nodes answered: the lock stays valid until
//     its old deadline, and Extend may be tried again.
//
// Extend returns ErrReleased after Release, and an error wrapping
// ErrInvalid for a bad ttl.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	ttl, err := l.c.checkLock(l.key, ttl)
	if err != nil {
		return err
	}
	l.op.Lock()
	defer l.op.Unlock()
	l.mu.Lock()
	until, released := l.until, l.released
	l.mu.Unlock()
	if released {
		return ErrReleased
	}
	e := &OpError{Op: "extend", Key: l.key, Quorum: l.c.quorum, Rounds: 1}
	timeout := min(l.c.nodeTimeout(ttl), time.Until(until))
	if timeout <= 0 {
		e.Err = ErrExpired
		return e
	}
	r := l.c.send(ctx, timeout, 1, extendScript, decodeStatus,
		[]string{l.key}, []string{l.token, strconv.FormatInt(ttl.Milliseconds(), 10)})
	extended := r.collect(l.c.quorum)
	if extended && time.Now().Before(until) {
		l.mu.Lock()
		l.until = validUntil(r.start, ttl, l.c.drift(ttl))
		l.mu.Unlock()
		return nil
	}
	if !extended {
		r.drain()
	}
	e.Nodes = r.results
	switch {
	case r.count(Taken, Absent) > len(l.c.nodes)-l.c.quorum:
		e.Err = ErrLockLost
	case !time.Now().Before(until):
		e.Err = ErrExpired
	default:
		e.Err = ErrNoQuorum
		e.ctxErr = ctx.Err()
	}
	return e
}

// Release gives the lock up on every node where it still holds the
// lock's token, so that others can take it at once. It is not cut short
// by the cancellation of ctx, which is usual when a program is shutting
// down; it is bounded by Options.ReleaseTimeout instead.
//
// Release reports on what it found. It returns nil when a quorum of nodes
// confirmed the release within the lock's validity, and otherwise an
// *OpError wrapping
//   - ErrExpired when the deadline had passed before Release: the work
//     done under the lock may have overlapped another owner's;
//   - ErrLockLost when a quorum no longer held the token within the
//     validity: the lock had been lost;
//   - ErrNoQuorum when too few nodes answered to confirm the release; the
//     keys left expire by the lock's deadline.
//
// A second Release returns ErrReleased.
func (l *Lock) Release(ctx context.Context) error {
	l.op.Lock()
	defer l.op.Unlock()
	l.mu.Lock()
	until, released := l.until, l.released
	l.released = true
	l.mu.Unlock()
	if released {
		return ErrReleased
	}
	// A request of the acquiring round that is still on its way might
	// otherwise set its key after the release has passed that node.
	select {
	case <-l.settled:
	case <-time.After(time.Until(l.settledBy)):
	}
	expired := !time.Now().Before(until)
	r := l.c.releaseRound(ctx, l.key, l.token)
	e := &OpError{Op: "release", Key: l.key, Quorum: l.c.quorum, Rounds: 1, Nodes: r.results}
	switch {
	case expired:
		e.Err = ErrExpired
	case r.count(Taken, Absent) > len(l.c.nodes)-l.c.quorum:
		e.Err = ErrLockLost
	case r.count(OK) >= l.c.quorum:
		return nil
	default:
		e.Err = ErrNoQuorum
	}
	return e
}
