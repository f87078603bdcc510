package redlock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock/driver"
)

// NodeHealth is what a Client last saw of a node.
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
	// that it will give again however often the request is sent (the
	// outcome Refused), such as WRONGPASS or READONLY; NodeState.Err says
	// which.
	NodeRefusing
	// NodeBusy means the node answered the last request that it cannot
	// serve it now, with an error that may pass: LOADING, BUSY, TRYAGAIN,
	// MASTERDOWN or CLUSTERDOWN (the outcome Failed). NodeState.Err says
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

// NodeState is what a Client knows of one node.
type NodeState struct {
	Node   string     // the node's Name
	Health NodeHealth // what the last answer, or its absence, showed
	Until  time.Time  // NodeQuarantined: when the node is expected to vote again
	Err    error      // NodeUnreachable, NodeRefusing, NodeBusy: the last error
	Seen   time.Time  // when the state was observed; zero if never

	// Set by Probe only.
	Age         time.Duration // how long the node's redis-server process has run
	MaxTTL      time.Duration // the largest TTL recorded on the node
	ClockOffset time.Duration // the node's clock minus this machine's, to the millisecond
}

// States returns what the client last observed of each node, in the order
// given to New. Every round updates it; Probe refreshes it on demand.
func (c *Client) States() []NodeState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]NodeState(nil), c.states...)
}

// Probe asks every node for its state, without touching any lock: whether
// it answers, how long its process has run, the largest TTL recorded on
// it, its clock, and from these whether it is in quarantine. It waits for
// every node, at most Options.ReleaseTimeout.
//
// A node keeps its records per cluster hash slot (see [MarkerKey]); Probe
// reads those of the slot of the empty key. The process age is the same in
// every slot, but the largest TTL is the one used in that slot, and a slot
// that has not yet seen its node's promotion from replica to master is
// in quarantine only once a lock is tried in it.
func (c *Client) Probe(ctx context.Context) []NodeState {
	r := c.send(ctx, c.opts.ReleaseTimeout, 1, probeScript, decodeProbe, []string{MarkerKey("")}, nil, nil)
	r.drain()
	r.decide(r.count(OK) == len(c.nodes))
	c.report(ctx, "probe", "", 1, r)
	c.heard(ctx, r, 0)
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.states {
		st, res := &c.states[i], r.results[i]
		st.Age, st.MaxTTL, st.ClockOffset = 0, 0, 0
		if res.Outcome != OK {
			continue
		}
		d := r.decoded[i]
		st.Age, st.MaxTTL = d.age, d.maxTTL
		// The node read its clock about halfway through the request.
		mid := r.start.Add(res.Latency / 2)
		st.ClockOffset = time.UnixMilli(d.clock).Sub(mid).Round(time.Millisecond)
	}
	return append([]NodeState(nil), c.states...)
}

// quarantineFor returns how long a node must have run to vote for a lock
// with the given TTL; 0 when quarantine is disabled.
func (c *Client) quarantineFor(ttl time.Duration) time.Duration {
	if c.opts.DisableQuarantine {
		return 0
	}
	return max(c.opts.Quarantine, time.Duration(c.learned.Load()), ttl)
}

// heardAllAt records that every node answered a round that started at t,
// with its age and the largest TTL it knows.
func (c *Client) heardAllAt(t time.Time) {
	raise(&c.heardAll, int64(t.Sub(c.born))+1) // 0 means never
}

// lastHeardAll returns the start of the latest round in which every node
// answered, or the zero time if there has been none.
func (c *Client) lastHeardAll() time.Time {
	at := c.heardAll.Load()
	if at == 0 {
		return time.Time{}
	}
	return c.born.Add(time.Duration(at - 1))
}

// learn records a TTL that some client used on the nodes.
func (c *Client) learn(ttl time.Duration) {
	raise(&c.learned, int64(ttl))
}

// answered reports whether err is the node's own error reply, rather than
// a failure to hear from the node.
func answered(err error) bool {
	var reply *driver.ReplyError
	return errors.As(err, &reply)
}

// raise sets a to v if v is larger.
func raise(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// heard records what an acquisition or probe round showed of the nodes:
// the largest TTL any of them has seen, and each one's health, judged
// against quarantine (0 for a probe: the learned one). A node whose answer
// was not waited for keeps its previous state. The Observer is told of
// every change.
func (c *Client) heard(ctx context.Context, r *round, quarantine time.Duration) {
	c.learn(r.maxTTL) // covers the TTL of a grant: every acquire reply reports at least its own TTL
	if all := r.pending == 0; all {
		for _, d := range r.decoded {
			all = all && d.age >= 0
		}
		if all {
			c.heardAllAt(r.start)
		}
	}
	if quarantine == 0 {
		quarantine = c.quarantineFor(0)
	}
	now := time.Now()
	var changed []NodeEvent
	c.mu.Lock()
	defer func() {
		c.mu.Unlock()
		for _, e := range changed {
			c.obs.Observe(ctx, e)
		}
	}()
	for i, res := range r.results {
		st := &c.states[i]
		was := st.Health
		switch {
		case res.Outcome == NoAnswer && res.Err == nil:
			continue
		case res.Outcome == Refused:
			st.Health, st.Err, st.Until = NodeRefusing, res.Err, time.Time{}
		case res.Outcome == Failed && answered(res.Err):
			st.Health, st.Err, st.Until = NodeBusy, res.Err, time.Time{}
		case res.Outcome == Failed || res.Outcome == NoAnswer:
			st.Health, st.Err, st.Until = NodeUnreachable, res.Err, time.Time{}
		case res.Outcome == Quarantined:
			st.Health, st.Err, st.Until = NodeQuarantined, nil, now.Add(res.TTL)
		case r.decoded[i].age >= 0 && r.decoded[i].age < quarantine:
			st.Health, st.Err, st.Until = NodeQuarantined, nil, now.Add(quarantine-r.decoded[i].age)
		default:
			st.Health, st.Err, st.Until = NodeHealthy, nil, time.Time{}
		}
		st.Seen = now
		if c.obs != nil && st.Health != was {
			changed = append(changed, NodeEvent{Previous: was, State: *st})
		}
	}
}
