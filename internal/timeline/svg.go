package timeline

import (
	"bytes"
	"cmp"
	"encoding/xml"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The geometry of a chart, in pixels.
const (
	defaultWidth = 1200
	nameWidth    = 120 // the lanes' names, left of the axis
	rightMargin  = 16
	rowHeight    = 16 // a lane has a row for each set of spans that do not overlap
	barHeight    = 12
	lanePad      = 3
	maxRows      = 4    // more overlapping spans are drawn over the last row
	charWidth    = 6.0  // the width of a character of the 10–11px font, about
	markRows     = 3    // rows of marks' labels above the lanes
	maxNotes     = 8    // lines of Notes drawn
	groupGap     = 10.0 // between the clients' lanes and the nodes'
)

// style is the chart's stylesheet: the classes the elements name.
const style = `text{font:11px sans-serif;fill:#222}` +
	`.t{font:bold 15px sans-serif}.s{font-size:12px;fill:#555}` +
	`.in{font-size:10px;fill:#fff}.o{font-size:10px;paint-order:stroke;stroke:#fff;stroke-width:3px}` +
	`.ml{font-size:10px;font-weight:bold;fill:#c62020}.pl{font-size:10px;fill:#666}` +
	`.h{fill:#3b6ea5}.l{fill:#94b4d6}.c{fill:#a8a8a8}.f{fill:#e69a28}.e{stroke:#333;stroke-width:2}` +
	`.b{fill:#d62728}.be{stroke:#d62728;stroke-width:2}` +
	`.m{fill:#d62728;fill-opacity:.22;stroke:#d62728}.ml2{stroke:#d62728;stroke-dasharray:2 2}` +
	`.g{stroke:#e6e6e6}.sep{stroke:#c8c8c8}.p{fill:#f3f3f3}.pb{stroke:#bbb;stroke-dasharray:4 3}`

// A level of detail at which a chart is drawn.
type level struct {
	// merge: spans of one kind in one row with at most this many pixels
	// between them are drawn as one; below zero, none are.
	merge    float64
	mergeBad bool // spans of violations are merged too
	notes    bool // tooltips are drawn
	marks    int  // the most marks drawn
}

// detail lists the levels at which SVG tries to draw a chart, in order.
var detail = []level{
	{merge: -1, notes: true, marks: 400},
	{merge: 1, notes: true, marks: 400},
	{merge: 4, notes: true, marks: 200},
	{merge: 4, marks: 100},
	{merge: 16, marks: 40},
	{merge: 64, mergeBad: true, marks: 16},
	{merge: math.MaxFloat64, mergeBad: true, marks: 16}, // a span of each kind a row
}

// An axis maps the chart's time to pixels.
type axis struct {
	start, end time.Duration
	step       time.Duration // between ticks
	x0, width  float64
}

func (a axis) x(t time.Duration) float64 {
	t = min(max(t, a.start), a.end)
	return a.x0 + float64(t-a.start)/float64(a.end-a.start)*a.width
}

// newAxis fits the axis to the chart.
func (c *Chart) newAxis(width float64) axis {
	lo, hi := c.Start, c.End
	if hi <= lo {
		lo, hi = c.bounds()
	}
	step := tickStep(hi - lo)
	if c.End <= c.Start {
		lo = lo / step * step // the first tick at the left edge
	}
	return axis{start: lo, end: hi, step: step, x0: nameWidth, width: width - nameWidth - rightMargin}
}

// bounds returns the first and the last moment in the chart.
func (c *Chart) bounds() (lo, hi time.Duration) {
	first := true
	see := func(from, to time.Duration) {
		if first {
			lo, hi, first = from, to, false
		}
		lo, hi = min(lo, from), max(hi, from, to)
	}
	for _, lanes := range [][]Lane{c.Clients, c.Nodes} {
		for _, l := range lanes {
			for _, s := range l.Spans {
				if s.Kind == Event {
					see(s.From, s.From)
				} else {
					see(s.From, s.To)
				}
			}
		}
	}
	for _, p := range c.Periods {
		see(p.From, p.To)
	}
	for _, m := range c.Marks {
		see(m.From, m.To)
	}
	if hi <= lo {
		hi = lo + time.Millisecond
	}
	return lo, hi
}

// tickStep returns the shortest step that puts at most ten ticks on
// span: 1, 2 or 5 times a power of ten up to 5s, then steps that fit the
// minutes and hours.
func tickStep(span time.Duration) time.Duration {
	var steps []time.Duration
	for m := time.Microsecond; m <= time.Second; m *= 10 {
		steps = append(steps, m, 2*m, 5*m)
	}
	steps = append(steps, 10*time.Second, 20*time.Second, 30*time.Second,
		time.Minute, 2*time.Minute, 5*time.Minute, 10*time.Minute, 20*time.Minute, 30*time.Minute, time.Hour)
	for _, s := range steps {
		if span/s <= 10 {
			return s
		}
	}
	return (span/10 + time.Hour - 1) / time.Hour * time.Hour
}

// A drawn span: a span where it is drawn, or several drawn as one.
type drawn struct {
	Span
	x0, x1 float64
	n      int // how many spans it stands for
}

// A laneBox is a lane laid out.
type laneBox struct {
	name string
	rows [][]drawn
	top  float64
}

func (l *laneBox) height() float64 { return float64(len(l.rows))*rowHeight + 2*lanePad }

// layout puts the spans of a lane in rows, each span in the first row
// where it overlaps no other, and merges spans as lv says.
func layout(l Lane, ax axis, lv level) laneBox {
	spans := slices.Clone(l.Spans)
	slices.SortStableFunc(spans, func(a, b Span) int { return cmp.Compare(a.From, b.From) })
	box := laneBox{name: l.Name}
	var rows []*row
	for _, s := range spans {
		d := drawn{Span: s, x0: ax.x(s.From), n: 1}
		d.x1 = d.x0
		if s.Kind != Event {
			d.x1 = max(d.x0, ax.x(s.To))
		}
		i := slices.IndexFunc(rows, func(r *row) bool { return r.end <= d.x0+0.01 })
		switch {
		case i >= 0:
		case len(rows) < maxRows:
			i = len(rows)
			rows = append(rows, &row{})
		default:
			i = 0
			for j, r := range rows {
				if r.end < rows[i].end {
					i = j
				}
			}
		}
		rows[i].add(d, lv)
	}
	for _, r := range rows {
		box.rows = append(box.rows, r.spans)
	}
	if len(box.rows) == 0 {
		box.rows = [][]drawn{nil}
	}
	return box
}

// A row is a row of a lane being laid out.
type row struct {
	spans []drawn
	end   float64      // where its last span ends
	last  map[Kind]int // the index of the last span of each kind
}

// add appends d to the row, or merges it into the row's last span of its
// kind, as lv allows.
func (r *row) add(d drawn, lv level) {
	r.end = max(r.end, d.x1)
	if r.last == nil {
		r.last = make(map[Kind]int)
	}
	i, ok := r.last[d.Kind]
	if !ok || lv.merge < 0 {
		r.last[d.Kind] = len(r.spans)
		r.spans = append(r.spans, d)
		return
	}
	last := &r.spans[i]
	if d.x0-last.x1 > lv.merge || (!lv.mergeBad && (last.Bad || d.Bad)) {
		r.last[d.Kind] = len(r.spans)
		r.spans = append(r.spans, d)
		return
	}
	switch {
	case d.Kind != Event:
		last.Label = ""
	default:
		last.Label = addLabel(last.Label, d.Label)
	}
	last.x1, last.To, last.n = max(last.x1, d.x1), max(last.To, d.To), last.n+d.n
	last.Bad = last.Bad || d.Bad
}

// addLabel adds part to label, a list of parts joined by ", ", unless it
// is there already; after three parts, "…" stands for the rest.
func addLabel(label, part string) string {
	parts := strings.Split(label, ", ")
	switch {
	case label == "":
		return part
	case part == "" || slices.Contains(parts, part):
		return label
	case len(parts) < 3:
		return label + ", " + part
	case parts[len(parts)-1] != "…":
		return label + ", …"
	}
	return label
}

// noun names spans of a kind, for the tooltip of merged spans.
var noun = map[Kind]string{Hold: "holds", Lapsed: "holds", Call: "calls", Fault: "faults", Event: "events"}

// note returns the tooltip of d.
func (d drawn) note() string {
	if d.n == 1 {
		return d.Note
	}
	if d.Kind == Event {
		return fmt.Sprintf("%d %s from %v to %v: %s", d.n, noun[d.Kind], d.From, d.To, d.Label)
	}
	return fmt.Sprintf("%d %s from %v to %v", d.n, noun[d.Kind], d.From, d.To)
}

// An svg is a document being written.
type svg struct {
	bytes.Buffer
	notes bool // tooltips are written
}

// esc escapes s for XML text and attribute values.
func esc(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

// num formats a coordinate.
func num(v float64) string {
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// round1 rounds a coordinate to a tenth of a pixel.
func round1(v float64) float64 { return float64(int64(v*10+0.5)) / 10 }

// rect writes a rectangle of class class with an optional tooltip.
func (w *svg) rect(class string, x, y, width, height float64, note string) {
	fmt.Fprintf(w, `<rect class="%s" x="%s" y="%s" width="%s" height="%s"`, class, num(round1(x)), num(round1(y)), num(round1(max(width, 1))), num(round1(height)))
	w.close("rect", note)
}

// line writes a line of class class with an optional tooltip.
func (w *svg) line(class string, x1, y1, x2, y2 float64, note string) {
	fmt.Fprintf(w, `<line class="%s" x1="%s" y1="%s" x2="%s" y2="%s"`, class, num(round1(x1)), num(round1(y1)), num(round1(x2)), num(round1(y2)))
	w.close("line", note)
}

// close ends the element name, with note as its tooltip if tooltips are
// written.
func (w *svg) close(name, note string) {
	if note == "" || !w.notes {
		w.WriteString("/>")
		return
	}
	fmt.Fprintf(w, "><title>%s</title></%s>", esc(note), name)
}

// text writes text of class class at x, y; anchor is "" (start), "middle"
// or "end".
func (w *svg) text(class string, x, y float64, anchor, s string) {
	fmt.Fprintf(w, `<text class="%s" x="%s" y="%s"`, class, num(round1(x)), num(round1(y)))
	if anchor != "" {
		fmt.Fprintf(w, ` text-anchor="%s"`, anchor)
	}
	fmt.Fprintf(w, ">%s</text>", esc(s))
}

// fit cuts s to at most width pixels of text of the 10–11px font.
func fit(s string, width float64) string { return fitChars(s, int(width/charWidth)) }

// fitChars cuts s to at most n characters.
func fitChars(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	if n < 2 {
		return ""
	}
	return string(r[:n-1]) + "…"
}

// textWidth estimates the width of s in pixels.
func textWidth(s string) float64 { return float64(len([]rune(s))) * charWidth }

// render draws the chart at a level of detail.
func (c *Chart) render(lv level) []byte {
	width := float64(cmp.Or(c.Width, defaultWidth))
	ax := c.newAxis(width)
	body := &svg{notes: lv.notes}

	// The heading.
	y := 22.0
	body.text("t", 8, y, "", fitChars(c.Title, int((width-16)/9)))
	if c.Subtitle != "" {
		y += 18
		body.text("s", 8, y, "", fitChars(c.Subtitle, int((width-16)/7)))
	}
	y += 8
	if len(c.Periods) > 0 {
		y += 14
		for _, p := range c.Periods {
			body.text("pl", ax.x(p.From)+4, y-3, "", fit(p.Label, ax.x(p.To)-ax.x(p.From)-6))
		}
	}
	marks := c.Marks[:min(len(c.Marks), lv.marks)]
	labelled, rows := placeMarks(marks, ax)
	markTop := y
	y += float64(rows)*13 + 4

	// The lanes.
	lanesTop := y
	var boxes []laneBox
	for g, group := range [][]Lane{c.Clients, c.Nodes} {
		if g == 1 && len(c.Clients) > 0 && len(c.Nodes) > 0 {
			y += groupGap
		}
		for _, l := range group {
			b := layout(l, ax, lv)
			b.top = y
			y += b.height()
			boxes = append(boxes, b)
		}
	}
	lanesBottom := max(y, lanesTop+rowHeight)

	// Behind the lanes: the periods and the grid.
	for i, p := range c.Periods {
		if i%2 == 1 {
			body.rect("p", ax.x(p.From), lanesTop, ax.x(p.To)-ax.x(p.From), lanesBottom-lanesTop, "")
		}
		if i > 0 {
			body.line("pb", ax.x(p.From), lanesTop-14, ax.x(p.From), lanesBottom, "")
		}
	}
	for t := ax.start; t <= ax.end; t += ax.step {
		x := ax.x(t)
		body.line("g", x, lanesTop, x, lanesBottom, "")
		label, anchor := tickLabel(t), "middle"
		if x+textWidth(label)/2 > width {
			anchor = "end"
		}
		body.text("pl", x, lanesBottom+13, anchor, label)
	}
	for _, b := range boxes {
		body.text("", 8, b.top+lanePad+rowHeight/2+4, "", fit(b.name, nameWidth-12))
		body.line("sep", 0, b.top+b.height(), width, b.top+b.height(), "")
	}
	body.WriteString(`<g class="lanes">`)
	body.bands(marks, boxes, ax, lanesTop, lanesBottom)
	for _, b := range boxes {
		body.lane(b, width)
	}
	body.markLabels(marks, labelled, boxes, ax, markTop, lanesTop, lanesBottom)
	body.WriteString("</g>")

	// Under the lanes: the legend and the notes.
	y = lanesBottom + 34
	body.WriteString(`<g class="legend">`)
	body.legend(c, y)
	body.WriteString("</g>")
	for _, n := range c.Notes[:min(len(c.Notes), maxNotes)] {
		y += 16
		body.text("", 8, y, "", fit(n, width-16))
	}
	if len(c.Notes) > maxNotes {
		y += 16
		body.text("s", 8, y, "", fmt.Sprintf("and %d more", len(c.Notes)-maxNotes))
	}
	height := y + 12

	var out bytes.Buffer
	fmt.Fprintf(&out, `<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s">`, num(width), num(height), num(width), num(height))
	fmt.Fprintf(&out, "<title>%s</title><style>%s</style>", esc(c.Title), style)
	fmt.Fprintf(&out, `<rect width="100%%" height="100%%" fill="#fff"/>`)
	out.Write(body.Bytes())
	out.WriteString("</svg>\n")
	return out.Bytes()
}

// tickLabel formats a moment on the axis.
func tickLabel(t time.Duration) string {
	if t == 0 {
		return "0"
	}
	return t.String()
}

// lane draws the spans of a lane, and labels: a hold's on its bar, or
// beside it where its row is empty; a fault's on its bar or beside it; an
// event's beside it.
func (w *svg) lane(b laneBox, width float64) {
	for r, row := range b.rows {
		top := b.top + lanePad + float64(r)*rowHeight
		mid := top + rowHeight/2
		var beside []aside
		after := 0.0 // where the spans so far, calls aside, end
		for i, d := range row {
			if i > 0 && row[i-1].Kind != Call {
				after = max(after, row[i-1].x1)
			}
			class := kindClass[d.Kind]
			switch {
			case d.Bad && d.Kind == Event:
				class = "be"
			case d.Bad:
				class = "b"
			}
			switch d.Kind {
			case Call:
				w.rect(class, d.x0, mid-1.5, d.x1-d.x0, 3, d.note())
			case Event:
				w.line(class, d.x0, top+1, d.x0, top+rowHeight-1, d.note())
			case Fault:
				w.rect(class, d.x0, mid-barHeight/2, d.x1-d.x0, barHeight, d.note())
			default:
				w.rect(class, d.x0, mid-barHeight/2, max(d.x1-d.x0, 2), barHeight, d.note())
			}
			if d.Label == "" || d.Kind == Call {
				continue
			}
			if d.Kind != Event && textWidth(d.Label)+4 <= d.x1-d.x0 {
				w.text("in", d.x0+2, mid+3.5, "", d.Label)
				continue
			}
			// Beside it, between the spans before and after it in its row;
			// calls, thin lines, do not stand in a label's way.
			a := aside{from: d.x0, to: d.x1, text: d.Label, limit: width, join: d.Kind == Fault || d.Kind == Event}
			if j := slices.IndexFunc(row[i+1:], notCall); j >= 0 {
				a.limit = row[i+1+j].x0
			}
			a.after = after
			beside = append(beside, a)
		}
		w.beside(beside, mid+3.5, width)
	}
}

// kindClass names the class of the spans of each kind.
var kindClass = map[Kind]string{Hold: "h", Lapsed: "l", Call: "c", Fault: "f", Event: "e"}

func notCall(d drawn) bool { return d.Kind != Call }

// An aside is a label to be written beside what it labels.
type aside struct {
	from, to float64 // where what it labels begins and ends
	text     string
	after    float64 // the label must begin after this: where the span before it ends
	limit    float64 // the label must end before this: where the span after it begins
	join     bool    // a fault's or an event's: joined to its neighbours'
}

// beside writes labels to the right of what they label or, where the
// next span of the row leaves no room, to the left: the labels of faults
// and events that end within a few pixels of one another joined (a kill
// and the restart that ends it), three at the most, and any label that
// has room on neither side left out (the tooltip still has it).
func (w *svg) beside(as []aside, y, width float64) {
	slices.SortStableFunc(as, func(a, b aside) int { return cmp.Compare(a.to, b.to) })
	var end float64 // where the last label written ends
	for i := 0; i < len(as); {
		a := as[i]
		j := i + 1
		for ; a.join && j < len(as) && as[j].join && as[j].to-a.to < 8; j++ {
			a.text = addLabel(a.text, as[j].text)
			a.to, a.limit = as[j].to, as[j].limit
		}
		i = j
		tw := textWidth(a.text)
		switch {
		case a.to+3 >= end && a.to+3+tw <= min(a.limit, width)-2:
			w.text("o", a.to+3, y, "", a.text)
			end = a.to + 3 + tw + 4
		case a.from-3-tw >= max(end, a.after+2, nameWidth):
			w.text("o", a.from-3, y, "end", a.text)
			end = a.from
		}
	}
}

// placeMarks puts the labels of marks in rows above the lanes, each in the
// first row where it runs into no other. It returns the row of each
// mark's label (-1 for a label left out) and how many rows there are.
func placeMarks(marks []Mark, ax axis) (row []int, rows int) {
	row = make([]int, len(marks))
	var ends []float64
	order := make([]int, len(marks))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(marks[a].From, marks[b].From) })
	for _, i := range order {
		m := marks[i]
		x := ax.x(m.From)
		r := slices.IndexFunc(ends, func(end float64) bool { return end <= x })
		if r < 0 && len(ends) < markRows {
			r = len(ends)
			ends = append(ends, 0)
		}
		row[i] = r
		if r >= 0 {
			ends[r] = x + textWidth(m.Label) + 6
		}
	}
	return row, len(ends)
}

// bands draws the violations, behind the spans: a red band over the lanes
// each names, or a red line where it has no length.
func (w *svg) bands(marks []Mark, boxes []laneBox, ax axis, lanesTop, lanesBottom float64) {
	for _, m := range marks {
		top, bottom := markSpan(m, boxes, lanesTop, lanesBottom)
		x0, x1 := ax.x(m.From), ax.x(m.To)
		if x1-x0 < 2 {
			w.line("be", x0, top, x0, bottom, m.Note)
		} else {
			w.rect("m", x0, top, x1-x0, bottom-top, m.Note)
		}
	}
}

// markLabels writes the labels of the marks above the lanes, each with a
// dashed line down to its band.
func (w *svg) markLabels(marks []Mark, row []int, boxes []laneBox, ax axis, labelTop, lanesTop, lanesBottom float64) {
	for i, m := range marks {
		if row[i] < 0 {
			continue
		}
		top, _ := markSpan(m, boxes, lanesTop, lanesBottom)
		x, y := ax.x(m.From), labelTop+float64(row[i]+1)*13
		w.text("ml", x, y, "", fitChars(m.Label, 40))
		w.line("ml2", x, y+2, x, top, "")
	}
}

// markSpan returns the top and the bottom of the lanes m names, or of all
// lanes.
func markSpan(m Mark, boxes []laneBox, lanesTop, lanesBottom float64) (top, bottom float64) {
	top, bottom = lanesBottom, lanesTop
	for _, b := range boxes {
		if slices.Contains(m.Lanes, b.name) {
			top, bottom = min(top, b.top), max(bottom, b.top+b.height())
		}
	}
	if top >= bottom {
		return lanesTop, lanesBottom
	}
	return top, bottom
}

// legend explains the kinds of span the chart draws.
func (w *svg) legend(c *Chart, y float64) {
	used := make(map[Kind]bool)
	bad := len(c.Marks) > 0
	for _, lanes := range [][]Lane{c.Clients, c.Nodes} {
		for _, l := range lanes {
			for _, s := range l.Spans {
				used[s.Kind] = true
				bad = bad || s.Bad
			}
		}
	}
	items := []struct {
		kind  Kind
		class string
		text  string
	}{
		{Hold, "h", "hold, labelled with its fence"},
		{Lapsed, "l", "hold that ran to its validity's end"},
		{Call, "c", "call: waiting, or failed"},
		{Fault, "f", "fault in force"},
		{Event, "e", "event"},
	}
	x := 8.0
	for _, it := range items {
		if !used[it.kind] {
			continue
		}
		switch it.kind {
		case Call:
			w.rect(it.class, x, y-5.5, 14, 3, "")
		case Event:
			w.line(it.class, x+7, y-10, x+7, y+2, "")
		default:
			w.rect(it.class, x, y-10, 14, 10, "")
		}
		w.text("", x+18, y-1, "", it.text)
		x += 18 + textWidth(it.text) + 14
	}
	if bad {
		w.rect("b", x, y-10, 14, 10, "")
		w.text("", x+18, y-1, "", "violation")
	}
}
