// Package observe holds what a redlock.Client tells an Observer: the
// events of its operations and rounds, each node's answer to a request
// (NodeResult, which redlock.OpError carries too), and what the Client
// knows of each node's health (NodeState).
//
// Set an Observer with redlock.Options.Observer; package
// github.com/quorumlock/redlock/otelredlock provides one for
// OpenTelemetry. The package depends on the standard library alone.
package observe

import (
	"context"
	"fmt"
	"time"

	"github.com/quorumlock/redlock/internal/errtext"
)

// An Observer is told what a redlock.Client and its Locks do, for
// metrics, traces and audit logs. Set one with redlock.Options.Observer.
//
// The Client calls an Observer synchronously, on the goroutine doing the
// work, and from many goroutines at once. Its methods must be safe for
// concurrent use, must return quickly and must not call back into the
// Client or the Lock the event is about. Without an Observer the Client
// does none of this work.
type Observer interface {
	// Start is called when an operation begins, and returns the context
	// the operation goes on with: its requests to the nodes and its events
	// get it, so a tracer can put its span there. It must return ctx itself
	// or a context derived from it.
	//
	// op is the operation's name (see OpEvent); ctx is the caller's
	// context, or a background context for AutoExtend's extensions.
	Start(ctx context.Context, op, key string) context.Context

	// Observe receives one event: a RoundEvent, an OpEvent, a LostEvent or
	// a NodeEvent, with the context Start returned for the operation the
	// event belongs to. Other event types may be added; an Observer should
	// ignore the types it does not know.
	//
	// For a LostEvent found at the lock's deadline, ctx is a background
	// context.
	Observe(ctx context.Context, e Event)
}

// An Event is something an Observer is told of. Its dynamic type is one of
// RoundEvent, OpEvent, LostEvent and NodeEvent.
type Event interface{ event() }

// A RoundEvent reports one round: one request sent to every node at once,
// with each node's answer.
//
// Lock makes a round per attempt, and one more to clean up each failed
// attempt ("cleanup"); Extend and Release make one round each;
// Client.Adopt makes an "adopt" round; Campaign makes an "elect" round once
// it holds the lock; Election.Leader makes a "leader" round. An RWLock
// writer that stops waiting makes a "drop-intent" round to take its intent
// back (see redlock.RWLock), as does one granted while a node refused it.
// Of the operators' calls (package admin), Probe makes a "probe" round,
// Inspect an "inspect" round, and ForceRelease an "inspect" round that it
// does not report and a "force-release" round.
type RoundEvent struct {
	Op       string        // as above
	Key      string        // the lock's key; empty for "probe"
	Round    int           // acquire, cleanup: Lock's attempt, from 1; else 1
	Start    time.Time     // just before the first request was sent
	Duration time.Duration // until the round was decided
	OK       bool          // whether a quorum of nodes did what was asked
	Quorum   int           // how many nodes must agree: N/2+1

	// Nodes is each node's answer, in the order of the Client's nodes, as
	// known when the round was decided: a node whose answer was not
	// needed then shows OutcomeNoAnswer.
	Nodes []NodeResult
}

// An OpEvent reports the end of an operation, including a call refused
// for a bad key or TTL (Err wraps redlock.ErrInvalid).
//
// Op is "acquire" for Lock, TryLock, LockAll, TryLockAll,
// Semaphore.Acquire, Semaphore.TryAcquire, the RLock, TryRLock, Lock and
// TryLock of an RWLock, and each lock attempt of Election.Campaign;
// "adopt" for Client.Adopt; "extend" for Extend; "release" for Release.
// Of the operators' calls (package admin), Inspect and InspectSemaphore
// report "inspect", once per key read, and ForceRelease and
// ForceReleasePermit "force-release".
type OpEvent struct {
	Op       string
	Key      string
	Start    time.Time     // when the call began
	Duration time.Duration // how long the call took
	Quorum   int           // how many nodes must agree: N/2+1
	Rounds   int           // acquire: the rounds made
	// TTL (acquire, extend) is the TTL asked for, to the millisecond when
	// valid.
	TTL   time.Duration
	Fence int64 // acquire, adopt: the lock's fence, when obtained
	// Until (acquire, adopt, extend) is the lock's validity deadline, when
	// the call succeeded.
	Until time.Time
	// Held (release) is the time from the start of the acquiring round to
	// the release.
	Held time.Duration
	Err  error // nil on success; as the call returned it
}

// A LostEvent reports that a lock was lost while its owner still held it:
// its validity deadline passed without an extension, with Lock.Context in
// use, or Extend found that a quorum no longer holds it.
//
// The lock's context ends with Cause: a *redlock.OpError from Extend, or
// an error saying that the validity ended (errors.As tells the two apart).
type LostEvent struct {
	Key   string
	Fence int64
	Held  time.Duration // from the start of the acquiring round to the loss
	Cause error         // wraps redlock.ErrLockLost
}

// A NodeEvent reports that the Client's view of a node changed health, as
// package admin's States shows it: a node became unreachable, was
// quarantined after a restart, or came back.
type NodeEvent struct {
	Previous NodeHealth
	State    NodeState
}

