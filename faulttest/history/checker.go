package history

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// A Kind is a kind of violation.
type Kind string

// The violations Check finds.
const (
	// Overlap: two acquisitions of one key, with different tokens, whose
	// holding intervals overlap. An acquisition holds from its Return to
	// the end of validity it claims (moved by each successful extension
	// from that extension's return on), cut short by the call of Release,
	// by an extension that reported the lock lost, or by the call of an
	// operator's removal that deleted its key and was confirmed by a
	// quorum (see Removal): from then on the operator has taken the lock
	// away, and exclusion against the removed holder rests on the fence.
	Overlap Kind = "overlap"
	// Quorum: a sample of a held lock, taken within its claimed validity,
	// found more than N−quorum nodes that answered and do not hold the
	// lock's token until the claimed end. Nodes that were killed or
	// restarted since the call started are not counted: losing keys to a
	// crash is what restart quarantine is for.
	Quorum Kind = "quorum"
	// Fence: an acquisition whose fence is not greater than the fence of
	// every acquisition of the same key that returned before it. For the
	// holds of a read-write lock: a writer's fence must be above every
	// earlier hold's, readers' included; a reader's (OpRead) need only be
	// at least every earlier writer's (or lock's), since readers share
	// the key's floor. An adoption (Op.Adopts) continues the adopted
	// hold: its fence must be at least that hold's, and later holds are
	// judged against it as against any earlier hold.
	Fence Kind = "fence"
	// Stale: a write to the fenced resource, accepted from an acquisition
	// that an operator removed, made after the removal and after an
	// acquisition of the same key that returned since the removal had
	// written (accepted or not). The resource had seen the newer holder's
	// fence, so it accepted the removed holder's only because that fence
	// was not below the newer one. A removed holder's writes before any
	// newer holder wrote are not judged: the resource knows of no newer
	// fence yet. RemovedWrites counts the removed holders' writes.
	Stale Kind = "stale"
	// Leftover: after a call returned, a node still held the token of one
	// of its failed rounds. Not counted are late grants (see LateGrants)
	// and nodes that could otherwise have received a command after its
	// clean-up: those with a process or link fault injected or healed
	// while the call ran, or paused when it started.
	Leftover Kind = "leftover"
	// Quiescence: a lock key still on a node once the run was over, every
	// fault healed and every TTL passed.
	Quiescence Kind = "quiescence"

	// Permits: more permits of one semaphore held at one instant than it
	// has (Op.Permits), or two permits, with different tokens, held on
	// one slot at one instant. Permits are held as locks are (see
	// Overlap), each on the lock key of its slot.
	Permits Kind = "permits"
	// Leaders: two leaderships of one election, with different tokens,
	// held at one instant: Overlap for leaderships, each held from the
	// return of Campaign to the end of validity it claims, moved by its
	// automatic renewals and cut at Resign or at a renewal that found it
	// lost.
	Leaders Kind = "leaders"
	// Term: a leadership whose term is not above the term of every
	// leadership of the same election that returned before it: Fence for
	// leaderships.
	Term Kind = "term"
	// Partial: a read, within the claimed validity of a lock on several
	// keys (LockAll), of all its keys on one node at one instant found
	// some of them holding the lock's token and others not. A node takes
	// the keys of a LockAll together or not at all. The keys of a LockAll
	// are judged one by one as keys of Lock otherwise: Overlap with any
	// acquisition of any of its keys, Fence above every earlier holder's
	// fence on any of them, Quorum on each.
	Partial Kind = "partial"

	// Starved: a writer of a read-write lock (OpWrite) that waited longer
	// than the library's bound on a writer's wait: its call returned, with
	// the lock or without it, after every hold of the key granted before
	// it began to wait had ended, plus a round. Judged only for writers
	// that record the allowance for a round (Op.WaitBoundMs), which also
	// says when the writer began to wait, its intent recorded: WaitBoundMs
	// after its call started. A hold granted before then is any other
	// acquisition of the key whose call started before then, and it ends
	// when the nodes may let it go at the latest: TTL after its return or
	// after its last extension (made or tried), or at the return of a
	// Release that succeeded. Readers are judged by Overlap and Fence as
	// locks are, except that readers of one key may hold at once, and that
	// a reader's fence need only be at least the fence of every writer of
	// the key that returned before it (see Fence).
	Starved Kind = "starved"
)

