package redlock

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/quorumlock/redlock/internal/clientx"
	"github.com/quorumlock/redlock/internal/mutant"
	"github.com/quorumlock/redlock/internal/wire"
	"github.com/quorumlock/redlock/observe"
)

// This file decides every vote. A round's answers are collected here, and
// one type, the tally, judges them as they come in, for any round of any
// operation (an acquisition, an extension, a release, an adoption, a
// read): which answers count, and, when the round fails, why. Three rules
// make an answer count:
//
//   - one server, one vote: a node whose server is not known to be apart
//     from every other counting node's does not count (identity.go learns
//     the servers; a grant that reports a start later than its node's
//     probe saw is from a server that may have changed, and is probed
//     again);
//   - the quarantine, for grants: a node younger than the bar (the
//     largest of the quarantine asked for and every TTL reported in the
//     round's hash slots) does not vote; and a node that restarted within
//     the hour votes at once only when the client has heard every node in
//     the round's slots since it started: until then the round waits for
//     every answer, since the node that knows of a long lock may be the
//     slowest (see SAFETY.md, "Restarts, per hash slot");
//   - the quorum: at least N/2+1 nodes that count agree, for one slot of a
//     semaphore.
//
// The fan-out of the requests is in round.go; the quarantine's bar, what
// the client learns of TTLs and how it logs a node's health are in
// quarantine.go.

// A tally judges the answers of one round; Client.tally makes it.
type tally struct {
	quorum int
	voters *voters // which nodes count (identity.go)
	// For a round that grants: the quarantine asked for (0: none), and
	// what makes a young node's grant count at once: Options.Quarantine
	// set (floor), or every node heard in the round's slots after the
	// node started (heard; zero if never).
	q     time.Duration
	floor bool
	heard time.Time
	slots []uint16 // the cluster hash slots of the round's keys
	stale []int    // nodes whose grants say their server may have changed
}

// tally returns the tally of a round of the client. With grant, the round
// grants the keys of ks under the quarantine q (0: none).
func (c *Client) tally(ks *keyset, q time.Duration) tally {
	t := tally{quorum: c.quorum, voters: c.ids.voters.Load(), q: q, floor: c.opts.Quarantine > 0}
	if ks != nil {
		t.slots = ks.slots
		if q > 0 && !t.floor {
			t.heard = c.hearing.since(t.slots)
		}
	}
	return t
}

// youngHorizon is the age under which a node's grant counts at once only
// if the client has heard every node in the round's slots since the node
// started: the longest TTL a lock may have by default (Options.MaxTTL).
const youngHorizon = time.Hour

// judge applies the tally to the answers of r collected so far, and
// reports whether r must wait for more answers though a quorum agrees.
func (t *tally) judge(r *round) (wait bool) {
	v := t.voters
	var bar, young time.Duration
	if t.q > 0 {
		bar, young = max(t.q, r.maxTTL()), max(youngHorizon, t.q)
	}
	for i := range r.results {
		res, age := &r.results[i], r.decoded[i].Age
		switch {
		case res.Outcome == observe.OutcomeNoAnswer || res.Outcome == observe.OutcomeFailed || res.Outcome == observe.OutcomeRefused:
			continue // counts for nothing, and says why itself
		case !v.all && !v.counts[i]:
			res.Outcome, res.Err = observe.OutcomeFailed, v.why[i]
			if v.why[i] != errUnidentified {
				res.Outcome = observe.OutcomeRefused
			}
			continue
		case t.slots == nil || age < 0:
			continue // not a grant: it reports no age
		}
		if t.changed(r, i) && !slices.Contains(t.stale, i) {
			// Probed again after the round; the answer counts as the
			// identity known before it says.
			t.stale = append(t.stale, i)
		}
		switch {
		case res.Outcome != observe.OutcomeOK || t.q == 0:
			continue
		case age < bar:
			res.Outcome, res.TTL = observe.OutcomeQuarantined, bar-age
			continue
		}
		// The node read its clock between the round's start and its
		// answer, and reports its age cut to the millisecond: it started
		// no later than this.
		started := r.start.Add(res.Latency - age + time.Millisecond)
		if !t.floor && age < young && (t.heard.IsZero() || !t.heard.After(started)) {
			wait = true
		}
	}
	return wait
}

// changed reports whether the answer of node i to r says that its
// process started later than the process its probe saw could have: a
// restart or a failover since, which may have put another server behind
// the node, or another process answering for it.
func (t *tally) changed(r *round, i int) bool {
	if mutant.On("identity-once") || i >= len(t.voters.limit) {
		return false
	}
	return r.start.Add(-r.decoded[i].Age).After(t.voters.limit[i])
}

// collect gathers answers until the round is decided: it returns true as
// soon as a quorum of the nodes that count agree and the tally does not
// ask to wait, and false as soon as a quorum is out of reach or the
// round's deadline has passed. At the deadline the answers in are judged
// as they are.
func (r *round) collect(t *tally) bool {
	for r.pending > 0 && r.next() {
		wait := t.judge(r)
		if r.agreed(t.quorum) && !wait {
			return true
		}
		if best, _ := r.votes(); best+r.pending < t.quorum {
			return false
		}
	}
	t.judge(r)
	return r.agreed(t.quorum)
}

