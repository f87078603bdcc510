package redlock

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
	"time"
)

// This file holds the fan-out of one request to every node and the quorum,
// quarantine and validity rules that decide a round.
//
// A round sends its request to all nodes at once, so that it takes as long
// as the slowest node it needs rather than the sum of all of them. The
// requests share one deadline. The round is decided as soon as a quorum has
// said yes, or so many nodes have said no that a quorum is out of reach;
// the late answers are still collected before anything that depends on
// them (the clean-up of a failed acquisition, or Release) is sent.

// A reply is one node's answer to one request of a round.
type reply struct {
	node    int
	val     any
	err     error
	latency time.Duration
	retried bool // an earlier try failed, and may have been applied
}

// A decoded reply, as the decode function of a round makes it.
type decoded struct {
	outcome Outcome
	ttl     time.Duration // Taken: the holder's TTL; Quarantined: the wait
	fence   int64         // OK from acquire: the node's fence
	age     time.Duration // acquire: how long ago the node's process started
	maxTTL  time.Duration // acquire: the largest TTL the node has seen
	clock   int64         // probe: the node's clock in ms since 1970
	woke    int64         // release: how many waiters the node told
	err     error
}

// A round is one request sent to every node at once.
type round struct {
	start    time.Time       // just before the first request was sent
	deadline time.Time       // when the requests are cut off
	ctx      context.Context // the requests' context: ends at the deadline
	expired  <-chan struct{} // ctx.Done(): closed at the deadline, or earlier if the caller's context ends
	replies  chan reply      // buffered: senders never block
	done     chan struct{}   // closed when every request has returned
	running  atomic.Int32    // requests that have not returned
	cancel   func()          // ends ctx; called with done
	decode   func(any) decoded

	script     *Script
	keys, args []string
	reqs       []request // each node's request, for the nodes' lanes
	flying     *flight   // the client's requests in flight

	results []NodeResult  // filled in as the answers are collected
	decoded []decoded     // each node's decoded answer; age -1 until known
	pending int           // answers not collected yet
	maxTTL  time.Duration // acquire, probe: the largest TTL any node reported
	fence   int64         // acquire: the largest fence granted
	woke    int64         // release: how many waiters the nodes told
}

// send sends script to every node at once. The requests are cut off after
// timeout. A request that fails before then is sent again, up to tries
// times in all; only idempotent scripts may be tried more than once. The
// answers are decoded with decode.
//
// A node that is a Batcher gets its request through its lane, batched with
// the requests of other rounds; any other node gets a goroutine that calls
// Eval.
func (c *Client) send(ctx context.Context, timeout time.Duration, tries int, script *Script, decode func(any) decoded, keys, args []string) *round {
	n := len(c.nodes)
	r := &round{
		start:   time.Now(),
		replies: make(chan reply, n),
		done:    make(chan struct{}),
		decode:  decode,
		script:  script,
		keys:    keys,
		args:    args,
		reqs:    make([]request, n),
		results: make([]NodeResult, n),
		decoded: make([]decoded, n),
		pending: n,
	}
	// All requests start together, so one deadline serves as the timeout
	// of each; it is released when the last request returns. Collecting
	// stops at the same deadline, which also bounds a Node that ignores
	// its context.
	r.deadline = r.start.Add(timeout)
	r.ctx, r.cancel = context.WithDeadline(ctx, r.deadline)
	r.expired = r.ctx.Done()
	r.running.Store(int32(n))
	r.flying = &c.flying
	c.flying.add(n)
	for i, node := range c.nodes {
		r.results[i].Node = node.Name()
		r.decoded[i].age = -1
		q := &r.reqs[i]
		q.r, q.node, q.tries = r, i, tries
		if ln := c.lanes[i]; ln != nil {
			ln.submit(q)
			continue
		}
		go func() {
			v, err := node.Eval(r.ctx, script, keys, args)
			for ; err != nil && q.tries > 1 && r.ctx.Err() == nil; q.tries-- {
				v, err = node.Eval(r.ctx, script, keys, args)
				q.retry = true
			}
			r.deliver(q, v, err)
		}()
	}
	return r
}

// deliver hands the answer to request q to the round's collector.
func (r *round) deliver(q *request, v any, err error) {
	r.replies <- reply{node: q.node, val: v, err: err, latency: time.Since(r.start), retried: q.retry}
	if r.running.Add(-1) == 0 {
		r.cancel()
		close(r.done)
	}
	r.flying.done()
}

