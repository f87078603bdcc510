package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
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
	GaveUp         uint64 // acquisitions the library gave up on
	Errors         uint64 // any other failure
	FirstError     string
	CutOff         uint64 // W2, RW: waits cut off by the end of a slice

	// W2 only.
	Acquisitions uint64  // counted under the lock
	Cross        uint64  // acquisitions by another contender than the previous holder
	HandoffShare float64 // Cross / acquisitions that had a predecessor
	BusiestShare float64 // the most acquisitions by one contender / all acquisitions
	LostUpdates  uint64  // increments of the protected counter lost to an overlap

	// RW only: holds that broke rwRule (it must be 0), the pairs of each
	// kind, and the acquisitions' latencies of each kind.
	Violations                uint64
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

// find returns the row of lib in cell c.
func (r *Report) find(c Cell, lib string) (Row, bool) {
	for _, row := range r.Rows {
		if row.Cell == c && row.Library == lib && !row.NA {
			return row, true
		}
	}
	return Row{}, false
}

// Failures returns an error for every row with errors, give-ups in W1,
// lost updates or violations; nil when there are none.
func (r *Report) Failures() error {
	var errs []error
	for _, row := range r.Rows {
		for _, f := range []struct {
			n    uint64
			what string
		}{
			{row.Errors, "errors, the first: " + row.FirstError},
			{row.GaveUp * btou(row.Cell.Workload == W1), "give-ups without contention"},
			{row.LostUpdates, "lost updates"},
			{row.Violations, "violations (" + rwRule + ")"},
		} {
			if f.n > 0 {
				errs = append(errs, fmt.Errorf("%s %s: %d %s", row.Cell, row.Library, f.n, f.what))
			}
		}
	}
	return errors.Join(errs...)
}

func btou(b bool) uint64 { return uint64(btoi(b)) }

// share returns part/whole, 0 when whole is 0.
func share(part, whole uint64) float64 {
	if whole == 0 {
		return 0
	}
	return float64(part) / float64(whole)
}

// fmtRatio formats a/b, or "" when b is 0.
func fmtRatio(a, b float64) string {
	if b == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f", a/b)
}

// fmtDur formats d with three significant digits or so.
func fmtDur(d time.Duration) string {
	v, unit := float64(d), "ns"
	switch {
	case d <= 0:
		return "0"
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", int64(d))
	case d < 999950*time.Nanosecond:
		v, unit = v/1e3, "µs"
	case d < 999950*time.Microsecond:
		v, unit = v/1e6, "ms"
	default:
		v, unit = v/1e9, "s"
	}
	digits := 2
	if v >= 99.95 {
		digits = 0
	} else if v >= 9.995 {
		digits = 1
	}
	return fmt.Sprintf("%.*f%s", digits, v, unit)
}

// progress is the one-line summary of a row printed as the run goes.
func (row Row) progress() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-17s %-16s %8.0f pairs/s  acquire p50 %-7s p99 %-7s p999 %-7s release p50 %-7s %6.1f allocs/op  server CPU %s/pair",
		row.Cell, row.Library, row.OpsPerSec, fmtDur(row.Acquire.P50), fmtDur(row.Acquire.P99), fmtDur(row.Acquire.P999),
		fmtDur(row.Release.P50), row.AllocsPerOp, fmtDur(row.ServerCPUPerOp))
	if contended(row.Cell.Workload) {
		fmt.Fprintf(&b, "  handoff %.0f%% busiest %.1f%% lost %d", 100*row.HandoffShare, 100*row.BusiestShare, row.LostUpdates)
	}
	if row.Errors > 0 {
		fmt.Fprintf(&b, "  ERRORS %d: %s", row.Errors, row.FirstError)
	}
	return b.String()
}

// textColumns are the columns of the tables that are left-aligned.
var textColumns = []string{"library", "clients", "retry", "lock", "commands per pair", "load"}

