package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/internal/redistest"
)

// TestMain fails the tests if they leave goroutines running.
func TestMain(m *testing.M) { redistest.Main(m) }

// TestCommand runs the command end to end with a tiny configuration: it
// starts its own servers and prints progress and the report.
func TestCommand(t *testing.T) {
	var stdout, stderr strings.Builder
	args := []string{"-duration", "20ms", "-reps", "1", "-n", "1,3", "-g", "2", "-count", "20", "-contenders", "2", "-ttl", "1s"}
	if err := run(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	for _, want := range []string{"W2 N=3 G=2 tuned", "W2s N=3 G=2 default", "age past the TTL", "RW N=3 G=2",
		"commands per lock+release, redlock/rueidis: evalsha 2.00", "server CPU"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("no progress line %q:\n%s", want, stderr.String())
		}
	}
	for _, want := range []string{"### Run of", "cd bench && go run ./cmd/lockbench -duration 20ms", "#### W1", "#### W2",
		"#### Commands per lock+release", "| redlock/go-redis | 2.00 |", "#### RW", "| server CPU | × redsync |"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("the report has no %q:\n%s", want, stdout.String())
		}
	}
}

// TestCommandNet runs W1 over the realistic network, with every library
// the flag's help names for it.
func TestCommandNet(t *testing.T) {
	var stdout, stderr strings.Builder
	args := []string{"-net", "realistic", "-workloads", "W1", "-duration", "100ms", "-reps", "1", "-n", "3", "-g", "2",
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
	args := []string{"-workloads", "W1,KEYS,WAITERS", "-keys", "300", "-waiters", "40",
		"-duration", "40ms", "-reps", "1", "-n", "1,3", "-g", "2", "-count", "0", "-ttl", "1s",
		"-libs", "redlock/rueidis,redsync", "-json", js}
	if err := run(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	for _, want := range []string{"#### KEYS", "| 300 | SET NX PX |", "| 300 | redlock/rueidis |",
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

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-n", "x"},
		{"extra"},
		{"-libs", "nope", "-n", "1"},
		{"-workloads", "W9", "-n", "1"},
		{"-net", "nowhere"},
		{"-net", "realistic", "-net-stall-node", "9"},
		{"-keys", "x"},
		{"-waiters", "x"},
		{"-fence-retention", "1s"}, // gone with Options.FenceRetention
		{"-plot", "x.json"},
		{"-plot", "/nonexistent.json", "-svg", "/tmp"},
	} {
		var stdout, stderr strings.Builder
		if err := run(context.Background(), args, &stdout, &stderr); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
}
