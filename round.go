package redlock

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock/internal/wire"
	"github.com/quorumlock/redlock/observe"
)

// This file is what every round shares: the fan-out of one request to all
// nodes at once. One acquisition round, step by step, is in acquire.go;
// the collection and the count of the answers, in vote.go.
//
// A round sends one request to all nodes at once, so that it takes as long
// as the slowest node it needs rather than the sum of all of them. The
// requests share one deadline. The round is decided as soon as a quorum has
// said yes, or so many nodes have said no that a quorum is out of reach;
// the late answers are still collected before anything that depends on
// them (the clean-up of a failed acquisition, or Release) is sent.

// validUntil returns when a lock stops being valid: ttl after the start of
// the round that granted or extended it, less the drift allowance. At the
// moment a round is decided, the validity left is validUntil − now, that is
// ttl − elapsed − drift.
func validUntil(start time.Time, ttl, drift time.Duration) time.Time {
	return start.Add(ttl - drift)
}

// extendRound sets a new time to live on every node where key still holds
// token, and reports whether a quorum did so. It never re-creates a key.
// The round is cut off after timeout, which the caller keeps within the
// lock's validity. Like a release, each node's request follows that
// node's request of prev, the lock's previous round: an extension that
// overtook a slow grant would find no key, and the grant would then keep
// its first TTL on that node.
func (c *Client) extendRound(ctx context.Context, prev *round, call wire.Call, timeout time.Duration) (*round, bool) {
	r := c.send(ctx, timeout, 1, call, prev)
	t := c.tally(nil, 0)
	if r.collect(&t) {
		return r, true
	}
	r.drain()
	t.judge(r)
	return r, false
}

// releaseRound runs the release script on every node. It ignores the
// cancellation of ctx and is bounded by Options.ReleaseTimeout instead. A
// node whose request fails outright, as on a connection that broke since
// its last use, is tried once more: a key that a release misses blocks
// others until it expires.
//
// A release must not overtake its own acquisition on a node, or the grant
// would land after it and stay. So with prev, the lock's latest round (its
// acquisition, or its latest extension), each node's release is sent only
// once that node's request of prev has returned (see send). The nodes that
// answered first, usually the quorum, are released at once.
//
// With all, it waits for every answer; otherwise it returns as soon as a
// quorum has confirmed, and the other requests go on in the background
// (within the same bound), so that a hung node does not hold up every
// Release.
func (c *Client) releaseRound(ctx context.Context, prev *round, call wire.Call, all bool) *round {
	if ctx.Done() != nil { // a context that never ends needs no detaching
		ctx = context.WithoutCancel(ctx)
	}
	r := c.send(ctx, c.opts.ReleaseTimeout, 2, call, prev)
	t := c.tally(nil, 0)
	if all || !r.collect(&t) {
		r.drain()
		t.judge(r)
	}
	return r
}

// A round is one request sent to every node at once.
type round struct {
	start    time.Time // just before the first request was sent
	deadline time.Time // when the requests are cut off
	// lastDeadline is the latest of deadline and the lastDeadline of the
	// round this one's requests wait for (see send).
	lastDeadline time.Time
	ctx          context.Context // the requests' context: ends at the deadline
	expired      <-chan struct{} // ctx.Done(): closed at the deadline, or earlier if the caller's context ends
	answered     chan int        // the nodes whose requests returned, each once; buffered: senders never block
	running      atomic.Int32    // requests that have not returned
	cancel       func()          // ends ctx; called when every request has returned

	call   wire.Call // what is sent to every node
	reqs   []request // each node's request, for the nodes' lanes
	flying *flight   // the client's requests in flight
	c      *Client   // whose nodes the round is sent to

	results []observe.NodeResult // filled in as the answers are collected
	decoded []wire.Reply         // each node's decoded answer; Age -1 until known
	pending int                  // answers not collected yet

	// Set by decide, for the Observer.
	took    time.Duration
	verdict []observe.NodeResult // results as they stood when decided; nil without an Observer
	ok      bool
	observe bool // the client has an Observer
}

