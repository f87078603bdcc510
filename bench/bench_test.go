package bench

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/redistest"
)

// TestSmoke runs every library in tiny cells of every workload against
// real servers and a cluster, and checks correctness only: no errors, no
// give-ups without contention, no lost updates, never more than n permits
// or one leader at once, work done in every cell, commands counted, and a
// report that renders. It asserts nothing about timing.
func TestSmoke(t *testing.T) {
	servers := redistest.StartN(t, 3, redistest.Config{})
	cluster := redistest.StartCluster(t, 3, redistest.Config{})
	cfg := DefaultConfig()
	for _, s := range servers {
		cfg.Addrs = append(cfg.Addrs, s.Addr())
	}
	cfg.ClusterAddrs = cluster.Addrs()
	cfg.Libraries = Libraries() // the defaults and those only named
	cfg.Duration = 60 * time.Millisecond
	cfg.Reps = 2
	cfg.Nodes = []int{1, 3}
	cfg.Goroutines = []int{1, 3}
	cfg.ClusterGoroutines = []int{2}
	cfg.CountPairs = 30
	cfg.Contenders = 3
	cfg.Candidates = 3
	cfg.Permits = []int{2, 0}
	var progress strings.Builder
	cfg.Progress = &progress
	// redlock runs as shipped, with restart quarantine: the fresh servers
	// vote once they are older than the TTL.
	cfg.TTL = time.Second
	time.Sleep(cfg.TTL + 100*time.Millisecond)

	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Failures(); err != nil {
		t.Fatal(err)
	}
	cells := cfg.cells()
	want := 0
	for _, c := range cells {
		if ownOnly(c.Workload) {
			want += 2 // this module's adapters only, without n/a rows
		} else {
			want += len(Libraries())
		}
	}
	if len(rep.Rows) != want {
		t.Fatalf("%d rows, want %d", len(rep.Rows), want)
	}
	if want := 2 * len(Libraries()); len(rep.Commands) != want {
		t.Fatalf("%d command counts, want %d", len(rep.Commands), want)
	}
	for _, cc := range rep.Commands {
		if cc.Pairs != cfg.CountPairs || cc.Rejected != 0 || len(cc.Calls) == 0 {
			t.Errorf("%s on %s: %+v", cc.Library, cc.Node, cc)
		}
		// This module's client sends one script per acquire and one per
		// release, on a server and on the cluster alike.
		if strings.HasPrefix(cc.Library, "redlock/") && cc.Scripts() != 2 {
			t.Errorf("%s on %s: %.2f scripts per lock+release, want 2: %s", cc.Library, cc.Node, cc.Scripts(), cc.Summary())
		}
	}
	for _, row := range rep.Rows {
		if row.NA != !supports(row.Library, row.Cell) {
			t.Errorf("%s %s: NA = %v", row.Cell, row.Library, row.NA)
		}
		if coordination(row.Cell.Workload) {
			checkCoordRow(t, row)
		}
		if row.NA {
			continue
		}
		if row.Ops == 0 {
			// A contended cell may see no grant at all in slices this
			// short: redsync pauses 50-250ms between tries by default.
			// Uncontended cells must make progress.
			if row.Cell.Workload == W1 || row.Cell.Workload == Sem && row.Cell.Permits > 0 {
				t.Errorf("%s %s: no lock+unlock in %v", row.Cell, row.Library, row.Elapsed)
			}
			continue
		}
		if row.Elapsed <= 0 || row.AllocsPerOp <= 0 {
			t.Errorf("%s %s: %d ops in %v, %.1f allocs/op", row.Cell, row.Library, row.Ops, row.Elapsed, row.AllocsPerOp)
		}
		if row.Acquire.P50 <= 0 || row.Acquire.P50 > row.Acquire.P99 || row.Acquire.P99 > row.Acquire.Max {
			t.Errorf("%s %s: acquire latencies %+v", row.Cell, row.Library, row.Acquire)
		}
		if contended(row.Cell.Workload) || coordination(row.Cell.Workload) {
			if row.Acquisitions != row.Ops {
				t.Errorf("%s %s: %d acquisitions counted under the lock, %d lock+unlock pairs", row.Cell, row.Library, row.Acquisitions, row.Ops)
			}
			if row.BusiestShare < 1/float64(row.Cell.G) || row.BusiestShare > 1 || row.HandoffShare < 0 || row.HandoffShare > 1 {
				t.Errorf("%s %s: busiest share %v, handoff share %v", row.Cell, row.Library, row.BusiestShare, row.HandoffShare)
			}
		}
	}
	if got, want := strings.Count(progress.String(), "\n"), len(rep.Rows)-countNA(rep.Rows)+len(rep.Commands); got != want {
		t.Errorf("%d progress lines for %d rows and %d command counts", got, len(rep.Rows)-countNA(rep.Rows), len(rep.Commands))
	}

	md := rep.Markdown()
	for _, want := range append([]string{"#### W1", "#### W2", "| n/a |", "zero lost updates in every W2 cell",
		"#### SEM", "| 3 | 3 | 2 | redlock/rueidis |", "| 1 | 3 | lock | redlock/go-redis |", "#### ELECT", "| 3 | 3 | redlock/go-redis |",
		"SEM and ELECT: never more than n permits or one leader at once",
		"#### RW", "| 3 | 3 | rwlock | redlock/go-redis |", "| 1 | 3 | lock | redlock/rueidis |", "RW: readers share and writers exclude",
		"| 1 (cluster) | 2 | bsm/redislock |", "#### Commands per lock+release", "no extra round trip on a cluster"}, Libraries()...) {
		if !strings.Contains(md, want) {
			t.Errorf("the report has no %q:\n%s", want, md)
		}
	}
	for _, tg := range rep.Targets() {
		if strings.HasPrefix(tg.Target, "no extra round trip") && !tg.Met {
			t.Errorf("%s (%s): %s", tg.Target, tg.Library, tg.Measured)
		}
	}
	if strings.Contains(md, "#### Errors") {
		t.Errorf("the report lists errors:\n%s", md)
	}
	t.Logf("\n%s", md)
}

