package history

import (
	"bytes"
	"encoding/xml"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/timeline"
)

// restartCanary is a history like canary-restart-no-quarantine's: a holds
// the lock; nodes 0 and 1 are killed and restarted at once; b tries, and
// gets the lock while a's validity runs.
func restartCanary() *History {
	a := holder(1, "a", "ta", 100, 1100, 5)
	b := holder(5, "b", "tb", 126, 1126, 6)
	b.Release = &Release{Call: ms(400), Return: ms(401)}
	h := history(3, a, failed(2, "b", 105, 106, "x1"), failed(3, "b", 111, 112, "x2"), failed(4, "b", 120, 121, "x3"), b)
	h.Faults = []Fault{
		{At: ms(110), Kind: FaultKill, Node: 0, Detail: "SIGKILL"},
		{At: ms(112), Kind: FaultRestart, Node: 0, Detail: "started again, empty"},
		{At: ms(114), Kind: FaultKill, Node: 1, Detail: "SIGKILL"},
		{At: ms(116), Kind: FaultRestart, Node: 1, Detail: "started again, empty"},
	}
	return h
}

// spans returns the spans of kind in the lane named name.
func spans(lanes []timeline.Lane, name string, kind timeline.Kind) []timeline.Span {
	var out []timeline.Span
	for _, l := range lanes {
		if l.Name == name {
			for _, s := range l.Spans {
				if s.Kind == kind {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

func dur(n int) time.Duration { return time.Duration(ms(n)) }

// The canary's timeline shows a's hold and b's, labelled with their
// fences, b's failed calls, the kills and restarts on their nodes, and the
// overlap in red where both held.
func TestTimelineOfCanary(t *testing.T) {
	h := restartCanary()
	vs := Check(h)
	if got := Count(vs); got[Overlap] != 1 || len(vs) != 1 {
		t.Fatalf("the synthetic canary should have one overlap, got %v", vs)
	}
	c := Timeline(h, vs)
	if c.Title != "synthetic" || !strings.Contains(c.Subtitle, "violations: overlap 1") {
		t.Errorf("title %q, subtitle %q", c.Title, c.Subtitle)
	}
	if names := []string{c.Clients[0].Name, c.Clients[1].Name}; len(c.Clients) != 2 || names[0] != "a" || names[1] != "b" {
		t.Fatalf("client lanes: %+v", c.Clients)
	}
	la := spans(c.Clients, "a", timeline.Lapsed)
	if len(la) != 1 || la[0].Label != "5" || !la[0].Bad || la[0].From != dur(100) || la[0].To != dur(1100) {
		t.Errorf("a's hold, which ran to its validity's end: %+v", la)
	}
	hb := spans(c.Clients, "b", timeline.Hold)
	if len(hb) != 1 || hb[0].Label != "6" || !hb[0].Bad || hb[0].From != dur(126) || hb[0].To != dur(400) {
		t.Errorf("b's hold, released at 400ms: %+v", hb)
	}
	if calls := spans(c.Clients, "b", timeline.Call); len(calls) != 4 || calls[0].Bad || !strings.Contains(calls[0].Note, "failed after 1ms") {
		t.Errorf("b's calls: %+v", calls)
	}
	if len(c.Nodes) != 3 {
		t.Fatalf("want a lane per node, got %+v", c.Nodes)
	}
	for node, at := range map[string]int{"node 0": 110, "node 1": 114} {
		down := spans(c.Nodes, node, timeline.Fault)
		if len(down) != 1 || down[0].Label != "killed" || down[0].From != dur(at) || down[0].To != dur(at+2) {
			t.Errorf("%s killed: %+v", node, down)
		}
		up := spans(c.Nodes, node, timeline.Event)
		if len(up) != 1 || up[0].Label != "restarted" || up[0].From != dur(at+2) || !strings.Contains(up[0].Note, "empty") {
			t.Errorf("%s restarted: %+v", node, up)
		}
	}
	if len(c.Marks) != 1 {
		t.Fatalf("marks: %+v", c.Marks)
	}
	m := c.Marks[0]
	if m.From != dur(126) || m.To != dur(400) || m.Label != "overlap 274ms" || !slices.Equal(m.Lanes, []string{"a", "b"}) {
		t.Errorf("the overlap's mark: %+v", m)
	}
	if len(c.Notes) != 1 || c.Notes[0] != vs[0].String() {
		t.Errorf("notes: %q", c.Notes)
	}
	var doc struct {
		XMLName xml.Name
	}
	svg := c.SVG()
	if err := xml.NewDecoder(bytes.NewReader(svg)).Decode(&doc); err != nil || doc.XMLName.Local != "svg" {
		t.Fatalf("the SVG does not decode: %v", err)
	}
	for _, want := range []string{">5</text>", ">6</text>", "killed, restarted", "overlap 274ms"} {
		if !bytes.Contains(svg, []byte(want)) {
			t.Errorf("the SVG lacks %q", want)
		}
	}
}

// Faults in force are bars until they are healed, or until the history's
// last moment (here the end of b's claim); moments are events; link faults name their client; an
// operator's removal is on the operator's lane; an extended hold is a bar
// per stretch of its claim without a gap, labelled once.
func TestTimelineFaults(t *testing.T) {
	a := holder(1, "a", "ta", 10, 100, 7)
	a.Extends = []Extend{{Start: ms(50), Return: ms(52), OK: true, Until: ms(150)}}
	a.Release = &Release{Call: ms(120), Return: ms(121)}
	// b's claim lapses before its extension returns: two stretches.
	b := holder(2, "b", "tb", 200, 210, 8)
	b.Extends = []Extend{{Start: ms(205), Return: ms(215), OK: true, Until: ms(260)}}
	h := history(3, a, b)
	h.Faults = []Fault{
		{At: ms(5), Kind: FaultBlackhole, Node: 1, Client: "c0", Detail: "on"},
		{At: ms(20), Kind: FaultPause, Node: 2, Detail: "SIGSTOP"},
		{At: ms(30), Kind: FaultClock, Node: 0, Detail: "wall clock +1.5s from real time"},
		{At: ms(40), Kind: FaultClock, Node: 2, Detail: "wall clock runs at rate 1.1 (+10.00%) from now, +0s from real time"},
		{At: ms(60), Kind: FaultResume, Node: 2, Detail: "SIGCONT"},
		{At: ms(70), Kind: FaultBlackhole, Node: 1, Client: "c0", Detail: "off"},
		{At: ms(80), Kind: FaultLatency, Node: 0, Client: "c1", Detail: "200ms"},
		{At: ms(90), Kind: FaultDropReply, Node: 0, Client: "c1", Detail: "next 2 acquire replies"},
		{At: ms(95), Kind: FaultReplication, Node: 2, Detail: "replication stream cut"},
	}
	h.Removals = []Removal{{Key: "k", By: "operator", How: ByForceRelease, Call: ms(130), Return: ms(131), OK: true}}
	c := Timeline(h, nil)
	if !strings.Contains(c.Subtitle, "no violations") || len(c.Marks) != 0 {
		t.Errorf("subtitle %q, marks %v", c.Subtitle, c.Marks)
	}
	if holds := spans(c.Clients, "a", timeline.Hold); len(holds) != 1 || holds[0].Label != "7" || holds[0].From != dur(10) || holds[0].To != dur(120) {
		t.Errorf("a's hold, extended in time and released: %+v", holds)
	}
	first, last := spans(c.Clients, "b", timeline.Hold), spans(c.Clients, "b", timeline.Lapsed)
	if len(first) != 1 || len(last) != 1 || first[0].Label != "8" || last[0].Label != "" || first[0].To != dur(210) || last[0].From != dur(215) || last[0].To != dur(260) {
		t.Errorf("b's hold, extended late: %+v, %+v", first, last)
	}
	if op := spans(c.Clients, "operator", timeline.Fault); len(op) != 1 || op[0].Label != ByForceRelease {
		t.Errorf("the operator's removal: %+v", op)
	}
	type bar struct {
		label    string
		from, to int
	}
	var got []bar
	var moments []string
	for _, l := range c.Nodes {
		for _, s := range l.Spans {
			if s.Kind == timeline.Fault {
				got = append(got, bar{l.Name + ": " + s.Label, int(s.From / time.Millisecond), int(s.To / time.Millisecond)})
			} else {
				moments = append(moments, l.Name+": "+s.Label)
			}
		}
	}
	want := []bar{{"node 0: c1 +200ms", 80, 260}, {"node 1: c0 cut off", 5, 70}, {"node 2: paused", 20, 60}, {"node 2: replication cut", 95, 260}}
	if !slices.Equal(got, want) {
		t.Errorf("faults in force:\n got %v\nwant %v", got, want)
	}
	if w := []string{"node 0: clock +1.5s", "node 0: c1 replies lost", "node 2: clock rate 1.1"}; !slices.Equal(moments, w) {
		t.Errorf("moments: got %q, want %q", moments, w)
	}
}
