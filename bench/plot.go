package bench

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"slices"
	"strconv"
	"strings"
)

// This file draws the plots of lockbench -svg with the standard library:
// a line plot (numeric x, linear or logarithmic axes, a range bar at each
// point where several runs were measured) and a grouped bar plot
// (categories along x). Both are plain SVG with a legend on the right.

// A Series is one line of a LinePlot: a point at each (X[i], Y[i]), and,
// if Lo and Hi are set, a vertical bar from Lo[i] to Hi[i] (the range over
// runs). A NaN Y leaves the point out.
type Series struct {
	Name   string
	Color  string // an SVG colour
	Dashed bool
	X, Y   []float64
	Lo, Hi []float64
}

// A LinePlot is a plot of lines against a numeric x axis.
type LinePlot struct {
	Title, XLabel, YLabel string
	// Notes are lines of small print under the plot: the command, the
	// machine's state.
	Notes      []string
	LogX, LogY bool
	// YZero starts a linear y axis at 0.
	YZero bool
	// Styles, if set, are extra legend entries that explain line styles,
	// as "solid: p50", "dashed: p99".
	Styles []string
	Series []Series
	// Legend, if set, are the legend's entries in place of one per
	// series: one per library where each has a line per percentile.
	Legend []Series
}

// A BarPlot is a plot of bars in groups along a categorical x axis: in
// each group, a bar per BarSeries.
type BarPlot struct {
	Title, YLabel string
	Notes         []string
	Groups        []string
	LogY          bool
	Bars          []Series // X is unused; Y[i] (and Lo[i], Hi[i]) belong to Groups[i]
}

// The size of a plot, in SVG user units (pixels).
const (
	plotW, plotH                 = 760, 420
	padL, padR, padT, padB       = 72, 220, 44, 56
	noteLine                     = 14
	legendLine                   = 18
	fontSize, smallFont, bigFont = 12, 10, 15
)

// palette has colours told apart by most readers, in the order series
// take them.
var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#17becf", "#bcbd22"}

// libColor returns the colour of library lib in every plot, so that a
// library looks the same from one plot to the next.
func libColor(lib string) string {
	if i := slices.Index(Libraries(), lib); i >= 0 {
		return palette[i%len(palette)]
	}
	return ""
}

// An axis maps data values onto a pixel range.
type axis struct {
	lo, hi   float64 // data range; for a log axis, of log10 of the values
	p0, p1   float64 // pixel range
	log      bool
	ticks    []float64 // data values
	tickText []string
}

func (a *axis) pos(v float64) float64 {
	if a.log {
		v = math.Log10(v)
	}
	if a.hi == a.lo {
		return (a.p0 + a.p1) / 2
	}
	return a.p0 + (v-a.lo)/(a.hi-a.lo)*(a.p1-a.p0)
}

// newAxis makes an axis over the values vs. at gives the ticks to use if
// set (the data's own x values, say); otherwise they are chosen: 1, 2 and
// 5 times powers of ten.
func newAxis(vs []float64, p0, p1 float64, log, zero bool, at []float64) *axis {
	a := &axis{p0: p0, p1: p1, log: log}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vs {
		if math.IsNaN(v) || math.IsInf(v, 0) || (log && v <= 0) {
			continue
		}
		lo, hi = min(lo, v), max(hi, v)
	}
	if math.IsInf(lo, 1) {
		lo, hi = 1, 10
	}
	if zero && !log {
		lo = min(lo, 0)
	}
	if log {
		if at == nil {
			at = logTicks(lo, hi)
		}
		l, h := math.Log10(lo), math.Log10(hi)
		if len(at) > 0 {
			l, h = min(l, math.Log10(at[0])), max(h, math.Log10(at[len(at)-1]))
		}
		if h == l {
			l, h = l-0.5, h+0.5
		}
		pad := (h - l) * 0.04
		a.lo, a.hi = l-pad, h+pad
	} else {
		if at == nil {
			at = linTicks(lo, hi)
			lo, hi = min(lo, at[0]), max(hi, at[len(at)-1])
		}
		if hi == lo {
			lo, hi = lo-1, hi+1
		}
		pad := (hi - lo) * 0.04
		a.lo, a.hi = lo-pad, hi+pad
		if zero && lo == 0 {
			a.lo = 0
		}
	}
	a.ticks = at
	for _, t := range at {
		a.tickText = append(a.tickText, fmtNum(t))
	}
	return a
}

// linTicks returns about five round ticks that cover lo to hi.
func linTicks(lo, hi float64) []float64 {
	if hi <= lo {
		hi = lo + 1
	}
	raw := (hi - lo) / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var ts []float64
	for t := math.Floor(lo/step) * step; t <= hi+step*1e-9; t += step {
		ts = append(ts, math.Round(t/step)*step)
	}
	if ts[len(ts)-1] < hi {
		ts = append(ts, ts[len(ts)-1]+step)
	}
	return ts
}

