package bench

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
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
//     library's acquire p99 and p999 with a server stalling and without
//     (what the reports have of each);
//   - keys-memory.svg: the server's bytes per distinct key against the
//     number of keys (KEYS).
func Figures(reps []*Report) []Figure {
	var figs []Figure
	figs = append(figs, w1Figures(reps)...)
	figs = append(figs, netFigures(reps)...)
	if f, ok := keysFigure(reps); ok {
		figs = append(figs, f)
	}
	return figs
}

// samples collects the values one quantity took over several runs.
type samples []float64

func (s samples) mean() float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	t := 0.0
	for _, v := range s {
		t += v
	}
	return t / float64(len(s))
}

func (s samples) lo() float64 { return slices.Min(s) }
func (s samples) hi() float64 { return slices.Max(s) }

type w1Key struct {
	lib  string
	n, g int
}

type w1Vals struct{ ops, p50, p99 samples }

// runNotes returns the small print of a plot from the reports that gave
// its points: how many runs, their commands, the machine, and the load
// averages.
func runNotes(reps []*Report, what string) []string {
	var cmds, loads []string
	for _, r := range reps {
		if c := dropFlag(r.Command, "-json"); c != "" && !slices.Contains(cmds, c) {
			cmds = append(cmds, c)
		}
		loads = append(loads, first(r.LoadStart)+"→"+first(r.LoadEnd))
	}
	var notes []string
	notes = append(notes, fmt.Sprintf("%s; %d run(s) of %s, %s UTC; 1-min load average (start→end): %s",
		what, len(reps), describeMachine(reps[0].Machine), reps[0].Started.UTC().Format("2006-01-02"), strings.Join(loads, ", ")))
	for _, c := range cmds {
		notes = append(notes, wrap(c, 125)...)
	}
	var out []string
	for _, n := range notes {
		out = append(out, wrap(n, 125)...)
	}
	return out
}

// dropFlag removes flag and its value from a command line: where a run
// saved its JSON report is no part of what it measured.
func dropFlag(cmd, flag string) string {
	w := strings.Fields(cmd)
	for i := 0; i < len(w); i++ {
		if w[i] == flag && i+1 < len(w) {
			w = append(w[:i], w[i+2:]...)
			i--
		}
	}
	return strings.Join(w, " ")
}

func describeMachine(m Machine) string {
	return fmt.Sprintf("%d CPUs, redis-server %s, %s", m.Cores, m.Redis, m.Go)
}

// first returns the first field of a load average: the 1-minute one.
func first(load string) string {
	if f := strings.Fields(load); len(f) > 0 {
		return f[0]
	}
	return "?"
}

// wrap splits s into lines of at most width bytes, at spaces.
func wrap(s string, width int) []string {
	var lines []string
	for len(s) > width {
		i := strings.LastIndex(s[:width], " ")
		if i <= 0 {
			i = width
		}
		lines = append(lines, s[:i])
		s = "    " + strings.TrimLeft(s[i:], " ")
	}
	return append(lines, s)
}

// us returns d in microseconds.
func us(d time.Duration) float64 { return float64(d) / 1e3 }

