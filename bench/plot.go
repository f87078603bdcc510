package bench

import (
	"bytes"
	"image/color"
	"math"
	"slices"
	"strconv"
	"strings"

	xfont "golang.org/x/image/font"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// This file draws the plots of lockbench -svg with gonum.org/v1/plot: a
// line plot (numeric x, linear or logarithmic axes, a range bar at each
// point where several runs were measured) and a grouped bar plot.

// A Series is one line of a LinePlot: a point at each (X[i], Y[i]), and,
// if Lo and Hi are set, a vertical bar from Lo[i] to Hi[i] (the range over
// runs). A NaN Y leaves the point out.
type Series struct {
	Name   string
	Color  string // "#rrggbb"
	Dashed bool
	X, Y   []float64
	Lo, Hi []float64
}

// A LinePlot is a plot of lines against a numeric x axis.
type LinePlot struct {
	Title, XLabel, YLabel string
	// Notes are lines of small print under the plot: the command, the
	// machine's state.
	Notes []string
	// LogX and LogY make an axis logarithmic; a linear y axis starts
	// at 0.
	LogX, LogY bool
	// Styles, if set, are extra legend entries that explain line styles,
	// as "solid: p50", "dashed: p99".
	Styles []string
	Series []Series
	// Legend, if set, are the legend's entries in place of one per
	// series: one per library where each has a line per percentile.
	Legend []Series
}

// A BarPlot is a plot of bars in groups along a categorical x axis: in
// each group, a bar per series, from 0.
type BarPlot struct {
	Title, YLabel string
	Notes         []string
	Groups        []string
	Bars          []Series // X is unused; Y[i] (and Lo[i], Hi[i]) belong to Groups[i]
}

// The size of a plot, in points: the plot's area is plotW-legendW wide
// and plotH high, with the legend right of it and the notes, noteLine
// apart, below both.
const plotW, plotH, legendW, noteLine = 760, 420, 200, 13

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

// rgb returns the colour "#rrggbb", or black.
func rgb(s string) color.Color {
	v, _ := strconv.ParseUint(strings.TrimPrefix(s, "#"), 16, 32)
	return color.RGBA{uint8(v >> 16), uint8(v >> 8), uint8(v), 255}
}

// sans returns a text style in Liberation Sans of the given size.
func sans(size vg.Length, c color.Color) text.Style {
	return text.Style{Font: font.From(font.Font{Typeface: "Liberation", Variant: "Sans"}, size), Color: c, Handler: plot.DefaultTextHandler}
}

// newPlot returns a plot with the titles and fonts of every plot here.
func newPlot(title, xlabel, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, xlabel, ylabel
	p.Title.TextStyle, p.Title.Padding = sans(15, color.Black), 12
	p.Title.TextStyle.Font.Weight = xfont.WeightBold
	p.Title.TextStyle.XAlign, p.Title.TextStyle.YAlign = draw.XCenter, draw.YTop
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font, a.Tick.Label.Font = sans(12, nil).Font, sans(10, nil).Font
	}
	return p
}