// checkCoordRow checks what a Sem or Elect row says of the library's
// guarantees and of the harness's own bookkeeping.
func checkCoordRow(t *testing.T, row Row) {
	t.Helper()
	if row.Library != LibRedlockGoRedis && row.Library != LibRedlockRueidis {
		t.Errorf("%s: a row of %s", row.Cell, row.Library)
	}
	if row.Violations != 0 || row.MaxHeld > row.Cell.limit() {
		t.Errorf("%s %s: %d violations, %d held at once", row.Cell, row.Library, row.Violations, row.MaxHeld)
	}
	if row.Acquisitions > 0 && (row.MaxHeld < 1 || row.MeanHeld <= 0 || row.MeanHeld > float64(row.Cell.limit())) {
		t.Errorf("%s %s: max held %d, mean held %.2f", row.Cell, row.Library, row.MaxHeld, row.MeanHeld)
	}
	if row.LeastShare > row.BusiestShare || row.LeastShare < 0 {
		t.Errorf("%s %s: least share %v, busiest %v", row.Cell, row.Library, row.LeastShare, row.BusiestShare)
	}
	if row.Cell.Workload != Elect {
		return
	}
	if row.Handovers > row.Acquisitions || row.Cross > row.Handovers {
		t.Errorf("%s %s: %d handovers (%d to another) in %d leaderships", row.Cell, row.Library, row.Handovers, row.Cross, row.Acquisitions)
	}
	if row.Reads == 0 || row.NoLeader > row.Reads {
		t.Errorf("%s %s: %d reads of the leader, %d without one", row.Cell, row.Library, row.Reads, row.NoLeader)
	}
	if row.Handovers > 0 && (row.Handover.P50 <= 0 || row.Handover.P50 > row.Handover.Max) {
		t.Errorf("%s %s: handover latencies %+v", row.Cell, row.Library, row.Handover)
	}
}

