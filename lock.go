package redlock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/quorumlock/redlock/internal/mutant"
	"github.com/quorumlock/redlock/internal/wire"
	"github.com/quorumlock/redlock/observe"
)

// A Lock is a held lock: what Client.Lock, Client.TryLock and
// Client.LockAll return, and the one handle of everything else held on
// the Client's nodes: a Semaphore's Permit embeds one, and an Election's
// Campaign returns one for its leadership.
//
// A Lock is valid until its deadline (Until), measured on the client's
// monotonic clock from the moment before the acquiring round sent its first
// request. Work protected by the lock must finish before the deadline or
// extend the lock in time; past the deadline another owner may hold it.
// Context returns a context that ends when the lock is lost, and
// AutoExtend keeps the lock alive in the background.
//
// A Lock is safe for concurrent use; Extend and Release calls on one Lock
// run one at a time.
type Lock struct {
	c     *Client
	ks    keyset // what the lock is on; ks.Name is its key
	token string // the value on the nodes: the token, a space, the owner's label
	ttl   time.Duration
	fence int64
	start time.Time // when the acquiring round began

	// covered marks the nodes (bit i for node i, the first 64) whose
	// grant gave a fence of at least the lock's, so that their counters
	// cover it: the release needs no marker there (see wire.Call.Lean)
	// unless long, set once a grant or extension is sent with a TTL above
	// wire.LongGrant. long is guarded by op.
	covered uint64
	long    bool

	// last is the latest round sent for the lock: the acquiring round, or
	// the latest extension. Its requests to the slowest nodes may still be
	// on their way; Extend and Release send to each node only once the
	// node's request of last has returned, so that the lock's requests
	// reach each node in order. Guarded by op.
	last *round

	op sync.Mutex // serialises Extend and Release

	mu       sync.Mutex // guards the fields below
	until    time.Time
	released bool
	lost     error                   // why the lock ended, once it has
	ctx      context.Context         // made by Context, ended with lost
	cancel   context.CancelCauseFunc // ends ctx
	timer    *time.Timer             // ends ctx at the deadline
	watchdog *watchdog               // started by AutoExtend
	failed   *OpError                // the last extension that failed, if the latest did
}

// isLapse reports whether err is the end of a lock at its deadline.
func isLapse(err error) bool {
	_, ok := err.(*lapse)
	return ok
}

// A lapse is the cause of a lock context that ended at the validity
// deadline, without an extension: it wraps ErrLockLost and, when one
// failed, the last extension's *OpError, which says what each node did.
type lapse struct{ last *OpError }

func (e *lapse) Error() string {
	if e.last == nil {
		return "redlock: lock lost: its validity ended without an extension"
	}
	return "redlock: lock lost: its validity ended without an extension; the last one tried: " + strings.TrimPrefix(e.last.Error(), "redlock: ")
}

func (e *lapse) Unwrap() []error {
	if e.last == nil {
		return []error{ErrLockLost}
	}
	return []error{ErrLockLost, e.last}
}

// Key returns the lock's key. For a lock on several keys (LockAll) it
// returns them, sorted, joined by commas.
func (l *Lock) Key() string { return l.ks.Name }

// Keys returns the lock's keys, sorted: the one key of Lock and TryLock,
// or those of LockAll without repeats.
func (l *Lock) Keys() []string { return l.ks.All() }

// Token returns what Client.Adopt takes to hand the lock over: the random
// token that marks this acquisition on the nodes (32 characters of
// URL-safe base64), a dot, and the lock's fence, which the adopter's
// fence must exceed; one shell word. It is the lock's secret: whoever
// knows it can release the lock. Show ID instead; String, GoString and
// LogValue do.
//
// The nodes keep the owner's label (Options.Owner) beside the token, for
// Inspect; it is not part of the token.
func (l *Lock) Token() string { return wire.Handover(wire.Token(l.token), l.fence) }