func w1Figures(reps []*Report) []Figure {
	vals := map[w1Key]*w1Vals{}
	from := map[w1Key][]*Report{}
	var libs []string
	for _, r := range reps {
		if r.Network != "" {
			continue
		}
		for _, row := range r.Rows {
			c := row.Cell
			if c.Workload != W1 || row.NA || row.Ops == 0 {
				continue
			}
			k := w1Key{row.Library, c.N, c.G}
			v := vals[k]
			if v == nil {
				v = new(w1Vals)
				vals[k] = v
			}
			v.ops = append(v.ops, row.OpsPerSec)
			v.p50 = append(v.p50, us(row.Acquire.P50))
			v.p99 = append(v.p99, us(row.Acquire.P99))
			from[k] = append(from[k], r)
			if !slices.Contains(libs, row.Library) {
				libs = append(libs, row.Library)
			}
		}
	}
	slices.SortFunc(libs, func(a, b string) int { return slices.Index(Libraries(), a) - slices.Index(Libraries(), b) })
	ns, gs := map[int][]int{}, map[int][]int{} // G → its Ns; N → its Gs
	for k := range vals {
		if !slices.Contains(ns[k.g], k.n) {
			ns[k.g] = append(ns[k.g], k.n)
		}
		if !slices.Contains(gs[k.n], k.g) {
			gs[k.n] = append(gs[k.n], k.g)
		}
	}
	var figs []Figure
	// plot draws the latency and pairs figures of the points whose key
	// fix selects, against x.
	plot := func(name, title, xlabel string, logX bool, xs []int, key func(lib string, x int) w1Key) {
		slices.Sort(xs)
		var lat, ops []Series
		var used []*Report
		runs := map[int]bool{}
		for _, lib := range libs {
			s50 := Series{Name: lib + " p50", Color: LibraryColor(lib)}
			s99 := Series{Name: lib + " p99", Color: LibraryColor(lib), Dashed: true}
			so := Series{Name: lib, Color: LibraryColor(lib)}
			for _, x := range xs {
				v := vals[key(lib, x)]
				if v == nil {
					continue
				}
				runs[len(v.ops)] = true
				for _, r := range from[key(lib, x)] {
					if !slices.Contains(used, r) {
						used = append(used, r)
					}
				}
				fx := float64(x)
				s50.X, s50.Y, s50.Lo, s50.Hi = append(s50.X, fx), append(s50.Y, v.p50.mean()), append(s50.Lo, v.p50.lo()), append(s50.Hi, v.p50.hi())
				s99.X, s99.Y, s99.Lo, s99.Hi = append(s99.X, fx), append(s99.Y, v.p99.mean()), append(s99.Lo, v.p99.lo()), append(s99.Hi, v.p99.hi())
				so.X, so.Y, so.Lo, so.Hi = append(so.X, fx), append(so.Y, v.ops.mean()), append(so.Lo, v.ops.lo()), append(so.Hi, v.ops.hi())
			}
			if len(so.X) == 0 {
				continue
			}
			so.Name = lib
			lat = append(lat, s50, s99)
			ops = append(ops, so)
		}
		if len(ops) == 0 {
			return
		}
		rs := slices.Sorted(maps.Keys(runs))
		what := fmt.Sprintf("points: mean of %s runs, bars: their range", intRange(rs))
		notes := runNotes(used, what)
		// The legend names each library once; the styles say which line
		// is which percentile.
		legend := make([]Series, 0, len(lat))
		for i := 0; i < len(lat); i += 2 {
			s := lat[i]
			s.Name = strings.TrimSuffix(s.Name, " p50")
			legend = append(legend, s)
		}
		lp := &LinePlot{Title: title + ": acquire latency", XLabel: xlabel, YLabel: "acquire latency (µs, log scale)", LogX: logX, LogY: true,
			Notes: notes, Styles: []string{"solid: p50", "dashed: p99"}, Series: lat, Legend: legend}
		figs = append(figs, Figure{Name: name + "-latency.svg", SVG: lp.SVG()})
		op := &LinePlot{Title: title + ": lock+release pairs per second", XLabel: xlabel, YLabel: "pairs per second", LogX: logX, YZero: true,
			Notes: notes, Series: ops}
		figs = append(figs, Figure{Name: name + "-pairs.svg", SVG: op.SVG()})
	}
	for _, g := range slices.Sorted(maps.Keys(ns)) {
		if len(ns[g]) < 2 {
			continue
		}
		plot(fmt.Sprintf("w1-nodes-g%d", g), fmt.Sprintf("W1, G=%d, against N", g), "N (nodes)", false, ns[g],
			func(lib string, n int) w1Key { return w1Key{lib, n, g} })
	}
	for _, n := range slices.Sorted(maps.Keys(gs)) {
		if len(gs[n]) < 3 {
			continue
		}
		plot(fmt.Sprintf("w1-goroutines-n%d", n), fmt.Sprintf("W1, N=%d, against G", n), "G (goroutines, log scale)", true, gs[n],
			func(lib string, g int) w1Key { return w1Key{lib, n, g} })
	}
	return figs
}

// intRange formats sorted counts as "2" or "2–4".
func intRange(v []int) string {
	if len(v) == 0 {
		return "0"
	}
	if v[0] == v[len(v)-1] {
		return strconv.Itoa(v[0])
	}
	return fmt.Sprintf("%d–%d", v[0], v[len(v)-1])
}

type netKey struct {
	lib    string
	n, g   int
	stalls bool
}