// TestCoordShared checks the harness's own safety bookkeeping on made-up
// holders: too many at once and fences that do not rise are violations.
func TestCoordShared(t *testing.T) {
	var sh coordShared
	sh.hold(2)
	sh.hold(2)
	sh.fence(1, 5)
	sh.fence(1, 6)
	if v := sh.violations.Load(); v != 0 || sh.maxHeld.Load() != 2 {
		t.Fatalf("%d violations, max held %d", v, sh.maxHeld.Load())
	}
	sh.hold(2)
	sh.fence(1, 6)
	sh.fence(0, 1)
	if v := sh.violations.Load(); v != 2 || sh.maxHeld.Load() != 3 {
		t.Errorf("%d violations, want 2; max held %d, want 3", v, sh.maxHeld.Load())
	}
}

func countNA(rows []Row) int {
	n := 0
	for _, r := range rows {
		if r.NA {
			n++
		}
	}
	return n
}

// TestRunStopsWithContext checks that a cancelled run returns promptly
// with the context's error, even in a contended cell.
func TestRunStopsWithContext(t *testing.T) {
	servers := redistest.StartN(t, 1, redistest.Config{})
	cfg := DefaultConfig()
	cfg.Addrs = []string{servers[0].Addr()}
	cfg.Duration = time.Hour
	cfg.Reps = 1
	cfg.Workloads = []string{W2}
	cfg.Nodes = []int{1}
	cfg.Contenders = 2
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Run(ctx, cfg)
	if err == nil || ctx.Err() == nil {
		t.Fatalf("Run returned %v before its context ended", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Run took %v to stop", took)
	}
}

func TestConfigValidate(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Addrs = []string{"127.0.0.1:1"}
	cfg.Libraries = []string{"nope"}
	cfg.Workloads = []string{"W3", Sem, Elect}
	cfg.Permits = []int{4, -1, 129}
	cfg.Candidates = 0
	err := cfg.validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`"nope"`, `"W3"`, "3 nodes", "5 nodes", "permits -1", "permits 129", "candidates 0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}

// TestHist compares the histogram's quantiles with those of the sorted
// values.
func TestHist(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h hist
	var vals []time.Duration
	for range 100000 {
		v := time.Duration(r.ExpFloat64() * float64(200*time.Microsecond))
		vals = append(vals, v)
		h.record(v)
	}
	slices.Sort(vals)
	for _, q := range []float64{0.01, 0.5, 0.9, 0.99, 0.999} {
		want := vals[int(q*float64(len(vals)))-1]
		got := h.quantile(q)
		if diff := float64(got-want) / float64(want); diff > 0.035 || diff < -0.035 {
			t.Errorf("quantile(%v) = %v, want %v within 3.5%%", q, got, want)
		}
	}
	for _, d := range []time.Duration{100 * time.Microsecond, time.Millisecond, 2 * time.Millisecond} {
		want := len(vals) - sort.Search(len(vals), func(i int) bool { return vals[i] >= d })
		got := int(h.atLeast(d))
		// Only the values in d's own bucket may be counted on the wrong
		// side of d.
		if diff := got - want; diff > want/20+5 || diff < -want/20-5 {
			t.Errorf("atLeast(%v) = %d, want %d within a bucket", d, got, want)
		}
	}
	if h.quantile(1) != vals[len(vals)-1] || h.max != vals[len(vals)-1] {
		t.Errorf("max %v, quantile(1) %v, want %v", h.max, h.quantile(1), vals[len(vals)-1])
	}
	var empty hist
	if empty.quantile(0.5) != 0 {
		t.Error("empty histogram has a median")
	}
	for i := range buckets {
		lo, hi := bucketRange(i)
		if bucketOf(lo) != i || bucketOf(hi) != i || (i > 0 && bucketOf(lo-1) != i-1) {
			t.Fatalf("bucket %d: [%d, %d]", i, lo, hi)
		}
	}
	if lo, hi := bucketRange(buckets - 1); hi != 1<<64-1 || lo > hi {
		t.Errorf("last bucket [%d, %d]", lo, hi)
	}
	var other hist
	other.record(-time.Second)
	other.record(time.Hour)
	h.merge(&other)
	if h.n != uint64(len(vals))+2 || h.max != time.Hour || h.counts[0] == 0 {
		t.Errorf("merge: n %d, max %v", h.n, h.max)
	}
}

func TestWriteSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	if err := WriteSection(path, "first\n"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if want := "# Benchmarks\n\n" + BeginMarker + "\nfirst\n" + EndMarker + "\n"; string(b) != want {
		t.Fatalf("new file:\n%s\nwant:\n%s", b, want)
	}
	os.WriteFile(path, []byte("intro\n"+BeginMarker+"\nold\n"+EndMarker+"\noutro\n"), 0o644)
	if err := WriteSection(path, "new"); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(path)
	if want := "intro\n" + BeginMarker + "\nnew\n" + EndMarker + "\noutro\n"; string(b) != want {
		t.Fatalf("replaced:\n%s\nwant:\n%s", b, want)
	}
	os.WriteFile(path, []byte("no markers\n"), 0o644)
	if err := WriteSection(path, "appended"); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(path)
	if want := "no markers\n\n" + BeginMarker + "\nappended\n" + EndMarker + "\n"; string(b) != want {
		t.Fatalf("appended:\n%s\nwant:\n%s", b, want)
	}
}

// TestTargets checks the target arithmetic on made-up rows.
func TestTargets(t *testing.T) {
	row := func(c Cell, lib string, f func(*Row)) Row {
		r := Row{Cell: c, Library: lib, Ops: 1}
		f(&r)
		return r
	}
	n1g1 := Cell{Workload: W1, N: 1, G: 1}
	n1g64 := Cell{Workload: W1, N: 1, G: 64}
	g64 := Cell{Workload: W1, N: 5, G: 64}
	g1 := Cell{Workload: W1, N: 5, G: 1}
	w2 := Cell{Workload: W2, N: 5, G: 16}
	rep := &Report{Rows: []Row{
		// bsm/redislock is the fastest peer at N=1: 90 against 100.
		row(n1g1, LibRedlockGoRedis, func(r *Row) { r.Acquire.P50, r.OpsPerSec = 95, 1000 }),
		row(n1g1, LibRedsync, func(r *Row) { r.Acquire.P50, r.OpsPerSec = 100, 900 }),
		row(n1g1, LibBSM, func(r *Row) { r.Acquire.P50, r.OpsPerSec = 90, 1100 }),
		row(n1g64, LibRedlockGoRedis, func(r *Row) { r.OpsPerSec = 1500 }),
		row(n1g64, LibRedsync, func(r *Row) { r.OpsPerSec = 1000 }),
		row(n1g64, LibBSM, func(r *Row) { r.OpsPerSec = 900 }),
		row(g64, LibRedlockGoRedis, func(r *Row) { r.OpsPerSec = 3000 }),
		row(g64, LibRedsync, func(r *Row) { r.OpsPerSec = 1000 }),
		row(g1, LibRedlockGoRedis, func(r *Row) { r.Acquire.P50 = 100; r.AllocsPerOp = 145 }),
		row(g1, LibRedsync, func(r *Row) { r.Acquire.P50 = 100; r.AllocsPerOp = 144 }),
		row(w2, LibRedlockGoRedis, func(r *Row) {
			r.CrossPerSec, r.Acquire.P99, r.BusiestShare, r.Acquisitions = 100, 20, 0.125, 10
		}),
		row(w2, LibRedsync, func(r *Row) { r.CrossPerSec, r.Acquire.P99, r.LostUpdates = 10, 100, 1 }),
	}}
	want := map[string]bool{
		"W1 N=1 G=1: acquire p50 ≤ the fastest peer's":                        false,
		"W1 N=1 G=1: ops/s ≥ the fastest peer's":                              false,
		"W1 N=5 G=1: acquire p50 ≤ redsync's":                                 true,
		"N=5: allocations per lock+unlock ≤ redsync's (W1 G=1)":               false,
		"W1 N=1 G=64: ops/s ≥ 1.5× the best peer's":                           true,
		"W1 N=5 G=64: ops/s ≥ 3× redsync's":                                   true,
		"W2 N=5 G=16 default: cross-contender acquisitions/s ≥ 10× redsync's": true,
		"W2 N=5 G=16 default: acquire p99 ≤ 1/5 of redsync's":                 true,
		"W2 N=5 G=16 default: no contender above 2× its fair share":           true,
		"zero lost updates in every W2 cell":                                  false,
	}
	got := rep.Targets()
	if len(got) != len(want) {
		t.Errorf("%d targets, want %d: %+v", len(got), len(want), got)
	}
	for _, tg := range got {
		met, ok := want[tg.Target]
		if !ok || met != tg.Met {
			t.Errorf("%s (%s): met %v, want %v (%s)", tg.Target, tg.Library, tg.Met, met, tg.Measured)
		}
	}
}

func TestFmtDur(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                        "0",
		999:                      "999ns",
		1500:                     "1.50µs",
		182 * time.Microsecond:   "182µs",
		999999:                   "1.00ms",
		12345 * time.Microsecond: "12.3ms",
		2 * time.Second:          "2.00s",
	} {
		if got := fmtDur(d); got != want {
			t.Errorf("fmtDur(%d) = %q, want %q", d, got, want)
		}
	}
}

// TestRoundTripTarget checks the target that compares the commands of a
// lock+release on the cluster with those on one server.
func TestRoundTripTarget(t *testing.T) {
	count := func(cluster bool, reads int64, calls map[string]int64) CommandCount {
		return CommandCount{Library: LibRedlockRueidis, Cluster: cluster, Pairs: 1000, Reads: reads, Calls: calls}
	}
	plain := count(false, 2000, map[string]int64{"evalsha": 2000, "set": 2000})
	for _, tc := range []struct {
		name    string
		cluster CommandCount
		met     bool
	}{
		{"same", count(true, 2000, map[string]int64{"evalsha": 2000, "set": 2000, "cluster|slots": 0}), true},
		{"a rare background command", count(true, 2000, map[string]int64{"evalsha": 2000, "set": 2000, "ping": 1}), true},
		{"an extra round trip", count(true, 3000, map[string]int64{"evalsha": 3000, "set": 2000}), false},
		{"redirected", func() CommandCount {
			c := count(true, 2000, map[string]int64{"evalsha": 2000, "set": 2000})
			c.Rejected = 3
			return c
		}(), false},
	} {
		rep := &Report{Commands: []CommandCount{plain, tc.cluster}}
		ts := rep.Targets()
		if len(ts) != 1 || !strings.HasPrefix(ts[0].Target, "no extra round trip") {
			t.Fatalf("%s: targets %+v", tc.name, ts)
		}
		if ts[0].Met != tc.met {
			t.Errorf("%s: met %v, want %v (%s)", tc.name, ts[0].Met, tc.met, ts[0].Measured)
		}
	}
	if got := count(true, 2000, map[string]int64{"evalsha": 2000, "ping": 1, "del": 1000}).Summary(); got != "evalsha 2.00, del 1.00, ping 1 call" {
		t.Errorf("Summary() = %q", got)
	}
}
