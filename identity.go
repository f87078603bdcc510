package redlock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock/internal/mutant"
	"github.com/quorumlock/redlock/internal/wire"
)

// This file is how a client learns which Redis server each of its nodes
// is, for the rule "one server, one vote": two nodes that are the same
// server (two databases of one server, two names of one host, two entries
// for one cluster) must never both count toward a quorum, in any round of
// any operation. New cannot tell, since it sends nothing; the client asks
// each node with the probe script, which returns the server's run_id and
// the age of its process. What the answers allow to count is decided in
// round.go, from the snapshot this file keeps (voters).
//
// A run_id names one process, not one server: a restart gives a new one.
// So two nodes are known to be two servers only when their run_ids differ
// at one moment. Two probes of one node that see the same run_id show
// that process running for the whole time between them (a run_id never
// comes back); a probe of another node made within that time, seeing
// another run_id, saw another server. Two probes on either side of a
// restart see two run_ids of one server, and prove nothing: until a node
// is proven apart from another, one of the two counts, and the one probed
// longer ago is probed again. The first identification probes every node
// in waves, each sent once the last has returned, until every pair is
// proven apart. And a node whose server may have changed since its probe
// (a restart, or a failover behind Sentinel that puts another server
// behind its name) is probed again, in the background, when the age its
// grants report says so: no request of its own is on the way of a round.

// identitySlack is how much later than the start of the process its probe
// saw a slot's records may say the node started, for the same process:
// the records take their start from the server's uptime in whole seconds.
// A later start is a restart or a promotion.
const identitySlack = 2 * time.Second

// identities is what a client knows of which server each node is.
type identities struct {
	first chan struct{} // closed once the first identification has ended
	// voters is the snapshot that rounds read: which nodes' answers
	// count. It is replaced, never changed, under mu.
	voters atomic.Pointer[voters]
	// asked marks the nodes whose grants reported a process that started
	// after their probe (a restart, a promotion, or another server behind
	// the node's name), and any tells that one is marked: the next call of
	// identify probes them again. If a probe then shows another node's
	// server, the client refuses as New's doc says; if it shows the same
	// process (a Redis Cluster's other masters answer for other slots),
	// the node's limit moves on.
	asked []atomic.Bool
	any   atomic.Bool

	mu     sync.Mutex
	tried  bool // the first identification has begun
	nodes  []identity
	flying []bool // a probe of the node is on its way
	err    error  // two nodes are one server: every acquisition fails with it
}

// An identity is what the probe of one node said.
type identity struct {
	known bool
	id    string // the run_id; "" for a server that has no INFO to tell it (the demo's in-process nodes)
	// seen holds the probes that saw id (the first, and the latest few),
	// each from its sending to its answer, on the client's clock: the
	// process id ran from the first's answer to the latest's sending, if
	// that is not empty.
	seen    []window
	recheck bool  // probe it again: its server may have changed, or be another node's
	refusal error // the probe was refused for good (an ACL without INFO)
	// limit is the latest start of a process that the node's grants may
	// report without its being probed again: its first probe's process
	// started no later than limit − identitySlack, and no slot's records
	// of that process say it started later than limit.
	limit time.Time
}

// maxSeen bounds the probes an identity keeps: the first, and the latest
// ones.
const maxSeen = 6

// A window is the time of one probe: from its sending to its answer. The
// node read its state somewhere within it.
type window struct{ sent, got time.Time }

// within reports whether the probe w was made while a process known to
// run from from to to ran.
func (w window) within(from, to time.Time) bool {
	return !w.sent.Before(from) && !w.got.After(to)
}

// voters is a snapshot of what the client knows of its nodes' servers:
// for each node, whether its answers count, and why not.
type voters struct {
	all    bool        // every node counts, and nothing is to be probed
	counts []bool      // whether node i's answers count
	why    []error     // for a node that does not count: errUnidentified, or the probe's refusal
	limit  []time.Time // the latest start a grant of node i may report for the process probed
}

// init makes ids the identities of n nodes that nothing is known of yet.
func (ids *identities) init(n int) {
	ids.first, ids.nodes, ids.flying, ids.asked = make(chan struct{}), make([]identity, n), make([]bool, n), make([]atomic.Bool, n)
	ids.voters.Store(ids.snapshot())
}

