package timeline

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// An element is an element of a decoded SVG document.
type element struct {
	XMLName  xml.Name
	Attrs    []xml.Attr `xml:",any,attr"`
	Text     string     `xml:",chardata"`
	Children []element  `xml:",any"`
}

func (e *element) attr(name string) string {
	for _, a := range e.Attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

// all returns every element below e (and e) named name, of class class
// unless class is "".
func (e *element) all(name, class string) []*element {
	var out []*element
	if e.XMLName.Local == name && (class == "" || e.attr("class") == class) {
		out = append(out, e)
	}
	for i := range e.Children {
		out = append(out, e.Children[i].all(name, class)...)
	}
	return out
}

// texts returns the text of every text element of class class below e.
func (e *element) texts(class string) []string {
	var out []string
	for _, t := range e.all("text", class) {
		out = append(out, t.Text)
	}
	return out
}

// decode parses doc as XML, strictly, and checks that it is one svg
// element in the SVG namespace.
func decode(t *testing.T, doc []byte) *element {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(doc))
	d.Strict = true
	root := &element{}
	if err := d.Decode(root); err != nil {
		t.Fatalf("the SVG is not well-formed XML: %v\n%s", err, doc)
	}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if cd, ok := tok.(xml.CharData); err != nil || !ok || len(bytes.TrimSpace(cd)) > 0 {
			t.Fatalf("something follows the svg element: %v %v", tok, err)
		}
	}
	if root.XMLName.Local != "svg" || root.XMLName.Space != "http://www.w3.org/2000/svg" {
		t.Fatalf("the root element is %v, want svg in the SVG namespace", root.XMLName)
	}
	return root
}

// lanes returns the group of the lanes, without the legend.
func lanes(t *testing.T, root *element) *element {
	t.Helper()
	for _, g := range root.all("g", "lanes") {
		return g
	}
	t.Fatal("no lanes")
	return nil
}

// canary is a chart like a fault scenario's canary: a holds, two nodes
// are killed and restarted, b tries and gets the lock while a holds it.
func canary() *Chart {
	c := &Chart{
		Title:    "canary-restart-no-quarantine",
		Subtitle: "3 nodes, quorum 2 · violations: overlap 1",
		Clients: []Lane{
			{Name: "a", Spans: []Span{
				{From: ms(100), To: ms(102), Kind: Call},
				{From: ms(102), To: ms(1100), Kind: Lapsed, Label: "1719912345678", Note: "a: fence 1719912345678", Bad: true},
			}},
			{Name: "b", Spans: []Span{
				{From: ms(105), To: ms(106), Kind: Call, Note: "TryLock failed: taken"},
				{From: ms(111), To: ms(112), Kind: Call},
				{From: ms(125), To: ms(126), Kind: Call},
				{From: ms(126), To: ms(400), Kind: Hold, Label: "1719912345701", Note: "b: fence 1719912345701", Bad: true},
			}},
		},
		Nodes: []Lane{
			{Name: "node 0", Spans: []Span{
				{From: ms(110), To: ms(115), Kind: Fault, Label: "killed", Note: "SIGKILL"},
				{From: ms(115), Kind: Event, Label: "restarted", Note: "started again, empty"},
			}},
			{Name: "node 1", Spans: []Span{
				{From: ms(116), To: ms(120), Kind: Fault, Label: "killed"},
				{From: ms(120), Kind: Event, Label: "restarted"},
				{From: ms(600), To: ms(900), Kind: Fault, Label: "paused"},
			}},
			{Name: "node 2"},
		},
		Marks: []Mark{{From: ms(126), To: ms(400), Lanes: []string{"a", "b"}, Label: "overlap 274ms", Note: "a & b <both>"}},
		Notes: []string{`overlap on "ft:lock" at +126ms: a & b <both>`},
	}
	return c
}

func TestSVGWellFormed(t *testing.T) {
	c := canary()
	c.Title = `<"&'>`
	c.Clients[0].Name = "a<&>"
	c.Periods = []Period{{From: 0, To: ms(500), Label: "phase 1 <all up>"}, {From: ms(500), To: ms(1200), Label: "phase 2"}}
	root := decode(t, c.SVG())
	if got := root.all("title", ""); len(got) == 0 || got[0].Text != `<"&'>` {
		t.Errorf("the document's title does not survive escaping: %v", got)
	}
}

