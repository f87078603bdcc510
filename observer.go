package redlock

import (
	"context"
	"time"
)

// An Observer is told what a Client and its Locks do, for metrics, traces
// and audit logs. Set one with Options.Observer; the otel module of this
// repository provides one for OpenTelemetry.
//
// The Client calls an Observer synchronously, on the goroutine doing the
// work, and from many goroutines at once. Its methods must be safe for
// concurrent use, must return quickly and must not call back into the
// Client or the Lock the event is about. Without an Observer the Client
// does none of this work.
type Observer interface {
	// Start is called when Lock, TryLock, Extend or Release begins, with
	// op "acquire", "extend" or "release" and the caller's context (for
	// AutoExtend's extensions, a background context). The operation
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
// attempt ("cleanup"); Extend and Release make one round each, and Probe
// makes a "probe" round.
type RoundEvent struct {
	Op       string        // "acquire", "cleanup", "extend", "release" or "probe"
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

// An OpEvent reports the end of Lock or TryLock (Op "acquire"), Extend
// ("extend") or Release ("release"), including a call refused for a bad
// key or TTL (Err wraps ErrInvalid).
type OpEvent struct {
	Op       string
	Key      string
	Start    time.Time     // when the call began
	Duration time.Duration // how long the call took
	Quorum   int           // how many nodes must agree: N/2+1
	Rounds   int           // acquire: the rounds made
	TTL      time.Duration // acquire, extend: the TTL asked for, to the millisecond when valid
	Fence    int64         // acquire: the lock's fence, when obtained
	Until    time.Time     // acquire, extend: the lock's validity deadline, when the call succeeded
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

// report tells the Observer of a round once it is decided.
func (c *Client) report(ctx context.Context, op, key string, n int, r *round) {
	if c.obs == nil {
		return
	}
	c.obs.Observe(ctx, RoundEvent{Op: op, Key: key, Round: n, Start: r.start,
		Duration: r.took, OK: r.ok, Quorum: c.quorum, Nodes: r.verdict})
}