// table writes a Markdown table under a heading and a note, if it has
// rows. Each row is its cells joined by "|"; a row shorter than the
// header is filled with empty cells.
func table(b *bytes.Buffer, title, note, header string, rows []string) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "\n#### %s\n\n%s\n\n", title, note)
	cols := strings.Split(header, "|")
	align := make([]string, len(cols))
	for i, c := range cols {
		align[i] = "--:"
		if slices.Contains(textColumns, c) {
			align[i] = "---"
		}
	}
	b.WriteString("| " + strings.Join(cols, " | ") + " |\n|" + strings.Join(align, "|") + "|\n")
	for _, r := range rows {
		cells := strings.Split(r, "|")
		cells = append(cells, make([]string, max(len(cols)-len(cells), 0))...)
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
}

// Markdown renders the report: when and where it ran, and a table for
// each workload.
func (r *Report) Markdown() string {
	var b bytes.Buffer
	cfg, m := r.Config, r.Machine
	fmt.Fprintf(&b, "### Run of %s\n\n", r.Started.UTC().Format("2006-01-02 15:04 MST"))
	if r.Command != "" {
		fmt.Fprintf(&b, "- Command: `%s`\n", r.Command)
	}
	fmt.Fprintf(&b, "- Machine: %s, %d logical CPUs (GOMAXPROCS %d), %s/%s, kernel %s; %s; redis-server %s; load average %s at the start, %s at the end\n",
		m.CPU, m.Cores, m.GOMAXPROCS, m.OS, m.Arch, m.Kernel, m.Go, m.Redis, r.LoadStart, r.LoadEnd)
	if r.Network != "" {
		fmt.Fprintf(&b, "- Network: %s.\n", r.Network)
	}
	fmt.Fprintf(&b, "- Each library ran %v per cell in %d interleaved slices; TTL %v; tuned retry delay %v; the run took %v.\n",
		cfg.Duration, cfg.Reps, cfg.TTL, tunedDelay, r.Finished.Sub(r.Started).Round(time.Second))

	var cmds []string
	for _, cc := range r.Commands {
		cmds = append(cmds, fmt.Sprintf("%s|%.2f|%s|%.1f|%d", cc.Library, cc.perPair(cc.Reads), cc.Summary(), cc.perPair(cc.ScriptUsec), cc.Errors))
	}
	table(&b, "Commands per lock+release", fmt.Sprintf("What the first server did while each library made %d lock+release pairs, one at a time, on %d keys it had locked once before: "+
		"round trips are the reads from client connections (INFO stats total_reads_processed); commands are the calls of each command (INFO commandstats), "+
		"those the client sent and those its scripts ran; µs in scripts is the server's time in script commands, the commands they ran included.", cfg.CountPairs, keysPerWorker),
		"library|round trips per pair|commands per pair|µs in scripts per pair|errors", cmds)

	var w1, w2, rw []string
	for _, row := range r.Rows {
		c := row.Cell
		switch {
		case c.Workload == W1 && row.NA:
			w1 = append(w1, fmt.Sprintf("%d|%d|%s|n/a", c.N, c.G, row.Library))
		case c.Workload == W1:
			p, _ := r.find(c, LibRedsync)
			w1 = append(w1, fmt.Sprintf("%d|%d|%s|%.0f|%s|%s|%s|%s|%s|%s|%s|%s|%s|%.1f|%.0f|%d",
				c.N, c.G, row.Library, row.OpsPerSec, fmtRatio(row.OpsPerSec, p.OpsPerSec),
				fmtDur(row.Acquire.P50), fmtDur(row.Acquire.P99), fmtDur(row.Acquire.P999), fmtDur(row.Acquire.Max),
				fmtDur(row.Release.P50), fmtDur(row.Release.P99), fmtDur(row.ServerCPUPerOp),
				fmtRatio(float64(row.ServerCPUPerOp), float64(p.ServerCPUPerOp)), row.AllocsPerOp, row.BytesPerOp, row.Errors+row.GaveUp))
		case c.Workload == RW:
			m := c
			m.Mutex = true
			p, _ := r.find(m, row.Library)
			secs := max(row.Elapsed.Seconds(), 1e-9)
			rw = append(rw, fmt.Sprintf("%d|%d|%s|%s|%.0f|%s|%.0f|%.0f|%s|%s|%s|%s|%s|%s|%.1f|%d|%d|%d",
				c.N, c.G, c.rwKind(), row.Library, row.OpsPerSec, fmtRatio(row.OpsPerSec, p.OpsPerSec*btof(!c.Mutex)),
				float64(row.ReadOps)/secs, float64(row.WriteOps)/secs,
				fmtDur(row.ReadAcquire.P50), fmtDur(row.ReadAcquire.P99), fmtDur(row.WriteAcquire.P50), fmtDur(row.WriteAcquire.P99),
				fmtDur(row.Release.P50), fmtDur(row.Release.P99), row.AllocsPerOp, row.CutOff, row.Violations, row.Errors+row.GaveUp))
		default:
			cells := fmt.Sprintf("%d|%d|%s|%s|%s|", c.N, c.G, map[string]string{W2: "own", W2Shared: "shared"}[c.Workload], c.retry(), row.Library)
			if row.NA {
				w2 = append(w2, cells+"n/a")
				continue
			}
			w2 = append(w2, cells+fmt.Sprintf("%.0f|%s|%s|%s|%s|%s|%s|%.1f|%.0f|%.1f%%|%.1f%%|%d|%d|%d|%d",
				row.OpsPerSec, fmtDur(row.Acquire.P50), fmtDur(row.Acquire.P99), fmtDur(row.Acquire.Max),
				fmtDur(row.Release.P50), fmtDur(row.Release.P99), fmtDur(row.ServerCPUPerOp), row.AllocsPerOp, row.BytesPerOp,
				100*row.HandoffShare, 100*row.BusiestShare, row.GaveUp, row.CutOff, row.LostUpdates, row.Errors))
		}
	}
	const cpuNote = "Server CPU is the CPU time the cell's servers used while it ran (INFO cpu, used_cpu_sys and used_cpu_user, summed over the servers) per lock+release pair."
	table(&b, "W1: uncontended (G goroutines share one client, each on its own keys)", cpuNote,
		"N|G|library|pairs/s|× redsync|acquire p50|p99|p999|max|release p50|p99|server CPU|× redsync|allocs/op|B/op|errors", w1)
	table(&b, "W2: contended (G contenders on one key, each with its own client as processes would have, or sharing one as goroutines of one process)",
		cpuNote+" A contender's acquire latency is its whole wait, from its previous release to holding the lock. Handoff share: the acquisitions by another contender than the last holder.",
		"N|G|clients|retry|library|pairs/s|acquire p50|p99|max|release p50|p99|server CPU|allocs/op|B/op|handoff share|busiest share|gave up|waits cut off|lost updates|errors", w2)
	table(&b, fmt.Sprintf("RW: a read-mostly mix on one key (G goroutines share one client; 1 operation in %d a write; lock: every operation a plain Lock)", rwWriteEvery),
		"No peer library offers a read-write lock over N masters. × lock is the pairs/s against the plain Lock's in the cell beside it; "+
			"a read or write is timed from the call to its return, the wait included; violations count "+rwRule+", and must be 0.",
		"N|G|lock|library|pairs/s|× lock|reads/s|writes/s|read p50|p99|write p50|p99|release p50|p99|allocs/op|waits cut off|violations|errors", rw)
	r.scaleMarkdown(&b) // the errors themselves: Failures
	return b.String()
}

func btof(b bool) float64 { return float64(btoi(b)) }

// WriteJSON writes the report to path as JSON, for drawing plots later
// from several runs (ReadReports, Figures).
func (r *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "\t")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadReports reads reports that WriteJSON wrote.
func ReadReports(paths []string) ([]*Report, error) {
	var reps []*Report
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		r := new(Report)
		if err := json.Unmarshal(b, r); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		reps = append(reps, r)
	}
	return reps, nil
}

// Stalls reports whether the report's run had a simulated network with a
// stalling server.
func (r *Report) Stalls() bool {
	return r.Network != "" && !strings.HasSuffix(r.Network, "; no stalls")
}
