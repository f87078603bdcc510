package bench

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// A Figure is one plot of lockbench -svg: its file name and its SVG.
type Figure struct {
	Name string
	SVG  []byte
}

// Figures draws the plots that reports support, each from every report
// that has its points, a point's value being the mean over the runs that
// measured it and its bar their range:
//
//   - w1-nodes-g{G}-latency.svg and w1-nodes-g{G}-pairs.svg: W1 acquire
//     p50 and p99, and lock+release pairs per second, against N, at G
//     goroutines, on loopback (for each G with at least two N);
//   - w1-goroutines-n{N}-latency.svg and w1-goroutines-n{N}-pairs.svg: the
//     same against G at N nodes (for each N with at least three G);
//   - realistic-n{N}-g{G}-tail.svg: over the realistic network, each
//     library's acquire p99 and p999 with a server stalling and without;
//   - keys-memory.svg: the server's bytes per distinct key against the
//     number of keys (KEYS).
func Figures(reps []*Report) []Figure {
	figs := w1Figures(reps)
	figs = append(figs, netFigures(reps)...)
	return append(figs, keysFigure(reps)...)
}

// samples collects the values one quantity took over several runs.
type samples []float64

func (s samples) mean() float64 {
	t := 0.0
	for _, v := range s {
		t += v
	}
	return t / float64(len(s))
}

// add adds a point at x with the mean of v, and a bar over its range.
func (s *Series) add(x float64, v samples) {
	s.X, s.Y, s.Lo, s.Hi = append(s.X, x), append(s.Y, v.mean()), append(s.Lo, slices.Min(v)), append(s.Hi, slices.Max(v))
}

// gather collects, from each report that keep accepts and each W1 row,
// the values that val gives under the key that key gives, and returns
// them, the reports each key came from, and the libraries in the order
// of Libraries.
func gather[K comparable](reps []*Report, keep func(*Report) bool, key func(*Report, Row) K, val func(Row) float64) (map[K]samples, map[K][]*Report, []string) {
	vals, from := map[K]samples{}, map[K][]*Report{}
	var libs []string
	for _, r := range reps {
		for _, row := range r.Rows {
			if !keep(r) || row.Cell.Workload != W1 || row.NA || row.Ops == 0 {
				continue
			}
			k := key(r, row)
			vals[k] = append(vals[k], val(row))
			if !slices.Contains(from[k], r) {
				from[k] = append(from[k], r)
			}
			if !slices.Contains(libs, row.Library) {
				libs = append(libs, row.Library)
			}
		}
	}
	slices.SortFunc(libs, func(a, b string) int { return slices.Index(Libraries(), a) - slices.Index(Libraries(), b) })
	return vals, from, libs
}

// runNotes returns the small print of a plot from the reports that gave
// its points: how many runs, the machine, the load averages and their
// commands (without -json: where a run saved its report is no part of
// what it measured).
func runNotes(reps []*Report, what string) []string {
	var cmds, loads []string
	for _, r := range reps {
		w := strings.Fields(r.Command)
		if i := slices.Index(w, "-json"); i >= 0 && i+1 < len(w) {
			w = slices.Delete(w, i, i+2)
		}
		if c := strings.Join(w, " "); c != "" && !slices.Contains(cmds, c) {
			cmds = append(cmds, c)
		}
		loads = append(loads, strings.Fields(r.LoadStart + " ?")[0]+"→"+strings.Fields(r.LoadEnd + " ?")[0])
	}
	m := reps[0].Machine
	notes := wrap(fmt.Sprintf("%s; %d run(s) of %d CPUs, redis-server %s, %s, %s UTC; 1-min load average (start→end): %s",
		what, len(reps), m.Cores, m.Redis, m.Go, reps[0].Started.UTC().Format("2006-01-02"), strings.Join(loads, ", ")))
	for _, c := range cmds {
		notes = append(notes, wrap(c)...)
	}
	return notes
}

// wrap splits s into lines of at most 125 bytes, at spaces.
func wrap(s string) []string {
	var lines []string
	for len(s) > 125 {
		i := strings.LastIndex(s[:125], " ")
		if i <= 0 {
			i = 125
		}
		lines = append(lines, s[:i])
		s = "    " + strings.TrimLeft(s[i:], " ")
	}
	return append(lines, s)
}

