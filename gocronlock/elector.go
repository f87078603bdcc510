package gocronlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/quorumlock/redlock"
)

// ElectorOptions configures an Elector. The zero value of every field
// selects the documented default; a nil *ElectorOptions selects all
// defaults.
type ElectorOptions struct {
	// TTL is the election's ttl (redlock.Client.Election): the time to
	// live of the lock that the leader holds. The leader extends it each
	// time a third of TTL has passed (redlock.Lock.AutoExtend), so a
	// leader that dies, or that is cut off from the nodes, keeps the
	// other instances from leading for at most TTL. A failed campaign is
	// tried again after a third of TTL. Every instance should use the
	// same TTL. Default DefaultElectorTTL, 15 seconds.
	TTL time.Duration

	// Logger receives a record of each term that begins or ends, and of
	// each campaign that fails. Default: none.
	Logger *slog.Logger
}

// An Elector is a gocron.Elector that lets the scheduler of one instance
// run jobs, the leader's, while the schedulers of the others skip them.
// Give it to gocron.WithDistributedElector, and call Run, which campaigns
// for the leadership until its context ends.
//
// The leader is the leader of the redlock.Election on the Elector's key
// (redlock.Client.Election): the instance whose campaign won the lock on
// that key on the nodes of a redlock.Client and recorded its term there.
// The lock is kept alive in the background for as long as the instance
// leads. A period of leadership is a Term. The leadership ends when the
// lock is lost, as when the leader cannot reach a quorum of the nodes in
// time, or when Run returns, which releases the lock so that another
// instance takes over at once. The end is visible: the Term's context
// ends, with the cause; IsLeader returns an error from then on; Elected
// waits for the next term.
//
// Because the Elector leads a redlock.Election, a program that does not
// campaign can learn who leads with Election.Leader or Election.Observe
// on the same key: the leader's value is the Options.Owner of its
// Client, and its term is its Term's Fence.
//
// gocron asks IsLeader before each run, and does not stop a run that has
// started when the leadership ends. A run that must not overlap a run on
// the next leader should stop when its Term's context ends, and send the
// Term's Fence with its writes to a resource that checks fencing tokens.
//
// An Elector is safe for concurrent use by multiple goroutines and
// schedulers.
type Elector struct {
	election *redlock.Election
	key      string
	ttl      time.Duration
	log      *slog.Logger
	running  atomic.Bool // Run is running

	mu      sync.Mutex    // guards the fields below
	term    *Term         // the current term; nil when not leading
	changed chan struct{} // closed and replaced when a term begins or ends
	failed  error         // why the last campaign failed; nil after a success
}

var _ gocron.Elector = (*Elector)(nil)

// A Term is one period of leadership of an Elector: from the moment its
// campaign won (redlock.Election.Campaign returned its lock) to the loss
// or the release of that lock. A Term is safe for concurrent use.
type Term struct {
	lock   *redlock.Lock
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// Context returns a context that is done when the term ends. Its cause,
// from context.Cause, wraps redlock.ErrLockLost when the lock was lost,
// and wraps ErrResigned and the cause of Run's context when Run
// returned. Work that must stop when the instance stops leading should
// use it.
func (t *Term) Context() context.Context { return t.ctx }

// Fence returns the term's fencing token: the election's term, which is
// the fence of the lock the leader holds (see redlock.Lock.Fence),
// greater than the fence of every earlier term on the same key. A
// resource that refuses writes with a fence below the largest it has
// seen refuses a former leader that has not noticed the end of its term.
func (t *Term) Fence() int64 { return t.lock.Fence() }

// NewElector returns an Elector that campaigns for the lock on key on c's
// nodes. Every instance that takes part in the election must use the same
// key. A nil c, an empty key or an invalid option gives an *OptionError.
// TTL and key are checked against c's options when Run first campaigns.
func NewElector(c *redlock.Client, key string, opts *ElectorOptions) (*Elector, error) {
	if c == nil {
		return nil, &OptionError{Name: "client", Reason: "is nil"}
	}
	if key == "" {
		return nil, &OptionError{Name: "key", Reason: "is empty"}
	}
	var o ElectorOptions
	if opts != nil {
		o = *opts
	}
	if o.TTL < 0 {
		return nil, &OptionError{Name: "ElectorOptions.TTL", Reason: o.TTL.String() + " is negative"}
	}
	if o.TTL == 0 {
		o.TTL = DefaultElectorTTL
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Elector{election: c.Election(key, o.TTL), key: key, ttl: o.TTL, log: o.Logger, changed: make(chan struct{})}, nil
}

// Run campaigns for the leadership until ctx is done, and then returns
// ctx.Err().
//
// A campaign is a call of redlock.Election.Campaign. While another
// instance leads, it waits for the lock as Client.Lock does, and takes it
// as soon as the leader releases it or it expires; it then records the
// new term on the nodes, and returns. From then on the Elector leads: the
// lock renews itself in the background (redlock.Lock.AutoExtend) until
// it is lost, and then Run campaigns again. When ctx is done, Run ends
// the term and releases the lock before it returns, so that another
// instance can lead at once; the release is not cut short by ctx (see
// redlock.Lock.Release).
//
// A campaign that fails otherwise than for ctx, as when the Client's
// Options.Tries runs out or the nodes refuse the lock
// (redlock.ErrRefused), is recorded to Logger and tried again after a
// third of the TTL; meanwhile IsLeader's error wraps the failure. A
// campaign that takes the lock but cannot record its term on a quorum of
// the nodes within the lock's validity does not fail: Campaign gives the
// lock up and campaigns on by itself. A key or TTL that the Client
// rejects makes Run return at once with an error wrapping
// redlock.ErrInvalid. Run may be called again after it has returned;
// while a call is running, another returns ErrRunning.
func (e *Elector) Run(ctx context.Context) error {
	if !e.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer e.running.Store(false)
	for {
		l, err := e.election.Campaign(ctx, "")
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, redlock.ErrInvalid) {
				return err
			}
			e.setFailed(err)
			e.log.Warn("gocronlock: campaign failed", "key", e.key, "err", err)
			if sleep(ctx, e.ttl/3) != nil {
				return ctx.Err()
			}
			continue
		}
		t := e.begin(l)
		select {
		case <-t.ctx.Done():
			e.end(t)
			e.log.Warn("gocronlock: leadership lost", "key", e.key, "fence", l.Fence(), "cause", context.Cause(t.ctx))
			// Delete what is left of the lost lock's keys, so that the
			// next leader need not wait for them to expire.
			l.Release(context.WithoutCancel(ctx))
		case <-ctx.Done():
			t.cancel(fmt.Errorf("%w: %w", ErrResigned, context.Cause(ctx)))
			e.end(t)
			err := l.Release(context.WithoutCancel(ctx))
			e.log.Info("gocronlock: leadership given up", "key", e.key, "fence", l.Fence(), "err", err)
			return ctx.Err()
		}
	}
}