// Kinds lists every kind of violation, in the order reports use.
var Kinds = []Kind{Overlap, Permits, Leaders, Quorum, Partial, Fence, Term, Stale, Leftover, Quiescence, Starved}

// A Violation is one breach of a property that Check found in a history.
type Violation struct {
	Kind   Kind   `json:"kind"`
	Key    string `json:"key"`
	Ops    []int  `json:"ops,omitempty"` // the IDs of the acquisitions involved
	At     Mono   `json:"at"`
	Detail string `json:"detail"`
}

func (v Violation) String() string {
	return fmt.Sprintf("%s on %q at %v (ops %v): %s", v.Kind, v.Key, v.At, v.Ops, v.Detail)
}

// Check judges a finished history and returns every violation it finds,
// grouped by check (overlaps, with the permits and leaders they find,
// first) and then in the order of time.
func Check(h *History) []Violation {
	var vs []Violation
	vs = append(vs, checkOverlap(h)...)
	vs = append(vs, checkPermits(h)...)
	vs = append(vs, checkQuorum(h)...)
	vs = append(vs, checkPartial(h)...)
	vs = append(vs, checkFences(h)...)
	vs = append(vs, checkStale(h)...)
	vs = append(vs, checkLeftovers(h)...)
	vs = append(vs, checkFinal(h)...)
	vs = append(vs, checkStarved(h)...)
	return vs
}

// Count returns how many violations of each kind vs holds.
func Count(vs []Violation) map[Kind]int {
	n := make(map[Kind]int)
	for _, v := range vs {
		n[v.Kind]++
	}
	return n
}

// A segment is a stretch of time during which an acquisition claims to
// hold its lock.
type segment struct {
	op       *Op
	from, to Mono
}

// A holderRef names an acquisition by its key and its ID (Op.Holder).
type holderRef struct{ key, id string }

// removals maps every acquisition that an operator's confirmed removal
// deleted to the call of the first such removal.
type removals map[holderRef]Mono

func removedAt(h *History) removals {
	rm := make(removals)
	for _, r := range h.Removals {
		if !r.OK {
			continue
		}
		for _, id := range r.Holders {
			ref := holderRef{r.Key, id}
			if at, ok := rm[ref]; !ok || r.Call < at {
				rm[ref] = r.Call
			}
		}
	}
	return rm
}

// forever is a moment after every other.
const forever = Mono(1<<63 - 1)

// cut returns when an operator removed op, or forever if none did. A
// removal of any one key of a LockAll ends its claim: the lock is no
// longer the all-or-nothing hold it was.
func (rm removals) cut(op *Op) Mono {
	if op.Holder == "" {
		return forever
	}
	at := forever
	if t, ok := rm[holderRef{op.Key, op.Holder}]; ok {
		at = t
	}
	for _, key := range op.LockKeys() {
		if t, ok := rm[holderRef{key, op.Holder}]; ok {
			at = min(at, t)
		}
	}
	return at
}

// held returns the stretches during which op claims to hold its lock: from
// its return to its claimed end, then from each successful extension's
// return to the end that extension claims; all of it cut at the call of
// Release, at an extension that found the lock lost, and at cut, when an
// operator removed the lock.
func held(op *Op, cut Mono) []segment {
	if !op.OK {
		return nil
	}
	end := cut
	if op.Release != nil {
		end = min(end, op.Release.Call)
	}
	if op.Handover != 0 {
		end = min(end, op.Handover)
	}
	var segs []segment
	from, until := op.Return, op.Until
	for _, e := range op.Extends {
		if e.Lost {
			end = min(end, e.Return)
		}
		if !e.OK {
			continue
		}
		segs = append(segs, segment{op, from, min(until, e.Return)})
		// An extension may return before the call does: an election's
		// first renewal can run before Campaign returns.
		from, until = max(e.Return, op.Return), e.Until
	}
	segs = append(segs, segment{op, from, until})
	out := segs[:0]
	for _, s := range segs {
		s.to = min(s.to, end)
		if s.to > s.from {
			out = append(out, s)
		}
	}
	return out
}