// The picture has what the reader looks for: a bar per hold with its
// fence on it, the calls, the faults with what they were, the violation
// in red where the holds overlap, and the notes.
func TestSVGDrawsTheRun(t *testing.T) {
	doc := decode(t, canary().SVG())
	root := lanes(t, doc)
	if n := len(root.all("rect", "h")); n != 0 {
		t.Errorf("%d holds drawn blue; both are part of the violation and must be red", n)
	}
	bad := root.all("rect", "b")
	if len(bad) < 2 {
		t.Fatalf("want both holds drawn red, got %d red bars", len(bad))
	}
	labels := strings.Join(root.texts("in"), " ")
	for _, fence := range []string{"1719912345678", "1719912345701"} {
		if !strings.Contains(labels, fence) {
			t.Errorf("fence %s is not on its bar: %q", fence, labels)
		}
	}
	if n := len(root.all("rect", "c")); n != 4 {
		t.Errorf("want 4 calls drawn, got %d", n)
	}
	if n := len(root.all("rect", "f")); n != 3 {
		t.Errorf("want 3 faults drawn, got %d", n)
	}
	if n := len(root.all("line", "e")); n != 2 {
		t.Errorf("want 2 events drawn, got %d", n)
	}
	beside := strings.Join(root.texts("o"), " | ")
	if beside != "killed, restarted | killed, restarted" {
		t.Errorf("want the kills and restarts labelled beside them, got %q", beside)
	}
	if !slices.Contains(root.texts("in"), "paused") {
		t.Errorf("want the pause labelled on its bar, got %q", root.texts("in"))
	}
	band := root.all("rect", "m")
	if len(band) != 1 {
		t.Fatalf("want the overlap marked by one band, got %d", len(band))
	}
	// The band covers the stretch where both held: from b's grant to its
	// release, and a's lane and b's.
	bx, bw := band[0].attr("x"), band[0].attr("width")
	var found bool
	for _, r := range bad {
		if r.attr("x") == bx && r.attr("width") == bw {
			found = true
		}
	}
	if !found {
		t.Errorf("the band (x=%s width=%s) is not where b's hold is", bx, bw)
	}
	if got := root.texts("ml"); len(got) != 1 || got[0] != "overlap 274ms" {
		t.Errorf("want the band labelled %q, got %q", "overlap 274ms", got)
	}
	names := strings.Join(doc.texts(""), " | ")
	for _, want := range []string{"node 0", "node 1", "node 2", "a & b <both>"} {
		if !strings.Contains(names, want) {
			t.Errorf("want %q in the picture, got %q", want, names)
		}
	}
	var tips []string
	for _, ti := range root.all("title", "") {
		tips = append(tips, ti.Text)
	}
	for _, want := range []string{"b: fence 1719912345701", "TryLock failed: taken", "started again, empty"} {
		if !strings.Contains(strings.Join(tips, " | "), want) {
			t.Errorf("want the tooltip %q, got %q", want, tips)
		}
	}
}

// A hold too short for its label has it beside it, where its row is
// empty; overlapping spans of one lane are drawn in rows of their own.
func TestSVGLayout(t *testing.T) {
	c := &Chart{Clients: []Lane{{Name: "w", Spans: []Span{
		{From: 0, To: ms(1000), Kind: Hold, Label: "wide"},
		{From: ms(2000), To: ms(2001), Kind: Hold, Label: "narrow-label"},
		{From: ms(500), To: ms(1500), Kind: Hold, Label: "second-row"},
	}}}}
	root := lanes(t, decode(t, c.SVG()))
	labels := root.texts("in")
	if strings.Join(labels, " ") != "wide second-row" {
		t.Errorf("labels drawn: %q; want those of the wide bars only", labels)
	}
	// The narrow hold is the last thing in its row: its label is beside
	// it, left of it at the right edge of the chart.
	beside := root.all("text", "o")
	if len(beside) != 1 || beside[0].Text != "narrow-label" || beside[0].attr("text-anchor") != "end" {
		t.Errorf("want the narrow hold's label left of it, got %+v", beside)
	}
	ys := make(map[string]bool)
	for _, r := range root.all("rect", "h") {
		ys[r.attr("y")] = true
	}
	if len(ys) != 2 {
		t.Errorf("want the holds in 2 rows, got rows at %v", ys)
	}
}

