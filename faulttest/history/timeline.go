package history

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/quorumlock/redlock/internal/timeline"
)

// Timeline returns the picture of a history and of the violations Check
// found in it (see package timeline): a lane per client, on which each
// call is a thin line from its start to its return and each acquisition a
// bar, labelled with its fence (a leadership's term), for each stretch
// during which it claims to hold its lock, as Check sees it, without a
// gap; an operator's
// removals on the operator's lane; a lane per node with the faults done to
// it and to the clients' links to it; each violation in red, over the
// lanes of its clients and, for two holders at once, over the stretch
// during which both held.
func Timeline(h *History, vs []Violation) *timeline.Chart {
	rm := removedAt(h)
	bad := make(map[int]bool)
	for _, v := range vs {
		for _, id := range v.Ops {
			bad[id] = true
		}
	}
	c := &timeline.Chart{Title: h.Scenario, Subtitle: subtitle(h, vs)}
	clients := make(map[string]int)
	lane := func(name string) *timeline.Lane {
		i, ok := clients[name]
		if !ok {
			i = len(c.Clients)
			clients[name] = i
			c.Clients = append(c.Clients, timeline.Lane{Name: name})
		}
		return &c.Clients[i]
	}
	ops := slices.Clone(h.Ops)
	slices.SortStableFunc(ops, func(a, b *Op) int { return cmp.Compare(a.Start, b.Start) })
	for _, op := range ops {
		l := lane(op.Client)
		l.Spans = append(l.Spans, callSpan(op, bad[op.ID] && !op.OK))
		l.Spans = append(l.Spans, holdSpans(op, rm.cut(op), bad[op.ID])...)
	}
	for _, r := range h.Removals {
		l := lane(r.By)
		l.Spans = append(l.Spans, timeline.Span{From: time.Duration(r.Call), To: time.Duration(r.Return), Kind: timeline.Fault, Label: r.How,
			Note: fmt.Sprintf("%s removed the lock %s (%s), confirmed by a quorum: %v, holders %v", r.By, r.Key, r.How, r.OK, r.Holders)})
	}
	c.Nodes = faultLanes(h)
	c.Marks, c.Notes = marks(h, vs, rm)
	return c
}

// subtitle sums the history up in a line.
func subtitle(h *History, vs []Violation) string {
	clients := make(map[string]bool)
	ok := 0
	for _, op := range h.Ops {
		clients[op.Client] = true
		if op.OK {
			ok++
		}
	}
	verdict := "no violations"
	if len(vs) > 0 {
		verdict = "violations: " + FormatCounts(Count(vs))
	}
	return fmt.Sprintf("%d nodes, quorum %d · %d clients · %d calls, %d obtained · %d faults · %s",
		h.Nodes, h.Quorum, len(clients), len(h.Ops), ok, len(h.Faults), verdict)
}

// what names what op asks for.
func what(op *Op) string {
	if op.Adopts != 0 {
		return fmt.Sprintf("%s, adopted from call %d", whatKind(op), op.Adopts)
	}
	return whatKind(op)
}

func whatKind(op *Op) string {
	switch op.Kind {
	case OpRead:
		return "a read of " + op.Key
	case OpWrite:
		return "the write lock " + op.Key
	case OpAll:
		return "the locks " + op.Key
	case OpPermit:
		return fmt.Sprintf("a permit of %s (%d)", op.Key, op.Permits)
	case OpLeader:
		return "the leadership of " + op.Key
	}
	return "the lock " + op.Key
}

// callSpan is op's call, from its start to its return.
func callSpan(op *Op, bad bool) timeline.Span {
	note := fmt.Sprintf("%s asked for %s at %v: granted after %v", op.Client, what(op), op.Start, time.Duration(op.Return-op.Start))
	if !op.OK {
		note = fmt.Sprintf("%s asked for %s at %v: failed after %v, %s", op.Client, what(op), op.Start, time.Duration(op.Return-op.Start), cmp.Or(op.Reason, op.Err))
	}
	return timeline.Span{From: time.Duration(op.Start), To: time.Duration(op.Return), Kind: timeline.Call, Note: note, Bad: bad}
}

