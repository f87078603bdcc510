package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/redistest"
	"golang.org/x/exp/trace"
)

// TestMain fails the tests if they leave goroutines running.
func TestMain(m *testing.M) { redistest.Main(m) }

func TestHistBuckets(t *testing.T) {
	// Every value lies in its bucket, buckets follow each other without
	// gaps, and none is wider than 1/64 of its least value.
	prevLo, prevW := uint64(0), uint64(0)
	for i := range histBuckets - exactBelow {
		lo, w := bounds(i)
		if i > 0 && lo != prevLo+prevW {
			t.Fatalf("bucket %d starts at %d, the last ended at %d", i, lo, prevLo+prevW)
		}
		if lo >= exactBelow && float64(w) > float64(lo)/64 {
			t.Fatalf("bucket %d [%d, +%d) is wider than 1/64", i, lo, w)
		}
		for _, v := range []uint64{lo, lo + w - 1} {
			if got := bucket(v); got != i {
				t.Fatalf("bucket(%d) = %d, want %d", v, got, i)
			}
		}
		prevLo, prevW = lo, w
	}
	if got := bucket(math.MaxUint64); got >= histBuckets {
		t.Fatalf("the largest value falls outside the histogram: bucket %d of %d", got, histBuckets)
	}
}

func TestHistQuantile(t *testing.T) {
	var h hist
	if got := h.quantile(0.5); got != 0 {
		t.Errorf("empty: p50 %v", got)
	}
	for i := 1; i <= 1000; i++ {
		h.add(time.Duration(i) * time.Microsecond)
	}
	h.add(-time.Second) // counts as 0
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Microsecond}, {0.9, 900 * time.Microsecond}, {1, 1000 * time.Microsecond}, {0.0001, 0}} {
		got := h.quantile(c.q)
		if math.Abs(float64(got-c.want)) > float64(c.want)/64+1 {
			t.Errorf("q%v = %v, want %v within 1/64", c.q, got, c.want)
		}
	}
	var g hist
	g.merge(&h)
	g.merge(&h)
	if g.n != 2*h.n || g.quantile(0.5) != h.quantile(0.5) {
		t.Errorf("merged twice: n %d p50 %v, want %d and %v", g.n, g.quantile(0.5), 2*h.n, h.quantile(0.5))
	}
	g.reset()
	if g.n != 0 || g.quantile(0.5) != 0 {
		t.Errorf("reset left %d values", g.n)
	}
}

func TestParsers(t *testing.T) {
	if run, wait, ok := parseSchedstat("123456 7890 42\n"); !ok || run != 123456 || wait != 7890 {
		t.Errorf("parseSchedstat: %d %d %v", run, wait, ok)
	}
	for _, bad := range []string{"", "12", "x 1 2"} {
		if _, _, ok := parseSchedstat(bad); ok {
			t.Errorf("parseSchedstat(%q) ok", bad)
		}
	}
	status := "Name:\tredis-server\nCpus_allowed_list:\t0-1\nvoluntary_ctxt_switches:\t17\nnonvoluntary_ctxt_switches:\t3\n"
	if v, ok := statusField(status, "voluntary_ctxt_switches"); !ok || v != "17" {
		t.Errorf("statusField: %q %v", v, ok)
	}
	if _, ok := statusField(status, "Cpus"); ok {
		t.Error("statusField matched a prefix")
	}
	stat := "cpu  100 5 20 9999 50 1 2 3 40 0\ncpu0 50 2 10 5000 25 0 1 1 20 0\n"
	if busy, ok := parseBusyTicks(stat); !ok || busy != 100+5+20+1+2+3 {
		t.Errorf("parseBusyTicks: %d %v", busy, ok)
	}
	if _, ok := parseBusyTicks("cpu0 1 2 3\n"); ok {
		t.Error("parseBusyTicks took a short line")
	}
	info := "# Server\r\nredis_version:7.0.15\r\nprocess_id:4242\r\nuptime_in_seconds:12\r\n"
	if v := infoField(info, "process_id"); v != "4242" {
		t.Errorf("infoField: %q", v)
	}
	if v := infoField(info, "tcp_port"); v != "" {
		t.Errorf("infoField of a missing field: %q", v)
	}
}