// collect gathers answers until the round is decided: it returns true as
// soon as quorum nodes answered OK, and false as soon as a quorum is out of
// reach or the round's deadline has passed.
//
// With quarantine > 0, a grant counts only from a node whose process has
// run for at least the quarantine, or for the largest TTL any node of the
// round reports if that is longer; other grants become Quarantined. What
// the bar should be is learned from the answers, so a quorum that leans on
// a young node (one that started less than youngHorizon ago, as after a
// restart) is not trusted before every node has answered or the deadline
// has passed: the node that knows of a long lock may be the slowest.
func (r *round) collect(quorum int, quarantine time.Duration) bool {
	for r.pending > 0 {
		if !r.next() {
			return r.granted(quorum, quarantine)
		}
		if r.granted(quorum, quarantine) && (quarantine == 0 || !r.leansOnYoung(max(youngHorizon, quarantine))) {
			return true
		}
		if answered := len(r.results) - r.pending; answered-r.count(OK) > len(r.results)-quorum {
			return false
		}
	}
	return r.granted(quorum, quarantine)
}

// youngHorizon is the age under which a node's vote waits for the other
// nodes' answers (see collect).
const youngHorizon = time.Hour

// granted applies the quarantine to the answers so far and reports
// whether quorum nodes granted.
func (r *round) granted(quorum int, quarantine time.Duration) bool {
	if quarantine > 0 {
		r.quarantine(max(quarantine, r.maxTTL))
	}
	return r.count(OK) >= quorum
}