// logTicks returns 1, 2 and 5 times the powers of ten from below lo to
// above hi, thinned to powers of ten alone over a wide range.
func logTicks(lo, hi float64) []float64 {
	e0, e1 := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	mults := []float64{1, 2, 5}
	if e1-e0 > 3 {
		mults = []float64{1}
	}
	var ts []float64
	for e := e0; e <= e1; e++ {
		for _, m := range mults {
			t := m * math.Pow(10, e)
			ts = append(ts, t)
		}
	}
	// Keep one tick at or below lo and one at or above hi.
	for len(ts) > 2 && ts[1] <= lo {
		ts = ts[1:]
	}
	for len(ts) > 2 && ts[len(ts)-2] >= hi {
		ts = ts[:len(ts)-1]
	}
	return ts
}

// fmtNum formats a tick: 250, 1.5k, 10k, 1M, 0.2.
func fmtNum(v float64) string {
	round := func(x, scale float64) string { return strconv.FormatFloat(math.Round(x*scale)/scale, 'f', -1, 64) }
	switch av := math.Abs(v); {
	case av >= 1e6:
		return round(v/1e6, 100) + "M"
	case av >= 1e4:
		return round(v/1e3, 10) + "k"
	case av >= 1 || av == 0:
		return round(v, 100)
	}
	return strconv.FormatFloat(v, 'g', 2, 64)
}

// svgDoc accumulates an SVG document.
type svgDoc struct {
	b      bytes.Buffer
	height float64
}