// Format prints the lock's key and ID, never its token, for every verb of
// package fmt: redlock.Lock{key: "k", id: 1a2b3c4d5e6f}, and with %#v
// &redlock.Lock{key: "k", id: "1a2b3c4d5e6f"}. A Lock's fields hold its
// token, which lets the bearer release the lock; printing them would give
// it away.
func (l *Lock) Format(f fmt.State, verb rune) {
	switch {
	case verb == 'v' && f.Flag('#') && l == nil:
		io.WriteString(f, "(*redlock.Lock)(nil)")
	case verb == 'v' && f.Flag('#'):
		fmt.Fprintf(f, "&redlock.Lock{key: %q, id: %q}", l.ks.Name, l.ID())
	case l == nil:
		io.WriteString(f, "<nil>")
	default:
		fmt.Fprintf(f, "redlock.Lock{key: %q, id: %s}", l.ks.Name, l.ID())
	}
}

// LogValue returns the lock's key and ID, never its token, as a group of
// two attributes, key and id, for log/slog.
func (l *Lock) LogValue() slog.Value {
	if l == nil {
		return slog.StringValue("<nil>")
	}
	return slog.GroupValue(slog.String("key", l.ks.Name), slog.String("id", l.ID()))
}

// ID returns a short name of the acquisition, the first 12 hex digits of
// the SHA-1 of its token: what Inspect and ForceRelease show as the holder.
// It identifies the acquisition in logs and tools without giving away the
// token, which lets its bearer release the lock.
func (l *Lock) ID() string { return wire.TokenID(l.token) }

// Fence returns the lock's fencing token: a number greater than the fence
// of every owner that held the lock before. A resource that accepts a
// write only with a fence greater than the greatest it has seen cannot be
// written by an owner that lost the lock without noticing.
//
// The fence costs no extra round trip: each node keeps a counter per
// lock, max(counter+1, node clock in µs), that every grant raises and
// every release lifts to at least the lock's fence; the lock's fence is
// the largest its granting nodes gave. So the order holds as long as:
//
//   - no node hands out fences ahead of the other nodes' clocks by as much
//     as the TTL of a lock on the key: a clock ahead by X needs every TTL
//     used on the key above X, and still does, through the counter, until
//     X has passed since the clock was put right;
//   - no node's clock has gone back since an earlier owner's grant while
//     the node has no counter for the lock: the counters of a hash slot
//     live in its marker, which has no expiry, but a restart without
//     persistence loses it.
func (l *Lock) Fence() int64 { return l.fence }

// Until returns the lock's validity deadline. The returned time carries a
// monotonic clock reading; compare it with time.Now, not with wall-clock
// times from elsewhere.
func (l *Lock) Until() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

// Context returns a context that is done when the lock ends: at its
// validity deadline unless an extension succeeded in time, as soon as
// Extend (or AutoExtend) finds that a quorum no longer holds the lock, or
// on Release. Its cause, from context.Cause, wraps ErrLockLost when the
// lock was lost and is ErrReleased after Release. Work done under the lock
// should stop when the context is done.
func (l *Lock) Context() context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx == nil {
		l.ctx, l.cancel = context.WithCancelCause(context.Background())
		if l.lost != nil {
			l.cancel(l.lost)
		} else {
			l.timer = time.AfterFunc(time.Until(l.until), l.deadline)
		}
	}
	return l.ctx
}

// deadline runs when the validity deadline passes, unless an extension
// moved it on.
func (l *Lock) deadline() {
	l.mu.Lock()
	if l.lost != nil {
		l.mu.Unlock()
		return
	}
	if d := time.Until(l.until); d > 0 {
		l.timer.Reset(d) // extended in the meantime
		l.mu.Unlock()
		return
	}
	cause := &lapse{last: l.failed}
	l.endLocked(cause)
	l.mu.Unlock()
	l.lostNow(context.Background(), cause)
}

// lostNow tells the Observer that the lock was lost.
func (l *Lock) lostNow(ctx context.Context, cause error) {
	l.c.hooks.lost(ctx, l.ks.Name, l.fence, l.start, cause)
}

// endLocked records why the lock ended and ends its context. The first
// cause stays. l.mu must be held.
func (l *Lock) endLocked(cause error) {
	if l.lost != nil {
		return
	}
	l.lost = cause
	if l.cancel != nil {
		l.cancel(cause)
		l.timer.Stop()
	}
}

