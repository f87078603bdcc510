package faulttest

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"github.com/quorumlock/redlock/faulttest/history"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

var (
	longProfile = flag.Bool("long", false, "run the long profile of the fault scenarios (minutes; not for CI); or set REDLOCK_FAULT_LONG=1")
	timelineDir = flag.String("timeline", "", "write each scenario run's timeline as an SVG into this `directory` (relative to faulttest/); or set REDLOCK_TIMELINE")
)

func TestMain(m *testing.M) {
	flag.Parse()
	// go-redis logs every failed dial; the scenarios cause thousands.
	redis.SetLogger(quiet{})
	redistest.Main(m, redistest.Cleanup(printSummary), redistest.Cleanup(CleanupClockShim))
}

// quiet is a go-redis logger that logs nothing.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// isLong reports whether the long profile runs.
func isLong() bool { return *longProfile || os.Getenv("REDLOCK_FAULT_LONG") != "" }

// pick returns short in the short profile and long in the long one.
func pick[T any](short, long T) T {
	if isLong() {
		return long
	}
	return short
}

// A scenario is one fault and what must come of it.
type scenario struct {
	name    string
	nodes   int
	clients int
	fault   string // what is done to the nodes and links
	// canary lists the violations the scenario must produce: each kind in
	// it must be found, and no other. With none, no violation may be found.
	canary  []Kind
	shim    bool // run the nodes with the clock shim
	persist bool // run the nodes with an fsync-always AOF
	// replicated makes every node a master with a replica; clusterMasters
	// makes every node a Redis Cluster of that many masters.
	replicated     bool
	sentinels      bool // with replicated: a Sentinel watches each master
	clusterMasters int
	body           func(r *run)
}

// expected describes what the scenario expects, for the summary.
func (sc *scenario) expected() string {
	if len(sc.canary) == 0 {
		return "safe"
	}
	kinds := make([]string, len(sc.canary))
	for i, k := range sc.canary {
		kinds[i] = string(k)
	}
	return "detect " + strings.Join(kinds, "+")
}

// A run is one scenario running in one test.
type run struct {
	*testing.T
	sc       *scenario
	c        *Cluster
	res      *Resource
	start    time.Time
	observed []string
}

// note adds a measurement or an observation to the scenario's row.
func (r *run) note(format string, args ...any) {
	r.observed = append(r.observed, fmt.Sprintf(format, args...))
}

// client makes a client. Unless quarantine is asked for, it is disabled:
// the scenario's servers are new, and nobody locked anything on them before.
func (r *run) client(name string, quarantine bool, opts redlock.Options) *Client {
	r.Helper()
	opts.DisableQuarantine = !quarantine
	if opts.RetryDelay == 0 {
		opts.RetryDelay = 5 * time.Millisecond
	}
	return r.c.NewClient(name, opts)
}

// clients makes n clients named c0, c1, ... with the same options.
func (r *run) clients(n int, quarantine bool, opts redlock.Options) []*Client {
	r.Helper()
	cls := make([]*Client, n)
	for i := range cls {
		cls[i] = r.client(fmt.Sprintf("c%d", i), quarantine, opts)
	}
	return cls
}

// aged waits until the servers have run long enough to vote for locks
// with TTLs up to d under restart quarantine; see Cluster.Aged.
func (r *run) aged(d time.Duration) { r.c.Aged(d) }

// ops returns the acquisitions recorded so far that match keep.
func (r *run) ops(keep func(*Op) bool) []*Op {
	r.c.H.Mu.Lock()
	defer r.c.H.Mu.Unlock()
	var out []*Op
	for _, op := range r.c.H.Ops {
		if keep == nil || keep(op) {
			out = append(out, op)
		}
	}
	return out
}

func okBy(name string) func(*Op) bool {
	return func(op *Op) bool { return op.OK && op.Client == name }
}

func by(name string) func(*Op) bool {
	return func(op *Op) bool { return op.Client == name }
}

func succeeded(op *Op) bool { return op.OK }

// TestScenarios runs every scenario and prints a summary table at the end.
func TestScenarios(t *testing.T) {
	for i := range scenarios {
		sc := &scenarios[i]
		t.Run(sc.name, func(t *testing.T) {
			r := &run{T: t, sc: sc, start: time.Now()}
			r.c = NewCluster(t, Config{Scenario: sc.name, N: sc.nodes, ClockShim: sc.shim, Persistence: sc.persist,
				Replicated: sc.replicated, Sentinels: sc.sentinels, ClusterMasters: sc.clusterMasters})
			r.res = NewResource(r.c.H)
			r.Logf("N=%d, %d clients (%s profile), fault: %s; expected: %s", sc.nodes, sc.clients, pick("short", "long"), sc.fault, sc.expected())
			defer r.finish()
			sc.body(r)
		})
	}
}

