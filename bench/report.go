package bench

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// latencies are the percentiles of one kind of call.
type latencies struct {
	P50, P99, P999, Max time.Duration
}

// A Row is what one library did in one cell.
type Row struct {
	Cell    Cell
	Library string
	// NA is set when the library cannot run the cell (bsm/redislock with
	// more than one node); nothing else is then set.
	NA bool

	Elapsed   time.Duration // measured time, over every slice
	Ops       uint64        // completed lock+unlock pairs
	OpsPerSec float64
	// Acquire is, in W1, one lock call; in W2, a contender's whole wait
	// across give-ups, including the waits cut off by the end of a slice
	// at the time waited so far.
	Acquire latencies
	Release latencies
	// AllocsPerOp and BytesPerOp are the heap allocations of the whole
	// process during the measured slices (runtime.MemStats Mallocs and
	// TotalAlloc) divided by Ops.
	AllocsPerOp, BytesPerOp float64
	// SlowAcquires are, in W1 with Config.SlowAbove set, the lock calls
	// that took at least SlowAbove, and SlowShare their share of all.
	SlowAbove    time.Duration
	SlowAcquires uint64
	SlowShare    float64
	GaveUp       uint64 // acquisitions the library gave up on
	Errors       uint64 // any other failure
	FirstError   string

	// W2 only.
	Acquisitions uint64  // counted under the lock
	CutOff       uint64  // waits cut off by the end of a slice
	Cross        uint64  // acquisitions by another contender than the previous holder
	CrossPerSec  float64 // Cross per second of measured time
	HandoffShare float64 // Cross / acquisitions that had a predecessor
	BusiestShare float64 // the most acquisitions by one contender / all acquisitions
	LostUpdates  uint64  // increments of the protected counter lost to an overlap

	// Sem and Elect only (Acquisitions, CutOff and BusiestShare too; Ops
	// are acquisitions released, and Acquire the holder's wait).
	LeastShare float64 // the fewest acquisitions by one contender / all acquisitions
	MaxHeld    int     // the most permits or leaderships held at once
	MeanHeld   float64 // permits or leaderships held on average: time held / measured time
	// Violations counts more than n permits (one leader) held at once, two
	// holders of a slot, and fences or terms that did not rise; it must be
	// 0.
	Violations uint64

	// Elect only.
	Handovers       uint64    // leaderships that followed another in their slice
	HandoversPerSec float64   // Handovers per second; CrossPerSec counts those to another candidate
	Handover        latencies // from the moment the last leader began to resign to the next one's Campaign return
	Reads           uint64    // Leader calls by the reader
	NoLeader        uint64    // reads that found no leader
	ReadsPerSec     float64
	Read            latencies // Leader latency

	// RW only (Violations too): the pairs of each kind, and the
	// acquisitions' latencies of each kind; Acquire has both.
	ReadOps, WriteOps         uint64
	ReadAcquire, WriteAcquire latencies
}

// A Report is the result of a run.
type Report struct {
	Started, Finished time.Time
	Config            Config
	Machine           Machine
	// LoadStart and LoadEnd are the load averages at the start and the
	// end of the run.
	LoadStart, LoadEnd string
	// Command is the command that produced the report, for the reader.
	Command string
	// Network describes the simulated network of the run (see
	// Config.Network), or is empty on loopback; NetCells is what it
	// counted in each cell.
	Network  string
	NetCells []CellNetStats
	// Commands are the commands counted per lock+release, for each
	// library on the first server and on the cluster.
	Commands []CommandCount
	Rows     []Row
	// Keys and Waiters are the scale measurements KEYS and WAITERS.
	Keys    []KeyMem
	Waiters []WaiterMem
}

// findCount returns the command count of lib on the first server, or on
// the cluster.
func (r *Report) findCount(lib string, cluster bool) (CommandCount, bool) {
	for _, cc := range r.Commands {
		if cc.Library == lib && cc.Cluster == cluster {
			return cc, true
		}
	}
	return CommandCount{}, false
}

// Find returns the row of lib in cell c.
func (r *Report) Find(c Cell, lib string) (Row, bool) {
	for _, row := range r.Rows {
		if row.Cell == c && row.Library == lib && !row.NA {
			return row, true
		}
	}
	return Row{}, false
}

