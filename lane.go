package redlock

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock/driver"
)

// Limits of a lane. A healthy node answers a batch in well under a
// millisecond, and a few goroutines keep it busy. A slow node needs more,
// as each batch waits a round trip of its latency: with too few, requests
// wait in the queue behind slow batches and reach the node late, and a
// clean-up whose round ends while it waits is never sent. Sixteen per node
// are enough for nodes 200ms away under load; the price is smaller
// batches when the machine is saturated.
const (
	laneWorkers  = 16              // goroutines per node sending batches at once
	laneBatch    = 128             // most requests in one batch
	laneLingerOn = 2 * time.Second // how long an idle goroutine waits for work
)

// A lane is the way to one Batcher node: a queue of requests, served by up
// to laneWorkers goroutines that each send what is queued as one batch.
// Goroutines start when requests come and end after laneLingerOn without
// any.
type lane struct {
	node driver.Batcher

	mu      sync.Mutex
	queue   []*request
	workers int           // goroutines running
	idle    int           // goroutines waiting for wake
	wake    chan struct{} // a token for an idle goroutine; cap laneWorkers
	closed  chan struct{} // closed by close: idle goroutines end at once
	once    sync.Once
}

// A request is one node's part of a round.
type request struct {
	r     *round
	node  int
	tries int  // tries left, this one included
	retry bool // an earlier try failed, and may have been applied

	// The answer, set by deliver before the node's index is sent on the
	// round's answered channel, and read by the round's collector after.
	val     any
	err     error
	latency time.Duration

	returned atomic.Bool             // set by deliver
	next     atomic.Pointer[request] // sent once this one has returned; see then
}

// then arranges for next to be dispatched once q has returned, and reports
// whether it did so; false means that q has returned already, and next
// may be sent at once. Exactly one of then, deliver and the deadline
// fallback in send dispatches next. q holds one next; a second request
// to follow q (a lock's release while a writer's intent is taken back
// after the same round, say) follows the first instead, which is sent
// only after q anyway.
func (q *request) then(next *request) bool {
	for {
		if q.returned.Load() {
			return false
		}
		if q.next.CompareAndSwap(nil, next) {
			if q.returned.Load() && q.next.CompareAndSwap(next, nil) {
				return false // returned meanwhile, and deliver did not take next
			}
			return true
		}
		if p := q.next.Load(); p != nil {
			// p is sent after q has returned, or at the deadline: once p
			// has returned, or at once if it has, next may go.
			return p.then(next)
		}
	}
}

// dispatch sends the request through its node's lane, or on a goroutine
// of its own for a node without one.
func (q *request) dispatch() {
	c := q.r.c
	if ln := c.lanes[q.node]; ln != nil {
		ln.submit(q)
		return
	}
	go q.run(c.nodes[q.node])
}

// run sends the request to node with Eval, tries again while it fails,
// short of a refusal, and tries are left, and delivers the answer.
func (q *request) run(node driver.Node) {
	r := q.r
	keys := q.keys()
	v, err := node.Eval(r.ctx, r.call.Script, keys, r.call.Args)
	for ; err != nil && q.tries > 1 && r.ctx.Err() == nil && !refused(err); q.tries-- {
		v, err = node.Eval(r.ctx, r.call.Script, keys, r.call.Args)
		q.retry = true
	}
	r.deliver(q, v, err)
}

// keys returns the keys of the call that q sends: the call's lean keys
// where the call marks q's node, else its keys.
func (q *request) keys() []string {
	if q.r.call.LeanOn(q.node) {
		return q.r.call.LeanKeys
	}
	return q.r.call.Keys
}

func newLane(n driver.Batcher) *lane {
	return &lane{node: n, wake: make(chan struct{}, laneWorkers), closed: make(chan struct{})}
}

// close ends the lane's idle goroutines, now and from now on. A request
// submitted later is still sent.
func (ln *lane) close() {
	ln.once.Do(func() { close(ln.closed) })
}

// submit queues q and makes sure a goroutine will send it.
func (ln *lane) submit(q *request) {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	ln.queue = append(ln.queue, q)
	switch {
	case ln.idle > 0:
		// Sent under mu, so that a goroutine giving up at the same
		// time either sees the token or is not counted as idle.
		ln.idle--
		ln.wake <- struct{}{}
	case ln.workers < laneWorkers:
		ln.workers++
		go ln.work()
	}
	// Otherwise every goroutine is busy, and the first one done takes q.
}