// Extend pushes the lock's deadline out to ttl after the start of the
// extension round, less the drift allowance. It succeeds only if a quorum
// of nodes still holds the lock's token and agrees before the current
// deadline. A key that has expired on a node is never re-created.
//
// On failure the error is an *OpError wrapping
//   - ErrLockLost when a quorum no longer holds the token: the lock is gone,
//     and its context ends;
//   - ErrExpired when the deadline passed first: call Release;
//   - ErrRefused when so many nodes refused the extension (see ErrRefused)
//     that a quorum is out of reach: the lock stays valid until its old
//     deadline, but trying again cannot help;
//   - ErrNoQuorum when too few nodes answered: the lock stays valid until
//     its old deadline, and Extend may be tried again.
//
// Extend returns ErrReleased after Release, and an error wrapping
// ErrInvalid for a bad ttl.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) (err error) {
	ctx, ev := l.c.hooks.begin(ctx, "extend", l.ks.Name)
	defer func() {
		if err == nil {
			ev.Until = l.Until()
		}
		l.c.hooks.end(ctx, ev, err)
	}()
	if ev.TTL, err = l.c.checkTTL(ttl); err != nil {
		return err
	}
	return l.extend(ctx, ev.TTL)
}

func (l *Lock) extend(ctx context.Context, ttl time.Duration) error {
	l.op.Lock()
	defer l.op.Unlock()
	l.mu.Lock()
	until, released, lost := l.until, l.released, l.lost
	l.mu.Unlock()
	e := &OpError{Op: "extend", Key: l.ks.Name, Keys: l.ks.Keys, Quorum: l.c.quorum, Rounds: 1}
	switch {
	case released:
		return ErrReleased
	case lost != nil && !isLapse(lost): // seen lost by an earlier Extend
		e.Err = ErrLockLost
		return e
	}
	timeout := min(l.c.nodeTimeout(ttl), time.Until(until))
	if timeout <= 0 {
		e.Err = ErrExpired
		return e
	}
	// A node not known yet to be a server of its own (down at the lock's
	// first round, say) is probed now, in the background; until then its
	// answer does not count.
	if !mutant.On("extend-no-identity") {
		if err := l.c.identify(ctx, timeout); err != nil {
			e.Err = err
			return e
		}
	}
	l.long = l.long || ttl > wire.LongGrant
	r, extended := l.c.extendRound(ctx, l.last, l.ks.Extend(l.token, ttl), timeout)
	l.last = r
	ok := false
	if extended {
		l.mu.Lock()
		if ok = l.lost == nil && time.Now().Before(l.until); ok {
			l.until = validUntil(r.start, ttl, l.c.drift(ttl))
			l.c.learn(ttl)
		}
		l.mu.Unlock()
	}
	r.decide(ok)
	l.c.hooks.round(ctx, "extend", l.ks.Name, 1, r)
	if ok {
		l.mu.Lock()
		l.failed = nil
		l.mu.Unlock()
		return nil
	}
	e.Nodes = r.results
	defer func() {
		l.mu.Lock()
		l.failed = e
		l.mu.Unlock()
	}()
	e.Err = r.why(failure{op: "extend", late: extended, past: !time.Now().Before(until)})
	switch e.Err {
	case ErrLockLost:
		l.mu.Lock()
		first := l.lost == nil
		l.endLocked(e)
		l.mu.Unlock()
		if first {
			l.lostNow(ctx, e)
		}
	case ErrNoQuorum:
		e.ctxErr = ctx.Err()
	}
	return e
}

// Release gives the lock up on every node where it still holds the
// lock's token, so that others can take it at once, and raises the fence
// counter on every node to at least the lock's fence. It stops
// AutoExtend and ends the lock's context with ErrReleased. It is not cut
// short by the cancellation of ctx, which is usual when a program is
// shutting down; it is bounded by Options.ReleaseTimeout instead.
//
// Release reports on what it found. It returns nil as soon as a quorum of
// nodes has confirmed the release within the lock's validity (the other
// nodes are released in the background; Client.Close waits for them), and
// otherwise an
// *OpError wrapping
//   - ErrExpired when the deadline had passed before Release: the work
//     done under the lock may have overlapped another owner's;
//   - ErrLockLost when a quorum no longer held the token within the
//     validity: the lock had been lost;
//   - ErrRefused when so many nodes refused the release (see ErrRefused)
//     that a quorum could not confirm it; the keys left expire with their
//     TTL;
//   - ErrNoQuorum when too few nodes answered to confirm the release; the
//     keys left expire with their TTL.
//
// A second Release returns ErrReleased.
func (l *Lock) Release(ctx context.Context) (err error) {
	ctx, ev := l.c.hooks.begin(ctx, "release", l.ks.Name)
	defer func() {
		ev.Held = time.Since(l.start)
		l.c.hooks.end(ctx, ev, err)
	}()
	return l.release(ctx)
}