// leansOnYoung reports whether a grant came from a node younger than
// horizon.
func (r *round) leansOnYoung(horizon time.Duration) bool {
	for i, res := range r.results {
		if res.Outcome == OK && r.decoded[i].age < horizon {
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

var errNoAnswer = fmt.Errorf("no answer within the node timeout")

func (r *round) record(rep reply) {
	r.pending--
	res := &r.results[rep.node]
	res.Latency = rep.latency
	if rep.err != nil {
		res.Outcome, res.Err = Failed, rep.err
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

// count returns how many nodes had one of the given outcomes.
func (r *round) count(outcomes ...Outcome) int {
	n := 0
	for _, res := range r.results {
		for _, o := range outcomes {
			if res.Outcome == o {
				n++
			}
		}
	}
	return n
}

// acquire makes acquisition round n of a Lock. On failure it cleans the
// round up on every node before it returns.
func (c *Client) acquire(ctx context.Context, key string, ttl time.Duration, n int) (*Lock, *OpError) {
	token := newToken()
	q := c.quarantineFor(ttl)
	r := c.send(ctx, c.nodeTimeout(ttl), 1, acquireScript, decodeAcquire,
		[]string{key, fencePrefix + key, markerKey},
		[]string{token, msString(ttl), msString(q), msString(c.fenceTTL(ttl))})
	// The keys were set after r.start, so each lives at least until
	// r.start+ttl by its node's clock; the drift allowance covers the
	// difference between the nodes' clocks and ours.
	until := validUntil(r.start, ttl, c.drift(ttl))
	granted := r.collect(c.quorum, q)
	valid := granted && time.Now().Before(until)
	c.roundDone(ctx, "acquire", key, n, r, valid)
	if valid {
		c.learn(max(r.maxTTL, ttl))
		c.observe(ctx, r, q)
		return &Lock{c: c, key: key, token: token, ttl: ttl, fence: r.fence,
			start: r.start, until: until, settled: r.done, settledBy: r.deadline}, nil
	}
	c.cleanUp(ctx, key, token, r, n)
	c.learn(r.maxTTL) // with the late answers, which cleanUp waited for
	c.observe(ctx, r, q)
	e := &OpError{Op: "acquire", Key: key, Quorum: c.quorum, Rounds: 1, Nodes: r.results}
	switch {
	case granted:
		e.Err = ErrExpired
	case r.count(OK, Taken) >= c.quorum:
		e.Err = ErrTaken
	default:
		e.Err = ErrNoQuorum
	}
	return nil, e
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
func (c *Client) cleanUp(ctx context.Context, key, token string, acq *round, n int) {
	acq.drain()
	r := c.releaseRound(ctx, key, token, acq.fence, c.fenceTTL(0), true)
	c.roundDone(ctx, "cleanup", key, n, r, r.count(OK, Absent, Taken) == len(c.nodes))
	if failed := len(c.nodes) - r.count(OK, Absent, Taken); failed > 0 {
		c.log.Warn("redlock: clean-up of a failed acquisition did not reach every node; the keys left expire with their TTL",
			"key", key, "nodes_failed", failed, "results", r.results)
	}
}

// releaseRound runs the release script on every node. It ignores the
// cancellation of ctx and is bounded by Options.ReleaseTimeout instead. A
// node whose request fails outright, as on a connection that broke since
// its last use, is tried once more: a key that a release misses blocks
// others until it expires.
//
// With all, it waits for every answer; otherwise it returns as soon as a
// quorum has confirmed, and the other requests go on in the background
// (within the same bound), so that a hung node does not hold up every
// Release.
func (c *Client) releaseRound(ctx context.Context, key, token string, fence int64, fenceTTL time.Duration, all bool) *round {
	r := c.send(context.WithoutCancel(ctx), c.opts.ReleaseTimeout, 2, releaseScript, decodeRelease,
		[]string{key, fencePrefix + key},
		[]string{token, strconv.FormatInt(fence, 10), msString(fenceTTL)})
	if all || !r.collect(c.quorum, 0) {
		r.drain()
	}
	return r
}

// fenceTTL returns how long a fence counter outlives its lock's last
// grant: ten TTLs, and at least a minute. A counter that has expired is
// harmless (fences also follow the nodes' clocks); one kept longer only
// costs memory.
func (c *Client) fenceTTL(ttl time.Duration) time.Duration {
	return max(10*ttl, time.Minute)
}

func msString(d time.Duration) string {
	return strconv.FormatInt(d.Milliseconds(), 10)
}

// ints returns v as n integers, if it is an array of exactly n integers.
func ints(v any, n int) ([]int64, bool) {
	if a, ok := v.([]int64); ok {
		return a, len(a) == n
	}
	a, ok := v.([]any)
	if !ok || len(a) != n {
		return nil, false
	}
	out := make([]int64, n)
	for i, e := range a {
		if out[i], ok = e.(int64); !ok {
			return nil, false
		}
	}
	return out, true
}

// decodeAcquire decodes the reply of the acquire script: {1, fence, age,
// maxttl} granted, {0, pttl, age, maxttl} held by another owner, {-1, wait,
// age, maxttl} refused during quarantine.
func decodeAcquire(v any) decoded {
	a, ok := ints(v, 4)
	if !ok || !fitsMillis(a[2]) || !fitsMillis(a[3]) || !fitsMillis(max(a[1], 0)) && a[0] != 1 {
		return decoded{outcome: Failed, err: fmt.Errorf("redlock: unexpected reply %#v from the acquire script", v)}
	}
	d := decoded{age: time.Duration(a[2]) * time.Millisecond, maxTTL: time.Duration(a[3]) * time.Millisecond}
	switch a[0] {
	case 1:
		d.outcome, d.fence = OK, a[1]
	case 0:
		d.outcome, d.ttl = Taken, time.Duration(max(a[1], 0))*time.Millisecond
	case -1:
		d.outcome, d.ttl = Quarantined, time.Duration(max(a[1], 0))*time.Millisecond
	default:
		return decoded{outcome: Failed, err: fmt.Errorf("redlock: unexpected reply %#v from the acquire script", v)}
	}
	return d
}

// fitsMillis reports whether n milliseconds are a duration a script can
// report: not negative, and within what a time.Duration holds (292 years).
func fitsMillis(n int64) bool {
	return n >= 0 && n <= math.MaxInt64/int64(time.Millisecond)
}

// decodeStatus decodes the reply of the extend script: 1 done, 0 key
// absent, -1 held by another owner.
func decodeStatus(v any) decoded {
	switch v {
	case int64(1):
		return decoded{outcome: OK}
	case int64(0):
		return decoded{outcome: Absent}
	case int64(-1):
		return decoded{outcome: Taken}
	}
	return decoded{outcome: Failed, err: fmt.Errorf("redlock: unexpected reply %#v from the extend script", v)}
}

// decodeRelease decodes the reply of the release script: {status, woke},
// with status as for decodeStatus and woke the number of waiters told.
func decodeRelease(v any) decoded {
	if a, ok := ints(v, 2); ok && a[1] >= 0 {
		if d := decodeStatus(a[0]); d.outcome != Failed {
			d.woke = a[1]
			return d
		}
	}
	return decoded{outcome: Failed, err: fmt.Errorf("redlock: unexpected reply %#v from the release script", v)}
}