// ticker labels an axis's ticks as fmtNum does: at the values given, if
// any; else at 1, 2 and 5 times powers of ten on a log axis; else where
// gonum puts them.
func ticker(log bool, at []float64) plot.Ticker {
	return plot.TickerFunc(func(lo, hi float64) []plot.Tick {
		vs, ts := at, []plot.Tick(nil)
		if log && vs == nil {
			vs = logTicks(lo, hi)
		} else if vs == nil {
			ts = plot.DefaultTicks{}.Ticks(lo, hi)
		}
		for _, v := range vs {
			ts = append(ts, plot.Tick{Value: v, Label: "-"})
		}
		for i := range ts {
			if ts[i].Label != "" {
				ts[i].Label = fmtNum(ts[i].Value)
			}
		}
		return ts
	})
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
			ts = append(ts, m*math.Pow(10, e))
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

// at returns v[i], or NaN past its end.
func at(v []float64, i int) float64 {
	if i < len(v) {
		return v[i]
	}
	return math.NaN()
}

// points returns the points of s at x(i), and the range bars at those
// with a range, leaving out what a log y axis cannot show.
func points(s Series, n int, x func(i int) float64, logY bool) (plotter.XYs, *plotter.YErrorBars) {
	var pts plotter.XYs
	bars := &plotter.YErrorBars{LineStyle: draw.LineStyle{Color: rgb(s.Color), Width: 1}, CapWidth: 8}
	for i := range n {
		y, lo, hi := at(s.Y, i), at(s.Lo, i), at(s.Hi, i)
		if math.IsNaN(y) || logY && y <= 0 {
			continue
		}
		pts = append(pts, plotter.XY{X: x(i), Y: y})
		if hi > lo && (!logY || lo > 0) {
			bars.XYs = append(bars.XYs, plotter.XY{X: x(i), Y: y})
			bars.YErrors = append(bars.YErrors, plotter.Errors{{Low: y - lo, High: hi - y}}...)
		}
	}
	return pts, bars
}

// lineStyle returns the style of s's line.
func lineStyle(s Series) draw.LineStyle {
	ls := draw.LineStyle{Color: rgb(s.Color), Width: 2}
	if s.Dashed {
		ls.Dashes = []vg.Length{6, 4}
	}
	return ls
}

// SVG draws the plot.
func (p *LinePlot) SVG() []byte {
	pl := newPlot(p.Title, p.XLabel, p.YLabel)
	var xs []float64
	for _, s := range p.Series {
		for i, x := range s.X {
			if !math.IsNaN(at(s.Y, i)) && !slices.Contains(xs, x) {
				xs = append(xs, x)
			}
		}
	}
	slices.Sort(xs)
	if len(xs) > 12 {
		xs = nil // too many: round ones
	}
	pl.X.Tick.Marker, pl.Y.Tick.Marker, pl.Y.AutoRescale = ticker(p.LogX, xs), ticker(p.LogY, nil), p.LogY
	if p.LogX {
		pl.X.Scale = plot.LogScale{}
	}
	if pl.Y.Min = 0; p.LogY {
		pl.Y.Min, pl.Y.Scale = math.Inf(1), plot.LogScale{}
	}
	pl.Add(plotter.NewGrid())
	for _, s := range p.Series {
		pts, bars := points(s, len(s.X), func(i int) float64 { return s.X[i] }, p.LogY)
		if len(pts) == 0 {
			continue
		}
		pl.Add(&plotter.Line{XYs: pts, LineStyle: lineStyle(s)}, bars,
			&plotter.Scatter{XYs: pts, GlyphStyle: draw.GlyphStyle{Color: rgb(s.Color), Radius: 3, Shape: draw.CircleGlyph{}}})
	}
	if !p.LogY {
		pl.Y.Max *= 1.05 // room above the highest point
	}
	l, leg := plot.NewLegend(), p.Legend
	if leg == nil {
		leg = p.Series
	}
	for _, s := range leg {
		l.Add(s.Name, &plotter.Line{LineStyle: lineStyle(s)})
	}
	for i, st := range p.Styles {
		if i == 0 {
			l.Add("")
		}
		l.Add(st, &plotter.Line{LineStyle: lineStyle(Series{Color: "#333333", Dashed: i%2 == 1})})
	}
	return render(pl, l, p.Notes, nil)
}

// SVG draws the plot.
func (p *BarPlot) SVG() []byte {
	pl := newPlot(p.Title, "", p.YLabel)
	groups := make([]string, len(p.Groups))
	for i, g := range p.Groups {
		// A long name is split after its first slash or at its first
		// space.
		if j := strings.IndexAny(g, "/ "); len(g) > 12 && j > 0 {
			g = g[:j+1] + "\n" + g[j+1:]
		}
		groups[i] = g
	}
	pl.NominalX(groups...)
	pl.X.Min, pl.X.Max, pl.Y.Min = -0.5, float64(len(groups))-0.5, 0
	pl.Y.Tick.Marker = ticker(false, nil)
	pl.Add(&plotter.Grid{Horizontal: plotter.DefaultGridLineStyle})
	l := plot.NewLegend()
	var charts []*plotter.BarChart
	for k, s := range p.Bars {
		vs := make(plotter.Values, len(groups))
		for g := range vs {
			if v := at(s.Y, g); v > 0 {
				vs[g] = v
			}
		}
		// The bars share 80% of a group's width, in the order of p.Bars.
		b, _ := plotter.NewBarChart(vs, 1)
		b.Color, b.LineStyle.Width = rgb(s.Color), 0
		b.XMin = 0.8*(float64(k)+0.5)/float64(len(p.Bars)) - 0.4
		_, w := points(s, len(groups), func(g int) float64 { return float64(g) + b.XMin }, false)
		w.LineStyle.Color = color.Black
		pl.Add(b, w)
		l.Add(s.Name, b)
		charts = append(charts, b)
	}
	pl.Y.Max *= 1.05
	resize := func(dc draw.Canvas) {
		trX, _ := pl.Transforms(&dc)
		for _, b := range charts {
			b.Width = (trX(1) - trX(0)) * 0.8 / vg.Length(len(charts)) * 0.92
		}
	}
	return render(pl, l, p.Notes, resize)
}

// render draws pl on the left of an SVG page, l on its right (from the
// top) and the notes under both, and returns the SVG. before, if not nil, is given
// the canvas of pl's data before pl is drawn.
func render(pl *plot.Plot, l plot.Legend, notes []string, before func(draw.Canvas)) []byte {
	below := vg.Length(noteLine*len(notes) + 6)
	h := plotH + below
	c := vgsvg.New(plotW, h)
	page := draw.New(c)
	page.SetColor(color.White)
	page.Fill(page.Rectangle.Path())
	area := draw.Crop(page, 8, -legendW, below, -8)
	if before != nil {
		before(pl.DataCanvas(area))
	}
	pl.Draw(area)
	l.TextStyle, l.Top, l.Left, l.Padding = sans(11, color.Black), true, true, 4
	l.Draw(draw.Crop(page, plotW-legendW+16, 0, below, -44))
	small := sans(10, color.Gray{0x44})
	for i, n := range notes {
		page.FillText(small, vg.Point{X: 8, Y: below - vg.Length(noteLine*(i+1))}, n)
	}
	var b bytes.Buffer
	c.WriteTo(&b)
	return b.Bytes()
}