func netFigures(reps []*Report) []Figure {
	type tail struct{ p99, p999 samples }
	vals := map[netKey]*tail{}
	var libs []string
	cells := map[[2]int][]*Report{}
	for _, r := range reps {
		if r.Network == "" {
			continue
		}
		for _, row := range r.Rows {
			c := row.Cell
			if c.Workload != W1 || row.NA || row.Ops == 0 {
				continue
			}
			k := netKey{row.Library, c.N, c.G, r.Stalls()}
			v := vals[k]
			if v == nil {
				v = new(tail)
				vals[k] = v
			}
			v.p99 = append(v.p99, float64(row.Acquire.P99)/1e6)
			v.p999 = append(v.p999, float64(row.Acquire.P999)/1e6)
			if !slices.Contains(libs, row.Library) {
				libs = append(libs, row.Library)
			}
			ck := [2]int{c.N, c.G}
			if !slices.Contains(cells[ck], r) {
				cells[ck] = append(cells[ck], r)
			}
		}
	}
	slices.SortFunc(libs, func(a, b string) int { return slices.Index(Libraries(), a) - slices.Index(Libraries(), b) })
	var figs []Figure
	for _, ck := range slices.SortedFunc(maps.Keys(cells), func(a, b [2]int) int { return (a[0]-b[0])*10000 + a[1] - b[1] }) {
		n, g := ck[0], ck[1]
		kinds := []struct {
			name   string
			stalls bool
			p999   bool
			color  string
		}{
			{"p99, one server stalling", true, false, "#d62728"},
			{"p99, no stalls", false, false, "#1f77b4"},
			{"p999, one server stalling", true, true, "#ff9896"},
			{"p999, no stalls", false, true, "#aec7e8"},
		}
		var bars []Series
		runs := map[int]bool{}
		for _, kd := range kinds {
			s := Series{Name: kd.name, Color: kd.color}
			any := false
			for _, lib := range libs {
				v := vals[netKey{lib, n, g, kd.stalls}]
				if v == nil {
					s.Y, s.Lo, s.Hi = append(s.Y, math.NaN()), append(s.Lo, math.NaN()), append(s.Hi, math.NaN())
					continue
				}
				any = true
				q := v.p99
				if kd.p999 {
					q = v.p999
				}
				runs[len(q)] = true
				s.Y, s.Lo, s.Hi = append(s.Y, q.mean()), append(s.Lo, q.lo()), append(s.Hi, q.hi())
			}
			if any {
				bars = append(bars, s)
			}
		}
		rs := slices.Sorted(maps.Keys(runs))
		bp := &BarPlot{
			Title:  fmt.Sprintf("Realistic network, W1 N=%d G=%d: acquire tail", n, g),
			YLabel: "acquire latency (ms)",
			Groups: libs,
			Bars:   bars,
			Notes:  runNotes(cells[ck], fmt.Sprintf("bars: mean of %s runs, whiskers: their range", intRange(rs))),
		}
		figs = append(figs, Figure{Name: fmt.Sprintf("realistic-n%d-g%d-tail.svg", n, g), SVG: bp.SVG()})
	}
	return figs
}

func keysFigure(reps []*Report) (Figure, bool) {
	type key struct {
		lib       string
		retention time.Duration
		phase     string
	}
	vals := map[key]map[int]samples{}
	var used []*Report
	add := func(k key, keys int, v float64) {
		if vals[k] == nil {
			vals[k] = map[int]samples{}
		}
		vals[k][keys] = append(vals[k][keys], v)
	}
	for _, r := range reps {
		if len(r.Keys) == 0 {
			continue
		}
		used = append(used, r)
		for _, km := range r.Keys {
			add(key{km.Library, km.Retention, "held"}, km.Keys, km.PerKey(km.UsedHeld))
			// With a short retention the read after the release waits for
			// used_memory to settle, by when the counters have expired:
			// the expired line says it.
			if km.UsedReleased != 0 && km.UsedExpired == 0 {
				add(key{km.Library, km.Retention, "released"}, km.Keys, km.PerKey(km.UsedReleased))
			}
			if km.UsedExpired != 0 {
				add(key{km.Library, km.Retention, "expired"}, km.Keys, km.PerKey(km.UsedExpired))
			}
		}
	}
	if len(vals) == 0 {
		return Figure{}, false
	}
	ks := slices.SortedFunc(maps.Keys(vals), func(a, b key) int {
		if a.lib != b.lib {
			return strings.Compare(b.lib, a.lib) // SET NX PX last
		}
		if a.retention != b.retention {
			return int(a.retention - b.retention)
		}
		return slices.Index([]string{"held", "released", "expired"}, a.phase) - slices.Index([]string{"held", "released", "expired"}, b.phase)
	})
	var ss []Series
	runs := map[int]bool{}
	for _, k := range ks {
		name := k.lib + ", " + k.phase
		if k.lib != LibSetNX {
			ret := "default retention"
			if k.retention > 0 {
				ret = "retention " + k.retention.String()
			}
			name = fmt.Sprintf("ours, %s, %s", ret, k.phase)
		}
		s := Series{Name: name, Dashed: k.phase != "held"}
		for _, n := range slices.Sorted(maps.Keys(vals[k])) {
			v := vals[k][n]
			runs[len(v)] = true
			s.X, s.Y, s.Lo, s.Hi = append(s.X, float64(n)), append(s.Y, v.mean()), append(s.Lo, v.lo()), append(s.Hi, v.hi())
		}
		ss = append(ss, s)
	}
	rs := slices.Sorted(maps.Keys(runs))
	p := &LinePlot{
		Title:  "Server memory per distinct key (one node)",
		XLabel: "distinct keys (log scale)", YLabel: "bytes per key (used_memory)",
		LogX: true, YZero: true, Series: ss,
		Notes: runNotes(used, fmt.Sprintf("points: mean of %s runs, bars: their range; held: every lock held; released: just after release; expired: the counters expired", intRange(rs))),
	}
	return Figure{Name: "keys-memory.svg", SVG: p.SVG()}, true
}