// claimAt returns the end of validity op claims at moment t, and false if
// at t it does not claim to hold the lock at all (not yet returned,
// released, seen lost or removed by an operator at cut).
func claimAt(op *Op, t, cut Mono) (Mono, bool) {
	for _, s := range held(op, cut) {
		if s.from <= t && t < s.to {
			until := op.Until
			for _, e := range op.Extends {
				if e.OK && e.Return <= t {
					until = e.Until
				}
			}
			return until, true
		}
	}
	return 0, false
}

// byKey groups the successful acquisitions by the lock keys they hold on
// the nodes (Op.LockKeys): a LockAll is in the group of each of its keys,
// a permit in that of its slot.
func byKey(h *History) map[string][]*Op {
	m := make(map[string][]*Op)
	for _, op := range h.Ops {
		if op.OK {
			for _, key := range op.LockKeys() {
				m[key] = append(m[key], op)
			}
		}
	}
	return m
}

// segments returns the stretches during which ops claim to hold.
func segments(ops []*Op, rm removals) []segment {
	var segs []segment
	for _, op := range ops {
		segs = append(segs, held(op, rm.cut(op))...)
	}
	return segs
}

// sweep goes through segs in the order they begin, and for each segment
// that begins while segments of other tokens are held, calls meet with it
// and those others.
func sweep(segs []segment, meet func(s segment, others []segment)) {
	segs = slices.Clone(segs)
	slices.SortStableFunc(segs, func(a, b segment) int { return cmp.Compare(a.from, b.from) })
	// active holds the segments that have begun and not ended.
	var active []segment
	for _, s := range segs {
		active = slices.DeleteFunc(active, func(a segment) bool { return a.to <= s.from })
		var others []segment
		for _, a := range active {
			if a.op.Token != s.op.Token {
				others = append(others, a)
			}
		}
		if len(others) > 0 {
			meet(s, others)
		}
		active = append(active, s)
	}
}

// overlapKind names an overlap of a and b on one lock key: Leaders for
// two leaderships, Permits for two permits (on one slot), else Overlap.
func overlapKind(a, b *Op) Kind {
	switch {
	case a.Kind == OpLeader && b.Kind == OpLeader:
		return Leaders
	case a.Kind == OpPermit && b.Kind == OpPermit:
		return Permits
	}
	return Overlap
}

func checkOverlap(h *History) []Violation {
	var vs []Violation
	rm := removedAt(h)
	for key, ops := range byKey(h) {
		sweep(segments(ops, rm), func(s segment, others []segment) {
			for _, a := range others {
				if a.op.Shared() && s.op.Shared() {
					continue // readers share
				}
				kind := overlapKind(a.op, s.op)
				what := "both"
				if kind == Permits {
					what = "both on one slot"
				}
				vs = append(vs, Violation{Kind: kind, Key: key, Ops: []int{a.op.ID, s.op.ID}, At: s.from,
					Detail: fmt.Sprintf("%s holds from %v to %v and %s from %v to %v: %s for %v",
						a.op.Client, a.from, a.to, s.op.Client, s.from, s.to, what, time.Duration(min(a.to, s.to)-s.from))})
			}
		})
	}
	return sortViolations(vs)
}

