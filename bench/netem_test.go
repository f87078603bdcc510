package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock/redistest"
)

// startEcho starts a TCP server on a loopback port that sends back what it
// reads, and stops it when t ends.
func startEcho(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				io.Copy(c, c)
				c.Close()
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// roundTrip writes one byte to c and reads it back, and returns how long
// that took.
func roundTrip(t *testing.T, c net.Conn) time.Duration {
	t.Helper()
	t0 := time.Now()
	if _, err := c.Write([]byte{'x'}); err != nil {
		t.Fatal(err)
	}
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		t.Fatal(err)
	}
	return time.Since(t0)
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func startTestEmulator(t *testing.T, targets []string, cfg NetConfig) *emulator {
	t.Helper()
	e, err := startEmulator(targets, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.close)
	return e
}

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
	for _, bad := range []NetConfig{
		{MinRTT: time.Millisecond, MaxRTT: time.Microsecond},
		{Jitter: -1},
		{StallNode: 6, StallEvery: time.Second, StallMin: 1, StallMax: 1},
		{StallNode: 1, StallEvery: time.Second},
		{StallNode: 1, StallEvery: time.Second, StallMin: 2, StallMax: 1},
	} {
		if bad.validate(5) == nil {
			t.Errorf("%+v: valid", bad)
		}
	}
}

// TestEmulatorDelays checks that each server's proxy holds a round trip
// for at least its base round trip, and not much longer.
func TestEmulatorDelays(t *testing.T) {
	targets := []string{startEcho(t), startEcho(t)}
	cfg := NetConfig{MinRTT: 2 * time.Millisecond, MaxRTT: 6 * time.Millisecond}
	e := startTestEmulator(t, targets, cfg)
	for i, addr := range e.addrs() {
		c := dial(t, addr)
		base := cfg.RTT(i, len(targets))
		var rtts []time.Duration
		for range 20 {
			rtts = append(rtts, roundTrip(t, c))
		}
		slices.Sort(rtts)
		// A shared machine may be late by a lot, but not at the median.
		if rtts[0] < base || rtts[len(rtts)/2] > base+5*time.Millisecond {
			t.Errorf("server %d, base %v: round trips %v", i+1, base, rtts)
		}
	}
	s := e.stats()
	if s.Segments != 40 || s.LateMax <= 0 || s.Stalls != 0 {
		t.Errorf("stats %+v", s)
	}
	if s = e.stats(); s.Segments != 0 {
		t.Errorf("stats not counted afresh: %+v", s)
	}
}

// TestEmulatorOrder checks that a large jitter never reorders a
// connection's bytes.
func TestEmulatorOrder(t *testing.T) {
	e := startTestEmulator(t, []string{startEcho(t)}, NetConfig{MinRTT: 100 * time.Microsecond, MaxRTT: 100 * time.Microsecond, Jitter: 4 * time.Millisecond})
	c := dial(t, e.addrs()[0])
	var sent bytes.Buffer
	for i := range 300 {
		msg := fmt.Sprintf("message %d;", i)
		sent.WriteString(msg)
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	got := make([]byte, sent.Len())
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, sent.Bytes()) {
		t.Errorf("the bytes came back out of order:\n%s", got)
	}
}

// TestEmulatorStall checks that nothing reaches a stalled server until
// the stall ends, and that the other servers go on answering.
func TestEmulatorStall(t *testing.T) {
	targets := []string{startEcho(t), startEcho(t)}
	e := startTestEmulator(t, targets, NetConfig{MinRTT: 100 * time.Microsecond, MaxRTT: 100 * time.Microsecond, StallNode: 1})
	stalled, healthy := dial(t, e.addrs()[0]), dial(t, e.addrs()[1])
	roundTrip(t, stalled) // connected before the stall
	const stall = 50 * time.Millisecond
	e.proxies[0].stall(stall)
	t0 := time.Now()
	if d := roundTrip(t, healthy); d >= stall {
		t.Errorf("the healthy server took %v", d)
	}
	if d := time.Since(t0) + roundTrip(t, stalled); d < stall {
		t.Errorf("the stalled server answered after %v, within its stall of %v", d, stall)
	}
	s := e.stats()
	if s.StallNode != 1 || s.Stalls != 1 || s.Stalled != stall {
		t.Errorf("stats %+v", s)
	}
}