type w1Key struct {
	lib  string
	n, g int
	q    string // "ops", "p50" or "p99"
}

func w1Figures(reps []*Report) []Figure {
	loopback := func(r *Report) bool { return r.Network == "" }
	var vals map[w1Key]samples
	var from map[w1Key][]*Report
	var libs []string
	for _, q := range []string{"ops", "p50", "p99"} {
		v, f, l := gather(reps, loopback, func(_ *Report, row Row) w1Key { return w1Key{row.Library, row.Cell.N, row.Cell.G, q} },
			func(row Row) float64 {
				switch q {
				case "p50":
					return us(row.Acquire.P50)
				case "p99":
					return us(row.Acquire.P99)
				}
				return row.OpsPerSec
			})
		if vals == nil {
			vals, from, libs = v, f, l
		} else {
			maps.Copy(vals, v)
		}
	}
	ns, gs := map[int][]int{}, map[int][]int{} // G → its Ns; N → its Gs
	for k := range from {
		if !slices.Contains(ns[k.g], k.n) {
			ns[k.g] = append(ns[k.g], k.n)
		}
		if !slices.Contains(gs[k.n], k.g) {
			gs[k.n] = append(gs[k.n], k.g)
		}
	}
	var figs []Figure
	// plot draws the latency and pairs figures of the points that key
	// selects, against x.
	plot := func(name, title, xlabel string, logX bool, xs []int, key func(lib string, x int) w1Key) {
		slices.Sort(xs)
		var lat, ops, legend []Series
		var used []*Report
		for _, lib := range libs {
			s50 := Series{Name: lib, Color: libColor(lib)}
			s99 := Series{Name: lib + " p99", Color: libColor(lib), Dashed: true}
			so := Series{Name: lib, Color: libColor(lib)}
			for _, x := range xs {
				k := key(lib, x)
				if from[k] == nil {
					continue
				}
				for _, r := range from[k] {
					if !slices.Contains(used, r) {
						used = append(used, r)
					}
				}
				k.q = "p50"
				s50.add(float64(x), vals[k])
				k.q = "p99"
				s99.add(float64(x), vals[k])
				so.add(float64(x), vals[key(lib, x)])
			}
			if len(so.X) > 0 {
				lat, ops, legend = append(lat, s50, s99), append(ops, so), append(legend, s50)
			}
		}
		if len(ops) == 0 {
			return
		}
		notes := runNotes(used, fmt.Sprintf("points: mean of %d runs, bars: their range", len(used)))
		lp := &LinePlot{Title: title + ": acquire latency", XLabel: xlabel, YLabel: "acquire latency (µs, log scale)", LogX: logX, LogY: true,
			Notes: notes, Styles: []string{"solid: p50", "dashed: p99"}, Series: lat, Legend: legend}
		op := &LinePlot{Title: title + ": lock+release pairs per second", XLabel: xlabel, YLabel: "pairs per second", LogX: logX,
			Notes: notes, Series: ops}
		figs = append(figs, Figure{name + "-latency.svg", lp.SVG()}, Figure{name + "-pairs.svg", op.SVG()})
	}
	for _, g := range slices.Sorted(maps.Keys(ns)) {
		if len(ns[g]) >= 2 {
			plot(fmt.Sprintf("w1-nodes-g%d", g), fmt.Sprintf("W1, G=%d, against N", g), "N (nodes)", false, ns[g],
				func(lib string, n int) w1Key { return w1Key{lib, n, g, "ops"} })
		}
	}
	for _, n := range slices.Sorted(maps.Keys(gs)) {
		if len(gs[n]) >= 3 {
			plot(fmt.Sprintf("w1-goroutines-n%d", n), fmt.Sprintf("W1, N=%d, against G", n), "G (goroutines, log scale)", true, gs[n],
				func(lib string, g int) w1Key { return w1Key{lib, n, g, "ops"} })
		}
	}
	return figs
}

// us returns d in microseconds.
func us(d time.Duration) float64 { return float64(d) / 1e3 }

type netKey struct {
	lib          string
	n, g         int
	stalls, p999 bool
}

