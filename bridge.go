package redlock

import (
	"context"
	"time"

	"github.com/quorumlock/redlock/internal/clientx"
	"github.com/quorumlock/redlock/internal/wire"
	"github.com/quorumlock/redlock/observe"
)

// This file is what a Client hands to the operators' API (package admin)
// and to this repository's tools through internal/clientx: the states it
// keeps of its nodes, a probe of them, and the rounds of Inspect and
// ForceRelease. Package admin builds its answers from these.

func init() {
	clientx.Of = func(c any) clientx.Client { return bridge{c.(*Client)} }
	clientx.Semaphore = func(s any) (clientx.Client, string, int) {
		sem := s.(*Semaphore)
		return bridge{sem.c}, sem.key, sem.n
	}
	clientx.CheckKey = checkKey
	clientx.CheckSemaphore = checkSemaphore
	clientx.CheckSlot = checkSlot
	clientx.Limits.Keys = maxKeys
	clientx.Limits.OwnerLen = maxOwnerLen
	clientx.Limits.TokenLen = tokenLen
	clientx.Limits.Permits = maxPermits
}

// bridge is a Client as clientx.Client.
type bridge struct{ c *Client }

func (b bridge) Quorum() int                               { return b.c.quorum }
func (b bridge) Nodes() []string                           { return b.c.nodeNames() }
func (b bridge) IntentTTL(ttl time.Duration) time.Duration { return b.c.intentTTL(ttl) }

// States returns what the client last observed of each node, in the order
// given to New. Every round updates it; Probe refreshes it on demand.
func (b bridge) States() []observe.NodeState {
	c := b.c
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]observe.NodeState(nil), c.states...)
}

// Probe asks every node for its state, without touching any lock: whether
// it answers, how long its process has run, the largest TTL recorded on
// it, its clock, and from these whether it is in quarantine. It waits for
// every node, at most Options.ReleaseTimeout.
//
// A node keeps its records per cluster hash slot (see [wire.MarkerKey]); Probe
// reads those of the slot of the empty key. The process age is the same in
// every slot, but the largest TTL is the one used in that slot, and a slot
// that has not yet seen its node's promotion from replica to master is
// in quarantine only once a lock is tried in it.
func (b bridge) Probe(ctx context.Context) []observe.NodeState {
	c := b.c
	r, _ := c.inquire(ctx, "probe", "", c.opts.ReleaseTimeout, 1, wire.Probe(), false, everyOK)
	c.noteHealth(ctx, r, 0)
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.states {
		st, res := &c.states[i], r.results[i]
		st.Age, st.MaxTTL, st.ClockOffset = 0, 0, 0
		if res.Outcome != observe.OutcomeOK {
			continue
		}
		d := r.decoded[i]
		st.Age, st.MaxTTL = d.Age, d.MaxTTL
		// The node read its clock about halfway through the request.
		mid := r.start.Add(res.Latency / 2)
		st.ClockOffset = time.UnixMilli(d.Clock).Sub(mid).Round(time.Millisecond)
	}
	return append([]observe.NodeState(nil), c.states...)
}

// Inspect reads what every node holds for key, in one round that changes
// nothing, and waits for every node, at most Options.ReleaseTimeout.
func (b bridge) Inspect(ctx context.Context, key string) clientx.Round {
	c := b.c
	ctx, ev := c.hooks.begin(ctx, "inspect", key)
	r, e := c.inquire(ctx, "inspect", key, c.opts.ReleaseTimeout, 2, wire.InspectRW(key), true, everyOK)
	out := clientx.Round{Start: r.start, Quorum: c.quorum, Results: r.results, Replies: r.decoded}
	if !c.opts.DisableQuarantine {
		out.Quarantine = max(c.quarantineFor(0), r.maxTTL())
	}
	out.Verdict = r.holdings(out.Quarantine)
	if e != nil {
		out.Err = e
	}
	c.hooks.end(ctx, ev, nil)
	return out
}

// ForceRelease is the round of admin's ForceRelease of the lock key key,
// whose releases wake the waiters of waitKey: the key itself, or a
// semaphore's.
func (b bridge) ForceRelease(ctx context.Context, key, waitKey string) clientx.Round {
	r, err := b.c.forceRelease(ctx, key, waitKey)
	return clientx.Round{Start: r.start, Quorum: b.c.quorum, Results: r.results, Replies: r.decoded, Err: err}
}

// forceRelease deletes the lock on key from every node, whatever token
// holds it, after raising every node's fence counter to the largest, and
// wakes the waiters of waitKey: the key itself, or a semaphore's.
func (c *Client) forceRelease(ctx context.Context, key, waitKey string) (*round, error) {
	ctx, ev := c.hooks.begin(ctx, "force-release", key)
	// The fence floor: the removed owner's fence is no more than the
	// counter of a node that granted it, or, where that counter has been
	// lost since, than that node's clock (see wire/lua/acquire.lua).
	floor := c.fenceFloor(ctx, key)
	call := wire.Force(key, floor, waitKey)
	if key == waitKey { // not a semaphore's slot: an RWLock's readers go too
		call = wire.ForceRW(key, floor, waitKey)
	}
	r, e := c.inquire(context.WithoutCancel(ctx), "force-release", key, c.opts.ReleaseTimeout, 2, call, true, nil)
	c.noteHealth(ctx, r, 0)
	var err error
	if e != nil {
		err = e
	}
	c.hooks.end(ctx, ev, err)
	return r, err
}

// everyOK decides a round that reads every node: it succeeds when every
// node answered.
func everyOK(r *round) bool { return r.count(observe.OutcomeOK) == len(r.results) }

// fenceFloor reads every node's fence counter and clock for key, and
// returns the largest of them.
func (c *Client) fenceFloor(ctx context.Context, key string) (floor int64) {
	r := c.send(ctx, c.opts.ReleaseTimeout, 2, wire.Inspect(key), nil)
	r.drain()
	for i, res := range r.results {
		if res.Outcome == observe.OutcomeOK {
			d := r.decoded[i]
			floor = max(floor, d.Fence, d.Clock)
		}
	}
	return floor
}