// agreed is the quorum rule: it reports whether at least quorum nodes
// granted, for one slot (see votes).
func (r *round) agreed(quorum int) bool {
	best, _ := r.votes()
	return best >= quorum
}

// votes returns the most grants that one slot got so far, and that slot.
// A lock has one slot, 0; a semaphore's nodes may grant different ones.
func (r *round) votes() (best, slot int) {
	for i, res := range r.results {
		if res.Outcome != observe.OutcomeOK {
			continue
		}
		s, n := r.decoded[i].Slot, 0
		for j := range r.results {
			if r.results[j].Outcome == observe.OutcomeOK && r.decoded[j].Slot == s {
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
		if res.Outcome == observe.OutcomeOK && r.decoded[i].Slot == slot {
			f = max(f, res.Fence)
		}
	}
	return f
}

// covering returns the nodes, as a bitmask of the first 64, that granted
// with a fence of at least fence.
func (r *round) covering(fence int64) uint64 {
	var m uint64
	for i, res := range r.results[:min(len(r.results), 64)] {
		if res.Outcome == observe.OutcomeOK && res.Fence >= fence {
			m |= 1 << i
		}
	}
	return m
}

// holders tallies the holders that the nodes that count reported
// (Reply.Holder): each holder's ID, with the nodes that hold for it.
func (r *round) holders() map[string][]int {
	holding := map[string][]int{}
	for i, res := range r.results {
		if id := r.decoded[i].Holder; res.Outcome == observe.OutcomeOK && id != "" {
			holding[id] = append(holding[id], i)
		}
	}
	return holding
}

// held returns the holder that a quorum of the nodes of a read round hold
// a key for, with those nodes; "" when none does.
func (r *round) held() (id string, nodes []int) {
	for id, nodes := range r.holders() {
		if len(nodes) >= r.c.quorum {
			return id, nodes
		}
	}
	return "", nil
}

// ends returns when fewer than a quorum of nodes will hold what each of
// ttls is held for on one node: the quorum-th longest, from the round's
// start. It sorts ttls.
func (r *round) ends(ttls []time.Duration) time.Time {
	return r.start.Add(quorumTTL(ttls, r.c.quorum))
}

// holdings returns what a quorum of the nodes that count hold for the key
// that the inspect round r read, and, under the quarantine q (0: none),
// how long each node still sits out for the key's slot.
func (r *round) holdings(q time.Duration) clientx.Verdict {
	var v clientx.Verdict
	if id, nodes := r.held(); id != "" {
		ttls := make([]time.Duration, len(nodes))
		for k, i := range nodes {
			ttls[k] = r.decoded[i].TTL
			v.Owner = r.decoded[i].Owner
		}
		v.Holder, v.HeldOn, v.Ends = id, len(nodes), r.ends(ttls)
	}
	readers := map[string][]time.Duration{}
	var order []string
	owners := map[string]string{}
	for i, res := range r.results {
		if res.Outcome != observe.OutcomeOK || r.decoded[i].RW == nil {
			continue
		}
		for _, rv := range r.decoded[i].RW.Readers {
			if _, seen := readers[rv.ID]; !seen {
				order = append(order, rv.ID)
			}
			readers[rv.ID] = append(readers[rv.ID], rv.TTL)
			owners[rv.ID] = rv.Owner
		}
	}
	for _, id := range order {
		if ttls := readers[id]; len(ttls) >= r.c.quorum {
			v.Readers = append(v.Readers, clientx.Reader{ID: id, Owner: owners[id], Ends: r.ends(ttls)})
		}
	}
	slices.SortFunc(v.Readers, func(a, b clientx.Reader) int { return a.Ends.Compare(b.Ends) })
	v.SitsOut = make([]time.Duration, len(r.results))
	if q > 0 {
		bar := max(q, r.maxTTL())
		for i, d := range r.decoded {
			if r.results[i].Outcome == observe.OutcomeOK && d.Age >= 0 && d.Age < bar {
				v.SitsOut[i] = bar - d.Age
			}
		}
	}
	return v
}

// quorumTTL returns the time left on the quorum-th longest of ttls, the
// TTLs of the nodes that hold something: when fewer than quorum of them
// will hold it. It sorts ttls; with fewer than quorum of them, it returns
// 0.
func quorumTTL(ttls []time.Duration, quorum int) time.Duration {
	if len(ttls) < quorum || quorum <= 0 {
		return 0
	}
	slices.Sort(ttls)
	return ttls[len(ttls)-quorum]
}

// decide records the round's verdict, when it was reached, and for an
// Observer the answers as they stood then.
func (r *round) decide(ok bool) {
	r.ok, r.took = ok, time.Since(r.start)
	if r.observe {
		r.verdict = append([]observe.NodeResult(nil), r.results...)
	}
}

// count returns how many nodes had the outcome o.
func (r *round) count(o observe.Outcome) int {
	n := 0
	for _, res := range r.results {
		if res.Outcome == o {
			n++
		}
	}
	return n
}

// replied returns how many nodes that count answered the round with what
// they hold: OK, Taken or Absent.
func (r *round) replied() int {
	return r.count(observe.OutcomeOK) + r.count(observe.OutcomeTaken) + r.count(observe.OutcomeAbsent)
}

// maxFence returns the largest fence that any node gave.
func (r *round) maxFence() int64 {
	var f int64
	for _, d := range r.decoded {
		f = max(f, d.Fence)
	}
	return f
}

// maxTTL returns the largest TTL that any node reported recording.
func (r *round) maxTTL() time.Duration {
	var m time.Duration
	for _, d := range r.decoded {
		m = max(m, d.MaxTTL)
	}
	return m
}

// What a failed round was, for its reason (see why).
type failure struct {
	op   string // the operation, as OpError.Op names it
	late bool   // a quorum agreed, but the lock had ended by then (or Release came after the deadline)
	past bool   // the lock's deadline had passed by the end of the round
}

// why returns why the round failed, the one chain of reasons of every
// operation:
//   - ErrExpired when a quorum agreed too late;
//   - ErrTaken when a quorum answered an acquisition, but too many hold
//     another token; and for an adoption, when some hold another token;
//   - ErrLockLost when, for an extension or a release, too many nodes no
//     longer hold the token for a quorum to; or, for an adoption that a
//     quorum answered, too few hold it;
//   - ErrExpired when the lock's deadline passed meanwhile;
//   - ErrRefused when so many nodes refused that no quorum could agree;
//   - ErrNoQuorum when too few nodes answered.
func (r *round) why(f failure) error {
	quorum := r.c.quorum
	ok, taken := r.count(observe.OutcomeOK), r.count(observe.OutcomeTaken)
	switch {
	case f.late:
		return ErrExpired
	case f.op == "acquire" && ok+taken >= quorum:
		return ErrTaken
	case f.op == "adopt" && taken > 0 && ok+taken >= quorum:
		return ErrTaken
	case f.op == "adopt" && r.replied() >= quorum:
		return ErrLockLost
	case (f.op == "extend" || f.op == "release") && r.lostQuorum():
		return ErrLockLost
	case f.past:
		return ErrExpired
	case r.refusedQuorum():
		return ErrRefused
	}
	return ErrNoQuorum
}

// refusedQuorum reports whether so many nodes refused the round that no
// quorum could have agreed: more than N − quorum.
func (r *round) refusedQuorum() bool {
	return r.count(observe.OutcomeRefused) > len(r.results)-r.c.quorum
}

// lostQuorum reports whether so many nodes no longer hold the lock's
// token (taken over, or absent) that no quorum holds it.
func (r *round) lostQuorum() bool {
	return r.count(observe.OutcomeTaken)+r.count(observe.OutcomeAbsent) > len(r.results)-r.c.quorum
}

// opError returns the *OpError of op on key, decided by this one round,
// wrapping err.
func (r *round) opError(op, key string, err error) *OpError {
	return &OpError{Op: op, Key: key, Quorum: r.c.quorum, Rounds: 1, Nodes: r.results, Err: err}
}

// drain waits until every request has returned or the round's deadline
// has passed, and records the answers. Nodes that did not answer keep the
// outcome NoAnswer.
func (r *round) drain() {
	for r.pending > 0 {
		if !r.next() {
			for i := range r.results {
				if r.results[i].Outcome == observe.OutcomeNoAnswer && r.results[i].Err == nil {
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
	case i := <-r.answered:
		r.record(&r.reqs[i])
		return true
	case <-r.expired:
		for {
			select {
			case i := <-r.answered:
				r.record(&r.reqs[i])
			default:
				return false
			}
		}
	}
}

// record records the answer to q, which has returned.
func (r *round) record(q *request) {
	r.pending--
	res := &r.results[q.node]
	res.Latency = q.latency
	if q.err != nil {
		res.Outcome, res.Err = observe.OutcomeFailed, q.err
		if refused(q.err) {
			res.Outcome = observe.OutcomeRefused
		}
		return
	}
	d := r.call.Decode(q.val)
	res.Outcome, res.TTL, res.Fence, res.Err = observe.Outcome(d.Status), d.TTL, d.Fence, d.Err
	if q.retry && res.Outcome == observe.OutcomeAbsent {
		// The failed try may have deleted the key itself.
		res.Outcome = observe.OutcomeOK
	}
	if d.Status != wire.Failed {
		r.decoded[q.node] = d
	}
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
	c.reidentify(t.stale)
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

// since returns the start of the latest round after which every node
// reported in each of slots; the zero time if some node has not.
func (h *hearing) since(slots []uint16) time.Time {
	if mutant.On("hearing-all-slots") {
		slots = []uint16{allSlots}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var least int64
	for k, s := range slots {
		at := h.slots[s]
		if at == nil {
			return time.Time{}
		}
		for i, t := range at {
			if t == 0 {
				return time.Time{}
			}
			if k == 0 && i == 0 || t < least {
				least = t
			}
		}
	}
	if least == 0 {
		return time.Time{}
	}
	return h.born.Add(time.Duration(least - 1))
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