func netFigures(reps []*Report) []Figure {
	realistic := func(r *Report) bool { return r.Network != "" }
	vals, cells := map[netKey]samples{}, map[netKey][]*Report{}
	var libs []string
	for _, p999 := range []bool{false, true} {
		v, from, l := gather(reps, realistic, func(r *Report, row Row) netKey { return netKey{row.Library, row.Cell.N, row.Cell.G, r.Stalls(), p999} },
			func(row Row) float64 {
				if p999 {
					return float64(row.Acquire.P999) / 1e6
				}
				return float64(row.Acquire.P99) / 1e6
			})
		maps.Copy(vals, v)
		libs = l
		for k, rs := range from {
			c := netKey{n: k.n, g: k.g}
			for _, r := range rs {
				if !slices.Contains(cells[c], r) {
					cells[c] = append(cells[c], r)
				}
			}
		}
	}
	var figs []Figure
	for _, ck := range slices.SortedFunc(maps.Keys(cells), func(a, b netKey) int { return cmp.Or(a.n-b.n, a.g-b.g) }) {
		var bars []Series
		for i, kd := range []string{"p99, one server stalling", "p99, no stalls", "p999, one server stalling", "p999, no stalls"} {
			s := Series{Name: kd, Color: []string{"#d62728", "#1f77b4", "#ff9896", "#aec7e8"}[i]}
			for _, lib := range libs {
				v := vals[netKey{lib, ck.n, ck.g, i%2 == 0, i >= 2}]
				if v == nil {
					s.add(math.NaN(), samples{math.NaN()})
					continue
				}
				s.add(0, v)
			}
			if slices.ContainsFunc(s.Y, func(y float64) bool { return !math.IsNaN(y) }) {
				bars = append(bars, s)
			}
		}
		bp := &BarPlot{
			Title:  fmt.Sprintf("Realistic network, W1 N=%d G=%d: acquire tail", ck.n, ck.g),
			YLabel: "acquire latency (ms)",
			Groups: libs,
			Bars:   bars,
			Notes:  runNotes(cells[ck], fmt.Sprintf("bars: mean of %d runs, whiskers: their range", len(cells[ck]))),
		}
		figs = append(figs, Figure{fmt.Sprintf("realistic-n%d-g%d-tail.svg", ck.n, ck.g), bp.SVG()})
	}
	return figs
}

func keysFigure(reps []*Report) []Figure {
	type key struct {
		lib   string
		phase int // held, released, expired
	}
	vals := map[key]map[int]samples{}
	var used []*Report
	add := func(k key, keys int, m float64) {
		if vals[k] == nil {
			vals[k] = map[int]samples{}
		}
		vals[k][keys] = append(vals[k][keys], m)
	}
	for _, r := range reps {
		if len(r.Keys) > 0 {
			used = append(used, r)
		}
		for _, km := range r.Keys {
			for phase, m := range []int64{km.UsedHeld, km.UsedReleased, km.UsedExpired} {
				if m != 0 {
					add(key{km.Library, phase}, km.Keys, km.PerKey(m))
				}
			}
		}
	}
	if len(vals) == 0 {
		return nil
	}
	var ss []Series
	for i, k := range slices.SortedFunc(maps.Keys(vals), func(a, b key) int {
		return cmp.Or(strings.Compare(b.lib, a.lib), a.phase-b.phase) // SET NX PX last
	}) {
		name := k.lib
		if k.lib != LibSetNX {
			name = "ours"
		}
		name += ", " + []string{"held", "released", "expired"}[k.phase]
		s := Series{Name: name, Dashed: k.phase > 0, Color: palette[i%len(palette)]}
		for _, n := range slices.Sorted(maps.Keys(vals[k])) {
			s.add(float64(n), vals[k][n])
		}
		ss = append(ss, s)
	}
	p := &LinePlot{
		Title:  "Server memory per distinct key (one node)",
		XLabel: "distinct keys (log scale)", YLabel: "bytes per key (used_memory)",
		LogX: true, Series: ss,
		Notes: runNotes(used, fmt.Sprintf("points: mean of %d runs, bars: their range; held: every lock held; released: just after release; expired: locked again and left to expire", len(used))),
	}
	return []Figure{{"keys-memory.svg", p.SVG()}}
}