// checkPermits finds the moments at which more permits of a semaphore are
// held than it has. Permits of one semaphore that name different numbers
// of permits are judged by the smallest.
func checkPermits(h *History) []Violation {
	sems := make(map[string][]*Op)
	for _, op := range h.Ops {
		if op.OK && op.Kind == OpPermit {
			sems[op.Key] = append(sems[op.Key], op)
		}
	}
	var vs []Violation
	rm := removedAt(h)
	for key, ops := range sems {
		n := ops[0].Permits
		for _, op := range ops {
			n = min(n, op.Permits)
		}
		sweep(segments(ops, rm), func(s segment, others []segment) {
			ids := []int{s.op.ID}
			parts := []string{fmt.Sprintf("%s (slot %d) from %v", s.op.Client, s.op.Slot, s.from)}
			for _, a := range others {
				if !slices.Contains(ids, a.op.ID) {
					ids = append(ids, a.op.ID)
					parts = append(parts, fmt.Sprintf("%s (slot %d) until %v", a.op.Client, a.op.Slot, a.to))
				}
			}
			if len(ids) <= n {
				return
			}
			slices.Sort(ids)
			vs = append(vs, Violation{Kind: Permits, Key: key, Ops: ids, At: s.from,
				Detail: fmt.Sprintf("%d permits of %d held at once: %s", len(ids), n, strings.Join(parts, ", "))})
		})
	}
	return sortViolations(vs)
}

func checkQuorum(h *History) []Violation {
	var vs []Violation
	rm := removedAt(h)
	for _, op := range h.Ops {
		for _, p := range op.Probes {
			at := p.At()
			claim, holding := claimAt(op, at, rm.cut(op))
			if !holding || claim <= at {
				continue
			}
			var short []string
			for _, n := range p.Nodes {
				if !n.Reached || crashed(h, n.Node, op.Start, at) {
					continue
				}
				switch {
				case n.Value != op.Token:
					short = append(short, fmt.Sprintf("node %d holds %s", n.Node, valueOrNone(n.Value)))
				case n.Expires != 0 && n.Expires < claim:
					short = append(short, fmt.Sprintf("node %d's key expires at %v, %v early", n.Node, n.Expires, time.Duration(claim-n.Expires)))
				}
			}
			if len(short) > h.Nodes-h.Quorum {
				vs = append(vs, Violation{Kind: Quorum, Key: p.Key, Ops: []int{op.ID}, At: at,
					Detail: fmt.Sprintf("%s claims the lock until %v but %d of %d nodes do not hold it that long (at most %d may not): %s",
						op.Client, claim, len(short), h.Nodes, h.Nodes-h.Quorum, strings.Join(short, "; "))})
			}
		}
	}
	return sortViolations(vs)
}

// crashed reports whether node was killed, restarted or failed over (its
// replica promoted) between from and to.
func crashed(h *History, node int, from, to Mono) bool {
	for _, f := range h.Faults {
		if f.Node == node && (f.Kind == FaultKill || f.Kind == FaultRestart || f.Kind == FaultPromote) && from <= f.At && f.At <= to {
			return true
		}
	}
	return false
}

func valueOrNone(v string) string {
	if v == "" {
		return "nothing"
	}
	return fmt.Sprintf("%.8s…", v)
}

// checkPartial judges the reads of a LockAll's keys made together on each
// node (Sample.Batch) within the lock's claimed validity.
func checkPartial(h *History) []Violation {
	var vs []Violation
	rm := removedAt(h)
	for _, op := range h.Ops {
		if !op.OK || op.Kind != OpAll {
			continue
		}
		batches := make(map[int][]Sample)
		var order []int
		for _, p := range op.Probes {
			if p.Batch != 0 {
				if batches[p.Batch] == nil {
					order = append(order, p.Batch)
				}
				batches[p.Batch] = append(batches[p.Batch], p)
			}
		}
		for _, b := range order {
			ss := batches[b]
			at := ss[0].At()
			if claim, holding := claimAt(op, at, rm.cut(op)); !holding || claim <= at {
				continue
			}
			for i := range ss[0].Nodes {
				var with, without []string
				for _, s := range ss {
					n := s.Nodes[i]
					switch {
					case !n.Reached:
					case n.Value == op.Token:
						with = append(with, s.Key)
					default:
						without = append(without, fmt.Sprintf("%s (%s)", s.Key, valueOrNone(n.Value)))
					}
				}
				if len(with) > 0 && len(without) > 0 {
					vs = append(vs, Violation{Kind: Partial, Key: op.Key, Ops: []int{op.ID}, At: ss[0].Nodes[i].At,
						Detail: fmt.Sprintf("node %d holds %s's lock on %s but not on %s",
							ss[0].Nodes[i].Node, op.Client, strings.Join(with, ", "), strings.Join(without, ", "))})
				}
			}
		}
	}
	return sortViolations(vs)
}