// work sends batches until there has been no request for laneLingerOn.
func (ln *lane) work() {
	var batch []*request
	var calls []driver.Call
	var linger *time.Timer
	for {
		ln.mu.Lock()
		if len(ln.queue) == 0 {
			ln.idle++
			ln.mu.Unlock()
			if linger == nil {
				linger = time.NewTimer(laneLingerOn)
			} else {
				linger.Reset(laneLingerOn)
			}
			select {
			case <-ln.wake:
				linger.Stop()
				continue
			case <-linger.C:
			case <-ln.closed:
				linger.Stop()
			}
			ln.mu.Lock()
			select {
			case <-ln.wake: // work came as the timer fired
				ln.mu.Unlock()
				continue
			default:
				ln.idle--
				ln.workers--
				ln.mu.Unlock()
				return
			}
		}
		n := min(len(ln.queue), laneBatch)
		batch = append(batch[:0], ln.queue[:n]...)
		rest := copy(ln.queue, ln.queue[n:])
		clear(ln.queue[rest:])
		ln.queue = ln.queue[:rest]
		ln.mu.Unlock()
		calls = ln.send(batch, calls[:0])
	}
}

// send runs one batch and delivers its answers. Requests whose round has
// ended are answered with the round's error without being sent. It
// returns calls for reuse.
//
// No request may outlive its round's deadline, as a request of its own
// would not: a late grant could otherwise land after the clean-up of its
// round had passed the node. So a batch is cut at the earliest deadline
// of its requests. A request cut that way before its own deadline is sent
// again in a later batch; every script can be sent twice (acquire finds
// its own grant, extend never deletes, and a release sent again is marked
// as retried, so that it counts a key it finds gone as its own doing).
func (ln *lane) send(batch []*request, calls []driver.Call) []driver.Call {
	var deadline time.Time
	var base context.Context
	live := batch[:0]
	for _, q := range batch {
		if err := q.r.ctx.Err(); err != nil {
			q.r.deliver(q, nil, err)
			continue
		}
		live = append(live, q)
		calls = append(calls, driver.Call{Script: q.r.call.Script, Keys: q.keys(), Args: q.r.call.Args})
		if d := q.r.deadline; base == nil || d.Before(deadline) {
			deadline, base = d, q.r.ctx
		}
	}
	if len(live) == 0 {
		return calls
	}
	cut := false
	if len(live) == 1 {
		ln.node.EvalBatch(base, calls)
	} else {
		// One round's caller giving up does not cut the others' requests.
		ctx, cancel := context.WithDeadline(context.WithoutCancel(base), deadline)
		ln.node.EvalBatch(ctx, calls)
		cut = ctx.Err() != nil
		cancel()
	}
	var again []*request
	for i, q := range live {
		c := &calls[i]
		switch {
		case c.Err == nil || q.r.ctx.Err() != nil || refused(c.Err):
			q.r.deliver(q, c.Reply, c.Err)
			continue
		case cut && q.r.deadline.After(deadline):
			// Cut for another round: not a try of its own. A script that
			// may be retried may have run, as after a failed try.
			q.retry = q.retry || q.tries > 1
		case q.tries > 1:
			q.tries--
			q.retry = true
		default:
			q.r.deliver(q, c.Reply, c.Err)
			continue
		}
		again = append(again, q)
	}
	clear(calls) // drop the replies
	for _, q := range again {
		ln.submit(q)
	}
	return calls[:0]
}

// A flight counts a client's requests in flight, for Client.Close. Unlike
// a sync.WaitGroup it may gain requests while Close waits, as when a
// forgotten AutoExtend extends a lock; Close then waits for those too.
type flight struct {
	n       atomic.Int64
	waiting atomic.Bool // someone is in wait
	mu      sync.Mutex
	zero    sync.Cond // on mu; signalled when n drops to 0 while waiting
}

func (f *flight) init() { f.zero.L = &f.mu }

func (f *flight) add(n int) { f.n.Add(int64(n)) }

func (f *flight) done() {
	if f.n.Add(-1) == 0 && f.waiting.Load() {
		f.mu.Lock()
		f.zero.Broadcast()
		f.mu.Unlock()
	}
}

// wait returns once no request is in flight.
func (f *flight) wait() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.waiting.Store(true)
	for f.n.Load() > 0 {
		f.zero.Wait()
	}
}
