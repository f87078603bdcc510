package bench

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func TestNetConfigRTT(t *testing.T) {
	cfg := DefaultNetConfig()
	var got []time.Duration
	for i := range 5 {
		got = append(got, cfg.RTT(i, 5))
	}
	want := []time.Duration{200 * time.Microsecond, 400 * time.Microsecond, 600 * time.Microsecond, 800 * time.Microsecond, time.Millisecond}
	if !slices.Equal(got, want) {
		t.Errorf("round trips %v, want %v", got, want)
	}
	if got := cfg.RTT(0, 1); got != cfg.MinRTT {
		t.Errorf("one server: %v, want %v", got, cfg.MinRTT)
	}
	d := cfg.Describe(5)
	for _, want := range []string{"200µs, 400µs, 600µs, 800µs, 1.00ms", "server 1 stalls for 5.00ms–20.0ms", "mean 1s"} {
		if !strings.Contains(d, want) {
			t.Errorf("%q has no %q", d, want)
		}
	}
}

// TestNetwork checks that each proxy holds a command for at least its
// server's base round trip, and that the stalling server's commands are
// held for a stall now and then.
func TestNetwork(t *testing.T) {
	servers := redistest.StartN(t, 3, redistest.Config{})
	cfg := DefaultNetConfig()
	cfg.StallEvery = 10 * time.Millisecond
	n, err := StartNetwork(servers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	}()
	ctx := context.Background()
	for i, addr := range n.Addrs() {
		rc := redis.NewClient(&redis.Options{Addr: addr})
		stalled := 0
		for range 50 {
			t0 := time.Now()
			if err := rc.Ping(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(t0); d < cfg.RTT(i, 3) {
				t.Errorf("server %d: a round trip of %v", i+1, d)
			} else if d >= cfg.StallMin {
				stalled++
			}
		}
		rc.Close()
		if i == 0 && stalled == 0 {
			t.Errorf("server 1 never stalled in 50 round trips with a stall every %v", cfg.StallEvery)
		}
	}
	if _, err := StartNetwork(servers, NetConfig{StallNode: 4}); err == nil {
		t.Error("a bad configuration started")
	}
}

// TestSmokeNetwork runs every library of W1 through the simulated network
// and checks that the network is in the path: no call is faster than the
// shortest round trip.
func TestSmokeNetwork(t *testing.T) {
	servers := redistest.StartN(t, 3, redistest.Config{})
	nc := DefaultNetConfig()
	nc.StallEvery = 50 * time.Millisecond
	n, err := StartNetwork(servers, nc)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	cfg := DefaultConfig()
	cfg.Addrs, cfg.Network = n.Addrs(), n.Describe()
	for _, s := range servers {
		cfg.ServerAddrs = append(cfg.ServerAddrs, s.Addr())
	}
	cfg.Workloads, cfg.Libraries = []string{W1}, Libraries()
	cfg.Nodes, cfg.Goroutines = []int{3}, []int{2}
	cfg.Duration, cfg.Reps, cfg.CountPairs = 200*time.Millisecond, 2, 0
	cfg.TTL = time.Second
	time.Sleep(cfg.TTL + 100*time.Millisecond) // the quarantine, as in TestSmoke

	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Failures(); err != nil {
		t.Fatal(err)
	}
	for _, row := range rep.Rows {
		if row.NA != (row.Library == LibBSM) {
			t.Errorf("%s %s: NA = %v", row.Cell, row.Library, row.NA)
		}
		if row.NA {
			continue
		}
		a := row.Acquire
		if row.Ops == 0 || a.P50 < nc.MinRTT || a.P50 > a.P99 || a.P99 > a.P999 || a.P999 > a.Max {
			t.Errorf("%s %s: %d ops, acquire %+v", row.Cell, row.Library, row.Ops, a)
		}
		if row.ServerCPUPerOp <= 0 {
			t.Errorf("%s %s: server CPU %v per pair", row.Cell, row.Library, row.ServerCPUPerOp)
		}
	}
	md := rep.Markdown()
	for _, want := range []string{"- Network: each server behind a delay proxy", "| 3 | 2 | quorum floor |", "| 3 | 2 | redsync/failfast |"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report has no %q:\n%s", want, md)
		}
	}
	t.Logf("\n%s", md)
}
