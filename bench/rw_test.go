package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
)

// TestRW runs the read-mostly mix alone on three real servers, and checks
// correctness only: reads and writes in every row, no violation, no
// error, a row for the read-write lock and one for the plain Lock beside
// it, and a table that renders. It asserts nothing about timing.
func TestRW(t *testing.T) {
	servers := redistest.StartN(t, 3, redistest.Config{})
	cfg := DefaultConfig()
	for _, s := range servers {
		cfg.Addrs = append(cfg.Addrs, s.Addr())
	}
	cfg.Workloads = []string{RW}
	cfg.Nodes = []int{3}
	cfg.Contenders = 4
	cfg.Duration = 200 * time.Millisecond
	cfg.Reps = 2
	cfg.CountPairs = 0
	cfg.Quarantine = false
	var progress strings.Builder
	cfg.Progress = &progress

	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Failures(); err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 4 {
		t.Fatalf("%d rows, want 4 (two adapters, the read-write lock and the plain Lock)", len(rep.Rows))
	}
	for _, row := range rep.Rows {
		// Goroutine 0 writes first: each slice has a write.
		if row.NA || row.ReadOps == 0 || row.WriteOps == 0 || row.Ops != row.ReadOps+row.WriteOps {
			t.Errorf("%s %s: %d pairs, %d reads, %d writes", row.Cell, row.Library, row.Ops, row.ReadOps, row.WriteOps)
		}
		if row.ReadAcquire.P50 <= 0 || row.ReadAcquire.P50 > row.ReadAcquire.P99 || row.WriteAcquire.P50 <= 0 || row.WriteAcquire.P50 > row.WriteAcquire.Max {
			t.Errorf("%s %s: read latencies %+v, write latencies %+v", row.Cell, row.Library, row.ReadAcquire, row.WriteAcquire)
		}
	}
	md := rep.Markdown()
	for _, want := range []string{"#### RW", "| 3 | 4 | rwlock | redlock/go-redis |", "| 3 | 4 | lock | redlock/rueidis |"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report has no %q:\n%s", want, md)
		}
	}
	for _, want := range []string{"RW N=3 G=4 rwlock", "RW N=3 G=4 lock"} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("no progress line %q:\n%s", want, progress.String())
		}
	}
	t.Logf("\n%s", md)
}