// TestEmulatorStallLoop checks that a server stalls now and then on its
// own.
func TestEmulatorStallLoop(t *testing.T) {
	cfg := NetConfig{StallNode: 1, StallMin: time.Millisecond, StallMax: 2 * time.Millisecond, StallEvery: 5 * time.Millisecond}
	e := startTestEmulator(t, []string{startEcho(t)}, cfg)
	time.Sleep(200 * time.Millisecond)
	s := e.stats()
	if s.Stalls < 2 || s.Stalled < time.Duration(s.Stalls)*cfg.StallMin || s.Stalled > time.Duration(s.Stalls)*cfg.StallMax {
		t.Errorf("stats %+v", s)
	}
}

// TestNetwork starts the network in a process of its own, the test binary
// started again, and relays through it.
func TestNetwork(t *testing.T) {
	targets := []string{startEcho(t), startEcho(t), startEcho(t)}
	cfg := DefaultNetConfig()
	cfg.StallEvery = 10 * time.Millisecond
	n, err := StartNetwork(targets, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	}()
	if len(n.Addrs()) != 3 {
		t.Fatalf("addresses %v", n.Addrs())
	}
	if _, err := n.Stats(); err != nil {
		t.Fatal(err)
	}
	for _, addr := range n.Addrs() {
		c := dial(t, addr)
		for range 10 {
			if d := roundTrip(t, c); d < cfg.MinRTT {
				t.Errorf("%s: a round trip of %v", addr, d)
			}
		}
	}
	time.Sleep(100 * time.Millisecond)
	s, err := n.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if s.Segments != 30 || s.Stalls == 0 || s.StallNode != 1 {
		t.Errorf("stats %+v", s)
	}
	t.Logf("%s; %s", n.Describe(), s)
	if _, err := StartNetwork(targets, NetConfig{MinRTT: 2, MaxRTT: 1}); err == nil {
		t.Error("a bad configuration started")
	}
}

// TestSmokeNetwork runs every library of W1 through the simulated network
// and checks that the network is in the path: no call is faster than the
// shortest round trip.
func TestSmokeNetwork(t *testing.T) {
	servers := redistest.StartN(t, 3, redistest.Config{})
	var addrs []string
	for _, s := range servers {
		addrs = append(addrs, s.Addr())
	}
	nc := DefaultNetConfig()
	nc.StallEvery = 50 * time.Millisecond
	n, err := StartNetwork(addrs, nc)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	cfg := DefaultConfig()
	cfg.Addrs, cfg.Network, cfg.SlowAbove = n.Addrs(), n, nc.StallMin
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
		if row.SlowAbove != nc.StallMin || row.SlowShare < 0 || row.SlowShare > 1 || row.SlowAcquires > 0 && a.Max < nc.StallMin*96/100 {
			t.Errorf("%s %s: %d acquires of at least %v (%.2f%%), max %v", row.Cell, row.Library, row.SlowAcquires, row.SlowAbove, 100*row.SlowShare, a.Max)
		}
	}
	if len(rep.NetCells) != 1 || rep.NetCells[0].Cell != (Cell{Workload: W1, N: 3, G: 2}) || rep.NetCells[0].Segments == 0 || rep.NetCells[0].Stalls == 0 {
		t.Errorf("network stats %+v", rep.NetCells)
	}
	md := rep.Markdown()
	for _, want := range []string{"- Network: each server behind a delay proxy", "#### Network", "| acquire ≥ 5.00ms |", "| W1 N=3 G=2 | ", "| 3 | 2 | quorum floor |",
		"| 3 | 2 | redsync/failfast |", "realistic network, W1 N=3 G=2: acquire p99 nearer the quorum-th node's",
		"realistic network, W1 N=3 G=2: acquire p999 nearer the quorum-th node's"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report has no %q:\n%s", want, md)
		}
	}
	t.Logf("\n%s", md)
}
