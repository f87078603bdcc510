package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/bench"
	"github.com/quorumlock/redlock/redistest"
)

// TestMain fails the tests if they leave goroutines running.
func TestMain(m *testing.M) { redistest.Main(m) }

// TestCommand runs the command end to end with a tiny configuration: it
// starts its own servers, prints progress and the report, and
// writes the report into a file between the markers, keeping the rest of
// the file.
func TestCommand(t *testing.T) {
	out := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	if err := os.WriteFile(out, []byte("# Benchmarks\n\nprose\n\n"+bench.BeginMarker+"\nold\n"+bench.EndMarker+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	args := []string{"-duration", "20ms", "-reps", "1", "-n", "1,3", "-g", "2", "-count", "20", "-contenders", "2", "-retry", "tuned", "-ttl", "1s", "-out", out}
	if err := run(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	for _, want := range []string{"W2 N=3 G=2 tuned", "W2s N=3 G=2 tuned", "age past the TTL", "RW N=3 G=2",
		"commands per lock+release, redlock/rueidis on 1 server: evalsha 2.00", "server CPU"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("no progress line %q:\n%s", want, stderr.String())
		}
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	file := string(b)
	for _, want := range []string{"prose", "### Run of", "cd bench && go run ./cmd/lockbench -duration 20ms", "#### W1", "#### W2",
		"#### Commands per lock+release", "| redlock/go-redis | 1 server | 2.00 |", "#### RW", "| server CPU | × redsync |"} {
		if !strings.Contains(file, want) {
			t.Errorf("%s has no %q:\n%s", out, want, file)
		}
	}
	if strings.Contains(file, "\nold\n") {
		t.Errorf("the old report was kept:\n%s", file)
	}
	if !strings.Contains(file, strings.TrimRight(stdout.String(), "\n")) {
		t.Errorf("the file's report differs from stdout's")
	}
}

// TestCommandNet runs W1 over the realistic network, with every library
// the flag's help names for it.
func TestCommandNet(t *testing.T) {
	var stdout, stderr strings.Builder
	args := []string{"-net", "realistic", "-net-stall-every", "20ms", "-workloads", "W1", "-duration", "100ms", "-reps", "1", "-n", "3", "-g", "2",
		"-count", "0", "-ttl", "1s", "-libs", "redlock/go-redis,redlock/rueidis,redsync,redsync/failfast,raw go-redis,quorum floor"}
	if err := run(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	for _, want := range []string{"through the proxies on", "base round trips 200µs, 600µs, 1.00ms", "W1 N=3 G=2        quorum floor"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("no progress line %q:\n%s", want, stderr.String())
		}
	}
	for _, want := range []string{"- Network: each server behind a delay proxy", "server 1 stalls for 5.00ms–20.0ms", "| 3 | 2 | redsync/failfast |", "p999"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("the report has no %q:\n%s", want, stdout.String())
		}
	}
}

// TestCommandScale runs the scale measurements small, with a W1 cell on
// two numbers of nodes, and draws their plots from the JSON report.
func TestCommandScale(t *testing.T) {
	dir := t.TempDir()
	js := filepath.Join(dir, "run.json")
	var stdout, stderr strings.Builder
	args := []string{"-workloads", "W1,KEYS,WAITERS", "-keys", "300", "-fence-retention", "default,200ms", "-waiters", "40",
		"-duration", "40ms", "-reps", "1", "-n", "1,3", "-g", "2", "-count", "0", "-ttl", "1s",
		"-libs", "redlock/rueidis,redsync", "-json", js}
	if err := run(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	for _, want := range []string{"#### KEYS", "| 300 | SET NX PX | - |", "| 300 | redlock/rueidis | default |", "| 300 | redlock/rueidis | 200ms |",
		"#### WAITERS", "| 1 | 40 | redlock/rueidis |"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("the report has no %q:\n%s", want, stdout.String())
		}
	}
	svg := filepath.Join(dir, "svg")
	stderr.Reset()
	if err := run(context.Background(), []string{"-plot", js, "-svg", svg}, &stdout, &stderr); err != nil {
		t.Fatalf("-plot: %v\n%s", err, stderr.String())
	}
	for _, f := range []string{"w1-nodes-g2-latency.svg", "w1-nodes-g2-pairs.svg", "keys-memory.svg"} {
		if _, err := os.Stat(filepath.Join(svg, f)); err != nil {
			t.Errorf("-plot: %v\n%s", err, stderr.String())
		}
	}
}

func TestParseDurRange(t *testing.T) {
	for in, want := range map[string][2]time.Duration{
		"200us-1ms":  {200 * time.Microsecond, time.Millisecond},
		"200µs-1ms":  {200 * time.Microsecond, time.Millisecond},
		"5ms":        {5 * time.Millisecond, 5 * time.Millisecond},
		" 1ms - 2ms": {time.Millisecond, 2 * time.Millisecond},
	} {
		lo, hi, err := parseDurRange(in)
		if err != nil || lo != want[0] || hi != want[1] {
			t.Errorf("%q: %v, %v, %v; want %v", in, lo, hi, err, want)
		}
	}
	for _, bad := range []string{"", "x", "2ms-1ms", "1ms-x"} {
		if _, _, err := parseDurRange(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-n", "x"},
		{"-retry", "sometimes"},
		{"extra"},
		{"-libs", "nope", "-n", "1"},
		{"-workloads", "W9", "-n", "1"},
		{"-net", "nowhere"},
		{"-net", "realistic", "-net-rtt", "x"},
		{"-net", "realistic", "-net-stall", "9ms-1ms"},
		{"-keys", "x"},
		{"-waiters", "x"},
		{"-fence-retention", "soon"},
		{"-plot", "x.json"},
		{"-plot", "/nonexistent.json", "-svg", "/tmp"},
	} {
		var stdout, stderr strings.Builder
		if err := run(context.Background(), args, &stdout, &stderr); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}
