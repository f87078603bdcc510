// Package otelredlock reports what a redlock.Client does to OpenTelemetry:
// metrics of its operations, rounds and nodes, and a span for each
// operation on a lock. It lives in a module of its own so that the redlock
// package itself depends on nothing but the standard library.
//
// An Observer from New is an observe.Observer; set it in the Client's
// options:
//
//	obs, err := otelredlock.New()
//	if err != nil {
//		return err
//	}
//	defer obs.Close()
//	c, err := redlock.New(nodes, &redlock.Options{Observer: obs})
//
// By default it uses the global meter and tracer providers of the otel
// package; WithMeterProvider and WithTracerProvider choose others. One
// Observer may serve several Clients of the same nodes.
//
// # Metrics
//
// The instruments belong to the meter named ScopeName. Durations are in
// seconds, as OpenTelemetry's semantic conventions ask. No metric carries
// a lock's key, since keys are unbounded; the number of time series grows
// only with the number of nodes.
//
//	Name                      Instrument     Unit         Attributes
//	redlock.acquire.duration  histogram      s            redlock.outcome
//	redlock.hold.duration     histogram      s            redlock.outcome
//	redlock.operations        counter        {operation}  redlock.operation, redlock.outcome
//	redlock.rounds            counter        {round}      redlock.operation, redlock.round.ok
//	redlock.node.errors       counter        {error}      redlock.node.name, redlock.operation, redlock.node.outcome
//	redlock.node.latency      histogram      s            redlock.node.name, redlock.operation
//	redlock.node.state        gauge (async)  1            redlock.node.name, redlock.node.state
//	redlock.locks.lost        counter        {lock}       none
//
// Every data point also has the attributes given with WithAttributes.
//
// redlock.acquire.duration is the time Client.Lock or Client.TryLock took,
// waiting included. redlock.hold.duration is the time from the start of
// the round that acquired a lock to its Release; the outcome is the
// Release's. redlock.operations counts the calls of Lock and TryLock
// (operation "acquire"; also RWLock's RLock, TryRLock, Lock and TryLock),
// Extend ("extend"), Release ("release") and Client.Adopt ("adopt").
// redlock.rounds counts rounds, each one request sent to every node:
// besides those of the four operations, "cleanup" rounds remove the keys
// of a failed acquisition round, "drop-intent" rounds take back the intent
// of an RWLock writer that stopped waiting, and "probe" rounds are made by
// admin.Client.Probe; redlock.round.ok says whether a quorum did what was asked
// (for a probe, whether every node answered).
//
// redlock.node.latency is each node's time to answer, for the answers that
// came (outcome ok, taken, absent or quarantined). redlock.node.errors
// counts the requests to a node that failed (redlock.node.outcome
// "failed"), that it refused in a way that trying again cannot change
// ("refused": a wrong password, a missing permission, a replica, a full
// node) or that got no answer in time ("no_answer"); a node whose answer
// was not needed because the round was already decided is not counted.
// redlock.node.state is 1 for the state the Client last reported of each
// node and 0 for the other four; a node appears once a round or a change
// of state mentions it.
//
// redlock.locks.lost counts locks lost while held: their deadline passed
// without an extension while Lock.Context was in use, or Extend found that
// a quorum no longer held them.
//
// The attributes take these values:
//
//	redlock.operation     acquire, extend, release; for rounds also cleanup, probe
//	redlock.outcome       ok, taken, no_quorum, refused, expired, lost, released, canceled, invalid, error
//	redlock.round.ok      true, false
//	redlock.node.name     the node's Name, such as "10.0.0.7:6379/0"
//	redlock.node.outcome  failed, refused, no_answer
//	redlock.node.state    healthy, quarantined, unreachable, refusing, busy, unknown
//
// An outcome is derived from the error the call returned, with errors.Is:
// canceled when the caller's context ended the call (context.Canceled or
// context.DeadlineExceeded), otherwise taken, no_quorum, refused, expired,
// lost, released and invalid for redlock.ErrTaken, ErrNoQuorum, ErrRefused,
// ErrExpired, ErrLockLost, ErrReleased and ErrInvalid, and error for
// anything else.
// A second Release of a lock (outcome released) does not add to
// redlock.hold.duration. The Client rejects most invalid arguments before
// an operation starts, so they are seldom seen as invalid.
//
// # Traces
//
// Every operation on a lock is a span of kind client, named
// "redlock.acquire", "redlock.extend" or "redlock.release", a child of the
// span in the caller's context. Its attributes:
//
//	redlock.operation  acquire, extend or release
//	redlock.key        the lock's key
//	redlock.quorum     the number of nodes that must agree
//	redlock.outcome    as for the metrics
//	error.type         the outcome, on failure
//	redlock.ttl_ms     acquire, extend: the TTL asked for, in milliseconds
//	redlock.rounds     acquire: the rounds made
//	redlock.fence      acquire: the lock's fencing token, when obtained
//	redlock.held_ms    release: how long the lock was held, in milliseconds
//
// A failed operation sets the span's status to Error with the error's
// text. Within the span, each round adds an event "redlock.round", stamped
// with the time the round began, followed by one event "redlock.node" per
// node, stamped with the time the node answered (or, if it did not, the
// time the round was decided), so that a trace viewer lists every round
// with its nodes in order of their answers:
//
//	redlock.round: redlock.operation, redlock.round.number, redlock.round.ok,
//	               redlock.round.duration_ms
//	redlock.node:  redlock.node.name, redlock.node.outcome, redlock.node.latency_ms
//	               (if it answered), redlock.node.ttl_ms (taken: the other
//	               owner's time to live; quarantined: the time left),
//	               error.message (if it failed)
//
// Here redlock.node.outcome is any of ok, taken, absent, failed,
// quarantined and no_answer. A change of a node's state seen during the
// operation adds an event "redlock.node.state" (redlock.node.name,
// redlock.node.state, redlock.node.previous_state, error.message), and the
// loss of the lock an event "redlock.lost" (redlock.fence,
// redlock.held_ms, error.message).
//
// Events that belong to no operation's span, such as the rounds of
// admin.Client.Probe and a loss found at the lock's deadline, are counted in
// the metrics only.
package otelredlock
