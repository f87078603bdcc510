package redlock

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/quorumlock/redlock/driver"
	"github.com/quorumlock/redlock/internal/mutant"
	"github.com/quorumlock/redlock/observe"
)

// This file holds the quarantine's bar (how long a node must have run to
// vote), and what the client learns from a round's answers: the TTLs in
// use, which nodes it heard in each hash slot, and its nodes' health. How
// the bar judges a round's grants is in round.go, with every other rule of
// the count.

// quarantineFor returns how long a node must have run to vote for a lock
// with the given TTL; 0 when quarantine is disabled.
func (c *Client) quarantineFor(ttl time.Duration) time.Duration {
	if c.opts.DisableQuarantine {
		return 0
	}
	return max(c.opts.Quarantine, c.learned.max(time.Now()), ttl)
}

// learn records a TTL that some client used on the nodes.
func (c *Client) learn(ttl time.Duration) {
	if ttl > 0 {
		c.learned.add(ttl, time.Now())
	}
}

// learning remembers the TTLs a client has seen in use, each only while a
// lock taken with it may still be held: a TTL seen at t weighs on the
// quarantine until t + TTL. Past that, every lock it was used for has
// expired or was extended (and an extension is seen again), so a restart
// cannot have lost one. Its largest live TTL is the learned quarantine.
//
// It keeps the TTLs that some later-ending TTL does not outweigh: sorted
// by TTL, longest first, and so by end, earliest first. Programs use a few
// TTLs, so the list stays short; past maxWeights the two shortest TTLs are
// merged into one weight of the longer TTL and the later end, which only
// ever lengthens the bar.
type learning struct {
	mu      sync.Mutex
	weights []weight
}

// A weight is a TTL seen in use, and when a lock taken with it ends.
type weight struct {
	ttl   time.Duration
	until time.Time
}

// maxWeights bounds the TTLs a learning keeps apart.
const maxWeights = 8

// add records ttl, seen at now.
func (l *learning) add(ttl time.Duration, now time.Time) {
	w := weight{ttl, now.Add(ttl)}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.drop(now)
	for _, o := range l.weights {
		if o.ttl >= w.ttl && !o.until.Before(w.until) {
			return // outweighed
		}
	}
	kept := l.weights[:0]
	for _, o := range l.weights {
		if o.ttl > w.ttl || o.until.After(w.until) {
			kept = append(kept, o)
		}
	}
	i := 0
	for i < len(kept) && kept[i].ttl > w.ttl {
		i++
	}
	l.weights = slices.Insert(kept, i, w)
	if n := len(l.weights); n > maxWeights {
		l.weights[n-2].until = l.weights[n-1].until
		l.weights = l.weights[:n-1]
	}
}

// max returns the longest TTL that still weighs at now; 0 if none.
func (l *learning) max(now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.drop(now)
	if len(l.weights) == 0 {
		return 0
	}
	return l.weights[0].ttl
}

// drop forgets the weights that have ended by now: the first ones, as the
// ends rise along the list.
func (l *learning) drop(now time.Time) {
	i := 0
	for i < len(l.weights) && !now.Before(l.weights[i].until) {
		i++
	}
	if i > 0 {
		l.weights = slices.Delete(l.weights, 0, i)
	}
}

// answered reports whether err is the node's own error reply, rather than
// a failure to hear from the node.
func answered(err error) bool {
	var reply *driver.ReplyError
	return errors.As(err, &reply)
}

// noteHealth records each node's health as the answers to r show it,
// judged against quarantine (0: the learned one). A node whose answer was
// not waited for keeps its previous state. The Observer is told of every
// change.
func (c *Client) noteHealth(ctx context.Context, r *round, quarantine time.Duration) {
	if quarantine == 0 {
		quarantine = c.quarantineFor(0)
	}
	now := time.Now()
	var changed []observe.NodeEvent
	var held []observe.NodeState // nodes gone into a quarantine not logged yet
	c.mu.Lock()
	defer func() {
		c.mu.Unlock()
		for _, e := range changed {
			c.hooks.event(ctx, e)
			c.logHealth(ctx, e)
		}
		for _, st := range held {
			c.logQuarantine(ctx, st, now)
		}
	}()
	for i, res := range r.results {
		st := &c.states[i]
		was := st.Health
		switch {
		case res.Outcome == observe.OutcomeNoAnswer && res.Err == nil:
			continue
		case errors.Is(res.Err, errUnidentified):
			continue // it answered; whether it counts is not its health
		case res.Outcome == observe.OutcomeRefused:
			st.Health, st.Err, st.Until = observe.NodeRefusing, res.Err, time.Time{}
		case res.Outcome == observe.OutcomeFailed && answered(res.Err):
			st.Health, st.Err, st.Until = observe.NodeBusy, res.Err, time.Time{}
		case res.Outcome == observe.OutcomeFailed || res.Outcome == observe.OutcomeNoAnswer:
			st.Health, st.Err, st.Until = observe.NodeUnreachable, res.Err, time.Time{}
		case res.Outcome == observe.OutcomeQuarantined:
			st.Health, st.Err, st.Until = observe.NodeQuarantined, res.Err, now.Add(res.TTL)
		case r.decoded[i].Age >= 0 && r.decoded[i].Age < quarantine:
			st.Health, st.Err, st.Until = observe.NodeQuarantined, nil, now.Add(quarantine-r.decoded[i].Age)
		default:
			st.Health, st.Err, st.Until = observe.NodeHealthy, nil, time.Time{}
		}
		st.Seen = now
		if st.Health != was {
			changed = append(changed, observe.NodeEvent{Previous: was, State: *st})
		}
		// Once per quarantine: a node judged against the TTLs of several
		// locks may go in and out of it; what was logged lasts until the
		// end it gave.
		if st.Health == observe.NodeQuarantined && was != observe.NodeQuarantined && !now.Before(c.quarantineLogged[i]) {
			c.quarantineLogged[i] = st.Until
			held = append(held, *st)
		}
	}
}

