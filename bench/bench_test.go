package bench

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
)

// TestSmoke runs every library in tiny cells of every workload against
// real servers, and checks correctness only: no errors, no give-ups
// without contention, no lost updates, no read-write violation, work done
// in every cell, commands counted, the servers' CPU read, and a report that
// renders. It asserts nothing about timing.
func TestSmoke(t *testing.T) {
	servers := redistest.StartN(t, 3, redistest.Config{})
	cfg := DefaultConfig()
	for _, s := range servers {
		cfg.Addrs = append(cfg.Addrs, s.Addr())
	}
	cfg.Libraries = Libraries() // the defaults and those only named
	cfg.Duration = 60 * time.Millisecond
	cfg.Reps = 2
	cfg.Nodes = []int{1, 3}
	cfg.Goroutines = []int{1, 3}
	cfg.CountPairs = 30
	cfg.Contenders = 3
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
		if c.Workload == RW {
			want += 2 // this module's adapters only, without n/a rows
		} else {
			want += len(Libraries())
		}
	}
	if len(rep.Rows) != want {
		t.Fatalf("%d rows, want %d", len(rep.Rows), want)
	}
	if want := len(Libraries()); len(rep.Commands) != want {
		t.Fatalf("%d command counts, want %d", len(rep.Commands), want)
	}
	for _, cc := range rep.Commands {
		if cc.Pairs != cfg.CountPairs || cc.Errors != 0 || len(cc.Calls) == 0 {
			t.Errorf("%s: %+v", cc.Library, cc)
		}
		// This module's client sends one script per acquire and one per
		// release.
		if strings.HasPrefix(cc.Library, "redlock/") && cc.Calls["evalsha"] != 2*int64(cc.Pairs) {
			t.Errorf("%s: %d scripts in %d lock+release pairs, want 2 a pair: %s", cc.Library, cc.Calls["evalsha"], cc.Pairs, cc.Summary())
		}
	}
	for _, row := range rep.Rows {
		if row.NA != !supports(row.Library, row.Cell) {
			t.Errorf("%s %s: NA = %v", row.Cell, row.Library, row.NA)
		}
		if row.NA {
			continue
		}
		if row.Ops == 0 {
			// A contended cell may see no grant at all in slices this
			// short: redsync pauses 50-250ms between tries by default.
			// Uncontended cells must make progress.
			if row.Cell.Workload == W1 {
				t.Errorf("%s %s: no lock+unlock in %v", row.Cell, row.Library, row.Elapsed)
			}
			continue
		}
		if row.Elapsed <= 0 || row.AllocsPerOp <= 0 || row.ServerCPUPerOp <= 0 {
			t.Errorf("%s %s: %d ops in %v, %.1f allocs/op, server CPU %v per pair", row.Cell, row.Library, row.Ops, row.Elapsed, row.AllocsPerOp, row.ServerCPUPerOp)
		}
		if row.Acquire.P50 <= 0 || row.Acquire.P50 > row.Acquire.P99 || row.Acquire.P99 > row.Acquire.Max {
			t.Errorf("%s %s: acquire latencies %+v", row.Cell, row.Library, row.Acquire)
		}
		if contended(row.Cell.Workload) {
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
	for _, want := range append([]string{"#### W1", "#### W2", "| n/a |", "server CPU",
		"#### RW", "| 3 | 3 | rwlock | redlock/go-redis |", "| 1 | 3 | lock | redlock/rueidis |",
		"| 1 | 3 | bsm/redislock |", "#### Commands per lock+release"}, Libraries()...) {
		if !strings.Contains(md, want) {
			t.Errorf("the report has no %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "#### Errors") {
		t.Errorf("the report lists errors:\n%s", md)
	}
	t.Logf("\n%s", md)
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
	cfg.Workloads = []string{"W3", W2}
	cfg.Contenders = 0
	err := cfg.validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`"nope"`, `"W3"`, "3 nodes", "5 nodes", "contenders 0"} {
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