// send sends call to every node at once. The requests are cut off after
// timeout. A request that fails before then is sent again, up to tries
// times in all; only idempotent scripts may be tried more than once.
//
// With after, a round sent earlier to the same nodes, each node's request
// waits until that node's request of after has returned, or, if a node
// ignores its context, until the last deadline of after and of the rounds
// it waits for in turn.
//
// A node that is a driver.Batcher gets its request through its lane,
// batched with the requests of other rounds; any other node gets a
// goroutine that calls Eval.
func (c *Client) send(ctx context.Context, timeout time.Duration, tries int, call wire.Call, after *round) *round {
	n := len(c.nodes)
	r := &round{reqs: make([]request, n), results: make([]observe.NodeResult, n), decoded: make([]wire.Reply, n)}
	r.start = time.Now()
	r.answered = make(chan int, n)
	r.call, r.pending, r.observe, r.c = call, n, c.opts.Observer != nil, c
	// All requests start together, so one deadline serves as the timeout
	// of each; it is released when the last request returns. Collecting
	// stops at the same deadline, which also bounds a Node that ignores
	// its context.
	r.deadline = r.start.Add(timeout)
	r.lastDeadline = r.deadline
	if after != nil && after.lastDeadline.After(r.deadline) {
		r.lastDeadline = after.lastDeadline
	}
	r.ctx, r.cancel = context.WithDeadline(ctx, r.deadline)
	r.expired = r.ctx.Done()
	r.running.Store(int32(n))
	r.flying = &c.flying
	c.flying.add(n)
	waiting := false
	for i, node := range c.nodes {
		r.results[i].Node = node.Name()
		r.decoded[i].Age = -1
		q := &r.reqs[i]
		q.r, q.node, q.tries = r, i, tries
		if after != nil && after.reqs[i].then(q) {
			waiting = true
			continue
		}
		q.dispatch()
	}
	if waiting {
		// The fallback for a node that ignores its context: at the last
		// deadline, the requests still waiting are sent anyway.
		time.AfterFunc(time.Until(after.lastDeadline), func() {
			for i := range after.reqs {
				if q := after.reqs[i].next.Swap(nil); q != nil {
					q.dispatch()
				}
			}
		})
	}
	return r
}

// deliver hands the answer to request q to the round's collector, and
// sends the request that waits for q to return, if there is one.
func (r *round) deliver(q *request, v any, err error) {
	q.val, q.err, q.latency = v, err, time.Since(r.start)
	r.answered <- q.node
	if r.running.Add(-1) == 0 {
		r.cancel()
	}
	q.returned.Store(true)
	if next := q.next.Swap(nil); next != nil {
		next.dispatch()
	}
	r.flying.done()
}

// inquire makes a round of call that waits for every node's answer, at
// most timeout, for an operation op on key that reads or forces rather
// than acquires: Leader, Adopt, Inspect, Probe, ForceRelease. The answers
// are judged as every round's are, by the nodes' identities (see tally),
// when judged is set: not for a probe, which reports on every node. ok decides the
// round from its answers (nil: a quorum answered OK), and the Observer is
// told of it. It returns the round and, when fewer than a quorum of nodes
// answered (OK, Taken or Absent), an *OpError wrapping ErrRefused if so
// many refused that no quorum could have answered, and ErrNoQuorum
// otherwise.
func (c *Client) inquire(ctx context.Context, op, key string, timeout time.Duration, tries int, call wire.Call, judged bool, ok func(*round) bool) (*round, *OpError) {
	var t tally
	var idErr error
	if judged {
		// The nodes' servers are learnt at the first round, whatever it
		// is; the tally is of what was known before the round.
		idErr = c.identify(ctx, timeout)
		t = c.tally(nil, 0)
	}
	r := c.send(ctx, timeout, tries, call, nil)
	r.drain()
	if judged {
		t.judge(r)
	}
	if ok == nil {
		r.decide(r.count(observe.OutcomeOK) >= c.quorum)
	} else {
		r.decide(ok(r))
	}
	c.hooks.round(ctx, op, key, 1, r)
	switch {
	case idErr != nil && errors.Is(idErr, ErrInvalid):
		return r, r.opError(op, key, idErr)
	case r.replied() >= c.quorum:
		return r, nil
	}
	return r, r.opError(op, key, r.why(failure{op: op}))
}