// identify returns an error wrapping ErrInvalid, naming both, if two of
// the client's nodes are one server. Once every node is known it costs an
// atomic load.
//
// The first call probes every node, bounded by timeout, and every call
// waits for it (see firstIdentification). Later calls send the probe, in
// the background, to the nodes still to be probed (those that did not
// answer, usually because they are down, and those whose server may have
// changed), one probe per node at a time, and return at once: a node that
// stays down does not slow every round. Until a node is known its answers
// do not count (see voters).
func (c *Client) identify(ctx context.Context, timeout time.Duration) error {
	ids := &c.ids
	if ids.voters.Load().all && !ids.any.Load() {
		return nil
	}
	ids.mu.Lock()
	first := !ids.tried
	ids.tried = true
	if ids.any.Swap(false) && !mutant.On("identity-once") {
		for i := range ids.asked {
			if ids.asked[i].Swap(false) {
				ids.nodes[i].recheck = true
			}
		}
		ids.voters.Store(ids.snapshot())
	}
	probe := ids.toProbe()
	ids.mu.Unlock()
	if first {
		// A first probe opens the connection (a dial, perhaps a TLS
		// handshake), which can take longer than a round's node timeout.
		c.firstIdentification(ctx, probe, max(timeout, time.Second))
		close(ids.first)
	} else {
		c.probeLater(ctx, probe, timeout)
		select {
		case <-ids.first:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	ids.mu.Lock()
	defer ids.mu.Unlock()
	return ids.err
}

// toProbe marks as flying, and returns, the nodes to probe now: those not
// known, or stale, that no probe is on its way to. ids.mu must be held.
func (ids *identities) toProbe() []int {
	var probe []int
	for i := range ids.nodes {
		n := &ids.nodes[i]
		if (!n.known || n.recheck) && n.refusal == nil && !ids.flying[i] && ids.err == nil {
			ids.flying[i] = true
			probe = append(probe, i)
		}
	}
	return probe
}

// probeLater probes the nodes of probe in the background, each bounded by
// timeout; Close waits for them.
func (c *Client) probeLater(ctx context.Context, probe []int, timeout time.Duration) {
	for _, i := range probe {
		c.flying.add(1)
		go func() {
			defer c.flying.done()
			pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(timeout, 100*time.Millisecond))
			defer cancel()
			c.probeID(pctx, i)
		}()
	}
}

// firstIdentification probes the nodes of probe at once, and then every
// node twice more, in waves, each sent once the one before has returned:
// the second wave's probe of a node falls within the time between the
// first and third waves' probes of every other node, which proves two
// servers apart (see apart). Each wave is bounded by timeout; and once a quorum
// of nodes is known, a wave waits for the others only as long again as
// that took (at least graceMin): a node that is slow or down does not
// hold up the first lock by a node timeout, as it holds up no round. The
// probes left go on in the background (Close waits for them); until a
// node is known its answers do not count.
func (c *Client) firstIdentification(ctx context.Context, probe []int, timeout time.Duration) {
	const waves = 3
	ids := &c.ids
	for wave := 1; len(probe) > 0; wave++ {
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		defer cancel()
		if !c.probeWave(ctx, pctx, probe) || wave == waves {
			return
		}
		ids.mu.Lock()
		probe = probe[:0]
		if ids.err == nil && !ids.voters.Load().all {
			for i := range ids.nodes {
				if n := &ids.nodes[i]; n.known && n.refusal == nil && !ids.flying[i] {
					ids.flying[i] = true
					probe = append(probe, i)
				}
			}
		}
		ids.mu.Unlock()
	}
}

// probeWave probes the nodes of probe at once, bounded by pctx, and waits
// for them as firstIdentification says. It reports false when pctx or
// ctx ended first; the probes that did not return go on in the
// background.
func (c *Client) probeWave(ctx, pctx context.Context, probe []int) bool {
	const graceMin = 100 * time.Millisecond
	start := time.Now()
	answered := make(chan struct{}, len(probe))
	for _, i := range probe {
		c.flying.add(1) // Close waits for it
		go func() {
			defer c.flying.done()
			c.probeID(pctx, i)
			answered <- struct{}{}
		}()
	}
	var grace <-chan time.Time
	for range probe {
		select {
		case <-answered:
		case <-pctx.Done():
			return false
		case <-grace:
			return true
		case <-ctx.Done():
			return false
		}
		if grace == nil && c.ids.knownCount() >= c.quorum {
			grace = time.After(max(time.Since(start), graceMin))
		}
	}
	return true
}

// knownCount returns how many nodes have answered a probe.
func (ids *identities) knownCount() int {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	n := 0
	for _, id := range ids.nodes {
		if id.known {
			n++
		}
	}
	return n
}

// probeID asks node i for its server's run_id and its process's age, and
// records the answer. A failure that may pass (no answer, a broken
// connection, BUSY, LOADING) records nothing: the node is asked again at
// a later round. A refusal (the ACL denies INFO) is recorded, and the
// node's answers are refusals from then on.
func (c *Client) probeID(ctx context.Context, i int) {
	call := wire.Probe()
	sent := time.Now()
	v, err := c.nodes[i].Eval(ctx, call.Script, call.Keys, call.Args)
	got := time.Now()
	var d wire.Reply
	if err == nil {
		if d = call.Decode(v); d.Status != wire.OK {
			err = d.Err
		}
	}
	ids := &c.ids
	ids.mu.Lock()
	defer ids.mu.Unlock()
	ids.flying[i] = false
	n := &ids.nodes[i]
	switch {
	case err == nil:
	case refused(err) && !mutant.On("identity-error-distinct"):
		n.refusal = fmt.Errorf("the probe of the node's server identity was refused (%w); the identity needs INFO: add +info to the ACL user", err)
		ids.voters.Store(ids.snapshot())
		return
	case mutant.On("identity-error-distinct") && answered(err):
		// The hole put back: an error reply taken for a server of its own.
		*n = identity{known: true, seen: []window{{sent, got}}, limit: got.Add(identitySlack)}
		ids.voters.Store(ids.snapshot())
		return
	default:
		return
	}
	w := window{sent, got}
	if n.known && n.id == d.ServerID && d.ServerID != "" {
		// The same process, since the first probe that saw it. A grant
		// that reported a later start came from another process that
		// answers for the node (a Redis Cluster's master of another
		// slot), which may start as late as that.
		if len(n.seen) == maxSeen {
			n.seen = slices.Delete(n.seen, 1, 2)
		}
		n.seen, n.recheck = append(n.seen, w), false
		if l := got.Add(identitySlack); l.After(n.limit) {
			n.limit = l
		}
	} else {
		// The node read its clock before got and reports its age cut to
		// the millisecond: its process started no later than that.
		*n = identity{known: true, id: d.ServerID, seen: []window{w}, limit: got.Add(-d.Age + time.Millisecond + identitySlack)}
	}
	for j := range ids.nodes {
		o := &ids.nodes[j]
		if j == i || !o.known || o.id == "" || o.id != n.id || ids.err != nil {
			continue
		}
		a, b := min(i, j), max(i, j)
		ids.err = invalidf("nodes %q and %q are the same Redis server (run_id %s): one server would vote twice; give each server once", c.nodes[a].Name(), c.nodes[b].Name(), n.id)
	}
	if mutant.On("identity-once") {
		// The hole put back: a node once known is never asked again.
		for j := range ids.nodes {
			ids.nodes[j].recheck = false
		}
	} else {
		// A node that is not known to be apart from this one, and whose
		// probe came first, is asked again: if both are one server, its
		// next probe sees this one's process.
		for j := range ids.nodes {
			o := &ids.nodes[j]
			if j == i || !o.known || apart(n, o) {
				continue
			}
			if o.seen[len(o.seen)-1].sent.Before(w.sent) {
				o.recheck = true
			} else {
				n.recheck = true
			}
		}
	}
	ids.voters.Store(ids.snapshot())
}

// apart reports whether the probes of two nodes show two servers: their
// run_ids differ, and one node's process was seen running over a time
// within which the other node was probed. A server without a run_id (one
// without INFO, as the demo's in-process nodes) is taken as one of its
// own.
func apart(a, b *identity) bool {
	if a.id == "" || b.id == "" {
		return true
	}
	if mutant.On("identity-once") {
		return a.id != b.id // the hole put back: two run_ids, two servers
	}
	return a.id != b.id && (saw(a, b) || saw(b, a))
}

// saw reports whether a probe of b was made while a's process ran.
func saw(a, b *identity) bool {
	from, to := a.seen[0].got, a.seen[len(a.seen)-1].sent
	for _, w := range b.seen {
		if w.within(from, to) {
			return true
		}
	}
	return false
}

// snapshot returns what the nodes known so far allow to count: a set of
// known nodes of which every two are known to be apart. Of two nodes that
// may be one server, one counts. The set is built greedily, the nodes
// proven apart from the most others first, and of those the one probed
// last (a node that is down is probed in vain), so that a node known only
// lately, or gone, does not push out those proven apart from each other.
// ids.mu must be held.
func (ids *identities) snapshot() *voters {
	n := len(ids.nodes)
	v := &voters{all: ids.err == nil, counts: make([]bool, n), why: make([]error, n), limit: make([]time.Time, n)}
	usable := func(a *identity) bool { return a.known && a.refusal == nil }
	partners := make([]int, n)
	order := make([]int, n)
	for i := range ids.nodes {
		order[i] = i
		for j := range ids.nodes {
			if j != i && usable(&ids.nodes[i]) && usable(&ids.nodes[j]) && apart(&ids.nodes[i], &ids.nodes[j]) {
				partners[i]++
			}
		}
	}
	slices.SortStableFunc(order, func(a, b int) int {
		if partners[a] != partners[b] {
			return partners[b] - partners[a]
		}
		return lastSeen(&ids.nodes[b]).Compare(lastSeen(&ids.nodes[a]))
	})
	var counted []int
	for _, i := range order {
		a := &ids.nodes[i]
		v.limit[i] = a.limit
		switch {
		case a.refusal != nil:
			v.why[i] = a.refusal
		case !usable(a):
			v.why[i] = errUnidentified
		default:
			v.counts[i] = true
			for _, j := range counted {
				if !apart(a, &ids.nodes[j]) {
					v.counts[i], v.why[i] = false, errUnidentified
					break
				}
			}
			if v.counts[i] {
				counted = append(counted, i)
			}
		}
		if !v.counts[i] || a.recheck {
			v.all = false
		}
	}
	return v
}

// lastSeen returns when a's latest probe was sent; the zero time if none.
func lastSeen(a *identity) time.Time {
	if len(a.seen) == 0 {
		return time.Time{}
	}
	return a.seen[len(a.seen)-1].sent
}