func newSVG(notes int) *svgDoc {
	d := &svgDoc{height: plotH + float64(notes)*noteLine}
	fmt.Fprintf(&d.b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%.0f" viewBox="0 0 %d %.0f" font-family="sans-serif" font-size="%d">`+"\n",
		plotW, d.height, plotW, d.height, fontSize)
	fmt.Fprintf(&d.b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	return d
}

func (d *svgDoc) text(x, y float64, anchor, s string, size int, extra string) {
	fmt.Fprintf(&d.b, `<text x="%.1f" y="%.1f" text-anchor="%s" font-size="%d"%s>%s</text>`+"\n", x, y, anchor, size, extra, html.EscapeString(s))
}

func (d *svgDoc) line(x1, y1, x2, y2 float64, stroke string, width float64, dash bool) {
	da := ""
	if dash {
		da = ` stroke-dasharray="6 4"`
	}
	fmt.Fprintf(&d.b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="%.1f"%s/>`+"\n", x1, y1, x2, y2, stroke, width, da)
}

// frame draws the title, the axes with their ticks, grid lines and
// labels, and the notes.
func (d *svgDoc) frame(title, xlabel, ylabel string, notes []string, x, y *axis) {
	d.text(plotW/2-padR/2+padL/2, 24, "middle", title, bigFont, ` font-weight="bold"`)
	left, right, top, bottom := float64(padL), float64(plotW-padR), float64(padT), float64(plotH-padB)
	for i, t := range y.ticks {
		py := y.pos(t)
		d.line(left, py, right, py, "#e0e0e0", 1, false)
		d.text(left-6, py+4, "end", y.tickText[i], smallFont, "")
	}
	if x != nil {
		for i, t := range x.ticks {
			px := x.pos(t)
			d.line(px, top, px, bottom, "#f0f0f0", 1, false)
			d.line(px, bottom, px, bottom+5, "black", 1, false)
			d.text(px, bottom+18, "middle", x.tickText[i], smallFont, "")
		}
	}
	d.line(left, bottom, right, bottom, "black", 1, false)
	d.line(left, top, left, bottom, "black", 1, false)
	if xlabel != "" {
		d.text((left+right)/2, bottom+38, "middle", xlabel, fontSize, "")
	}
	d.text(16, (top+bottom)/2, "middle", ylabel, fontSize, fmt.Sprintf(` transform="rotate(-90 16 %.1f)"`, (top+bottom)/2))
	for i, n := range notes {
		d.text(8, plotH+float64(i)*noteLine, "start", n, smallFont, ` fill="#444"`)
	}
}

// legend draws an entry per series, and the style entries, right of the
// plot.
func (d *svgDoc) legend(series []Series, styles []string, bars bool) {
	x, y := float64(plotW-padR+16), float64(padT+8)
	for _, s := range series {
		if bars {
			fmt.Fprintf(&d.b, `<rect x="%.1f" y="%.1f" width="22" height="10" fill="%s"/>`+"\n", x, y-9, s.Color)
		} else {
			d.line(x, y-4, x+22, y-4, s.Color, 2.5, s.Dashed)
		}
		d.text(x+28, y, "start", s.Name, smallFont+1, "")
		y += legendLine
	}
	if len(styles) > 0 {
		y += 6
		for i, st := range styles {
			d.line(x, y-4, x+22, y-4, "#333", 2, i%2 == 1)
			d.text(x+28, y, "start", st, smallFont+1, "")
			y += legendLine
		}
	}
}

// whisker draws a bar from lo to hi at x, with ends w wide each side,
// unless the range is empty.
func (d *svgDoc) whisker(x, w, lo, hi float64, y *axis, color string) {
	if !(hi > lo) {
		return // NaN, or no range
	}
	d.line(x, y.pos(lo), x, y.pos(hi), color, 1.2, false)
	d.line(x-w, y.pos(lo), x+w, y.pos(lo), color, 1.2, false)
	d.line(x-w, y.pos(hi), x+w, y.pos(hi), color, 1.2, false)
}

func (d *svgDoc) bytes() []byte {
	d.b.WriteString("</svg>\n")
	return d.b.Bytes()
}

// at returns v[i], or NaN past its end.
func at(v []float64, i int) float64 {
	if i < len(v) {
		return v[i]
	}
	return math.NaN()
}

// SVG draws the plot.
func (p *LinePlot) SVG() []byte {
	var xs, ys, xticks []float64
	for _, s := range p.Series {
		for i := range s.X {
			if math.IsNaN(at(s.Y, i)) {
				continue
			}
			xs = append(xs, s.X[i])
			ys = append(ys, s.Y[i], at(s.Lo, i), at(s.Hi, i))
			if !slices.Contains(xticks, s.X[i]) {
				xticks = append(xticks, s.X[i])
			}
		}
	}
	slices.Sort(xticks)
	if len(xticks) > 12 {
		xticks = nil // too many: round ones
	}
	x := newAxis(xs, padL, plotW-padR, p.LogX, false, xticks)
	y := newAxis(ys, plotH-padB, padT, p.LogY, p.YZero, nil)
	d := newSVG(len(p.Notes))
	d.frame(p.Title, p.XLabel, p.YLabel, p.Notes, x, y)
	for _, s := range p.Series {
		var pts []string
		for i := range s.X {
			v := at(s.Y, i)
			if math.IsNaN(v) || (p.LogY && v <= 0) {
				continue
			}
			px, py := x.pos(s.X[i]), y.pos(v)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px, py))
			if !p.LogY || at(s.Lo, i) > 0 {
				d.whisker(px, 4, at(s.Lo, i), at(s.Hi, i), y, s.Color)
			}
			fmt.Fprintf(&d.b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", px, py, s.Color)
		}
		if len(pts) > 1 {
			da := ""
			if s.Dashed {
				da = ` stroke-dasharray="6 4"`
			}
			fmt.Fprintf(&d.b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), s.Color, da)
		}
	}
	leg := p.Series
	if p.Legend != nil {
		leg = p.Legend
	}
	d.legend(leg, p.Styles, false)
	return d.bytes()
}

// SVG draws the plot.
func (p *BarPlot) SVG() []byte {
	var ys []float64
	for _, s := range p.Bars {
		for i := range p.Groups {
			ys = append(ys, at(s.Y, i), at(s.Lo, i), at(s.Hi, i))
		}
	}
	y := newAxis(ys, plotH-padB, padT, p.LogY, !p.LogY, nil)
	d := newSVG(len(p.Notes))
	d.frame(p.Title, "", p.YLabel, p.Notes, nil, y)
	left, right, bottom := float64(padL), float64(plotW-padR), float64(plotH-padB)
	gw := (right - left) / float64(max(len(p.Groups), 1))
	bw := gw * 0.8 / float64(max(len(p.Bars), 1))
	base := bottom
	if p.LogY {
		base = y.p0
	}
	for g, name := range p.Groups {
		gx := left + float64(g)*gw + gw*0.1
		l1, l2 := splitLabel(name)
		d.text(gx+gw*0.4, bottom+16, "middle", l1, smallFont, "")
		if l2 != "" {
			d.text(gx+gw*0.4, bottom+28, "middle", l2, smallFont, "")
		}
		for k, s := range p.Bars {
			v := at(s.Y, g)
			if math.IsNaN(v) || (p.LogY && v <= 0) {
				continue
			}
			bx, by := gx+float64(k)*bw, y.pos(v)
			fmt.Fprintf(&d.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n", bx, by, bw*0.92, max(base-by, 0), s.Color)
			d.whisker(bx+bw*0.46, 3, at(s.Lo, g), at(s.Hi, g), y, "black")
		}
	}
	d.legend(p.Bars, nil, true)
	return d.bytes()
}

// splitLabel splits a label longer than 12 bytes in two after its first
// slash or at its first space.
func splitLabel(s string) (string, string) {
	if i := strings.IndexAny(s, "/ "); len(s) > 12 && i > 0 {
		return s[:i+1], s[i+1:]
	}
	return s, ""
}