// holdSpans are the stretches during which op claims its lock, as Check
// sees them (see held), those that follow one another without a gap
// joined (an extension that returned in time): the first labelled with
// the fence.
func holdSpans(op *Op, cut Mono, bad bool) []timeline.Span {
	var segs []segment
	for _, s := range held(op, cut) {
		if n := len(segs); n > 0 && segs[n-1].to == s.from {
			segs[n-1].to = s.to
			continue
		}
		segs = append(segs, s)
	}
	fence := "fence"
	if op.Kind == OpLeader {
		fence = "term"
	}
	var spans []timeline.Span
	for i, s := range segs {
		kind, end := timeline.Hold, "its claim lapsed before an extension returned"
		if i == len(segs)-1 {
			kind, end = holdEnd(op, s.to, cut)
		}
		sp := timeline.Span{From: time.Duration(s.from), To: time.Duration(s.to), Kind: kind, Bad: bad,
			Note: fmt.Sprintf("%s held %s, %s %d, from %v to %v: %s", op.Client, what(op), fence, op.Fence, s.from, s.to, end)}
		if i == 0 {
			sp.Label = fmt.Sprint(op.Fence)
		}
		spans = append(spans, sp)
	}
	return spans
}

// holdEnd says how op's last stretch of holding, ending at to, ended.
func holdEnd(op *Op, to, cut Mono) (timeline.Kind, string) {
	switch {
	case op.Release != nil && to == op.Release.Call:
		return timeline.Hold, "released"
	case to == cut:
		return timeline.Hold, "removed by an operator"
	case op.Handover != 0 && to == op.Handover:
		return timeline.Hold, "handed over"
	}
	for _, e := range op.Extends {
		if e.Lost && to == e.Return {
			return timeline.Hold, "an extension found it lost"
		}
	}
	return timeline.Lapsed, "ran to the end of its validity"
}

// faultLanes draws the faults: a lane per node, on which a fault in force
// (a node killed or paused, a client's link cut off, slowed or refusing,
// a replication stream cut, a slot moving) is a bar from its injection to
// its healing, and a restart, a promotion, a step of the clock, a reset or
// a lost reply is a moment.
func faultLanes(h *History) []timeline.Lane {
	lanes := make([]timeline.Lane, h.Nodes)
	for i := range lanes {
		lanes[i].Name = fmt.Sprintf("node %d", i)
	}
	laneOf := func(node int) *timeline.Lane {
		if node < 0 || node >= len(lanes) {
			name := "all nodes"
			if node >= 0 {
				name = fmt.Sprintf("node %d", node)
			}
			i := slices.IndexFunc(lanes, func(l timeline.Lane) bool { return l.Name == name })
			if i < 0 {
				lanes = append(lanes, timeline.Lane{Name: name})
				i = len(lanes) - 1
			}
			return &lanes[i]
		}
		return &lanes[node]
	}
	// open holds the faults in force, by node and what they are.
	type state struct {
		node int
		what string
	}
	open := make(map[state]timeline.Span)
	var order []state // the faults in force, in the order they began
	begin := func(f Fault, what, label string) {
		st := state{f.Node, what}
		if _, ok := open[st]; !ok {
			order = append(order, st)
		}
		open[st] = timeline.Span{From: time.Duration(f.At), Kind: timeline.Fault, Label: label, Note: fmt.Sprintf("%s at %v: %s", label, f.At, f.Detail)}
	}
	end := func(node int, what string, at Mono) {
		st := state{node, what}
		if sp, ok := open[st]; ok {
			sp.To = time.Duration(at)
			sp.Note += fmt.Sprintf(", until %v", at)
			l := laneOf(node)
			l.Spans = append(l.Spans, sp)
			delete(open, st)
		}
	}
	moment := func(f Fault, label string) {
		l := laneOf(f.Node)
		l.Spans = append(l.Spans, timeline.Span{From: time.Duration(f.At), Kind: timeline.Event, Label: label, Note: fmt.Sprintf("%s at %v: %s", label, f.At, f.Detail)})
	}
	link := func(f Fault) string { return f.Client + " " } // a link fault's label begins with its client
	for _, f := range h.Faults {
		switch f.Kind {
		case FaultKill:
			end(f.Node, "paused", f.At)
			begin(f, "down", "killed")
		case FaultRestart:
			end(f.Node, "paused", f.At)
			end(f.Node, "down", f.At)
			moment(f, "restarted")
		case FaultPromote:
			end(f.Node, "down", f.At)
			moment(f, "promoted")
		case FaultPause:
			begin(f, "paused", "paused")
		case FaultResume:
			end(f.Node, "paused", f.At)
		case FaultClock:
			moment(f, clockLabel(f.Detail))
		case FaultLatency:
			end(f.Node, "latency "+f.Client, f.At)
			if f.Detail != "0s" {
				begin(f, "latency "+f.Client, link(f)+"+"+f.Detail)
			}
		case FaultBlackhole:
			end(f.Node, "cut "+f.Client, f.At)
			if f.Detail == "on" {
				begin(f, "cut "+f.Client, link(f)+"cut off")
			}
		case FaultReset:
			switch f.Detail {
			case "refusing connections":
				begin(f, "refuse "+f.Client, link(f)+"refused")
			case "accepting connections":
				end(f.Node, "refuse "+f.Client, f.At)
			default:
				moment(f, link(f)+"reset")
			}
		case FaultDropReply:
			moment(f, link(f)+"replies lost")
		case FaultReplication:
			end(f.Node, "replication", f.At)
			if strings.Contains(f.Detail, "cut") {
				begin(f, "replication", "replication cut")
			}
		case FaultMove:
			end(f.Node, "move", f.At)
			if !strings.Contains(f.Detail, "finished") {
				begin(f, "move", "slot moving")
			}
		default:
			moment(f, string(f.Kind))
		}
	}
	last := lastMoment(h)
	for _, st := range order {
		end(st.node, st.what, last)
	}
	return lanes
}