// checkFences finds fences that do not rise, per lock key; for
// leaderships, terms (Term). A reader's fence need only reach the
// writers' before it, and an adoption's the adopted hold's (see Fence).
// An acquisition that returned after its validity had ended (Until at or
// before Return, never extended), or after an operator removed it, held
// nothing: its fence, drawn before the holds returned meanwhile, is not
// judged against theirs.
func checkFences(h *History) []Violation {
	var vs []Violation
	byID := make(map[int]*Op, len(h.Ops))
	for _, op := range h.Ops {
		byID[op.ID] = op
	}
	rm := removedAt(h)
	// unfenced reports whether top's fence need not be exceeded by op:
	// an operator removed top before op returned, in a history whose
	// removals need not meet A5.
	unfenced := func(top, op *Op) bool {
		return h.RemovalsUnfenced && rm.cut(top) < op.Return
	}
	for key, ops := range byKey(h) {
		ops = slices.Clone(ops)
		slices.SortFunc(ops, func(a, b *Op) int { return cmp.Compare(a.Return, b.Return) })
		var top *Op  // the acquisition with the greatest fence so far
		var excl *Op // the same among the holds that are not readers'
		for _, op := range ops {
			switch {
			case op.Adopts != 0:
				if from := byID[op.Adopts]; from != nil && op.Fence < from.Fence {
					vs = append(vs, Violation{Kind: Fence, Key: key, Ops: []int{from.ID, op.ID}, At: op.Return,
						Detail: fmt.Sprintf("%s adopted %s's hold at %v with fence %d, below the %d that %s got at %v",
							op.Client, from.Client, op.Return, op.Fence, from.Fence, from.Client, from.Return)})
				}
			case op.Until <= op.Return && len(op.Extends) == 0:
			case rm.cut(op) <= op.Return:
				// Removed by an operator before the call returned: it
				// never held, and its fence is not judged. In a history
				// whose removals need not meet A5, nothing after it is
				// judged against its fence either.
				if h.RemovalsUnfenced {
					continue
				}
			case op.Shared():
				if excl != nil && op.Fence < excl.Fence {
					vs = append(vs, Violation{Kind: Fence, Key: key, Ops: []int{excl.ID, op.ID}, At: op.Return,
						Detail: fmt.Sprintf("%s got reader's fence %d at %v, below the writer's %d that %s got at %v",
							op.Client, op.Fence, op.Return, excl.Fence, excl.Client, excl.Return)})
				}
			case top != nil && op.Fence <= top.Fence && !unfenced(top, op):
				kind, what := Fence, "fence"
				if op.Kind == OpLeader && top.Kind == OpLeader {
					kind, what = Term, "term"
				}
				vs = append(vs, Violation{Kind: kind, Key: key, Ops: []int{top.ID, op.ID}, At: op.Return,
					Detail: fmt.Sprintf("%s got %s %d at %v, not above %d that %s got at %v",
						op.Client, what, op.Fence, op.Return, top.Fence, top.Client, top.Return)})
			}
			if top == nil || op.Fence > top.Fence {
				top = op
			}
			if !op.Shared() && (excl == nil || op.Fence > excl.Fence) {
				excl = op
			}
		}
	}
	return sortViolations(vs)
}

// ReaderOverlaps counts the pairs of readers of one key, with different
// tokens, that held at one instant: the shared mode at work.
func ReaderOverlaps(h *History) int {
	n := 0
	rm := removedAt(h)
	for _, ops := range byKey(h) {
		readers := slices.DeleteFunc(slices.Clone(ops), func(op *Op) bool { return !op.Shared() })
		sweep(segments(readers, rm), func(_ segment, others []segment) { n += len(others) })
	}
	return n
}

