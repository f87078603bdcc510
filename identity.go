package redlock

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock/internal/wire"
)

// This file holds the rule "one server, one vote": two of a client's
// nodes that are the same Redis server (the same run_id: two databases of
// one server, two names of one host, two entries for one cluster) must
// never both count toward a quorum. New cannot tell, since it sends
// nothing; the client learns each node's run_id once, with the probe
// script, at the first round that meets the node.

// identities is what a client knows of which server each node is.
type identities struct {
	all   atomic.Bool   // every node's server is known: nothing more to do
	first chan struct{} // closed once the first identification has ended

	mu     sync.Mutex
	tried  bool     // the first identification has begun
	known  []bool   // whether the node has answered the probe
	flying []bool   // a probe of the node is on its way
	ids    []string // each known node's run_id; "" if it did not tell
	err    error    // two nodes are one server: every acquisition fails with it
}

func newIdentities(n int) identities {
	return identities{first: make(chan struct{}), known: make([]bool, n), flying: make([]bool, n), ids: make([]string, n)}
}

// identify returns an error wrapping ErrInvalid, naming both, if two of
// the client's nodes are one server. Once every node has answered the
// probe it costs an atomic load.
//
// The first call probes every node, bounded by timeout, and every call
// waits for it (see firstIdentification). Later calls send the probe, in the background, to the
// nodes still unknown (those that did not answer, usually because they
// are down), one probe per node at a time, and return at once: a node
// that stays down does not slow every round. Until a node is known its
// grants do not count (see unidentified). A server that does not tell
// its run_id (INFO denied, or an error reply to the probe) cannot be
// compared, and counts as distinct.
func (c *Client) identify(ctx context.Context, timeout time.Duration) error {
	ids := &c.ids
	if ids.all.Load() {
		return nil
	}
	ids.mu.Lock()
	first := !ids.tried
	ids.tried = true
	var probe []int
	for i := range c.nodes {
		if !ids.known[i] && !ids.flying[i] && ids.err == nil {
			ids.flying[i] = true
			probe = append(probe, i)
		}
	}
	ids.mu.Unlock()
	if first {
		// A first probe opens the connection (a dial, perhaps a TLS
		// handshake), which can take longer than a round's node timeout.
		c.firstIdentification(ctx, probe, max(timeout, time.Second))
		close(ids.first)
	} else {
		for _, i := range probe {
			c.flying.add(1) // Close waits for it
			go func() {
				defer c.flying.done()
				pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
				defer cancel()
				c.probeID(pctx, i)
			}()
		}
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

// firstIdentification probes the nodes of probe at once and waits for
// their answers, bounded by timeout; but once a quorum of nodes is known
// it waits for the others only as long again as that took (at least
// graceMin): a node that is slow or down does not hold up the first lock
// by a node timeout, as it holds up no round. The probes left go on in
// the background (Close waits for them); until a node is known its grants
// do not count.
func (c *Client) firstIdentification(ctx context.Context, probe []int, timeout time.Duration) {
	const graceMin = 10 * time.Millisecond
	start := time.Now()
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	answered := make(chan struct{}, len(probe))
	var left sync.WaitGroup
	left.Add(len(probe))
	for _, i := range probe {
		c.flying.add(1) // Close waits for it
		go func() {
			defer c.flying.done()
			defer left.Done()
			c.probeID(pctx, i)
			answered <- struct{}{}
		}()
	}
	go func() {
		left.Wait()
		cancel()
	}()
	var grace <-chan time.Time
	for range probe {
		select {
		case <-answered:
		case <-pctx.Done():
			return
		case <-grace:
			return
		case <-ctx.Done():
			return
		}
		if grace == nil && c.ids.count() >= c.quorum {
			grace = time.After(max(time.Since(start), graceMin))
		}
	}
}

// count returns how many nodes are known.
func (ids *identities) count() int {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	n := 0
	for _, k := range ids.known {
		if k {
			n++
		}
	}
	return n
}

// probeID asks node i for its server's run_id and records the answer.
func (c *Client) probeID(ctx context.Context, i int) {
	call := wire.Probe()
	v, err := c.nodes[i].Eval(ctx, call.Script, call.Keys, call.Args)
	ids := &c.ids
	ids.mu.Lock()
	defer ids.mu.Unlock()
	ids.flying[i] = false
	if err != nil && !answered(err) {
		return // not heard: asked again at the next round
	}
	// A node that answered with an error, or with a reply the probe
	// cannot have given, is a server that cannot tell its run_id: it is
	// taken as one of its own, rather than never let vote.
	id := ""
	if err == nil {
		if d := call.Decode(v); d.Status == wire.OK {
			id = d.ServerID
		}
	}
	ids.known[i], ids.ids[i] = true, id
	for j, other := range ids.ids {
		if j != i && id != "" && other == id && ids.err == nil {
			a, b := min(i, j), max(i, j)
			ids.err = invalidf("nodes %q and %q are the same Redis server (run_id %s): one server would vote twice; give each server once", c.nodes[a].Name(), c.nodes[b].Name(), id)
		}
	}
	if ids.err == nil && !slices.Contains(ids.known, false) {
		ids.all.Store(true)
	}
}

// unidentified returns, for each node, whether the client does not know
// its server yet; nil once it knows every node's. Such a node may be
// another node's server, so its vote cannot count until the probe has
// told (see round.void).
func (c *Client) unidentified() []bool {
	ids := &c.ids
	if ids.all.Load() {
		return nil
	}
	ids.mu.Lock()
	defer ids.mu.Unlock()
	unknown := make([]bool, len(ids.known))
	for i, k := range ids.known {
		unknown[i] = !k
	}
	return unknown
}