func (RoundEvent) event() {}
func (OpEvent) event()    {}
func (LostEvent) event()  {}
func (NodeEvent) event()  {}

// An Outcome is what one node did with one request, in a NodeResult.
type Outcome int

const (
	// OutcomeNoAnswer means the node did not answer in time, or the
	// outcome was decided before its answer was needed.
	OutcomeNoAnswer Outcome = iota
	// OutcomeOK means the node did what was asked: it granted the lock,
	// extended it or deleted our key.
	OutcomeOK
	// OutcomeTaken means the key on the node holds another owner's token.
	OutcomeTaken
	// OutcomeAbsent means the key does not exist on the node (extend,
	// release).
	OutcomeAbsent
	// OutcomeFailed means the request failed in a way that may pass: the
	// node could not be reached, the connection broke, or the node
	// answered that it is busy or loading its data. NodeResult.Err says
	// why.
	OutcomeFailed
	// OutcomeQuarantined means the node restarted too recently to vote:
	// it may have lost lock keys that are still valid elsewhere.
	// NodeResult.TTL says how much longer it stays out.
	OutcomeQuarantined
	// OutcomeRefused means the node answered with an error that it will
	// give again however often the request is sent, such as WRONGPASS,
	// NOPERM, WRONGTYPE, READONLY or OOM, or a TLS handshake that cannot
	// succeed (see driver.IsCertificateError). NodeResult.Err says why.
	OutcomeRefused
)

var outcomeNames = [...]string{"no answer", "ok", "taken", "absent", "failed", "quarantined", "refused"}

func (o Outcome) String() string {
	if o >= 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// NodeResult is what one node did with one request. RoundEvent.Nodes and
// redlock.OpError.Nodes hold one for each node, in the Client's order.
type NodeResult struct {
	Node    string  // the node's Name
	Outcome Outcome // what it did
	// TTL is, for OutcomeTaken, the other owner's remaining time to live,
	// and for OutcomeQuarantined, how long the node stays out.
	TTL     time.Duration
	Fence   int64         // OutcomeOK from an acquisition: the fence granted
	Err     error         // OutcomeFailed, OutcomeRefused, OutcomeNoAnswer: why
	Latency time.Duration // from the start of the round to the answer
}

func (r NodeResult) String() string {
	s := r.Node + " " + r.Outcome.String()
	switch {
	case r.Outcome == OutcomeTaken && r.TTL > 0:
		s += " (expires in " + r.TTL.String() + ")"
	case r.Outcome == OutcomeQuarantined:
		s += " (votes again in " + r.TTL.String() + ")"
	case r.Err != nil:
		s += ": " + errtext.Of(r.Err)
	}
	if r.Outcome != OutcomeNoAnswer {
		s += " in " + r.Latency.Round(time.Microsecond).String()
	}
	return s
}

// NodeHealth is what a redlock.Client last saw of a node.
type NodeHealth int

const (
	// NodeUnknown means the client has not heard from the node yet.
	NodeUnknown NodeHealth = iota
	// NodeHealthy means the node answered and may vote.
	NodeHealthy
	// NodeQuarantined means the node answered but restarted too recently
	// to vote; NodeState.Until says until when.
	NodeQuarantined
	// NodeUnreachable means the last request to the node got no answer:
	// it could not be sent, the connection broke, or the node did not
	// answer in time; NodeState.Err says why.
	NodeUnreachable
	// NodeRefusing means the node answered the last request with an error
	// that it will give again however often the request is sent
	// (OutcomeRefused), such as WRONGPASS or READONLY; NodeState.Err says
	// which.
	NodeRefusing
	// NodeBusy means the node answered the last request that it cannot
	// serve it now, with an error that may pass: LOADING, BUSY, TRYAGAIN,
	// MASTERDOWN or CLUSTERDOWN (OutcomeFailed). NodeState.Err says
	// which.
	NodeBusy
)

var healthNames = [...]string{"unknown", "healthy", "quarantined", "unreachable", "refusing", "busy"}

func (h NodeHealth) String() string {
	if h >= 0 && int(h) < len(healthNames) {
		return healthNames[h]
	}
	return fmt.Sprintf("NodeHealth(%d)", int(h))
}

// NodeState is what a redlock.Client knows of one node: NodeEvent carries
// it, and package admin's States and Probe return it.
type NodeState struct {
	Node   string     // the node's Name
	Health NodeHealth // what the last answer, or its absence, showed
	Until  time.Time  // NodeQuarantined: when the node should vote again at the latest
	Err    error      // NodeUnreachable, NodeRefusing, NodeBusy: the last error; NodeQuarantined: what it waits for, if more than time
	Seen   time.Time  // when the state was observed; zero if never

	// Set by package admin's Probe only: how long the node's redis-server
	// process has run, the largest TTL recorded on the node, and the
	// node's clock minus this machine's, to the millisecond.
	Age         time.Duration
	MaxTTL      time.Duration
	ClockOffset time.Duration
}