// A label that has no room right of what it labels, before the next span
// of its row, goes left of it.
func TestSVGLabelLeft(t *testing.T) {
	c := &Chart{End: ms(1000), Nodes: []Lane{{Name: "node 0", Spans: []Span{
		{From: ms(100), Kind: Event, Label: "clock +1s"},
		{From: ms(101), To: ms(900), Kind: Fault, Label: "b cut off"},
	}}}}
	root := lanes(t, decode(t, c.SVG()))
	beside := root.all("text", "o")
	if len(beside) != 1 || beside[0].Text != "clock +1s" || beside[0].attr("text-anchor") != "end" {
		t.Errorf("want the clock's label left of it, got %+v", beside)
	}
	if got := root.texts("in"); len(got) != 1 || got[0] != "b cut off" {
		t.Errorf("want the cut labelled on its bar, got %q", got)
	}
}

// However long the run, the picture stays under MaxBytes, and well-formed,
// and still shows every lane and the first violations.
func TestSVGSizeBound(t *testing.T) {
	c := &Chart{Title: "big", Width: 1600}
	for l := range 16 {
		lane := Lane{Name: fmt.Sprintf("c%d", l)}
		for i := range 6000 {
			from := ms(i*3 + l)
			lane.Spans = append(lane.Spans,
				Span{From: from, To: from + ms(1), Kind: Call, Note: "a call that failed with a long explanation"},
				Span{From: from + ms(1), To: from + ms(2), Kind: Hold, Label: fmt.Sprint(i), Note: "a hold with a long tooltip", Bad: i%50 == 0})
		}
		c.Clients = append(c.Clients, lane)
	}
	for n := range 16 {
		lane := Lane{Name: fmt.Sprintf("node %d", n)}
		for i := range 2000 {
			lane.Spans = append(lane.Spans, Span{From: ms(i * 11), Kind: Event, Label: "restarted"},
				Span{From: ms(i*11 + 1), To: ms(i*11 + 5), Kind: Fault, Label: "paused"})
		}
		c.Nodes = append(c.Nodes, lane)
	}
	for i := range 1000 {
		c.Marks = append(c.Marks, Mark{From: ms(i * 20), To: ms(i*20 + 1), Lanes: []string{"c0", "c1"}, Label: "overlap"})
		c.Notes = append(c.Notes, fmt.Sprintf("violation %d", i))
	}
	doc := c.SVG()
	if len(doc) > MaxBytes {
		t.Fatalf("the SVG is %d bytes, more than %d", len(doc), MaxBytes)
	}
	root := decode(t, doc)
	names := strings.Join(root.texts(""), " ")
	for _, want := range []string{"c0", "c15", "node 0", "node 15", "and 992 more"} {
		if !strings.Contains(names, want) {
			t.Errorf("%q is missing from the reduced picture", want)
		}
	}
	if len(root.all("rect", "b")) == 0 || len(root.texts("ml")) == 0 {
		t.Errorf("the reduced picture shows no violation")
	}
	t.Logf("%d bytes", len(doc))
}

// A small chart is drawn in full: nothing merged, every tooltip.
func TestSVGFullDetail(t *testing.T) {
	c := canary()
	if got, want := string(c.SVG()), string(c.render(detail[0])); got != want {
		t.Errorf("a small chart is not drawn at full detail")
	}
}

func TestAddLabel(t *testing.T) {
	label := ""
	for _, part := range []string{"killed", "restarted", "killed", "", "paused", "clock +1s", "clock +2s"} {
		label = addLabel(label, part)
	}
	if label != "killed, restarted, paused, …" {
		t.Errorf("got %q", label)
	}
}

func TestTickStep(t *testing.T) {
	for _, tc := range []struct{ span, want time.Duration }{
		{ms(1), 100 * time.Microsecond},
		{ms(95), ms(10)},
		{ms(1500), ms(200)},
		{ms(3000), ms(500)},
		{10 * time.Second, time.Second},
		{11 * time.Second, 2 * time.Second},
		{7 * time.Minute, time.Minute},
	} {
		if got := tickStep(tc.span); got != tc.want {
			t.Errorf("tickStep(%v) = %v, want %v", tc.span, got, tc.want)
		}
	}
}

func TestWriteFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.svg")
	c := canary()
	if err := c.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	decode(t, b)
	if err := c.WriteFile(filepath.Join(t.TempDir(), "missing", "t.svg")); err == nil || !strings.HasPrefix(err.Error(), "timeline: ") {
		t.Errorf("writing into a missing directory: got %v", err)
	}
}
