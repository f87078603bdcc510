package redlock

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock/internal/clientx"
	"github.com/quorumlock/redlock/internal/mutant"
	"github.com/quorumlock/redlock/internal/wire"
	"github.com/quorumlock/redlock/observe"
)

// This file is what every round shares: the fan-out of one request to all
// nodes at once, the collection of the answers, and their count. One
// type, the tally, judges the answers as they come in, for any round of
// any operation (an acquisition, an extension, a release, an adoption, a
// read): which answers count, and, when the round fails, why. Three rules
// make an answer count:
//
//   - one server, one vote: a node whose server is not known to be apart
//     from every other counting node's does not count (identity.go learns
//     the servers; a grant that reports a later start than its node's
//     probe saw has the node probed again);
//   - the quarantine, for grants: a node younger than the bar (the
//     largest of the quarantine asked for and every TTL reported in the
//     round's hash slots) does not vote; and a node that restarted within
//     the hour votes at once only when the client has heard every node in
//     the round's slots since it started: until then the round waits for
//     every answer, since the node that knows of a long lock may be the
//     slowest (see SAFETY.md, "Restarts, per hash slot");
//   - the quorum: at least N/2+1 nodes that count agree, for one slot of a
//     semaphore.
//
// One acquisition round, step by step, is in acquire.go; the quarantine's
// bar, what the client learns of TTLs and of its nodes' health, in
// quarantine.go.

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
// so that no release overtakes its own acquisition. A clean-up that does
// not reach a node is logged at Debug level: the node's own state, which
// the log is told of when it changes, says why (see noteHealth), and the
// keys left expire with their TTL.
func (c *Client) cleanUp(ctx context.Context, key string, acq *round) *round {
	acq.drain()
	r := c.releaseRound(ctx, nil, acq.call.Undo(acq.maxFence(), acq.count(observe.OutcomeTaken) > 0), true)
	reached := r.replied()
	r.decide(reached == len(c.nodes))
	if reached < len(c.nodes) {
		c.log.Debug("redlock: clean-up of a failed acquisition did not reach every node; the keys left expire with their TTL",
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

// A tally judges the answers of one round; Client.tally makes it.
type tally struct {
	quorum int
	voters *voters // which nodes count (identity.go)
	// For a round that grants: the quarantine asked for (0: none), and
	// what makes a young node's grant count: Options.Quarantine set
	// (floor), or every node heard in the round's slots after the node
	// started, before the round (heard, by node; zero if never) or in it.
	q     time.Duration
	floor bool
	heard []time.Time
	slots []uint16 // the cluster hash slots of the round's keys
	stale []int    // nodes whose grants say their server may have changed
}

// tally returns the tally of a round of the client. With grant, the round
// grants the keys of ks under the quarantine q (0: none).
func (c *Client) tally(ks *keyset, q time.Duration) tally {
	t := tally{quorum: c.quorum, voters: c.ids.voters.Load(), q: q, floor: c.opts.Quarantine > 0}
	if ks != nil {
		t.slots = ks.slots
		if q > 0 && !t.floor {
			t.heard = c.hearing.each(t.slots)
		}
	}
	return t
}

// youngHorizon is the age under which a node's grant counts at once only
// if the client has heard every node in the round's slots since the node
// started: the longest TTL a lock may have by default (Options.MaxTTL).
const youngHorizon = time.Hour

// judge applies the tally to the answers of r once they are all in, or
// the round is over: see weigh.
func (t *tally) judge(r *round) { t.weigh(r, true) }

// weigh applies the tally to the answers of r collected so far, and
// reports whether r must wait for more answers though a quorum agrees.
// With final, the round takes no more answers: a young node's grant that
// the client cannot yet trust (see heardSince) then does not count.
func (t *tally) weigh(r *round, final bool) (wait bool) {
	v := t.voters
	var bar, young time.Duration
	var heard time.Time
	if t.q > 0 {
		bar, young = max(t.q, r.maxTTL()), max(youngHorizon, t.q)
		if !t.floor {
			heard = t.heardSince(r)
		}
	}
	for i := range r.results {
		res, age := &r.results[i], r.decoded[i].Age
		switch {
		case res.Outcome == observe.OutcomeNoAnswer || res.Outcome == observe.OutcomeFailed || res.Outcome == observe.OutcomeRefused:
			continue // counts for nothing, and says why itself
		case !v.all && !v.counts[i]:
			res.Outcome, res.Err = observe.OutcomeFailed, v.why[i]
			if v.why[i] != errUnidentified {
				res.Outcome = observe.OutcomeRefused
			}
			continue
		case t.slots == nil || age < 0:
			continue // not a grant: it reports no age
		}
		if t.changed(r, i) && !slices.Contains(t.stale, i) {
			// Probed again after the round; the answer counts as the
			// identity known before it says.
			t.stale = append(t.stale, i)
		}
		switch {
		case res.Outcome != observe.OutcomeOK || t.q == 0:
			continue
		case age < bar:
			res.Outcome, res.TTL = observe.OutcomeQuarantined, bar-age
			continue
		}
		// The node read its clock between the round's start and its
		// answer, and reports its age cut to the millisecond: it started
		// no later than this.
		started := r.start.Add(res.Latency - age + time.Millisecond)
		if !t.floor && age < young && (heard.IsZero() || !heard.After(started)) {
			if final {
				// Some node that may keep a lock this one lost, and
				// would report its TTL, has not been heard in the
				// slot since the node started.
				res.Outcome, res.TTL, res.Err = observe.OutcomeQuarantined, young-age, errUnheard
				continue
			}
			wait = true
		}
	}
	return wait
}

// heardSince returns the time after which every node has reported in the
// round's slots: before the round (t.heard), or in it, at its start; the
// zero time if some node has not.
func (t *tally) heardSince(r *round) time.Time {
	var least time.Time
	for i, d := range r.decoded {
		at := time.Time{}
		if i < len(t.heard) {
			at = t.heard[i]
		}
		if d.Age >= 0 && r.start.After(at) {
			at = r.start
		}
		if at.IsZero() {
			return time.Time{}
		}
		if i == 0 || at.Before(least) {
			least = at
		}
	}
	return least
}

// changed reports whether the answer of node i to r says that its
// process started later than the process its probe saw could have: a
// restart or a failover since, which may have put another server behind
// the node, or another process answering for it.
func (t *tally) changed(r *round, i int) bool {
	if mutant.On("identity-once") || i >= len(t.voters.limit) {
		return false
	}
	return r.start.Add(-r.decoded[i].Age).After(t.voters.limit[i])
}

// collect gathers answers until the round is decided: it returns true as
// soon as a quorum of the nodes that count agree and the tally does not
// ask to wait, and false as soon as a quorum is out of reach or the
// round's deadline has passed. At the deadline the answers in are judged
// as they are.
func (r *round) collect(t *tally) bool {
	for r.pending > 0 && r.next() {
		wait := t.weigh(r, false)
		if r.agreed(t.quorum) && !wait {
			return true
		}
		if best, _ := r.votes(); best+r.pending < t.quorum {
			return false
		}
	}
	t.judge(r)
	return r.agreed(t.quorum)
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

// holders tallies the holders that the nodes that count reported
// (Reply.Holder): each holder's ID, with the nodes that hold for it.
func (r *round) holders() map[string][]int {
	holding := map[string][]int{}
	for i, res := range r.results {
		if id := r.decoded[i].Holder; res.Outcome == observe.OutcomeOK && id != "" {
			holding[id] = append(holding[id], i)
		}
	}
	return holding
}

// held returns the holder that a quorum of the nodes of a read round hold
// a key for, with those nodes; "" when none does.
func (r *round) held() (id string, nodes []int) {
	for id, nodes := range r.holders() {
		if len(nodes) >= r.c.quorum {
			return id, nodes
		}
	}
	return "", nil
}

// ends returns when fewer than a quorum of nodes will hold what each of
// ttls is held for on one node: the quorum-th longest, from the round's
// start. It sorts ttls.
func (r *round) ends(ttls []time.Duration) time.Time {
	return r.start.Add(quorumTTL(ttls, r.c.quorum))
}

// holdings returns what a quorum of the nodes that count hold for the key
// that the inspect round r read, and, under the quarantine q (0: none),
// how long each node still sits out for the key's slot.
func (r *round) holdings(q time.Duration) clientx.Verdict {
	var v clientx.Verdict
	if id, nodes := r.held(); id != "" {
		ttls := make([]time.Duration, len(nodes))
		for k, i := range nodes {
			ttls[k] = r.decoded[i].TTL
			v.Owner = r.decoded[i].Owner
		}
		v.Holder, v.HeldOn, v.Ends = id, len(nodes), r.ends(ttls)
	}
	readers := map[string][]time.Duration{}
	var order []string
	owners := map[string]string{}
	for i, res := range r.results {
		if res.Outcome != observe.OutcomeOK || r.decoded[i].RW == nil {
			continue
		}
		for _, rv := range r.decoded[i].RW.Readers {
			if _, seen := readers[rv.ID]; !seen {
				order = append(order, rv.ID)
			}
			readers[rv.ID] = append(readers[rv.ID], rv.TTL)
			owners[rv.ID] = rv.Owner
		}
	}
	for _, id := range order {
		if ttls := readers[id]; len(ttls) >= r.c.quorum {
			v.Readers = append(v.Readers, clientx.Reader{ID: id, Owner: owners[id], Ends: r.ends(ttls)})
		}
	}
	slices.SortFunc(v.Readers, func(a, b clientx.Reader) int { return a.Ends.Compare(b.Ends) })
	v.SitsOut = make([]time.Duration, len(r.results))
	if q > 0 {
		bar := max(q, r.maxTTL())
		for i, d := range r.decoded {
			if r.results[i].Outcome == observe.OutcomeOK && d.Age >= 0 && d.Age < bar {
				v.SitsOut[i] = bar - d.Age
			}
		}
	}
	return v
}

// quorumTTL returns the time left on the quorum-th longest of ttls, the
// TTLs of the nodes that hold something: when fewer than quorum of them
// will hold it. It sorts ttls; with fewer than quorum of them, it returns
// 0.
func quorumTTL(ttls []time.Duration, quorum int) time.Duration {
	if len(ttls) < quorum || quorum <= 0 {
		return 0
	}
	slices.Sort(ttls)
	return ttls[len(ttls)-quorum]
}

// decide records the round's verdict, when it was reached, and for an
// Observer the answers as they stood then.
func (r *round) decide(ok bool) {
	r.ok, r.took = ok, time.Since(r.start)
	if r.observe {
		r.verdict = append([]observe.NodeResult(nil), r.results...)
	}
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

// replied returns how many nodes that count answered the round with what
// they hold: OK, Taken or Absent.
func (r *round) replied() int {
	return r.count(observe.OutcomeOK) + r.count(observe.OutcomeTaken) + r.count(observe.OutcomeAbsent)
}

// maxFence returns the largest fence that any node gave.
func (r *round) maxFence() int64 {
	var f int64
	for _, d := range r.decoded {
		f = max(f, d.Fence)
	}
	return f
}

// maxTTL returns the largest TTL that any node reported recording.
func (r *round) maxTTL() time.Duration {
	var m time.Duration
	for _, d := range r.decoded {
		m = max(m, d.MaxTTL)
	}
	return m
}

// What a failed round was, for its reason (see why).
type failure struct {
	op   string // the operation, as OpError.Op names it
	late bool   // a quorum agreed, but the lock had ended by then (or Release came after the deadline)
	past bool   // the lock's deadline had passed by the end of the round
}

// why returns why the round failed, the one chain of reasons of every
// operation:
//   - ErrExpired when a quorum agreed too late;
//   - ErrTaken when a quorum answered an acquisition, but too many hold
//     another token; and for an adoption, when some hold another token;
//   - ErrLockLost when, for an extension or a release, too many nodes no
//     longer hold the token for a quorum to; or, for an adoption that a
//     quorum answered, too few hold it;
//   - ErrExpired when the lock's deadline passed meanwhile;
//   - ErrRefused when so many nodes refused that no quorum could agree;
//   - ErrNoQuorum when too few nodes answered.
func (r *round) why(f failure) error {
	quorum := r.c.quorum
	ok, taken := r.count(observe.OutcomeOK), r.count(observe.OutcomeTaken)
	switch {
	case f.late:
		return ErrExpired
	case f.op == "acquire" && ok+taken >= quorum:
		return ErrTaken
	case f.op == "adopt" && taken > 0 && ok+taken >= quorum:
		return ErrTaken
	case f.op == "adopt" && r.replied() >= quorum:
		return ErrLockLost
	case (f.op == "extend" || f.op == "release") && r.lostQuorum():
		return ErrLockLost
	case f.past:
		return ErrExpired
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

// opError returns the *OpError of op on key, decided by this one round,
// wrapping err.
func (r *round) opError(op, key string, err error) *OpError {
	return &OpError{Op: op, Key: key, Quorum: r.c.quorum, Rounds: 1, Nodes: r.results, Err: err}
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