// begin starts a term on the lock l, which Campaign returned.
func (e *Elector) begin(l *redlock.Lock) *Term {
	ctx, cancel := context.WithCancelCause(l.Context())
	t := &Term{lock: l, ctx: ctx, cancel: cancel}
	e.mu.Lock()
	e.term, e.failed = t, nil
	e.changedLocked()
	e.mu.Unlock()
	e.log.Info("gocronlock: elected", "key", e.key, "fence", l.Fence())
	return t
}

// end records the end of the term t, whose context has ended.
func (e *Elector) end(t *Term) {
	t.cancel(nil) // frees the context; the cause stays the first one
	e.mu.Lock()
	e.term = nil
	e.changedLocked()
	e.mu.Unlock()
}

func (e *Elector) setFailed(err error) {
	e.mu.Lock()
	e.failed = err
	e.mu.Unlock()
}

// changedLocked wakes the goroutines waiting in Elected. e.mu must be
// held.
func (e *Elector) changedLocked() {
	close(e.changed)
	e.changed = make(chan struct{})
}

// current returns the current term, if it has not ended, and the channel
// that the next change closes.
func (e *Elector) current() (*Term, <-chan struct{}, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	t := e.term
	if t != nil && (t.ctx.Err() != nil || !time.Now().Before(t.lock.Until())) {
		t = nil
	}
	return t, e.changed, e.failed
}

// IsLeader returns nil if the Elector leads: Run's campaign has won, and
// its lock is within its validity, neither lost nor released. Otherwise it returns
// ErrNotLeader, or, when the last campaign failed, an error that wraps
// both ErrNotLeader and the campaign's error. It answers from what Run
// knows, without a round trip to the nodes, and does not use its
// context.
//
// gocron calls it before each run of a job, and skips the run on an
// error.
func (e *Elector) IsLeader(context.Context) error {
	t, _, failed := e.current()
	switch {
	case t != nil:
		return nil
	case failed != nil:
		return fmt.Errorf("%w: %w", ErrNotLeader, failed)
	default:
		return ErrNotLeader
	}
}

// Term returns the current term, or nil when the Elector does not lead.
func (e *Elector) Term() *Term {
	t, _, _ := e.current()
	return t
}

// Elected waits until the Elector leads and returns the current term, or
// returns ctx's error if ctx ends first. With the term's context, it
// lets a program follow the changes of leadership:
//
//	for {
//		term, err := e.Elected(ctx)
//		if err != nil {
//			return err
//		}
//		log.Print("leading")
//		<-term.Context().Done()
//		log.Print("no longer leading: ", context.Cause(term.Context()))
//	}
func (e *Elector) Elected(ctx context.Context) (*Term, error) {
	for {
		t, changed, _ := e.current()
		if t != nil {
			return t, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// sleep waits for d or until ctx is done, and then returns ctx.Err().
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return ctx.Err()
}
