package redlock

import (
	"context"
	"time"
)

// An Observer is told what a Client and its Locks do, for metrics, traces
// and audit logs. Set one with Options.Observer; package
// github.com/quorumlock/redlock/otelredlock provides one for OpenTelemetry.
//
// The Client calls an Observer synchronously, on the goroutine doing the
// work, and from many goroutines at once. Its methods must be safe for
// concurrent use, must return quickly and must not call back into the
// Client or the Lock the event is about. Without an Observer the Client
// does none of this work.
type Observer interface {
	// Start is called when an operation begins, with the operation's
	// name (see OpEvent) and the caller's context (for AutoExtend's
	// extensions, a background context). The operation
	// goes on with the context Start returns: its requests to the nodes
	// and its events get it, so a tracer can put its span there. It must
	// be ctx itself or derived from it.
	Start(ctx context.Context, op, key string) context.Context

	// Observe receives one event: a RoundEvent, an OpEvent, a LostEvent
	// or a NodeEvent. Other event types may be added; an Observer should
	// ignore the types it does not know. ctx is what Start returned for
	// the operation the event belongs to; for a LostEvent found at the
	// lock's deadline, it is a background context.
	Observe(ctx context.Context, e Event)
}

// An Event is something an Observer is told of. Its dynamic type is one of
// RoundEvent, OpEvent, LostEvent and NodeEvent.
type Event interface{ event() }

// A RoundEvent reports one round: one request sent to every node at once.
// Lock makes a round per attempt, and one more to clean up each failed
// attempt ("cleanup"); Extend and Release make one round each; Campaign
// makes an "elect" round once it holds the lock; Election.Leader makes a
// "leader" round, Probe a "probe" round, Inspect an "inspect" round and
// ForceRelease an "inspect" round that it does not report and a
// "force-release" round. Client.Adopt makes an "adopt" round; an RWLock
// writer that stops waiting makes a "drop-intent" round to take its
// intent back (see RWLock), as does one granted while a node refused it.
type RoundEvent struct {
	Op       string        // as above
	Key      string        // the lock's key; empty for "probe"
	Round    int           // acquire and cleanup: the attempt of Lock, from 1; otherwise 1
	Start    time.Time     // just before the first request was sent
	Duration time.Duration // until the round was decided
	OK       bool          // whether a quorum of nodes did what was asked
	Quorum   int           // how many nodes must agree: N/2+1

	// Nodes is each node's answer, in the order of the Client's nodes, as
	// known when the round was decided: a node whose answer was not
	// needed then shows NoAnswer.
	Nodes []NodeResult
}

// An OpEvent reports the end of an operation: Lock, TryLock, LockAll,
// TryLockAll, Semaphore.Acquire, Semaphore.TryAcquire, the RLock,
// TryRLock, Lock and TryLock of an RWLock, and each lock attempt of
// Election.Campaign (Op "acquire"), Client.Adopt ("adopt"), Extend
// ("extend"), Release
// ("release"), Inspect and Semaphore.Inspect ("inspect", once per key
// read) and ForceRelease ("force-release"), including a call refused for
// a bad key or TTL (Err wraps ErrInvalid).
type OpEvent struct {
	Op       string
	Key      string
	Start    time.Time     // when the call began
	Duration time.Duration // how long the call took
	Quorum   int           // how many nodes must agree: N/2+1
	Rounds   int           // acquire: the rounds made
	TTL      time.Duration // acquire, extend: the TTL asked for, to the millisecond when valid
	Fence    int64         // acquire, adopt: the lock's fence, when obtained
	Until    time.Time     // acquire, adopt, extend: the lock's validity deadline, when the call succeeded
	Held     time.Duration // release: from the start of the acquiring round to the release
	Err      error         // nil on success; as the call returned it
}

// A LostEvent reports that a lock was lost while its owner still held it:
// its validity deadline passed without an extension, with Lock.Context in
// use, or Extend found that a quorum no longer holds it. The lock's
// context ends with Cause, which is an *OpError from Extend (errors.As
// tells the two apart) or an error saying that the validity ended.
type LostEvent struct {
	Key   string
	Fence int64
	Held  time.Duration // from the start of the acquiring round to the loss
	Cause error         // wraps ErrLockLost
}

// A NodeEvent reports that the Client's view of a node changed health, as
// Client.States shows it: a node became unreachable, was quarantined after
// a restart, or came back.
type NodeEvent struct {
	Previous NodeHealth
	State    NodeState
}

func (RoundEvent) event() {}
func (OpEvent) event()    {}
func (LostEvent) event()  {}
func (NodeEvent) event()  {}

// hooks is how the Client tells its Observer what it does. Without an
// Observer it is noHooks, whose methods do nothing, so that the Client
// does none of the work of making events.
type hooks interface {
	// begin starts an operation: it returns the context the operation
	// goes on with, and the OpEvent that end completes.
	begin(ctx context.Context, op, key string) (context.Context, OpEvent)
	// end reports the end of an operation that begin started.
	end(ctx context.Context, ev OpEvent, err error)
	// round reports a round once it is decided.
	round(ctx context.Context, op, key string, n int, r *round)
	// lost reports that the lock on key, with the given fence and
	// obtained by a round that started at start, was lost.
	lost(ctx context.Context, key string, fence int64, start time.Time, cause error)
	// event reports any other event.
	event(ctx context.Context, e Event)
}

// newHooks returns the hooks that tell obs, for a Client whose quorum is
// quorum; noHooks if obs is nil.
func newHooks(obs Observer, quorum int) hooks {
	if obs == nil {
		return noHooks{}
	}
	return observing{obs: obs, quorum: quorum}
}

type noHooks struct{}

func (noHooks) begin(ctx context.Context, _, _ string) (context.Context, OpEvent) {
	return ctx, OpEvent{}
}
func (noHooks) end(context.Context, OpEvent, error)                   {}
func (noHooks) round(context.Context, string, string, int, *round)    {}
func (noHooks) lost(context.Context, string, int64, time.Time, error) {}
func (noHooks) event(context.Context, Event)                          {}

// observing is the hooks of a Client with an Observer.
type observing struct {
	obs    Observer
	quorum int
}

func (o observing) begin(ctx context.Context, op, key string) (context.Context, OpEvent) {
	ev := OpEvent{Op: op, Key: key, Quorum: o.quorum, Start: time.Now()}
	return o.obs.Start(ctx, op, key), ev
}

func (o observing) end(ctx context.Context, ev OpEvent, err error) {
	ev.Duration, ev.Err = time.Since(ev.Start), err
	o.obs.Observe(ctx, ev)
}

func (o observing) round(ctx context.Context, op, key string, n int, r *round) {
	o.obs.Observe(ctx, RoundEvent{Op: op, Key: key, Round: n, Start: r.start,
		Duration: r.took, OK: r.ok, Quorum: o.quorum, Nodes: r.verdict})
}

func (o observing) lost(ctx context.Context, key string, fence int64, start time.Time, cause error) {
	o.obs.Observe(ctx, LostEvent{Key: key, Fence: fence, Held: time.Since(start), Cause: cause})
}

func (o observing) event(ctx context.Context, e Event) { o.obs.Observe(ctx, e) }
