package redlock

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock/internal/wire"
	"github.com/quorumlock/redlock/observe"
)

// This file is what every round shares: the fan-out of one request to all
// nodes at once, the counting of their answers, and the quorum rule. One
// acquisition round, step by step, is in acquire.go; the quarantine's part
// in the count is in quarantine.go.
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

// cleanUp releases a failed acquisition round on every node: also on those
// that said no or did not answer, because a request may have been applied
// after its answer was lost. It first waits for the round's late answers,
// so that no release overtakes its own acquisition, and it is not cut
// short by the cancellation of ctx.
func (c *Client) cleanUp(ctx context.Context, key string, acq *round) *round {
	acq.drain()
	r := c.releaseRound(ctx, nil, acq.call.Undo(acq.maxFence(), 0), true)
	reached := r.count(observe.OutcomeOK) + r.count(observe.OutcomeAbsent) + r.count(observe.OutcomeTaken)
	r.decide(reached == len(c.nodes))
	if reached < len(c.nodes) {
		c.log.Warn("redlock: clean-up of a failed acquisition did not reach every node; the keys left expire with their TTL",
			"key", key, "nodes_failed", len(c.nodes)-reached, "results", r.results)
	}
	return r
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
	if r.collect(c.quorum, ballot{}) {
		return r, true
	}
	r.drain()
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
	if all || !r.collect(c.quorum, ballot{}) {
		r.drain()
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

// collect gathers answers until the round is decided: it returns true as
// soon as quorum nodes agree (see agreed), and false as soon as a quorum
// is out of reach or the round's deadline has passed.
//
// The ballot judges the answers first, as each comes in: under quarantine
// it may turn grants into refusals, and ask to wait for more answers
// though a quorum agrees (see Client.ballot). Rounds other than
// acquisitions pass the zero ballot, which judges nothing.
func (r *round) collect(quorum int, b ballot) bool {
	for r.pending > 0 && r.next() {
		wait := b.judge(r)
		if r.agreed(quorum) && !wait {
			return true
		}
		if best, _ := r.votes(); best+r.pending < quorum {
			return false
		}
	}
	b.judge(r)
	return r.agreed(quorum)
}

// agreed is the quorum rule: it reports whether at least quorum nodes
// granted, for one slot (see votes).
func (r *round) agreed(quorum int) bool {
	best, _ := r.votes()
	return best >= quorum
}

// votes returns the most grants that one slot got so far, and that slot.
// A lock has one slot, 0; a semaphore's nodes may grant different ones.
func (r *round) votes() (best, slot int) {
	for i, res := range r.results {
		if res.Outcome != observe.OutcomeOK {
			continue
		}
		s, n := r.decoded[i].Slot, 0
		for j := range r.results {
			if r.results[j].Outcome == observe.OutcomeOK && r.decoded[j].Slot == s {
				n++
			}
		}
		if n > best {
			best, slot = n, s
		}
	}
	return best, slot
}

// fenceOf returns the largest fence that the nodes granting slot gave.
func (r *round) fenceOf(slot int) int64 {
	var f int64
	for i, res := range r.results {
		if res.Outcome == observe.OutcomeOK && r.decoded[i].Slot == slot {
			f = max(f, res.Fence)
		}
	}
	return f
}

// covering returns the nodes, as a bitmask of the first 64, that granted
// with a fence of at least fence.
func (r *round) covering(fence int64) uint64 {
	var m uint64
	for i, res := range r.results[:min(len(r.results), 64)] {
		if res.Outcome == observe.OutcomeOK && res.Fence >= fence {
			m |= 1 << i
		}
	}
	return m
}

// decide records the round's verdict, when it was reached, and for an
// Observer the answers as they stood then.
func (r *round) decide(ok bool) {
	r.ok, r.took = ok, time.Since(r.start)
	if r.observe {
		r.verdict = append([]observe.NodeResult(nil), r.results...)
	}
}

// drain waits until every request has returned or the round's deadline
// has passed, and records the answers. Nodes that did not answer keep the
// outcome NoAnswer.
func (r *round) drain() {
	for r.pending > 0 {
		if !r.next() {
			for i := range r.results {
				if r.results[i].Outcome == observe.OutcomeNoAnswer && r.results[i].Err == nil {
					r.results[i].Err = errNoAnswer
				}
			}
			return
		}
	}
}

// next records the next answer. It returns false, having recorded every
// answer already in, once the requests' context has ended: at the
// deadline, when the caller's context ends, or after the last request
// returned (its answer is in by then).
func (r *round) next() bool {
	select {
	case i := <-r.answered:
		r.record(&r.reqs[i])
		return true
	case <-r.expired:
		for {
			select {
			case i := <-r.answered:
				r.record(&r.reqs[i])
			default:
				return false
			}
		}
	}
}

// record records the answer to q, which has returned.
func (r *round) record(q *request) {
	r.pending--
	res := &r.results[q.node]
	res.Latency = q.latency
	if q.err != nil {
		res.Outcome, res.Err = observe.OutcomeFailed, q.err
		if refused(q.err) {
			res.Outcome = observe.OutcomeRefused
		}
		return
	}
	d := r.call.Decode(q.val)
	res.Outcome, res.TTL, res.Fence, res.Err = observe.Outcome(d.Status), d.TTL, d.Fence, d.Err
	if q.retry && res.Outcome == observe.OutcomeAbsent {
		// The failed try may have deleted the key itself.
		res.Outcome = observe.OutcomeOK
	}
	if d.Status != wire.Failed {
		r.decoded[q.node] = d
	}
}

// void turns the grants of the nodes marked in which (nil: none) into
// failures with err, and reports whether there were any.
func (r *round) void(which []bool, err error) bool {
	found := false
	for i := range which {
		if res := &r.results[i]; which[i] && res.Outcome == observe.OutcomeOK {
			res.Outcome, res.Err = observe.OutcomeFailed, err
			found = true
		}
	}
	return found
}

// maxFence returns the largest fence that any node gave.
func (r *round) maxFence() int64 {
	var f int64
	for _, d := range r.decoded {
		f = max(f, d.Fence)
	}
	return f
}

// quorumTTL returns the time left on the quorum-th longest of ttls, the
// TTLs of the nodes that hold something: when fewer than quorum of them
// will hold it. It sorts ttls, of which there are at least quorum.
func quorumTTL(ttls []time.Duration, quorum int) time.Duration {
	slices.Sort(ttls)
	return ttls[len(ttls)-quorum]
}

// holders tallies the holders that the nodes reported (Reply.Holder):
// each holder's ID, with the nodes that answered OK and hold for it.
func (r *round) holders() map[string][]int {
	holding := map[string][]int{}
	for i, res := range r.results {
		if id := r.decoded[i].Holder; res.Outcome == observe.OutcomeOK && id != "" {
			holding[id] = append(holding[id], i)
		}
	}
	return holding
}

// count returns how many nodes had the outcome o.
func (r *round) count(o observe.Outcome) int {
	n := 0
	for _, res := range r.results {
		if res.Outcome == o {
			n++
		}
	}
	return n
}

// acquireFailure returns why an acquisition round that was not valid
// failed: the nodes granted but too late (ErrExpired); enough answered
// but too many hold another token (ErrTaken); too many refused
// (ErrRefused); too few answered, or sat out their quarantine
// (ErrNoQuorum).
func (r *round) acquireFailure(granted bool) error {
	switch {
	case granted:
		return ErrExpired
	case r.count(observe.OutcomeOK)+r.count(observe.OutcomeTaken) >= r.c.quorum:
		return ErrTaken
	case r.refusedQuorum():
		return ErrRefused
	}
	return ErrNoQuorum
}

// refusedQuorum reports whether so many nodes refused the round that no
// quorum could have agreed: more than N − quorum.
func (r *round) refusedQuorum() bool {
	return r.count(observe.OutcomeRefused) > len(r.results)-r.c.quorum
}

// lostQuorum reports whether so many nodes no longer hold the lock's
// token (taken over, or absent) that no quorum holds it.
func (r *round) lostQuorum() bool {
	return r.count(observe.OutcomeTaken)+r.count(observe.OutcomeAbsent) > len(r.results)-r.c.quorum
}

// inquire makes a round of call that waits for every node's answer, at
// most timeout, for an operation op on key that reads or forces rather
// than acquires: Leader, Adopt, Inspect, Probe, ForceRelease. ok decides
// the round from its answers (nil: a quorum answered OK), and the
// Observer is told of it. It returns the round and, when fewer than a
// quorum of nodes answered (OK, Taken or Absent), an *OpError wrapping
// ErrRefused if so many refused that no quorum could have answered, and
// ErrNoQuorum otherwise.
func (c *Client) inquire(ctx context.Context, op, key string, timeout time.Duration, tries int, call wire.Call, ok func(*round) bool) (*round, *OpError) {
	r := c.send(ctx, timeout, tries, call, nil)
	r.drain()
	answered := r.count(observe.OutcomeOK) + r.count(observe.OutcomeTaken) + r.count(observe.OutcomeAbsent)
	if ok == nil {
		r.decide(r.count(observe.OutcomeOK) >= c.quorum)
	} else {
		r.decide(ok(r))
	}
	c.hooks.round(ctx, op, key, 1, r)
	if answered >= c.quorum {
		return r, nil
	}
	return r, r.opError(op, key, r.shortOfQuorum())
}

// shortOfQuorum returns why too few nodes answered a round: ErrRefused
// when so many refused that no quorum could have agreed, else ErrNoQuorum.
func (r *round) shortOfQuorum() error {
	if r.refusedQuorum() {
		return ErrRefused
	}
	return ErrNoQuorum
}

// opError returns the *OpError of op on key, decided by this one round,
// wrapping err.
func (r *round) opError(op, key string, err error) *OpError {
	return &OpError{Op: op, Key: key, Quorum: r.c.quorum, Rounds: 1, Nodes: r.results, Err: err}
}
