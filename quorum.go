package redlock

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"
)

// This file holds the fan-out of one request to every node and the quorum
// and validity rules that decide a round.
//
// A round sends its request to all nodes at once, so that it takes as long
// as the slowest node it needs rather than the sum of all of them. Each
// request has its own timeout. The round is decided as soon as a quorum has
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

// A round is one request sent to every node at once.
type round struct {
	start    time.Time     // just before the first request was sent
	deadline time.Time     // when collecting stops waiting for answers
	replies  chan reply    // buffered: senders never block
	done     chan struct{} // closed when every request has returned
	cancel   func()        // ends the requests' context; called with done
	results  []NodeResult  // filled in as the answers are collected
	pending  int           // answers not collected yet
	decode   func(any) (Outcome, time.Duration, error)
}

// send sends script to every node at once. Each request is cut off after
// timeout. A request that fails before its timeout is sent again, up to
// tries times in all; only idempotent scripts may be tried more than once.
// The answers are decoded with decode.
func (c *Client) send(ctx context.Context, timeout time.Duration, tries int, script *Script, decode func(any) (Outcome, time.Duration, error), keys, args []string) *round {
	n := len(c.nodes)
	r := &round{
		start:   time.Now(),
		replies: make(chan reply, n),
		done:    make(chan struct{}),
		results: make([]NodeResult, n),
		pending: n,
		decode:  decode,
	}
	// Collecting waits a little longer than the requests' own timeout, so
	// that a node which answers at its deadline is not counted as silent;
	// it stops at all only in case a Node ignores its context.
	r.deadline = r.start.Add(timeout + timeout/4 + time.Millisecond)
	// All requests start together, so one deadline serves as the timeout
	// of each; it is released when the last request returns.
	ctx, r.cancel = context.WithTimeout(ctx, timeout)
	var running atomic.Int32
	running.Store(int32(n))
	for i, node := range c.nodes {
		r.results[i].Node = node.Name()
		go func() {
			v, err := node.Eval(ctx, script, keys, args)
			retried := false
			for try := 1; err != nil && try < tries && ctx.Err() == nil; try++ {
				v, err = node.Eval(ctx, script, keys, args)
				retried = true
			}
			r.replies <- reply{node: i, val: v, err: err, latency: time.Since(r.start), retried: retried}
			if running.Add(-1) == 0 {
				r.cancel()
				close(r.done)
			}
		}()
	}
	return r
}

// collect gathers answers until the round is decided: it returns true as
// soon as quorum nodes answered OK, and false as soon as a quorum is out of
// reach or the round's deadline has passed.
func (r *round) collect(quorum int) bool {
	var oks, others int
	timer := time.NewTimer(time.Until(r.deadline))
	defer timer.Stop()
	for r.pending > 0 {
		select {
		case rep := <-r.replies:
			if r.record(rep) == OK {
				oks++
			} else {
				others++
			}
		case <-timer.C:
			return false
		}
		if oks >= quorum {
			return true
		}
		if others > len(r.results)-quorum {
			return false
		}
	}
	return false
}

// drain waits until every request has returned or the round's deadline
// has passed, and records the answers. Nodes that did not answer keep the
// outcome NoAnswer.
func (r *round) drain() {
	timer := time.NewTimer(time.Until(r.deadline))
	defer timer.Stop()
	for r.pending > 0 {
		select {
		case rep := <-r.replies:
			r.record(rep)
		case <-timer.C:
			for i := range r.results {
				if r.results[i].Outcome == NoAnswer && r.results[i].Err == nil {
					r.results[i].Err = errNoAnswer
				}
			}
			return
		}
	}
}

var errNoAnswer = fmt.Errorf("no answer within the node timeout")

func (r *round) record(rep reply) Outcome {
	r.pending--
	res := &r.results[rep.node]
	res.Latency = rep.latency
	if rep.err != nil {
		res.Outcome, res.Err = Failed, rep.err
		return Failed
	}
	res.Outcome, res.TTL, res.Err = r.decode(rep.val)
	if rep.retried && res.Outcome == Absent {
		// The failed try may have deleted the key itself.
		res.Outcome = OK
	}
	return res.Outcome
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

// acquire makes one acquisition round. On failure it cleans the round up on
// every node before it returns.
func (c *Client) acquire(ctx context.Context, key string, ttl time.Duration) (*Lock, *OpError) {
	token := newToken()
	r := c.send(ctx, c.nodeTimeout(ttl), 1, acquireScript, decodeAcquire,
		[]string{key}, []string{token, strconv.FormatInt(ttl.Milliseconds(), 10)})
	// The keys were set after r.start, so each lives at least until
	// r.start+ttl by its node's clock; the drift allowance covers the
	// difference between the nodes' clocks and ours.
	until := validUntil(r.start, ttl, c.drift(ttl))
	granted := r.collect(c.quorum)
	if granted && time.Now().Before(until) {
		return &Lock{c: c, key: key, token: token, ttl: ttl, until: until, settled: r.done, settledBy: r.deadline}, nil
	}
	c.cleanUp(ctx, key, token, r)
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
func (c *Client) cleanUp(ctx context.Context, key, token string, acq *round) {
	acq.drain()
	r := c.releaseRound(ctx, key, token)
	if failed := len(c.nodes) - r.count(OK, Absent, Taken); failed > 0 {
		c.log.Warn("redlock: clean-up of a failed acquisition did not reach every node; the keys left expire with their TTL",
			"key", key, "nodes_failed", failed, "results", r.results)
	}
}

// releaseRound runs the release script on every node and waits for all
// answers. It ignores the cancellation of ctx and is bounded by
// Options.ReleaseTimeout instead. A node whose request fails outright, as
// on a connection that broke since its last use, is tried once more: a key
// that a release misses blocks others until it expires.
func (c *Client) releaseRound(ctx context.Context, key, token string) *round {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.ReleaseTimeout)
	defer cancel()
	r := c.send(ctx, c.opts.ReleaseTimeout, 2, releaseScript, decodeStatus, []string{key}, []string{token})
	r.drain()
	return r
}

// decodeAcquire decodes the reply of the acquire script: {1, 0} granted,
// {0, pttl} held by another owner.
func decodeAcquire(v any) (Outcome, time.Duration, error) {
	if a, ok := v.([]any); ok && len(a) == 2 {
		granted, ok1 := a[0].(int64)
		pttl, ok2 := a[1].(int64)
		switch {
		case ok1 && ok2 && granted == 1:
			return OK, 0, nil
		case ok1 && ok2 && granted == 0:
			return Taken, time.Duration(max(pttl, 0)) * time.Millisecond, nil
		}
	}
	return Failed, 0, fmt.Errorf("redlock: unexpected reply %#v from the acquire script", v)
}

// decodeStatus decodes the reply of the release and extend scripts: 1 done,
// 0 key absent, -1 held by another owner.
func decodeStatus(v any) (Outcome, time.Duration, error) {
	switch v {
	case int64(1):
		return OK, 0, nil
	case int64(0):
		return Absent, 0, nil
	case int64(-1):
		return Taken, 0, nil
	}
	return Failed, 0, fmt.Errorf("redlock: unexpected reply %#v from a lock script", v)
}