// write creates the file at root/rel with the given content.
func write(t *testing.T, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestKernel(t *testing.T) {
	root := t.TempDir()
	k := kernel{proc: filepath.Join(root, "proc"), sys: filepath.Join(root, "sys")}
	write(t, k.proc, "7/task/7/schedstat", "1000 200 5\n")
	write(t, k.proc, "7/task/8/schedstat", "3000 400 9\n")
	write(t, k.proc, "7/task/7/status", "voluntary_ctxt_switches:\t5\n")
	write(t, k.proc, "7/task/8/status", "voluntary_ctxt_switches:\t6\n")
	write(t, k.proc, "7/status", "Cpus_allowed_list:\t0\n")
	write(t, k.proc, "7/comm", "redis-server\n")
	write(t, k.proc, "stat", "cpu  10 0 5 100 0 0 0 1 0 0\n")
	cpu := "devices/system/cpu/"
	write(t, k.sys, cpu+"cpu0/cpuidle/state0/name", "POLL\n")
	write(t, k.sys, cpu+"cpu0/cpuidle/state0/usage", "1000\n")
	write(t, k.sys, cpu+"cpu0/cpuidle/state1/name", "haltpoll idle\n")
	write(t, k.sys, cpu+"cpu0/cpuidle/state1/usage", "30\n")
	write(t, k.sys, cpu+"cpu1/cpuidle/state1/name", "C1\n")
	write(t, k.sys, cpu+"cpu1/cpuidle/state1/usage", "12\n")
	write(t, k.sys, cpu+"cpufreq/name", "not a CPU\n")

	if run, wait, ok := k.schedstat("7"); !ok || run != 4000 || wait != 600 {
		t.Errorf("schedstat: %d %d %v", run, wait, ok)
	}
	if n, ok := k.voluntarySwitches("7"); !ok || n != 11 {
		t.Errorf("voluntarySwitches: %d %v", n, ok)
	}
	if got := k.allowedCPUs("7"); got != "0" {
		t.Errorf("allowedCPUs: %q", got)
	}
	if got := k.command("7"); got != "redis-server" {
		t.Errorf("command: %q", got)
	}
	if n, ok := k.idleEntries(); !ok || n != 42 {
		t.Errorf("idleEntries: %d %v, want 42 without POLL's", n, ok)
	}
	if n, ok := k.busyTicks(); !ok || n != 16 {
		t.Errorf("busyTicks: %d %v", n, ok)
	}

	// What cannot be read is reported so.
	none := kernel{proc: filepath.Join(root, "none"), sys: filepath.Join(root, "none")}
	if _, _, ok := none.schedstat("7"); ok {
		t.Error("schedstat of nothing ok")
	}
	if _, ok := none.voluntarySwitches("7"); ok {
		t.Error("voluntarySwitches of nothing ok")
	}
	if _, ok := none.idleEntries(); ok {
		t.Error("idleEntries of nothing ok")
	}
	if _, ok := none.busyTicks(); ok {
		t.Error("busyTicks of nothing ok")
	}
	if got := none.allowedCPUs("7"); got != "?" {
		t.Errorf("allowedCPUs of nothing: %q", got)
	}
}

// fakePairer hands each lock to a goroutine of its own and waits for it on
// a channel, and releases inline, failing on call failAt (1-based; 0
// never).
type fakePairer struct {
	calls, failAt int
	spent         time.Duration
}

func (f *fakePairer) lock(ctx context.Context, i int) error {
	f.calls++
	if f.calls == f.failAt {
		return errors.New("refused")
	}
	done := make(chan struct{})
	go func() { close(done) }()
	<-done
	return nil
}

func (f *fakePairer) unlock(context.Context) error {
	f.spent += time.Microsecond
	return nil
}

func (f *fakePairer) inNode() (time.Duration, bool) { return f.spent, true }
func (f *fakePairer) close() error                  { return nil }

func TestLoop(t *testing.T) {
	var acq, rel hist
	f := &fakePairer{}
	n, took, err := loop(context.Background(), f, 20*time.Millisecond, &acq, &rel)
	if err != nil || n == 0 || took < 20*time.Millisecond || acq.n != uint64(n) || rel.n != uint64(n) {
		t.Errorf("loop: %d pairs in %v (%v), %d and %d recorded", n, took, err, acq.n, rel.n)
	}
	f = &fakePairer{failAt: 3}
	if n, _, err := loop(context.Background(), f, time.Second, &acq, &rel); err == nil || n != 2 {
		t.Errorf("loop with a failing lock: %d pairs, %v", n, err)
	}
	if err := pairsFor(context.Background(), &fakePairer{failAt: 2}, 5); err == nil {
		t.Error("pairsFor ignored a failure")
	}
}

func TestReadProcessDoesNotAllocate(t *testing.T) {
	s := newSampler(host, nil)
	var c counters
	p := &fakePairer{}
	if n := testing.AllocsPerRun(100, func() { s.readProcess(&c, p) }); n != 0 {
		t.Errorf("readProcess allocates %v times: the allocations per pair would count it", n)
	}
}

func TestSliceTally(t *testing.T) {
	root := t.TempDir()
	k := kernel{proc: filepath.Join(root, "proc"), sys: filepath.Join(root, "sys")} // nothing to read
	s := newSampler(k, []int{1})
	tl := &tally{lib: "fake"}
	f := &fakePairer{}
	for range 2 {
		if err := s.slice(context.Background(), f, 5*time.Millisecond, tl); err != nil {
			t.Fatal(err)
		}
	}
	c := tl.cost
	if tl.pairs == 0 || len(tl.sliceAcq) != 2 || tl.acq.n != uint64(tl.pairs) {
		t.Fatalf("tally: %d pairs, %d slices, %d recorded", tl.pairs, len(tl.sliceAcq), tl.acq.n)
	}
	if !c.metricsOK || c.goroutines < uint64(tl.pairs) || c.allocs < uint64(tl.pairs) {
		t.Errorf("a goroutine and a channel per pair: %d goroutines, %d allocations for %d pairs", c.goroutines, c.allocs, tl.pairs)
	}
	if !c.inNodeOK || c.inNode != time.Duration(tl.pairs)*time.Microsecond {
		t.Errorf("in node: %v for %d pairs", c.inNode, tl.pairs)
	}
	if c.clientOK || c.serverOK || c.idleOK || c.busyOK {
		t.Errorf("counts read from an empty file system: %+v", c)
	}
	if s := othersCPU(tl); s != "" {
		t.Errorf("others' CPU without counts: %q", s)
	}
}

// event makes a trace event for the summary's tests.
func event[T trace.EventDetails](t *testing.T, at trace.Time, g trace.GoID, kind trace.EventKind, d T) trace.Event {
	t.Helper()
	ev, err := trace.MakeEvent(trace.EventConfig[T]{Time: at, Kind: kind, Goroutine: g, Details: d})
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func TestTraceSummary(t *testing.T) {
	const caller, other = 1, 2
	logEv := func(at trace.Time, msg string) trace.Event {
		return event(t, at, caller, trace.EventLog, trace.Log{Category: traceCategory, Message: msg})
	}
	goEv := func(at trace.Time, g trace.GoID, from, to trace.GoState, reason string) trace.Event {
		st := trace.MakeGoStateTransition(g, from, to)
		st.Reason = reason
		return event(t, at, caller, trace.EventStateTransition, st)
	}
	procEv := func(at trace.Time, from, to trace.ProcState) trace.Event {
		return event(t, at, caller, trace.EventStateTransition, trace.MakeProcStateTransition(0, from, to))
	}
	evs := []trace.Event{
		goEv(1, other, trace.GoWaiting, trace.GoRunnable, ""), // before the window: not counted
		logEv(1000, "begin lib/x 2"),
		goEv(1010, caller, trace.GoRunning, trace.GoSyscall, ""),
		goEv(1015, caller, trace.GoSyscall, trace.GoRunning, ""),
		goEv(1020, caller, trace.GoRunning, trace.GoWaiting, "network"),
		goEv(1021, other, trace.GoNotExist, trace.GoRunnable, ""),
		procEv(1022, trace.ProcIdle, trace.ProcRunning),
		goEv(1050, caller, trace.GoWaiting, trace.GoRunnable, ""),
		goEv(1060, caller, trace.GoRunnable, trace.GoRunning, ""),
		goEv(1061, other, trace.GoWaiting, trace.GoRunnable, ""),
		goEv(1070, caller, trace.GoRunning, trace.GoWaiting, "chan receive"),
		goEv(1080, caller, trace.GoWaiting, trace.GoRunnable, ""),
		goEv(1081, caller, trace.GoRunnable, trace.GoRunning, ""),
		logEv(1100, "end"),
		event(t, 1101, caller, trace.EventLog, trace.Log{Category: "other", Message: "not ours"}),
	}
	var s traceSummary
	for _, ev := range evs {
		if err := s.add(ev); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.done) != 1 {
		t.Fatalf("%d windows, want 1", len(s.done))
	}
	w := s.done[0]
	if w.lib != "lib/x" || w.pairs != 2 || w.wall != 100 {
		t.Errorf("window %s, %d pairs, %v", w.lib, w.pairs, w.wall)
	}
	wantTime := map[string]time.Duration{"running": 10 + 5 + 10 + 19, "syscall": 5, "waiting: network": 30, "waiting: chan receive": 10, "runnable": 10 + 1}
	for k, v := range wantTime {
		if w.time[k] != v {
			t.Errorf("time %s: %v, want %v (all: %v)", k, w.time[k], v, w.time)
		}
	}
	if len(w.time) != len(wantTime) {
		t.Errorf("states %v, want %v", w.time, wantTime)
	}
	if w.parks["network"] != 1 || w.parks["chan receive"] != 1 || w.syscalls != 1 {
		t.Errorf("parks %v, syscalls %d", w.parks, w.syscalls)
	}
	if w.created != 1 || w.woken != 1 || w.procStarts != 1 {
		t.Errorf("created %d, woken %d, P starts %d; want 1 each", w.created, w.woken, w.procStarts)
	}

	for _, bad := range [][]trace.Event{
		{logEv(1, "end")},
		{logEv(1, "begin a 1"), logEv(2, "begin b 1")},
		{logEv(1, "begin a x")},
		{logEv(1, "start")},
	} {
		var s traceSummary
		var err error
		for _, ev := range bad {
			if err = s.add(ev); err != nil {
				break
			}
		}
		if err == nil {
			t.Errorf("no error for %v", bad)
		}
	}
}

// TestTraceRoundTrip traces the fake pairer, whose lock waits for a new
// goroutine on a channel, in turns, and reads the trace back.
func TestTraceRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	const n = 2*traceChunk + 50
	if err := traceRun(context.Background(), &buf, []string{"a", "b"}, []pairer{&fakePairer{}, &fakePairer{}}, n); err != nil {
		t.Fatal(err)
	}
	got, err := summarizeTrace(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].lib != "a" || got[1].lib != "b" {
		t.Fatalf("windows: %v", got)
	}
	for _, w := range got {
		if w.pairs != n || w.created != n {
			t.Errorf("%s: %d pairs, %d goroutines created, want %d each", w.lib, w.pairs, w.created, n)
		}
		var sum time.Duration
		for _, v := range w.time {
			sum += v
		}
		if sum != w.wall {
			t.Errorf("%s: the states add up to %v, the window is %v", w.lib, sum, w.wall)
		}
	}
	if err := traceRun(context.Background(), &buf, []string{"a"}, []pairer{&fakePairer{failAt: 1}}, n); err == nil {
		t.Error("traceRun ignored a failure")
	}
}

func TestFlags(t *testing.T) {
	var stderr bytes.Buffer
	c, err := parseFlags(nil, &stderr)
	if err != nil || c.n != 1 || len(c.libs) != len(libraries()) {
		t.Errorf("defaults: n %d, libs %v, %v", c.n, c.libs, err)
	}
	c, err = parseFlags([]string{"-n", "3"}, &stderr)
	if err != nil || strings.Join(c.libs, ",") != libGoRedis+","+libRueidis+","+libRedsync {
		t.Errorf("-n 3: libs %v, %v", c.libs, err)
	}
	c, err = parseFlags([]string{"-addrs", "a:1, b:2", "-n", "7"}, &stderr)
	if err != nil || c.n != 2 || len(c.addrs) != 2 {
		t.Errorf("-addrs: n %d, addrs %q, %v", c.n, c.addrs, err)
	}
	for _, args := range [][]string{
		{"-n", "0"},
		{"-libs", "nope"},
		{"-libs", "redsync,redsync"},
		{"-n", "2", "-libs", "bsm/redislock"},
		{"-slice", "0s"},
		{"-trace", "x", "-trace-pairs", "0"},
		{"extra"},
	} {
		if _, err := parseFlags(args, &stderr); err == nil {
			t.Errorf("%q: no error", args)
		}
	}
	stderr.Reset()
	if _, err := parseFlags([]string{"-h"}, &stderr); !errors.Is(err, flag.ErrHelp) || !strings.Contains(stderr.String(), "-trace-pairs") {
		t.Errorf("-h: %v\n%s", err, stderr.String())
	}
}

func TestMarkdown(t *testing.T) {
	known := &tally{lib: "known", pairs: 100, wall: 10 * time.Millisecond, sliceAcq: []time.Duration{40 * time.Microsecond, 60 * time.Microsecond}}
	for i := range 100 {
		known.acq.add(time.Duration(50+i%2) * time.Microsecond)
		known.rel.add(30 * time.Microsecond)
	}
	known.cost = counters{allocs: 7500, bytes: 460000, metricsOK: true, switches: 300, switchesOK: true,
		clientRun: 10_000_000, clientWait: 100_000, clientOK: true, serverRun: 7_000_000, serverSwitches: 100, serverOK: true,
		idle: 350, idleOK: true, busy: 2, busyOK: true, inNode: 9 * time.Millisecond, inNodeOK: true}
	unknown := &tally{lib: "unknown"}
	r := &result{cfg: config{n: 1, slices: 2, slice: 5 * time.Millisecond, ttl: time.Second, quarantine: true, traceFile: "x.trace", tracePairs: 10},
		command: "cd bench && go run ./cmd/waits", loadBefore: "0.10 0.20 0.30", loadAfter: "0.40 0.50 0.60", clientCPUs: "0",
		servers: []server{{addr: "127.0.0.1:1", version: "7.0.15", pid: 9, cpus: "0"}, {addr: "h:2", version: "7.2"}},
		tallies: []*tally{known, unknown},
		traced: []*traced{{lib: "known", pairs: 10, wall: 1000 * time.Microsecond, time: map[string]time.Duration{"running": 200 * time.Microsecond, "waiting: network": 800 * time.Microsecond},
			parks: map[string]int{"network": 15, "sync": 0}, syscalls: 70}},
	}
	md := r.markdown()
	for _, want := range []string{
		"### waits: W1 N=1 G=1",
		"load average 0.10 0.20 0.30 at the start, 0.40 0.50 0.60 at the end",
		"Client on CPUs 0; redis-server 7.0.15 at 127.0.0.1:1 (pid 9 on CPUs 0); redis-server 7.2 at h:2 (pid unknown)",
		"restart quarantine on",
		"| known | 10000 | 49.9 | 30.1 | 50.9 | 30.1 | 40.0–60.0 |  | 90.0 |", // the middles of the buckets of 50, 30 and 51 µs
		"| unknown |  |  |  |  |  |  |  |  |\n",
		"| known | 75.0 | 4600 | 0.00 | 3.00 | 100.0 | 1.0 | 70.0 | 1.00 | 3.50 | 0.30 |",
		"| unknown |  |",
		"| known | 100.0 | 20.0 | 0.0 | 0.0 | network 80.0 | network 1.50 | 7.00 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("no %q in\n%s", want, md)
		}
	}
}

