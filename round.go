package redlock

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock/driver"
)

// This file is the Redlock algorithm: one round of an acquisition, in the
// order of the steps on the Redis page "Distributed locks with Redis", the
// rounds that extend and release a lock, and the fan-out and quorum
// counting that every round shares.
//
// A round sends one request to all nodes at once, so that it takes as long
// as the slowest node it needs rather than the sum of all of them. The
// requests share one deadline. The round is decided as soon as a quorum has
// said yes, or so many nodes have said no that a quorum is out of reach;
// the late answers are still collected before anything that depends on
// them (the clean-up of a failed acquisition, or Release) is sent.

// acquire makes acquisition round n for the lock on key: steps 1 to 5.
func (c *Client) acquire(ctx context.Context, ks keyset, ttl time.Duration, n int) (*Lock, *OpError) {
	key := ks.name
	// Step 1: a fresh token, which carries the owner's label; t0 is read
	// in send, just before the first request goes out.
	owner := ks.owner
	if owner == "" {
		owner = c.opts.Owner
	}
	token := newToken(owner)
	q := c.quarantineFor(ttl)

	// Step 2: SET key token NX PX ttl on all nodes at once, each request
	// bounded by the node timeout. The script also returns the node's fence
	// and what the quarantine needs: its age and the largest TTL it knows.
	heardAll := c.lastHeardAll()
	script, keys, args := ks.acquireCall(token, ttl, q, c.fenceTTL(ttl))
	decode := decodeAcquire
	if ks.permits > 0 {
		decode = decodePermit
	}
	r := c.send(ctx, c.nodeTimeout(ttl), 1, script, decode, keys, args, nil)
	r.heardAll = heardAll

	// Step 3: a quorum of grants from nodes out of quarantine, with
	// validity left: ttl − elapsed − drift > 0. A semaphore's grants count
	// for the slot they are of: the permit is the slot a quorum granted.
	granted := r.collect(c.quorum, q)
	until := validUntil(r.start, ttl, c.drift(ttl))
	valid := granted && time.Now().Before(until)
	r.decide(valid)

	// Step 4: the lock is valid until t0 + ttl − drift, on the client's
	// monotonic clock.
	var l *Lock
	var e *OpError
	var clean *round
	if valid {
		_, slot := r.votes()
		if ks.permits > 0 {
			ks.slot = slot
		}
		l = &Lock{c: c, ks: ks, token: token, ttl: ttl, fence: r.fenceOf(slot),
			start: r.start, until: until, last: r}
	} else {
		// Step 5: a failed round is undone on every node.
		clean = c.cleanUp(ctx, ks, token, r)
		e = &OpError{Op: "acquire", Key: key, Quorum: c.quorum, Rounds: 1, Nodes: r.results}
		switch {
		case granted:
			e.Err = ErrExpired
		case r.count(OK)+r.count(Taken) >= c.quorum:
			e.Err = ErrTaken
		case r.count(Refused) > len(c.nodes)-c.quorum:
			e.Err = ErrRefused
		default:
			e.Err = ErrNoQuorum
		}
	}
	c.report(ctx, "acquire", key, n, r)
	if clean != nil {
		c.report(ctx, "cleanup", key, n, clean)
	}
	c.heard(ctx, r, q)
	return l, e
}

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
func (c *Client) cleanUp(ctx context.Context, ks keyset, token string, acq *round) *round {
	acq.drain()
	r := c.releaseRound(ctx, nil, ks, token, acq.fence, c.fenceTTL(0), true)
	reached := r.count(OK) + r.count(Absent) + r.count(Taken)
	r.decide(reached == len(c.nodes))
	if reached < len(c.nodes) {
		c.log.Warn("redlock: clean-up of a failed acquisition did not reach every node; the keys left expire with their TTL",
			"key", ks.name, "nodes_failed", len(c.nodes)-reached, "results", r.results)
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
func (c *Client) extendRound(ctx context.Context, prev *round, ks keyset, token string, ttl, timeout time.Duration) (*round, bool) {
	script, keys, args := ks.extendCall(token, ttl)
	r := c.send(ctx, timeout, 1, script, decodeStatus, keys, args, prev)
	if r.collect(c.quorum, 0) {
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
func (c *Client) releaseRound(ctx context.Context, prev *round, ks keyset, token string, fence int64, fenceTTL time.Duration, all bool) *round {
	script, keys, args := ks.releaseCall(token, fence, fenceTTL)
	decode := decodeRelease
	if ks.permits > 0 {
		decode = decodeReleasePermit
	}
	r := c.send(context.WithoutCancel(ctx), c.opts.ReleaseTimeout, 2, script, decode, keys, args, prev)
	if all || !r.collect(c.quorum, 0) {
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
	replies      chan reply      // buffered: senders never block
	running      atomic.Int32    // requests that have not returned
	cancel       func()          // ends ctx; called when every request has returned
	decode       func(any) decoded

	script     *driver.Script
	keys, args []string
	reqs       []request // each node's request, for the nodes' lanes
	flying     *flight   // the client's requests in flight
	c          *Client   // whose nodes the round is sent to

	results []NodeResult  // filled in as the answers are collected
	decoded []decoded     // each node's decoded answer; age -1 until known
	pending int           // answers not collected yet
	maxTTL  time.Duration // acquire, probe: the largest TTL any node reported
	fence   int64         // acquire: the largest fence granted
	woke    int64         // release: how many waiters the nodes told

	// acquire: the start of the client's latest earlier round in which
	// every node answered; zero if none.
	heardAll time.Time

	// Set by decide, for the Observer.
	ok      bool
	took    time.Duration
	verdict []NodeResult // results as they stood when decided; nil without an Observer
	observe bool         // the client has an Observer
}

// A reply is one node's answer to one request of a round.
type reply struct {
	node    int
	val     any
	err     error
	latency time.Duration
	retried bool // an earlier try failed, and may have been applied
}

// send sends script to every node at once. The requests are cut off after
// timeout. A request that fails before then is sent again, up to tries
// times in all; only idempotent scripts may be tried more than once. The
// answers are decoded with decode.
//
// With after, a round sent earlier to the same nodes, each node's request
// waits until that node's request of after has returned, or, if a node
// ignores its context, until the last deadline of after and of the rounds
// it waits for in turn.
//
// A node that is a driver.Batcher gets its request through its lane,
// batched with the requests of other rounds; any other node gets a
// goroutine that calls Eval. With a single node there is nothing to send
// in parallel: the request is sent from the caller's goroutine, unless
// the node's lane is busy and the request can join its next batch.
func (c *Client) send(ctx context.Context, timeout time.Duration, tries int, script *driver.Script, decode func(any) decoded, keys, args []string, after *round) *round {
	n := len(c.nodes)
	r := &round{
		start:   time.Now(),
		replies: make(chan reply, n),
		decode:  decode,
		script:  script,
		keys:    keys,
		args:    args,
		reqs:    make([]request, n),
		results: make([]NodeResult, n),
		decoded: make([]decoded, n),
		pending: n,
		observe: c.obs != nil,
		c:       c,
	}
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
	waiting := false // a request waits behind one of after
	for i, node := range c.nodes {
		r.results[i].Node = node.Name()
		r.decoded[i].age = -1
		q := &r.reqs[i]
		q.r, q.node, q.tries = r, i, tries
		if after != nil && after.reqs[i].then(q) {
			waiting = true
			continue
		}
		ln := c.lanes[i]
		switch {
		case n == 1 && ln == nil:
			q.run(node)
		case n == 1 && ln.claim():
			q.run(node)
			ln.unclaim()
		default:
			q.dispatch()
		}
	}
	if waiting {
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
	r.replies <- reply{node: q.node, val: v, err: err, latency: time.Since(r.start), retried: q.retry}
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
// soon as quorum nodes answered OK, and false as soon as a quorum is out of
// reach or the round's deadline has passed.
//
// With quarantine > 0, a grant counts only from a node whose process has
// run for at least the quarantine, or for the largest TTL any node of the
// round reports if that is longer; other grants become Quarantined. The
// bar comes from what the client has heard, and a node that restarted
// knows nothing of the locks granted before: only the other nodes do. So a
// quorum that leans on a young node (one that started less than
// youngHorizon ago) is trusted at once only if the client heard every node
// after that node started (r.heardAll), which put every TTL recorded
// before its restart into the bar; otherwise the round waits for every
// answer or the deadline, since the node that knows of a long lock may be
// the slowest.
func (r *round) collect(quorum int, quarantine time.Duration) bool {
	for r.pending > 0 {
		if !r.next() {
			return r.granted(quorum, quarantine)
		}
		if r.granted(quorum, quarantine) && (quarantine == 0 || !r.leansOnUnheard(max(youngHorizon, quarantine))) {
			return true
		}
		if best, _ := r.votes(); best+r.pending < quorum {
			return false
		}
	}
	return r.granted(quorum, quarantine)
}

// youngHorizon is the age under which a node's grant is counted only after
// the client has heard every node since the node started (see collect).
const youngHorizon = time.Hour

// granted applies the quarantine to the answers so far and reports
// whether quorum nodes granted.
func (r *round) granted(quorum int, quarantine time.Duration) bool {
	if quarantine > 0 {
		r.quarantine(max(quarantine, r.maxTTL))
	}
	best, _ := r.votes()
	return best >= quorum
}

// votes returns the most grants that one slot got so far, and that slot.
// A lock has one slot, 0; a semaphore's nodes may grant different ones.
func (r *round) votes() (best, slot int) {
	for i, res := range r.results {
		if res.Outcome != OK {
			continue
		}
		s, n := r.decoded[i].slot, 0
		for j := range r.results {
			if r.results[j].Outcome == OK && r.decoded[j].slot == s {
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
		if res.Outcome == OK && r.decoded[i].slot == slot {
			f = max(f, res.Fence)
		}
	}
	return f
}

// leansOnUnheard reports whether a grant came from a node younger than
// horizon that may have started after the client last heard every node.
func (r *round) leansOnUnheard(horizon time.Duration) bool {
	for i, res := range r.results {
		age := r.decoded[i].age
		if res.Outcome != OK || age >= horizon {
			continue
		}
		// The node read its clock between the round's start and its
		// answer, and reports its age cut to the millisecond: it started
		// no later than this.
		started := r.start.Add(res.Latency - age + time.Millisecond)
		if r.heardAll.IsZero() || !r.heardAll.After(started) {
			return true
		}
	}
	return false
}

// quarantine turns the grants of nodes younger than q into Quarantined.
func (r *round) quarantine(q time.Duration) {
	for i := range r.results {
		if res, age := &r.results[i], r.decoded[i].age; res.Outcome == OK && age < q {
			res.Outcome, res.TTL = Quarantined, q-age
		}
	}
}

// decide records the round's verdict, when it was reached, and for an
// Observer the answers as they stood then.
func (r *round) decide(ok bool) {
	r.ok, r.took = ok, time.Since(r.start)
	if r.observe {
		r.verdict = append([]NodeResult(nil), r.results...)
	}
}

// drain waits until every request has returned or the round's deadline
// has passed, and records the answers. Nodes that did not answer keep the
// outcome NoAnswer.
func (r *round) drain() {
	for r.pending > 0 {
		if !r.next() {
			for i := range r.results {
				if r.results[i].Outcome == NoAnswer && r.results[i].Err == nil {
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
	case rep := <-r.replies:
		r.record(rep)
		return true
	case <-r.expired:
		for {
			select {
			case rep := <-r.replies:
				r.record(rep)
			default:
				return false
			}
		}
	}
}

func (r *round) record(rep reply) {
	r.pending--
	res := &r.results[rep.node]
	res.Latency = rep.latency
	if rep.err != nil {
		res.Outcome, res.Err = Failed, rep.err
		if refused(rep.err) {
			res.Outcome = Refused
		}
		return
	}
	d := r.decode(rep.val)
	res.Outcome, res.TTL, res.Fence, res.Err = d.outcome, d.ttl, d.fence, d.err
	if rep.retried && res.Outcome == Absent {
		// The failed try may have deleted the key itself.
		res.Outcome = OK
	}
	if d.outcome != Failed {
		r.decoded[rep.node] = d
	}
	r.maxTTL = max(r.maxTTL, d.maxTTL)
	r.fence = max(r.fence, d.fence)
	r.woke += d.woke
}

// full reports whether a release left at most one slot free, the one it
// freed, on some node that confirmed it: true for a lock, whose one key is
// its one slot; for a permit, whether the semaphore was full.
func (r *round) full() bool {
	for i, res := range r.results {
		if res.Outcome == OK && r.decoded[i].free <= 1 {
			return true
		}
	}
	return false
}

// count returns how many nodes had the outcome o.
func (r *round) count(o Outcome) int {
	n := 0
	for _, res := range r.results {
		if res.Outcome == o {
			n++
		}
	}
	return n
}