func (l *Lock) release(ctx context.Context) error {
	l.mu.Lock()
	released, w := l.released, l.watchdog
	l.released = true
	l.endLocked(ErrReleased)
	l.mu.Unlock()
	if released {
		return ErrReleased
	}
	if w != nil {
		close(w.stop)
		<-w.done
	}
	l.op.Lock()
	defer l.op.Unlock()
	until := l.Until()
	expired := !time.Now().Before(until)
	// A release within the validity that a quorum confirms is all the
	// caller needs to hear; one after the deadline, or one that finds the
	// lock gone, is reported with every node's answer.
	call := l.ks.Release(l.token, l.fence)
	if !l.long {
		call.Lean = l.covered
	}
	r := l.c.releaseRound(ctx, l.last, call, expired)
	r.decide(r.count(observe.OutcomeOK) >= l.c.quorum)
	l.c.hooks.round(ctx, "release", l.ks.Name, 1, r)
	// A goroutine of this Client that waits for the key is woken at once.
	// Otherwise, if the release woke waiters elsewhere, this Client holds
	// back before it takes the key again, so that one of them gets its
	// turn: when the slot it freed was the only free one. A semaphore with
	// other slots free has room for both.
	if local := l.c.wakeLocal(l.ks.Name); !local && r.woke() && r.full() {
		l.c.noteHandoff(l.ks.Name)
	}
	if r.ok && !expired {
		return nil
	}
	e := r.opError("release", l.ks.Name, r.why(failure{op: "release", late: expired}))
	e.Keys = l.ks.Keys
	return e
}

// full reports whether a release left at most one slot free, the one it
// freed, on some node that confirmed it: true for a lock, whose one key is
// its one slot; for a permit, whether the semaphore was full.
func (r *round) full() bool {
	for i, res := range r.results {
		if res.Outcome == observe.OutcomeOK && r.decoded[i].Free <= 1 {
			return true
		}
	}
	return false
}

// woke reports whether the nodes told any waiter of a release.
func (r *round) woke() bool {
	for _, d := range r.decoded {
		if d.Woke > 0 {
			return true
		}
	}
	return false
}

// A watchdog extends a lock in the background.
type watchdog struct {
	stop chan struct{} // closed by Release
	done chan struct{} // closed when the goroutine has returned
}

// AutoExtend keeps the lock alive in the background, for at most limit
// extensions; a limit of 0 or less sets no limit: the lock is extended
// until it is released or lost. Each time a third of its TTL has passed
// since the last extension, AutoExtend extends the lock by its TTL. After
// an extension fails for want of a quorum, it tries again after a short
// random pause while the lock is still valid.
//
// It stops for good at the first sign that the lock is gone (ErrLockLost,
// ErrExpired) or that the nodes will not extend it (ErrRefused), after
// limit successful extensions if limit > 0, and on Release, which waits
// for it to return. The lock's context ends when the lock is lost or its
// deadline passes; AutoExtend never re-creates a key that has expired.
// Calling AutoExtend again, or after Release, has no effect.
func (l *Lock) AutoExtend(limit int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.watchdog != nil || l.released {
		return
	}
	w := &watchdog{stop: make(chan struct{}), done: make(chan struct{})}
	l.watchdog = w
	go l.keepAlive(w, limit)
}

func (l *Lock) keepAlive(w *watchdog, limit int) {
	defer close(w.done)
	interval := l.ttl / 3
	wait := interval
	for n := 0; limit <= 0 || n < limit; {
		t := time.NewTimer(wait)
		select {
		case <-w.stop:
			t.Stop()
			return
		case <-t.C:
		}
		err := l.Extend(context.Background(), l.ttl)
		switch {
		case err == nil:
			n++
			wait = interval
		case errors.Is(err, ErrNoQuorum):
			wait = min(l.c.retryDelay(), interval)
		default:
			l.c.log.Info("redlock: automatic extension stopped", "key", l.ks.Name, "err", err)
			return
		}
	}
}