// TestCommand runs the command end to end on a redis-server of its own,
// with restart quarantine on (so it waits for the server to age) and a
// trace, then on two servers without quarantine.
func TestCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("starts redis-server")
	}
	tr := filepath.Join(t.TempDir(), "waits.trace")
	var stdout, stderr bytes.Buffer
	args := []string{"-slices", "2", "-slice", "20ms", "-warmup", "10ms", "-ttl", "1s", "-trace", tr, "-trace-pairs", "20"}
	if err := run(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"age past the TTL", "tracing 20 pairs"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("no progress line %q in\n%s", want, stderr.String())
		}
	}
	for _, lib := range libraries() {
		if n := strings.Count(out, "| "+lib+" | "); n != 3 {
			t.Errorf("%s has %d rows, want 3 (latency, costs, trace):\n%s", lib, n, out)
		}
	}
	if _, err := os.Stat(tr); err != nil {
		t.Error(err)
	}

	stdout.Reset()
	stderr.Reset()
	args = []string{"-n", "2", "-quarantine=false", "-slices", "1", "-slice", "20ms", "-warmup", "10ms", "-q"}
	if err := run(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	out = stdout.String()
	if !strings.Contains(out, "W1 N=2 G=1") || !strings.Contains(out, "| "+libRedsync+" | ") || strings.Contains(out, libBSM) || stderr.Len() > 0 {
		t.Errorf("N=2, quiet: stdout\n%s\nstderr\n%s", out, stderr.String())
	}
}