// Failures returns an error for every row with errors, give-ups in W1,
// or lost updates; nil when there are none.
func (r *Report) Failures() error {
	var errs []error
	for _, row := range r.Rows {
		if row.NA {
			continue
		}
		if row.Errors > 0 {
			errs = append(errs, fmt.Errorf("%s %s: %d errors, the first: %s", row.Cell, row.Library, row.Errors, row.FirstError))
		}
		if row.Cell.Workload == W1 && row.GaveUp > 0 {
			errs = append(errs, fmt.Errorf("%s %s: gave up %d times without contention", row.Cell, row.Library, row.GaveUp))
		}
		if row.LostUpdates > 0 {
			errs = append(errs, fmt.Errorf("%s %s: %d lost updates", row.Cell, row.Library, row.LostUpdates))
		}
		if row.Violations > 0 {
			rule := fmt.Sprintf("at most %d held at once, with rising fences", row.Cell.limit())
			if row.Cell.Workload == RW {
				rule = rwRule
			}
			errs = append(errs, fmt.Errorf("%s %s: %d violations (%s)", row.Cell, row.Library, row.Violations, rule))
		}
	}
	return errors.Join(errs...)
}

// A Target is one of the targets, checked against a report.
type Target struct {
	Target   string
	Library  string
	Measured string
	Met      bool
}

