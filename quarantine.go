package redlock

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock/driver"
	"github.com/quorumlock/redlock/observe"
)

// This file holds every quarantine rule of the client: how long a node
// must have run to vote, what the client learns of the TTLs in use, and
// how each round's answers update what it knows of its nodes' health.

// youngHorizon is the age under which a node's grant is counted only after
// the client has heard every node since the node started (see ballot).
const youngHorizon = time.Hour

// A ballot judges the answers of an acquisition round collected so far,
// as the quarantine wants (see Client.ballot): it turns the grants that do
// not count into Quarantined, and reports whether the round must wait for
// more answers even with a quorum. The zero ballot, without quarantine,
// judges nothing. It is a value rather than a closure over q and heardAll:
// every acquisition round makes one, and a closure would be an allocation
// each time.
type ballot struct {
	q        time.Duration // the quarantine; 0: none
	heardAll time.Time     // when the client last heard every node, before the round
}

// ballot returns how an acquisition round under the quarantine q counts
// its grants (see round.collect); the zero ballot when q is 0, without
// quarantine.
//
// A grant counts only from a node whose process has run for at least q,
// or for the largest TTL any node of the round reports if that is longer;
// other grants become Quarantined. The bar comes from what the client has
// heard, and a node that restarted knows nothing of the locks granted
// before: only the other nodes do. So a quorum that leans on a young node
// (one that started less than youngHorizon ago) is trusted at once only
// if the client heard every node after that node started, which put every
// TTL recorded before its restart into the bar; otherwise the round waits
// for every answer or the deadline, since the node that knows of a long
// lock may be the slowest. Call ballot before the round is sent: what the
// client has heard is what it heard before the round.
func (c *Client) ballot(q time.Duration) ballot {
	return quarantineBallot(q, c.lastHeardAll())
}

// quarantineBallot is the ballot of a round under the quarantine q, of a
// client that last heard every node in a round that started at heardAll.
func quarantineBallot(q time.Duration, heardAll time.Time) ballot {
	return ballot{q: q, heardAll: heardAll}
}

// judge applies the ballot to the answers of r collected so far, and
// reports whether r must wait for more answers though a quorum agrees.
func (b ballot) judge(r *round) (wait bool) {
	if b.q == 0 {
		return false
	}
	r.quarantine(max(b.q, r.maxTTL()))
	return r.leansOnUnheard(max(youngHorizon, b.q), b.heardAll)
}

// leansOnUnheard reports whether a grant came from a node younger than
// horizon that may have started after heardAll, when the client last
// heard every node; zero if it never did.
func (r *round) leansOnUnheard(horizon time.Duration, heardAll time.Time) bool {
	for i, res := range r.results {
		age := r.decoded[i].Age
		if res.Outcome != observe.OutcomeOK || age >= horizon {
			continue
		}
		// The node read its clock between the round's start and its
		// answer, and reports its age cut to the millisecond: it started
		// no later than this.
		started := r.start.Add(res.Latency - age + time.Millisecond)
		if heardAll.IsZero() || !heardAll.After(started) {
			return true
		}
	}
	return false
}

// quarantine turns the grants of nodes younger than q into Quarantined.
func (r *round) quarantine(q time.Duration) {
	for i := range r.results {
		if res, age := &r.results[i], r.decoded[i].Age; res.Outcome == observe.OutcomeOK && age < q {
			res.Outcome, res.TTL = observe.OutcomeQuarantined, q-age
		}
	}
}

// maxTTL returns the largest TTL that any node reported recording.
func (r *round) maxTTL() time.Duration {
	var m time.Duration
	for _, d := range r.decoded {
		m = max(m, d.MaxTTL)
	}
	return m
}

// quarantineFor returns how long a node must have run to vote for a lock
// with the given TTL; 0 when quarantine is disabled.
func (c *Client) quarantineFor(ttl time.Duration) time.Duration {
	if c.opts.DisableQuarantine {
		return 0
	}
	return max(c.opts.Quarantine, c.learned.max(time.Now()), ttl)
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
	c.learn(r.maxTTL()) // covers the TTL of a grant: every acquire reply reports at least its own TTL
	if all := r.pending == 0; all {
		for _, d := range r.decoded {
			all = all && d.Age >= 0
		}
		if all {
			c.heardAllAt(r.start)
		}
	}
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
		case res.Outcome == observe.OutcomeRefused:
			st.Health, st.Err, st.Until = observe.NodeRefusing, res.Err, time.Time{}
		case res.Outcome == observe.OutcomeFailed && answered(res.Err):
			st.Health, st.Err, st.Until = observe.NodeBusy, res.Err, time.Time{}
		case res.Outcome == observe.OutcomeFailed || res.Outcome == observe.OutcomeNoAnswer:
			st.Health, st.Err, st.Until = observe.NodeUnreachable, res.Err, time.Time{}
		case res.Outcome == observe.OutcomeQuarantined:
			st.Health, st.Err, st.Until = observe.NodeQuarantined, nil, now.Add(res.TTL)
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

// logQuarantine tells the log, at Info level, that a node has just gone
// into quarantine (see heard: once per node and quarantine, not once per
// round). Without it the first lock on fresh servers waits a TTL and says
// nothing.
func (c *Client) logQuarantine(ctx context.Context, st observe.NodeState, now time.Time) {
	c.log.LogAttrs(ctx, slog.LevelInfo, "redlock: node sits out its quarantine after a restart or a promotion; rounds that need its vote wait",
		slog.String("node", st.Node),
		slog.Duration("for", st.Until.Sub(now).Round(time.Millisecond)),
		slog.String("hint", "set Options.DisableQuarantine (redlock --no-quarantine) only for test servers, or for servers that keep their keys across restarts"))
}