// logHealth tells the log, at Warn level, of a node that stopped
// answering, answers again, or refuses for good, with why: once per
// change, not once per round.
func (c *Client) logHealth(ctx context.Context, e observe.NodeEvent) {
	switch {
	case e.State.Health == observe.NodeUnreachable:
		c.log.LogAttrs(ctx, slog.LevelWarn, "redlock: node stopped answering; rounds go on without it while a quorum answers",
			slog.String("node", e.State.Node), slog.Any("err", e.State.Err))
	case e.State.Health == observe.NodeRefusing:
		c.log.LogAttrs(ctx, slog.LevelWarn, "redlock: node refuses every request, and will until it is fixed; rounds go on without it while a quorum answers",
			slog.String("node", e.State.Node), slog.Any("err", e.State.Err))
	case e.Previous == observe.NodeUnreachable || e.Previous == observe.NodeRefusing:
		c.log.LogAttrs(ctx, slog.LevelWarn, "redlock: node answers again",
			slog.String("node", e.State.Node), slog.String("state", e.State.Health.String()))
	}
}

// logQuarantine tells the log, at Info level, that a node has just gone
// into quarantine (see heard: once per node and quarantine, not once per
// round). Without it the first lock on fresh servers waits a TTL and says
// nothing.
func (c *Client) logQuarantine(ctx context.Context, st observe.NodeState, now time.Time) {
	attrs := []slog.Attr{slog.String("node", st.Node), slog.Duration("for", st.Until.Sub(now).Round(time.Millisecond))}
	if st.Err != nil {
		attrs = append(attrs, slog.Any("or_until", st.Err))
	}
	attrs = append(attrs, slog.String("hint", "set Options.DisableQuarantine (redlock --no-quarantine) only for test servers, or for servers that keep their keys across restarts"))
	c.log.LogAttrs(ctx, slog.LevelInfo, "redlock: node sits out its quarantine after a restart or a promotion; rounds that need its vote wait", attrs...)
}

// heard records what a round that reports on the nodes (an acquisition,
// a probe) showed of them: the TTLs in use, which nodes were heard in the
// round's slots, and each node's health, judged against quarantine (0 for
// a probe: the learned one). It probes again the nodes whose server may
// have changed (see tally.judge). A node whose answer was not waited for
// keeps its previous state. The Observer is told of every change.
func (c *Client) heard(ctx context.Context, r *round, t *tally) {
	c.learn(r.maxTTL()) // covers the TTL of a grant: every acquire reply reports at least its own TTL
	c.hearing.record(t.slots, r)
	for _, i := range t.stale { // probed again at the next round (see identify)
		c.ids.asked[i].Store(true)
		c.ids.any.Store(true)
	}
	c.noteHealth(ctx, r, t.q)
}

// hearing is what a client heard of its nodes, per cluster hash slot: for
// each slot and node, the start of the latest round in which the node
// reported the TTLs of the slot. A node that restarted lost its locks;
// the TTLs they had are known only to the nodes that kept them, and only
// for their slot.
type hearing struct {
	mu    sync.Mutex
	born  time.Time
	n     int
	slots map[uint16][]int64 // 1 + nanoseconds from born; 0: never
}

// maxHeardSlots bounds the slots a hearing keeps. Past it, one is
// forgotten for each new one: a slot forgotten is one whose young nodes
// wait for every answer again, which is safe.
const maxHeardSlots = 4096

// allSlots is the one slot of every key, for the mutant that hears all
// slots at once.
const allSlots = 1 << 15

// each returns, for each node, the start of the latest round after which
// the node reported in every one of slots; the zero time for a node that
// has not.
func (h *hearing) each(slots []uint16) []time.Time {
	if mutant.On("hearing-all-slots") {
		slots = []uint16{allSlots}
	}
	out := make([]time.Time, h.n)
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range out {
		var least int64
		for k, s := range slots {
			at := h.slots[s]
			if at == nil || at[i] == 0 {
				least = 0
				break
			}
			if k == 0 || at[i] < least {
				least = at[i]
			}
		}
		if least > 0 {
			out[i] = h.born.Add(time.Duration(least - 1))
		}
	}
	return out
}

// record records that the nodes of r that reported did so in each of
// slots, in a round that started at r.start.
func (h *hearing) record(slots []uint16, r *round) {
	if len(slots) == 0 {
		return
	}
	if mutant.On("hearing-all-slots") {
		slots = []uint16{allSlots}
	}
	at := int64(r.start.Sub(h.born)) + 1
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range slots {
		nodes := h.slots[s]
		if nodes == nil {
			if len(h.slots) >= maxHeardSlots {
				for old := range h.slots {
					delete(h.slots, old)
					break
				}
			}
			nodes = make([]int64, h.n)
			h.slots[s] = nodes
		}
		for i := range nodes {
			if r.decoded[i].Age >= 0 && at > nodes[i] {
				nodes[i] = at
			}
		}
	}
}