// lastHeld returns the latest moment the nodes may keep op's hold: a TTL
// after its return or after its last extension, made or tried (one that
// failed may have been applied on some nodes), or the return of a Release
// that succeeded, if earlier.
func lastHeld(op *Op) Mono {
	end := op.Return + Mono(time.Duration(op.TTLms)*time.Millisecond)
	for _, e := range op.Extends {
		end = max(end, e.Return+Mono(time.Duration(e.TTLms)*time.Millisecond))
	}
	if r := op.Release; r != nil && r.Err == "" {
		end = min(end, r.Return)
	}
	return end
}

// checkStarved judges the waits of the writers that record the allowance
// for a round (see Starved).
func checkStarved(h *History) []Violation {
	var vs []Violation
	for _, w := range h.Ops {
		if w.Kind != OpWrite || w.WaitBoundMs <= 0 || w.Adopts != 0 {
			continue
		}
		round := Mono(time.Duration(w.WaitBoundMs) * time.Millisecond)
		began := w.Start + round
		end, last := began, (*Op)(nil)
		for _, op := range h.Ops {
			if op == w || !op.OK || op.Key != w.Key || op.Start >= began {
				continue
			}
			if e := lastHeld(op); e > end {
				end, last = e, op
			}
		}
		if deadline := end + round; w.Return > deadline {
			ops := []int{w.ID}
			held := "no hold of the key was granted before it"
			if last != nil {
				ops = append(ops, last.ID)
				held = fmt.Sprintf("the last hold granted before it, %s's, ended by %v", last.Client, end)
			}
			got := "got the lock"
			if !w.OK {
				got = "gave up (" + cmp.Or(w.Reason, w.Err) + ")"
			}
			vs = append(vs, Violation{Kind: Starved, Key: w.Key, Ops: ops, At: deadline,
				Detail: fmt.Sprintf("%s waited to write from %v and %s at %v; %s; with %v for a round the bound is %v, %v before",
					w.Client, w.Start, got, w.Return, held, time.Duration(round), deadline, time.Duration(w.Return-deadline))})
		}
	}
	return sortViolations(vs)
}

// reordering lists the faults that may let a command arrive after the
// clean-up that was meant to follow it, or keep it from arriving at all.
// A lost reply is not among them: the command was applied before its reply
// was lost, so the clean-up comes after it. Nor is a constant latency,
// which keeps every command in order.
var reordering = []FaultKind{FaultKill, FaultRestart, FaultPause, FaultResume, FaultLatency, FaultBlackhole, FaultReset}

// exempt reports whether a leftover of client's call on node between from
// and to may come from a command delivered after the clean-up.
func exempt(h *History, node int, client string, from, to Mono) bool {
	paused := false
	for _, f := range h.Faults {
		if f.Node != node || (f.Client != "" && f.Client != client) {
			continue
		}
		if f.At < from {
			switch f.Kind {
			case FaultPause:
				paused = true
			case FaultResume, FaultKill, FaultRestart:
				paused = false
			}
			continue
		}
		if f.At <= to && slices.Contains(reordering, f.Kind) {
			return true
		}
	}
	return paused
}

func checkStale(h *History) []Violation {
	rm := removedAt(h)
	if len(rm) == 0 {
		return nil
	}
	ops := make(map[int]*Op, len(h.Ops))
	for _, op := range h.Ops {
		ops[op.ID] = op
	}
	writes := slices.Clone(h.Writes)
	slices.SortStableFunc(writes, func(a, b Write) int { return cmp.Compare(a.At, b.At) })
	var vs []Violation
	for i, w := range writes {
		op := ops[w.Op]
		if op == nil || !w.Accepted {
			continue
		}
		cut := rm.cut(op)
		if w.At < cut {
			continue
		}
		for _, e := range writes[:i] {
			n := ops[e.Op]
			if n == nil || n.Key != op.Key || n.ID == op.ID || n.Return < cut {
				continue
			}
			vs = append(vs, Violation{Kind: Stale, Key: op.Key, Ops: []int{op.ID, n.ID}, At: w.At,
				Detail: fmt.Sprintf("%s's write with fence %d was accepted at %v, although an operator removed its lock at %v and %s, which got the lock since, wrote with fence %d at %v",
					op.Client, w.Fence, w.At, cut, n.Client, e.Fence, e.At)})
			break
		}
	}
	return sortViolations(vs)
}