// Targets checks the performance goals of this module's adapters against
// the report: the common case (one goroutine, an uncontended lock) at
// least as fast as the fastest peer, throughput under load, allocations,
// and the contended hand-off. A goal whose cells were not run is left out.
func (r *Report) Targets() []Target {
	var ts []Target
	w1 := func(n, g int) Cell { return Cell{Workload: W1, N: n, G: g} }
	w2 := Cell{Workload: W2, N: 5, G: 16, Retry: RetryDefault}
	for _, ours := range []string{LibRedlockGoRedis, LibRedlockRueidis} {
		add := func(target, measured string, met bool) {
			ts = append(ts, Target{Target: target, Library: ours, Measured: measured, Met: met})
		}
		// The fastest peer of a cell: the lowest acquire p50, or the most
		// ops/s.
		fastest := func(c Cell, better func(a, b Row) bool) (Row, bool) {
			var best Row
			found := false
			for _, lib := range []string{LibRedsync, LibBSM} {
				if p, ok := r.Find(c, lib); ok && (!found || better(p, best)) {
					best, found = p, true
				}
			}
			return best, found
		}
		byLatency := func(a, b Row) bool { return a.Acquire.P50 < b.Acquire.P50 }
		byOps := func(a, b Row) bool { return a.OpsPerSec > b.OpsPerSec }
		if o, ok := r.Find(w1(1, 1), ours); ok {
			if p, ok := fastest(w1(1, 1), byLatency); ok {
				add("W1 N=1 G=1: acquire p50 ≤ the fastest peer's",
					fmt.Sprintf("%s vs %s's %s", fmtDur(o.Acquire.P50), p.Library, fmtDur(p.Acquire.P50)), o.Acquire.P50 <= p.Acquire.P50)
			}
			if p, ok := fastest(w1(1, 1), byOps); ok {
				x := ratio(o.OpsPerSec, p.OpsPerSec)
				add("W1 N=1 G=1: ops/s ≥ the fastest peer's",
					fmt.Sprintf("%s× %s (%.0f vs %.0f)", fmtRatio(x), p.Library, o.OpsPerSec, p.OpsPerSec), x >= 1)
			}
		}
		if o, ok := r.Find(w1(5, 1), ours); ok {
			if p, ok := r.Find(w1(5, 1), LibRedsync); ok {
				add("W1 N=5 G=1: acquire p50 ≤ redsync's",
					fmt.Sprintf("%s vs %s (%s×)", fmtDur(o.Acquire.P50), fmtDur(p.Acquire.P50), fmtRatio(ratio(float64(o.Acquire.P50), float64(p.Acquire.P50)))),
					o.Acquire.P50 <= p.Acquire.P50)
				want, what := p.AllocsPerOp, "redsync's"
				if ours == LibRedlockRueidis {
					want, what = 60, "60"
				}
				add(fmt.Sprintf("N=5: allocations per lock+unlock ≤ %s (W1 G=1)", what),
					fmt.Sprintf("%.1f allocs, %.0f B; redsync %.1f", o.AllocsPerOp, o.BytesPerOp, p.AllocsPerOp), o.Ops > 0 && o.AllocsPerOp <= want)
			}
		}
		if o, ok := r.Find(w1(1, 64), ours); ok {
			if p, ok := fastest(w1(1, 64), byOps); ok {
				x := ratio(o.OpsPerSec, p.OpsPerSec)
				add("W1 N=1 G=64: ops/s ≥ 1.5× the best peer's",
					fmt.Sprintf("%s× %s (%.0f vs %.0f)", fmtRatio(x), p.Library, o.OpsPerSec, p.OpsPerSec), x >= 1.5)
			}
		}
		if o, ok := r.Find(w1(5, 64), ours); ok {
			if p, ok := r.Find(w1(5, 64), LibRedsync); ok {
				x := ratio(o.OpsPerSec, p.OpsPerSec)
				add("W1 N=5 G=64: ops/s ≥ 3× redsync's",
					fmt.Sprintf("%s× (%.0f vs %.0f)", fmtRatio(x), o.OpsPerSec, p.OpsPerSec), x >= 3)
			}
		}
		if o, ok := r.Find(w2, ours); ok {
			if p, ok := r.Find(w2, LibRedsync); ok {
				x := ratio(o.CrossPerSec, p.CrossPerSec)
				add("W2 N=5 G=16 default: cross-contender acquisitions/s ≥ 10× redsync's",
					fmt.Sprintf("%s× (%.1f/s vs %.1f/s)", fmtRatio(x), o.CrossPerSec, p.CrossPerSec), x >= 10)
				x = ratio(float64(o.Acquire.P99), float64(p.Acquire.P99))
				add("W2 N=5 G=16 default: acquire p99 ≤ 1/5 of redsync's",
					fmt.Sprintf("%s vs %s (%s×)", fmtDur(o.Acquire.P99), fmtDur(p.Acquire.P99), fmtRatio(x)),
					o.Acquisitions > 0 && o.Acquire.P99*5 <= p.Acquire.P99)
			}
			fair := 1 / float64(w2.G)
			add("W2 N=5 G=16 default: no contender above 2× its fair share",
				fmt.Sprintf("busiest %.1f%% (fair %.2f%%, %.2f× fair)", 100*o.BusiestShare, 100*fair, o.BusiestShare/fair),
				o.Acquisitions > 0 && o.BusiestShare <= 2*fair)
		}
		if r.Network != "" {
			for _, row := range r.Rows {
				c := row.Cell
				if c.Workload != W1 || c.Cluster || c.N < 3 || row.Library != ours || row.NA {
					continue
				}
				q, okq := r.Find(c, LibQuorumFloor)
				all, oka := r.Find(c, LibRaw)
				if !okq || !oka {
					continue
				}
				// At G = 1 a stall holds up one call of a client that
				// waits for every node, a few in a thousand: p999 shows
				// it where p99 does not.
				for _, p := range []struct {
					name          string
					ours, q, slow time.Duration
				}{
					{"p99", row.Acquire.P99, q.Acquire.P99, all.Acquire.P99},
					{"p999", row.Acquire.P999, q.Acquire.P999, all.Acquire.P999},
				} {
					add(fmt.Sprintf("realistic network, W1 N=%d G=%d: acquire %s nearer the quorum-th node's (quorum floor) than the slowest's (raw go-redis)", c.N, c.G, p.name),
						fmt.Sprintf("%s; quorum floor %s; raw %s", fmtDur(p.ours), fmtDur(p.q), fmtDur(p.slow)),
						p.ours-p.q < p.slow-p.ours)
				}
			}
		}
		if plain, ok := r.findCount(ours, false); ok {
			if cl, ok := r.findCount(ours, true); ok {
				same := maps.Equal(cl.rounded(), plain.rounded())
				measured := fmt.Sprintf("%.2f vs %.2f round trips per pair; ", cl.RoundTrips(), plain.RoundTrips())
				if same {
					measured += "the same commands"
				} else {
					measured += fmt.Sprintf("commands %s vs %s", cl.Summary(), plain.Summary())
				}
				if cl.Rejected+plain.Rejected > 0 {
					measured += fmt.Sprintf("; refused %d vs %d", cl.Rejected, plain.Rejected)
				}
				add("no extra round trip on a cluster: the same round trips and commands per lock+release as on one server", measured,
					same && math.Round(100*cl.RoundTrips()) == math.Round(100*plain.RoundTrips()) && cl.Rejected == 0 && plain.Rejected == 0)
			}
		}
	}
	var lost, cells uint64
	for _, row := range r.Rows {
		if contended(row.Cell.Workload) && !row.NA {
			lost += row.LostUpdates
			cells++
		}
	}
	if cells > 0 {
		ts = append(ts, Target{Target: "zero lost updates in every W2 cell", Library: "all",
			Measured: fmt.Sprintf("%d lost in %d library-cells", lost, cells), Met: lost == 0})
	}
	var bad uint64
	cells = 0
	for _, row := range r.Rows {
		if coordination(row.Cell.Workload) && !row.NA {
			bad += row.Violations
			cells++
		}
	}
	if cells > 0 {
		ts = append(ts, Target{Target: "SEM and ELECT: never more than n permits or one leader at once, fences and terms rising", Library: "all",
			Measured: fmt.Sprintf("%d violations in %d library-cells", bad, cells), Met: bad == 0})
	}
	return append(ts, r.rwTargets()...)
}

