package bench

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
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
	// ServerCPUPerOp is the CPU time the cell's servers used during the
	// measured slices (INFO cpu, system and user, summed over the servers)
	// divided by Ops.
	ServerCPUPerOp time.Duration
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

	// Violations counts, in RW, holds that broke the read-write lock's
	// rule (see rwRule); it must be 0.
	Violations uint64

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
	// Config.Network), or is empty on loopback.
	Network string
	// Commands are the commands counted per lock+release, for each
	// library on the first server.
	Commands []CommandCount
	Rows     []Row
	// Keys and Waiters are the scale measurements KEYS and WAITERS.
	Keys    []KeyMem
	Waiters []WaiterMem
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
			errs = append(errs, fmt.Errorf("%s %s: %d violations (%s)", row.Cell, row.Library, row.Violations, rwRule))
		}
	}
	return errors.Join(errs...)
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

// progress is the one-line summary of a row printed as the run goes.
func (row Row) progress() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-17s %-16s %8.0f ops/s  acquire p50 %-7s p99 %-7s p999 %-7s release p50 %-7s %6.1f allocs/op  server CPU %s/pair",
		row.Cell, row.Library, row.OpsPerSec, fmtDur(row.Acquire.P50), fmtDur(row.Acquire.P99), fmtDur(row.Acquire.P999),
		fmtDur(row.Release.P50), row.AllocsPerOp, fmtDur(row.ServerCPUPerOp))
	if row.Cell.Workload == RW {
		row.rwProgress(&b)
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
		fmt.Fprintf(&b, "- Network: %s.\n", r.Network)
	}
	if len(r.Rows) > 0 {
		fmt.Fprintf(&b, "- Each library ran %v per cell in %d interleaved slices of %v; TTL %v; tuned retry delay %v; the run took %v.\n",
			cfg.Duration, cfg.Reps, cfg.Duration/time.Duration(max(cfg.Reps, 1)), cfg.TTL, cfg.TunedDelay, r.Finished.Sub(r.Started).Round(time.Second))
	} else {
		fmt.Fprintf(&b, "- No table cells ran; TTL %v; the run took %v.\n", cfg.TTL, r.Finished.Sub(r.Started).Round(time.Second))
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

	b.WriteString("\nServer CPU is the CPU time the cell's servers used while it ran (INFO cpu, used_cpu_sys and used_cpu_user, summed over the servers) per lock+release pair.\n")
	var w1, w2, rw []Row
	for _, row := range r.Rows {
		switch row.Cell.Workload {
		case W1:
			w1 = append(w1, row)
		case RW:
			rw = append(rw, row)
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
		b.WriteString("| N | G | library | ops/s | × redsync | acquire p50 | p99 | p999 | max |" + slowHead + " release p50 | p99 | server CPU | × redsync | allocs/op | B/op | errors |\n")
		b.WriteString("|--:|--:|---|--:|--:|--:|--:|--:|--:|" + slowAlign + "--:|--:|--:|--:|--:|--:|--:|\n")
		for _, row := range w1 {
			c := row.Cell
			if row.NA {
				fmt.Fprintf(&b, "| %d | %d | %s | n/a | | | | | |%s | | | | | | |\n", c.N, c.G, row.Library, slowNA)
				continue
			}
			vs, cpuVs := "", ""
			if p, ok := r.Find(c, LibRedsync); ok {
				vs = fmtRatio(ratio(row.OpsPerSec, p.OpsPerSec))
				cpuVs = fmtRatio(ratio(float64(row.ServerCPUPerOp), float64(p.ServerCPUPerOp)))
			}
			slow := ""
			if cfg.SlowAbove > 0 {
				slow = fmt.Sprintf(" %.2f%% |", 100*row.SlowShare)
			}
			fmt.Fprintf(&b, "| %d | %d | %s | %.0f | %s | %s | %s | %s | %s |%s %s | %s | %s | %s | %.1f | %.0f | %d |\n",
				c.N, c.G, row.Library, row.OpsPerSec, vs,
				fmtDur(row.Acquire.P50), fmtDur(row.Acquire.P99), fmtDur(row.Acquire.P999), fmtDur(row.Acquire.Max), slow,
				fmtDur(row.Release.P50), fmtDur(row.Release.P99), fmtDur(row.ServerCPUPerOp), cpuVs,
				row.AllocsPerOp, row.BytesPerOp, row.Errors+row.GaveUp)
		}
	}
	if len(w2) > 0 {
		b.WriteString("\n#### W2: contended (G contenders on one key, each with its own client as processes would have, or sharing one as goroutines of one process)\n\n")
		b.WriteString("| N | G | clients | retry | library | ops/s | acquire p50 | p99 | max | release p50 | p99 | server CPU | allocs/op | B/op | handoff share | cross/s | busiest share | gave up | waits cut off | lost updates | errors |\n")
		b.WriteString("|--:|--:|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
		for _, row := range w2 {
			c := row.Cell
			if row.NA {
				fmt.Fprintf(&b, "| %d | %d | %s | %s | %s | n/a | | | | | | | | | | | | | | | |\n", c.N, c.G, clients[c.Workload], c.Retry, row.Library)
				continue
			}
			fmt.Fprintf(&b, "| %d | %d | %s | %s | %s | %.0f | %s | %s | %s | %s | %s | %s | %.1f | %.0f | %.1f%% | %.1f | %.1f%% | %d | %d | %d | %d |\n",
				c.N, c.G, clients[c.Workload], c.Retry, row.Library, row.OpsPerSec,
				fmtDur(row.Acquire.P50), fmtDur(row.Acquire.P99), fmtDur(row.Acquire.Max),
				fmtDur(row.Release.P50), fmtDur(row.Release.P99), fmtDur(row.ServerCPUPerOp),
				row.AllocsPerOp, row.BytesPerOp,
				100*row.HandoffShare, row.CrossPerSec, 100*row.BusiestShare,
				row.GaveUp, row.CutOff, row.LostUpdates, row.Errors)
		}
	}
	r.rwMarkdown(&b, rw)
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