// RemovedWrites counts the writes to the fenced resource that holders made
// after an operator had removed their lock, and how many of them the
// resource rejected.
func RemovedWrites(h *History) (made, rejected int) {
	rm := removedAt(h)
	ops := make(map[int]*Op, len(h.Ops))
	for _, op := range h.Ops {
		ops[op.ID] = op
	}
	for _, w := range h.Writes {
		if op := ops[w.Op]; op != nil && w.At >= rm.cut(op) {
			made++
			if !w.Accepted {
				rejected++
			}
		}
	}
	return made, rejected
}

func checkLeftovers(h *History) []Violation {
	var vs []Violation
	for _, op := range h.Ops {
		for _, l := range leftovers(op) {
			n := l.NodeSample
			if slices.Contains(op.Unsettled, RoundNode{Token: n.Value, Node: n.Node}) || exempt(h, n.Node, op.Client, op.Start, n.At) {
				continue
			}
			vs = append(vs, Violation{Kind: Leftover, Key: l.key, Ops: []int{op.ID}, At: n.At,
				Detail: fmt.Sprintf("node %d still holds %s of a failed round of %s's call that returned at %v",
					n.Node, valueOrNone(n.Value), op.Client, op.Return)})
		}
	}
	return sortViolations(vs)
}

// A keySample is what one node held under a key.
type keySample struct {
	key string
	NodeSample
}

// leftovers returns the keys on nodes that held a failed round's token of
// op just after op returned.
func leftovers(op *Op) []keySample {
	samples := op.Leftovers
	if op.Leftover != nil {
		samples = append([]Sample{*op.Leftover}, samples...)
	}
	failed := op.Tokens
	if op.OK && len(failed) > 0 {
		failed = failed[:len(failed)-1]
	}
	var out []keySample
	for _, s := range samples {
		for _, n := range s.Nodes {
			if n.Reached && n.Value != "" && slices.Contains(failed, n.Value) {
				out = append(out, keySample{s.Key, n})
			}
		}
	}
	return out
}

// LateGrants counts the keys that failed rounds left behind because their
// grant reached a node without an answer to the client: the request timed
// out, the caller's context cut it off, or the answer came after the
// round's deadline, and the command, already sent, was applied after the
// round's clean-up had passed that node. Check does
// not count them as violations: the client cannot tell such a grant from
// one never delivered. The key blocks others until its TTL ends; nobody
// holds the lock meanwhile.
func LateGrants(h *History) int {
	n := 0
	for _, op := range h.Ops {
		for _, s := range leftovers(op) {
			if slices.Contains(op.Unsettled, RoundNode{Token: s.Value, Node: s.Node}) {
				n++
			}
		}
	}
	return n
}

func checkFinal(h *History) []Violation {
	var vs []Violation
	for _, s := range h.Final {
		for _, n := range s.Nodes {
			if n.Reached && n.Value != "" {
				vs = append(vs, Violation{Kind: Quiescence, Key: s.Key, At: n.At,
					Detail: fmt.Sprintf("node %d still holds %s once the run was over", n.Node, valueOrNone(n.Value))})
			}
		}
	}
	return vs
}

func sortViolations(vs []Violation) []Violation {
	slices.SortStableFunc(vs, func(a, b Violation) int { return cmp.Compare(a.At, b.At) })
	return vs
}

// MostAtOnce returns the most of ops held at one instant, by the checker's
// account of holding (see Overlap), with no removals.
func MostAtOnce(ops []*Op) int {
	most := min(len(ops), 1)
	sweep(segments(ops, nil), func(_ segment, others []segment) { most = max(most, len(others)+1) })
	return most
}

// Claims reports whether op claims to hold its lock at moment t, by the
// checker's account of holding, with no removals.
func Claims(op *Op, t Mono) bool {
	_, ok := claimAt(op, t, forever)
	return ok
}