// limit is how many may hold at once in a Sem or Elect cell: the
// permits, one for a lock or a leadership.
func (c Cell) limit() int {
	if c.Workload == Sem {
		return max(c.Permits, 1)
	}
	return 1
}

// permits is what the n column of the SEM table says of c.
func (c Cell) permits() string {
	if c.Permits == 0 {
		return "lock"
	}
	return strconv.Itoa(c.Permits)
}

// ratio returns a/b, +Inf when only b is 0, and NaN when both are.
func ratio(a, b float64) float64 {
	if b == 0 {
		if a == 0 {
			return math.NaN()
		}
		return math.Inf(1)
	}
	return a / b
}

func fmtRatio(x float64) string {
	switch {
	case math.IsNaN(x):
		return "?"
	case math.IsInf(x, 1):
		return "∞"
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	}
	return fmt.Sprintf("%.2f", x)
}

// fmtDur formats d with three significant digits or so.
func fmtDur(d time.Duration) string {
	num := func(v float64, unit string) string {
		switch {
		case v >= 99.95:
			return fmt.Sprintf("%.0f%s", v, unit)
		case v >= 9.995:
			return fmt.Sprintf("%.1f%s", v, unit)
		}
		return fmt.Sprintf("%.2f%s", v, unit)
	}
	switch {
	case d <= 0:
		return "0"
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", int64(d))
	case d < 999950*time.Nanosecond:
		return num(float64(d)/1e3, "µs")
	case d < 999950*time.Microsecond:
		return num(float64(d)/1e6, "ms")
	}
	return num(d.Seconds(), "s")
}

// nodes is what the N column of the tables says of c: the number of
// nodes, and "1 (cluster)" for the cluster.
func (c Cell) nodes() string {
	if c.Cluster {
		return fmt.Sprintf("%d (cluster)", c.N)
	}
	return strconv.Itoa(c.N)
}

// progress is the one-line summary of a row printed as the run goes.
func (row Row) progress() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-17s %-16s %8.0f ops/s  acquire p50 %-7s p99 %-7s p999 %-7s release p50 %-7s %6.1f allocs/op",
		row.Cell, row.Library, row.OpsPerSec, fmtDur(row.Acquire.P50), fmtDur(row.Acquire.P99), fmtDur(row.Acquire.P999),
		fmtDur(row.Release.P50), row.AllocsPerOp)
	switch row.Cell.Workload {
	case Sem:
		fmt.Fprintf(&b, "  held mean %.2f max %d busiest %.1f%% least %.1f%% cut-off %d violations %d",
			row.MeanHeld, row.MaxHeld, 100*row.BusiestShare, 100*row.LeastShare, row.CutOff, row.Violations)
	case RW:
		row.rwProgress(&b)
	case Elect:
		fmt.Fprintf(&b, "  handovers %.1f/s (to another %.1f/s) p50 %s p99 %s  Leader() p50 %s p99 %s  violations %d",
			row.HandoversPerSec, row.CrossPerSec, fmtDur(row.Handover.P50), fmtDur(row.Handover.P99),
			fmtDur(row.Read.P50), fmtDur(row.Read.P99), row.Violations)
	}
	if contended(row.Cell.Workload) {
		fmt.Fprintf(&b, "  cross %.1f/s handoff %.0f%% busiest %.1f%% gave-up %d cut-off %d lost %d",
			row.CrossPerSec, 100*row.HandoffShare, 100*row.BusiestShare, row.GaveUp, row.CutOff, row.LostUpdates)
	}
	if row.Errors > 0 {
		fmt.Fprintf(&b, "  ERRORS %d: %s", row.Errors, row.FirstError)
	}
	return b.String()
}

