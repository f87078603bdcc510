package bench

import (
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFigures draws the plots of made-up reports, written as JSON and
// read back, and checks that each is well-formed SVG with a line or bar
// for each library.
func TestFigures(t *testing.T) {
	row := func(lib string, n, g int, ops float64, p50 time.Duration) Row {
		return Row{Cell: Cell{Workload: W1, N: n, G: g}, Library: lib, Ops: 100, OpsPerSec: ops,
			Acquire: latencies{P50: p50, P99: 3 * p50, P999: 9 * p50}}
	}
	var reps []*Report
	for run := range 2 {
		r := &Report{Started: time.Now(), Command: "cd bench && go run ./cmd/lockbench -n 3,5", LoadStart: "1.00 0.5 0.2", LoadEnd: "2.00 1 1"}
		for _, lib := range []string{LibRedlockGoRedis, LibRedsync, LibQuorumFloor} {
			for _, n := range []int{3, 5, 7} {
				for _, g := range []int{1, 4, 64} {
					r.Rows = append(r.Rows, row(lib, n, g, float64(1000*g+run), time.Duration(100+n+run)*time.Microsecond))
				}
			}
		}
		r.Keys = []KeyMem{
			{Library: LibSetNX, Keys: 1000, UsedBase: 1e6, UsedHeld: 1e6 + 90e3},
			{Library: LibRedlockRueidis, Keys: 1000, UsedBase: 1e6, UsedHeld: 1e6 + 300e3, UsedReleased: 1e6 + 1e3, UsedExpired: 1e6 + 1e3},
			{Library: LibRedlockRueidis, Keys: 10000, UsedBase: 1e6, UsedHeld: 1e6 + 3e6, UsedReleased: 1e6 + 1e4, UsedExpired: 1e6 + 1e4},
		}
		reps = append(reps, r)
		net := &Report{Started: time.Now(), Network: "proxies; server 1 stalls", Command: "lockbench -net realistic"}
		if run == 1 {
			net.Network = "proxies; no stalls"
		}
		for _, lib := range []string{LibRedlockGoRedis, LibRedsync} {
			net.Rows = append(net.Rows, row(lib, 5, 1, 500, time.Millisecond))
		}
		reps = append(reps, net)
	}
	// Through JSON, as lockbench -plot reads them.
	var paths []string
	for i, r := range reps {
		p := filepath.Join(t.TempDir(), fmt.Sprintf("r%d.json", i))
		if err := r.WriteJSON(p); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	back, err := ReadReports(paths)
	if err != nil {
		t.Fatal(err)
	}
	if !back[1].Stalls() || back[3].Stalls() {
		t.Errorf("Stalls: %v %v, want true false", back[1].Stalls(), back[3].Stalls())
	}
	want := map[string][]string{
		"w1-nodes-g1-latency.svg":      {LibRedlockGoRedis, LibRedsync, LibQuorumFloor, "dashed: p99", "stroke-dasharray"},
		"w1-nodes-g64-pairs.svg":       {LibRedlockGoRedis, "mean of 2 runs", "lockbench -n 3,5"},
		"w1-goroutines-n5-latency.svg": {"log scale"},
		"w1-goroutines-n7-pairs.svg":   {"pairs per second"},
		"realistic-n5-g1-tail.svg":     {"p99, one server stalling", "p999, no stalls", "fill:#D62728"},
		"keys-memory.svg":              {"SET NX PX, held", "ours, held", "ours, released", "ours, expired"},
	}
	got := map[string]bool{}
	dir := os.Getenv("LOCKBENCH_FIGURES") // to look at them
	for _, f := range Figures(back) {
		got[f.Name] = true
		if dir != "" {
			os.WriteFile(filepath.Join(dir, f.Name), f.SVG, 0o644)
		}
		d := xml.NewDecoder(strings.NewReader(string(f.SVG)))
		for {
			if _, err := d.Token(); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%s: not well-formed: %v", f.Name, err)
			}
		}
		for _, w := range want[f.Name] {
			if !strings.Contains(string(f.SVG), w) {
				t.Errorf("%s has no %q", f.Name, w)
			}
		}
	}
	for name := range want {
		if !got[name] {
			t.Errorf("no figure %s; got %v", name, got)
		}
	}
}

func TestTicks(t *testing.T) {
	var s []string
	for _, v := range logTicks(40, 3000) {
		s = append(s, fmtNum(v))
	}
	if got := strings.Join(s, " "); got != "20 50 100 200 500 1000 2000 5000" {
		t.Errorf("logTicks(40, 3000) = %s", got)
	}
	if got := fmtNum(1e6); got != "1M" {
		t.Errorf("fmtNum(1e6) = %s", got)
	}
}

// TestOldReport reads a report saved when KEYS had a fence retention
// dimension: the fields that are gone are ignored.
func TestOldReport(t *testing.T) {
	p := filepath.Join(t.TempDir(), "old.json")
	old := `{"Config": {"Keys": [1000], "FenceRetentions": [0, 1000000000]},
		"Keys": [{"Library": "redlock/rueidis", "Retention": 1000000000, "Keys": 1000, "UsedBase": 1000000, "UsedHeld": 1300000, "UsedExpired": 1001000}]}`
	if err := os.WriteFile(p, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	reps, err := ReadReports([]string{p})
	if err != nil {
		t.Fatal(err)
	}
	if got := reps[0].Keys; len(got) != 1 || got[0].PerKey(got[0].UsedHeld) != 300 || got[0].PerKey(got[0].UsedExpired) != 1 {
		t.Errorf("Keys = %+v", got)
	}
	if len(Figures(reps)) != 1 {
		t.Errorf("no keys-memory figure from the old report")
	}
}