// finish lets the run settle, checks its history against what the
// scenario expects, saves the history if the run failed and adds the row
// to the summary.
func (r *run) finish() {
	if !r.Failed() {
		r.c.Quiesce()
	}
	vs := Check(r.c.H)
	r.drawTimeline(vs)
	found := Count(vs)
	if len(r.sc.canary) == 0 {
		for _, v := range vs {
			r.Errorf("violation: %v", v)
		}
	} else {
		for _, k := range r.sc.canary {
			switch {
			case found[k] > 0:
			default:
				r.Errorf("canary: the checker found no %s violation; the scenario shows nothing (found %v)", k, found)
			}
		}
		for k, n := range found {
			if !slices.Contains(r.sc.canary, k) {
				r.Errorf("canary: %d unexpected %s violations, e.g. %v", n, k, firstOf(vs, k))
			}
		}
		for _, v := range vs[:min(len(vs), 3)] {
			r.Logf("detected as it must be: %v", v)
		}
	}
	switch n := LateGrants(r.c.H); n {
	case 0:
	case 1:
		r.note("1 late grant left until its TTL")
	default:
		r.note("%d late grants left until their TTL", n)
	}
	if r.Failed() || os.Getenv("REDLOCK_FAULT_ARTIFACTS") != "" {
		r.save()
	}
	ops := r.ops(nil)
	ok := 0
	for _, op := range ops {
		if op.OK {
			ok++
		}
	}
	addRow(row{
		scenario:   r.sc.name,
		setup:      fmt.Sprintf("%d/%d", r.c.N(), len(r.c.Clients())),
		expected:   r.sc.expected(),
		observed:   strings.Join(r.observed, "; "),
		violations: history.FormatCounts(found),
		acquired:   fmt.Sprintf("%d/%d", ok, len(ops)),
		elapsed:    time.Since(r.start),
		failed:     r.Failed(),
	})
}

func firstOf(vs []Violation, k Kind) Violation {
	for _, v := range vs {
		if v.Kind == k {
			return v
		}
	}
	return Violation{}
}

// drawn counts the timelines drawn of each scenario.
var (
	drawnMu sync.Mutex
	drawn   = make(map[string]int)
)

// drawTimeline writes the run's timeline (see Timeline) into the directory
// that -timeline or $REDLOCK_TIMELINE names, if any, as <scenario>.svg; a
// scenario run again by the same test binary (-count) as <scenario>-2.svg,
// and so on.
func (r *run) drawTimeline(vs []Violation) {
	dir := cmp.Or(*timelineDir, os.Getenv("REDLOCK_TIMELINE"))
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.Errorf("drawing the timeline: %v", err)
		return
	}
	drawnMu.Lock()
	drawn[r.sc.name]++
	n := drawn[r.sc.name]
	drawnMu.Unlock()
	name := r.sc.name
	if n > 1 {
		name += fmt.Sprintf("-%d", n)
	}
	path := filepath.Join(dir, name+".svg")
	if err := Timeline(r.c.H, vs).WriteFile(path); err != nil {
		r.Errorf("drawing the timeline: %v", err)
		return
	}
	r.Logf("timeline drawn in %s", path)
}

// save writes the history as JSON to $REDLOCK_FAULT_ARTIFACTS, or to the
// system's temporary directory, and says where.
func (r *run) save() {
	dir := os.Getenv("REDLOCK_FAULT_ARTIFACTS")
	if dir == "" {
		dir = os.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.Errorf("saving the history: %v", err)
		return
	}
	path := filepath.Join(dir, fmt.Sprintf("redlock-faulttest-%s-%s.json", r.sc.name, time.Now().Format("20060102-150405.000")))
	if err := r.c.H.Save(path); err != nil {
		r.Errorf("saving the history: %v", err)
		return
	}
	r.Logf("history saved to %s", path)
}

// A row is one line of the summary.
type row struct {
	scenario, setup, expected, observed, violations, acquired string
	elapsed                                                   time.Duration
	failed                                                    bool
}

var (
	summaryMu sync.Mutex
	summary   []row
)

func addRow(r row) {
	summaryMu.Lock()
	defer summaryMu.Unlock()
	summary = append(summary, r)
}