// clockLabel shortens the detail of a clock fault (see Cluster.JumpClock
// and Cluster.SetClockRate) to a label.
func clockLabel(detail string) string {
	if rate, ok := strings.CutPrefix(detail, "wall clock runs at rate "); ok {
		rate, _, _ = strings.Cut(rate, " ")
		return "clock rate " + rate
	}
	if step, ok := strings.CutPrefix(detail, "wall clock "); ok {
		step, _, _ = strings.Cut(step, " ")
		return "clock " + step
	}
	return "clock"
}

// lastMoment returns the last moment the history recorded, the final
// reads aside: faults in force until the end are drawn to it.
func lastMoment(h *History) Mono {
	var last Mono
	rm := removedAt(h)
	for _, op := range h.Ops {
		last = max(last, op.Return)
		for _, s := range held(op, rm.cut(op)) {
			last = max(last, s.to)
		}
		for _, e := range op.Extends {
			last = max(last, e.Return)
		}
		if op.Release != nil {
			last = max(last, op.Release.Return)
		}
	}
	for _, f := range h.Faults {
		last = max(last, f.At)
	}
	for _, r := range h.Removals {
		last = max(last, r.Return)
	}
	return last
}

// marks draws the violations vs: each over the lanes of the clients whose
// acquisitions it names; two or more holders at once over the stretch
// during which all of them held, anything else at its moment. The notes
// say what each one was.
func marks(h *History, vs []Violation, rm removals) ([]timeline.Mark, []string) {
	byID := make(map[int]*Op, len(h.Ops))
	for _, op := range h.Ops {
		byID[op.ID] = op
	}
	var ms []timeline.Mark
	var notes []string
	for _, v := range vs {
		m := timeline.Mark{From: time.Duration(v.At), To: time.Duration(v.At), Label: string(v.Kind), Note: v.String()}
		var holders [][]segment
		for _, id := range v.Ops {
			if op := byID[id]; op != nil {
				if !slices.Contains(m.Lanes, op.Client) {
					m.Lanes = append(m.Lanes, op.Client)
				}
				holders = append(holders, held(op, rm.cut(op)))
			}
		}
		if v.Kind == Overlap || v.Kind == Permits || v.Kind == Leaders {
			if to, ok := together(holders, v.At); ok {
				m.To = time.Duration(to)
				m.Label = fmt.Sprintf("%s %v", v.Kind, roundDur(time.Duration(to-v.At)))
			}
		}
		ms = append(ms, m)
		notes = append(notes, v.String())
	}
	return ms, notes
}

// roundDur rounds d to three significant digits or fewer.
func roundDur(d time.Duration) time.Duration {
	switch {
	case d >= 10*time.Millisecond:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

// together returns when the first of holders stops holding, each holding
// at at: the end of the stretch from at during which they held together.
// Check reports two holders at once (or more permits than a semaphore
// has) at the moment the last of them began to hold, when all hold.
func together(holders [][]segment, at Mono) (to Mono, ok bool) {
	to = forever
	for _, segs := range holders {
		i := slices.IndexFunc(segs, func(s segment) bool { return s.from <= at && at < s.to })
		if i < 0 {
			return 0, false
		}
		to = min(to, segs[i].to)
	}
	return to, len(holders) > 0
}

// FormatCounts formats the counts of violations by kind, in the order of
// Kinds: "overlap 2, quorum 1", or "0".
func FormatCounts(n map[Kind]int) string {
	var parts []string
	for _, k := range Kinds {
		if n[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, n[k]))
		}
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, ", ")
}