// Markdown renders the report: when and where it ran, the targets, and a
// table for each workload.
func (r *Report) Markdown() string {
	var b bytes.Buffer
	cfg := r.Config
	m := r.Machine
	fmt.Fprintf(&b, "### Run of %s\n\n", r.Started.UTC().Format("2006-01-02 15:04 MST"))
	if r.Command != "" {
		fmt.Fprintf(&b, "- Command: `%s`\n", r.Command)
	}
	fmt.Fprintf(&b, "- Machine: %s, %d logical CPUs (GOMAXPROCS %d), %s/%s, kernel %s; %s; redis-server %s; load average %s at the start, %s at the end\n",
		m.CPU, m.Cores, m.GOMAXPROCS, m.OS, m.Arch, m.Kernel, m.Go, m.Redis, orQ(r.LoadStart), orQ(r.LoadEnd))
	if r.Network != "" {
		fmt.Fprintf(&b, "- Network: %s; what it did in each cell is under \"Network\" below.\n", r.Network)
	}
	if len(r.Rows) > 0 {
		fmt.Fprintf(&b, "- Each library ran %v per cell in %d interleaved slices of %v; TTL %v; tuned retry delay %v; the run took %v.\n",
			cfg.Duration, cfg.Reps, cfg.Duration/time.Duration(max(cfg.Reps, 1)), cfg.TTL, cfg.TunedDelay, r.Finished.Sub(r.Started).Round(time.Second))
	} else {
		fmt.Fprintf(&b, "- No table cells ran; TTL %v; the run took %v.\n", cfg.TTL, r.Finished.Sub(r.Started).Round(time.Second))
	}

	if ts := r.Targets(); len(ts) > 0 {
		b.WriteString("\n#### Goals\n\n| target | library | measured | met |\n|---|---|---|---|\n")
		for _, t := range ts {
			met := "**no**"
			if t.Met {
				met = "yes"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", t.Target, t.Library, t.Measured, met)
		}
	}

	if len(r.Commands) > 0 {
		fmt.Fprintf(&b, "\n#### Commands per lock+release\n\n"+
			"What the node's servers did while each library made %d lock+release pairs, one at a time, on %d keys it had locked once before, "+
			"summed over the servers: round trips are the reads from client connections (INFO stats total_reads_processed), one per request "+
			"with one request in flight; commands are the calls of each command (INFO commandstats), those the client sent and those its scripts ran; "+
			"µs in scripts is the servers' time in script commands (their usec), the commands they ran included.\n\n",
			r.Commands[0].Pairs, keysPerWorker)
		b.WriteString("| library | node | round trips per pair | commands per pair | µs in scripts per pair | refused | failed |\n|---|---|--:|---|--:|--:|--:|\n")
		for _, cc := range r.Commands {
			fmt.Fprintf(&b, "| %s | %s | %.2f | %s | %.1f | %d | %d |\n", cc.Library, cc.Node, cc.RoundTrips(), cc.Summary(), cc.ScriptMicros(), cc.Rejected, cc.Failed)
		}
	}

	var w1, w2, sem, elect, rw []Row
	for _, row := range r.Rows {
		switch row.Cell.Workload {
		case W1:
			w1 = append(w1, row)
		case RW:
			rw = append(rw, row)
		case Sem:
			sem = append(sem, row)
		case Elect:
			elect = append(elect, row)
		default:
			w2 = append(w2, row)
		}
	}
	clients := map[string]string{W2: "own", W2Shared: "shared"}
	if len(w1) > 0 {
		b.WriteString("\n#### W1: uncontended (G goroutines share one client, each on its own keys)\n\n")
		// With Config.SlowAbove, a column of the share of lock calls that
		// took at least that long.
		slowHead, slowAlign, slowNA := "", "", ""
		if cfg.SlowAbove > 0 {
			slowHead, slowAlign, slowNA = fmt.Sprintf(" acquire ≥ %s |", fmtDur(cfg.SlowAbove)), "--:|", " |"
		}
		b.WriteString("| N | G | library | ops/s | × redsync | acquire p50 | p99 | p999 | max |" + slowHead + " release p50 | p99 | allocs/op | B/op | errors |\n")
		b.WriteString("|--:|--:|---|--:|--:|--:|--:|--:|--:|" + slowAlign + "--:|--:|--:|--:|--:|\n")
		for _, row := range w1 {
			c := row.Cell
			if row.NA {
				fmt.Fprintf(&b, "| %s | %d | %s | n/a | | | | | |%s | | | | |\n", c.nodes(), c.G, row.Library, slowNA)
				continue
			}
			vs := ""
			if p, ok := r.Find(c, LibRedsync); ok {
				vs = fmtRatio(ratio(row.OpsPerSec, p.OpsPerSec))
			}
			slow := ""
			if cfg.SlowAbove > 0 {
				slow = fmt.Sprintf(" %.2f%% |", 100*row.SlowShare)
			}
			fmt.Fprintf(&b, "| %s | %d | %s | %.0f | %s | %s | %s | %s | %s |%s %s | %s | %.1f | %.0f | %d |\n",
				c.nodes(), c.G, row.Library, row.OpsPerSec, vs,
				fmtDur(row.Acquire.P50), fmtDur(row.Acquire.P99), fmtDur(row.Acquire.P999), fmtDur(row.Acquire.Max), slow,
				fmtDur(row.Release.P50), fmtDur(row.Release.P99),
				row.AllocsPerOp, row.BytesPerOp, row.Errors+row.GaveUp)
		}
	}
	if len(w2) > 0 {
		b.WriteString("\n#### W2: contended (G contenders on one key, each with its own client as processes would have, or sharing one as goroutines of one process)\n\n")
		b.WriteString("| N | G | clients | retry | library | ops/s | acquire p50 | p99 | max | release p50 | p99 | allocs/op | B/op | handoff share | cross/s | busiest share | gave up | waits cut off | lost updates | errors |\n")
		b.WriteString("|--:|--:|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, row := range w2 {
			c := row.Cell
			if row.NA {
				fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | n/a | | | | | | | | | | | | | | |\n", c.nodes(), c.G, clients[c.Workload], c.Retry, row.Library)
				continue
			}
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %.0f | %s | %s | %s | %s | %s | %.1f | %.0f | %.1f%% | %.1f | %.1f%% | %d | %d | %d | %d |\n",
				c.nodes(), c.G, clients[c.Workload], c.Retry, row.Library, row.OpsPerSec,
				fmtDur(row.Acquire.P50), fmtDur(row.Acquire.P99), fmtDur(row.Acquire.Max),
				fmtDur(row.Release.P50), fmtDur(row.Release.P99),
				row.AllocsPerOp, row.BytesPerOp,
				100*row.HandoffShare, row.CrossPerSec, 100*row.BusiestShare,
				row.GaveUp, row.CutOff, row.LostUpdates, row.Errors)
		}
	}
	if len(sem) > 0 {
		fmt.Fprintf(&b, "\n#### SEM: a semaphore of n permits (G contenders, each with its own client, each holding a permit %v; n = lock: a plain Lock on one key, run alike)\n\n", cfg.Hold)
		b.WriteString("No peer library offers a semaphore over N masters: this module's client only. Grants/s are permits acquired and released per second; " +
			"the wait runs from a contender's previous release to its next grant; mean held is the permits held on average; " +
			"violations count more than n holders at once, two holders of a slot and fences that did not rise on a slot, and must be 0.\n\n")
		b.WriteString("| N | G | n | library | grants/s | wait p50 | p99 | max | release p50 | p99 | allocs/op | mean held | max held | busiest share | least share | waits cut off | violations | errors |\n")
		b.WriteString("|--:|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, row := range sem {
			c := row.Cell
			fmt.Fprintf(&b, "| %d | %d | %s | %s | %.0f | %s | %s | %s | %s | %s | %.1f | %.2f | %d | %.1f%% | %.1f%% | %d | %d | %d |\n",
				c.N, c.G, c.permits(), row.Library, row.OpsPerSec,
				fmtDur(row.Acquire.P50), fmtDur(row.Acquire.P99), fmtDur(row.Acquire.Max),
				fmtDur(row.Release.P50), fmtDur(row.Release.P99), row.AllocsPerOp,
				row.MeanHeld, row.MaxHeld, 100*row.BusiestShare, 100*row.LeastShare,
				row.CutOff, row.Violations, row.Errors+row.GaveUp)
		}
	}
	if len(elect) > 0 {
		fmt.Fprintf(&b, "\n#### ELECT: an election (C candidates, each with its own client; the leader resigns after %v; one more client reads Leader() back to back)\n\n", cfg.Hold)
		b.WriteString("No peer library offers an election over N masters: this module's client only. A handover is a leadership that follows another; " +
			"its latency runs from the moment the last leader began to Resign to the next leader's Campaign return; " +
			"to another: handovers to another candidate than the last leader; violations count two leaders at once and terms that did not rise, and must be 0.\n\n")
		b.WriteString("| N | C | library | handovers/s | to another /s | handover p50 | p99 | max | campaign wait p50 | p99 | resign p50 | p99 | Leader() p50 | p99 | reads/s | no leader | busiest share | least share | violations | errors |\n")
		b.WriteString("|--:|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, row := range elect {
			c := row.Cell
			fmt.Fprintf(&b, "| %d | %d | %s | %.1f | %.1f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.0f | %.1f%% | %.1f%% | %.1f%% | %d | %d |\n",
				c.N, c.G, row.Library, row.HandoversPerSec, row.CrossPerSec,
				fmtDur(row.Handover.P50), fmtDur(row.Handover.P99), fmtDur(row.Handover.Max),
				fmtDur(row.Acquire.P50), fmtDur(row.Acquire.P99),
				fmtDur(row.Release.P50), fmtDur(row.Release.P99),
				fmtDur(row.Read.P50), fmtDur(row.Read.P99), row.ReadsPerSec,
				100*share(row.NoLeader, row.Reads), 100*row.BusiestShare, 100*row.LeastShare,
				row.Violations, row.Errors+row.GaveUp)
		}
	}
	r.rwMarkdown(&b, rw)
	if len(r.NetCells) > 0 {
		b.WriteString("\n#### Network\n\n" +
			"What the simulated network did while each cell ran, its libraries' warm-up included: the segments the clients sent, " +
			"how late past their due time the proxies delivered them (the precision of their timing, on cores they share with the clients and the servers), " +
			"and the stalls of the server that stalls.\n\n")
		b.WriteString("| cell | segments | late p50 | p99 | p999 | max | stalls | stalled | share of the time |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, cn := range r.NetCells {
			s := cn.NetStats
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %d | %v | %.1f%% |\n", cn.Cell, s.Segments,
				fmtDur(s.LateP50), fmtDur(s.LateP99), fmtDur(s.LateP999), fmtDur(s.LateMax),
				s.Stalls, s.Stalled.Round(time.Millisecond), 100*s.stalledShare())
		}
	}
	r.scaleMarkdown(&b)
	var errs []string
	for _, row := range r.Rows {
		if row.FirstError != "" {
			errs = append(errs, fmt.Sprintf("- %s %s: %d errors; the first: `%s`", row.Cell, row.Library, row.Errors, row.FirstError))
		}
	}
	if len(errs) > 0 {
		b.WriteString("\n#### Errors\n\n" + strings.Join(errs, "\n") + "\n")
	}
	return b.String()
}

// share returns part/whole, 0 when whole is 0.
func share(part, whole uint64) float64 {
	if whole == 0 {
		return 0
	}
	return float64(part) / float64(whole)
}

func orQ(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

// The markers between which WriteSection puts a report.
const (
	BeginMarker = "<!-- lockbench:begin -->"
	EndMarker   = "<!-- lockbench:end -->"
)

// WriteSection puts section into the file at path between BeginMarker and
// EndMarker, replacing what was there, so that the text around the markers
// is kept. A file without the markers gets them, with the section, at its
// end; a missing file is created with a title.
func WriteSection(path, section string) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	block := BeginMarker + "\n" + strings.TrimRight(section, "\n") + "\n" + EndMarker
	text := string(old)
	i := strings.Index(text, BeginMarker)
	j := strings.Index(text, EndMarker)
	switch {
	case i >= 0 && j > i:
		text = text[:i] + block + text[j+len(EndMarker):]
	case len(old) == 0:
		text = "# Benchmarks\n\n" + block + "\n"
	default:
		text = strings.TrimRight(text, "\n") + "\n\n" + block + "\n"
	}
	return os.WriteFile(path, []byte(text), 0o644)
}