// printSummary prints the summary table of the scenarios that ran.
func printSummary() {
	summaryMu.Lock()
	defer summaryMu.Unlock()
	if len(summary) == 0 {
		return
	}
	head := []string{"scenario", "N/cl", "expected", "observed", "violations", "acq ok/calls", "time", "verdict"}
	lines := [][]string{head}
	var total time.Duration
	for _, r := range summary {
		verdict := "pass"
		if r.failed {
			verdict = "FAIL"
		}
		total += r.elapsed
		lines = append(lines, []string{r.scenario, r.setup, r.expected, r.observed, r.violations, r.acquired,
			r.elapsed.Round(10 * time.Millisecond).String(), verdict})
	}
	widths := make([]int, len(head))
	for _, l := range lines {
		for i, cell := range l {
			widths[i] = max(widths[i], len([]rune(cell)))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nfault scenarios, %s profile, %d scenarios in %v\n", pick("short", "long"), len(summary), total.Round(time.Second))
	for n, l := range lines {
		b.WriteString("|")
		for i, cell := range l {
			fmt.Fprintf(&b, " %s%s |", cell, strings.Repeat(" ", widths[i]-len([]rune(cell))))
		}
		b.WriteString("\n")
		if n == 0 {
			b.WriteString("|")
			for i := range l {
				b.WriteString(strings.Repeat("-", widths[i]+2) + "|")
			}
			b.WriteString("\n")
		}
	}
	fmt.Print(b.String())
	// go test hides the output of a package that passes, unless -v: a
	// script that wants the table anyway names a file for it.
	if path := os.Getenv("REDLOCK_FAULT_SUMMARY"); path != "" {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "faulttest: writing the summary:", err)
		}
	}
}

// A load is what the holders of a contention workload do.
type load struct {
	key    string
	ttl    time.Duration
	hold   time.Duration // the longest a holder works before it extends or releases
	extend float64       // the chance that a holder extends once
	expire float64       // the chance that a holder lets the lock expire instead of releasing it
	gap    time.Duration // the mean pause after a failed attempt
	rest   time.Duration // the pause of a holder after its lock ended
	wait   time.Duration // if set, clients wait up to this long with Lock instead of trying once with TryLock
}

// contend runs the load on every client until ctx ends. Each client tries
// the lock with TryLock (or waits for it with Lock), and as holder writes
// to the fenced resource, works, maybe extends, and releases or lets the
// lock expire.
func (r *run) contend(ctx context.Context, clients []*Client, l load) {
	var wg sync.WaitGroup
	for _, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				hl, err := l.acquire(ctx, cl)
				if err != nil {
					time.Sleep(l.gap/2 + rand.N(l.gap+1))
					continue
				}
				r.res.Write(hl)
				time.Sleep(rand.N(l.hold + 1))
				if rand.Float64() < l.extend && hl.Extend(context.Background(), l.ttl) == nil {
					r.res.Write(hl)
					time.Sleep(rand.N(l.hold + 1))
				}
				if rand.Float64() < l.expire {
					time.Sleep(time.Until(hl.ClaimedUntil()))
				} else {
					hl.Release(context.Background())
				}
				time.Sleep(l.rest)
			}
		}()
	}
	wg.Wait()
}

func (l load) acquire(ctx context.Context, cl *Client) (*Held, error) {
	if l.wait == 0 {
		return cl.TryLock(ctx, l.key, l.ttl)
	}
	ctx, cancel := context.WithTimeout(ctx, l.wait)
	defer cancel()
	return cl.Lock(ctx, l.key, l.ttl)
}

// durations returns the durations of the calls ops, sorted.
func durations(ops []*Op) []time.Duration {
	d := make([]time.Duration, len(ops))
	for i, op := range ops {
		d[i] = time.Duration(op.Return - op.Start)
	}
	slices.Sort(d)
	return d
}

// spread formats the median and the maximum of sorted durations.
func spread(d []time.Duration) string {
	if len(d) == 0 {
		return "none"
	}
	return fmt.Sprintf("p50 %v max %v", d[len(d)/2].Round(100*time.Microsecond), d[len(d)-1].Round(100*time.Microsecond))
}

// countOutcomes counts the outcomes nodes gave in the failed calls ops.
func countOutcomes(ops []*Op) string {
	n := make(map[string]int)
	for _, op := range ops {
		for _, o := range op.Outcomes {
			n[o]++
		}
	}
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Compare(n[b], n[a]) })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, n[k])
	}
	return strings.Join(parts, ", ")
}
