// Command waits breaks one uncontended lock+release into where its time
// goes, for this module's client over both adapters beside redsync and
// bsm/redislock, all driven in one process on one goroutine, one pair at a
// time (W1 with G=1), the libraries taking turns in short slices so that
// the drift of a shared machine hits them alike.
//
// It starts its own redis-server processes (-n, one node each) or uses
// running ones (-addrs), and stops those it started. For each library it
// prints, per lock+release pair:
//
//   - the latency of lock and of release (p50 and p90 over every pair, and
//     the range of the slices' p50), pairs per second, and for redlock
//     the time spent inside the nodes' Eval calls: the round trips as the
//     client waits for them;
//   - heap allocations, bytes and goroutines created (runtime/metrics);
//   - voluntary context switches of the process (getrusage): how often a
//     thread gave up its CPU to wait;
//   - CPU time of the client's threads and of the redis-servers' threads,
//     and the client's run-queue wait (/proc/PID/task/*/schedstat);
//   - the machine's entries into a CPU idle state other than POLL
//     (/sys/devices/system/cpu/cpu*/cpuidle/state*/usage): on a virtual
//     machine each is a halted vCPU that an interrupt must wake, which
//     costs tens of µs before the thread it wakes for runs;
//   - the CPU used meanwhile by the other processes of the machine.
//
// Columns whose counters cannot be read are left blank. With -trace it
// then runs a number of pairs of each library under runtime/trace, the
// libraries taking turns of 100 pairs, writes the trace to a file, and
// summarises what the calling goroutine did per pair: time running, in system calls, runnable and parked (by the
// runtime's reason: "network" for a reply), its parks and system calls,
// and the goroutines created, the others woken and the P starts.
//
// Besides the libraries it runs two floors on one node: redlock-scripts,
// the very acquire and release calls a redlock client makes (recorded
// from one Lock and Release), sent by a plain go-redis client, which is
// redlock's round trips and server time without its client; and
// setnx-cad, SET NX PX and a compare-and-delete script, the least a lock
// sends. Their differences split a redlock pair into script, client core
// and adapter.
//
// Run it from the bench module:
//
//	cd bench && go run ./cmd/waits
//	cd bench && go run ./cmd/waits -trace /tmp/waits.trace
//
// Pinned to one CPU, client and server take turns on it: no CPU halts
// between request and reply, and what remains is their CPU time on the
// critical path. The servers it starts inherit the CPUs it may use:
//
//	cd bench && taskset -c 0 go run ./cmd/waits
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/quorumlock/redlock/bench"
	"github.com/redis/go-redis/v9"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "waits:", err)
		os.Exit(1)
	}
}

// config is what the flags say.
type config struct {
	n          int
	addrs      []string
	libs       []string
	slice      time.Duration
	slices     int
	warmup     time.Duration
	ttl        time.Duration
	quarantine bool
	traceFile  string
	tracePairs int
	quiet      bool
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("waits", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: waits [flags]

Runs uncontended lock+release pairs of each library on one goroutine,
interleaved in slices, and prints per pair: latency, allocations, context
switches, client and server CPU, CPU idle entries, and with -trace what
the runtime trace shows. See the package documentation (go doc ./cmd/waits).

Flags:
`)
		fs.PrintDefaults()
	}
	var (
		c     config
		addrs string
		libs  string
	)
	fs.IntVar(&c.n, "n", 1, "redis-server processes to start, each a node of the quorum libraries (ignored with -addrs)")
	fs.StringVar(&addrs, "addrs", "", "use these running servers, host:port comma-separated, instead of starting any; keys named waits:PID:* are written on them")
	fs.StringVar(&libs, "libs", "", "libraries, comma-separated, among "+strings.Join(libraries(), ", ")+" (default: every one that runs on that many nodes; bsm/redislock and the floors need one)")
	fs.DurationVar(&c.slice, "slice", 200*time.Millisecond, "length of one measured slice; the libraries take turns slice by slice")
	fs.IntVar(&c.slices, "slices", 20, "measured slices of each library")
	fs.DurationVar(&c.warmup, "warmup", 500*time.Millisecond, "unmeasured pairs of each library before the first slice (connections made, scripts cached)")
	fs.DurationVar(&c.ttl, "ttl", 10*time.Second, "time to live of every lock")
	fs.BoolVar(&c.quarantine, "quarantine", true, "redlock with restart quarantine on, as shipped: servers younger than -ttl are first waited for; false sets Options.DisableQuarantine")
	fs.StringVar(&c.traceFile, "trace", "", "after the measured slices, run -trace-pairs pairs of each library under runtime/trace, in turns of 100, write the trace to this file and summarise it")
	fs.IntVar(&c.tracePairs, "trace-pairs", 2000, "pairs of each library in the trace")
	fs.BoolVar(&c.quiet, "q", false, "no progress lines on stderr")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	c.addrs, c.libs = list(addrs), list(libs)
	if len(c.addrs) > 0 {
		c.n = len(c.addrs)
	}
	var errs []error
	if c.n < 1 {
		errs = append(errs, errors.New("-n must be at least 1"))
	}
	nodes := c.n
	if len(c.libs) == 0 {
		for _, l := range libraries() {
			if !singleNode(l) || nodes == 1 {
				c.libs = append(c.libs, l)
			}
		}
	}
	for i, l := range c.libs {
		switch {
		case !slices.Contains(libraries(), l):
			errs = append(errs, fmt.Errorf("-libs: unknown library %q (known: %s)", l, strings.Join(libraries(), ", ")))
		case singleNode(l) && nodes != 1:
			errs = append(errs, fmt.Errorf("-libs: %s runs on one node only, not %d", l, nodes))
		case slices.Contains(c.libs[:i], l):
			errs = append(errs, fmt.Errorf("-libs: %s twice", l))
		}
	}
	if c.slice <= 0 || c.slices <= 0 || c.warmup < 0 || c.ttl <= 0 {
		errs = append(errs, errors.New("-slice, -slices and -ttl must be positive, -warmup not negative"))
	}
	if c.traceFile != "" && c.tracePairs <= 0 {
		errs = append(errs, errors.New("-trace-pairs must be positive"))
	}
	return c, errors.Join(errs...)
}

// run runs the command with args, writing the report to stdout and
// progress to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	progress := stderr
	if cfg.quiet {
		progress = io.Discard
	}
	say := func(format string, a ...any) { fmt.Fprintf(progress, "waits: "+format+"\n", a...) }

	res := &result{cfg: cfg, command: bench.CommandLine("waits", args), machine: bench.DescribeMachine(), loadBefore: bench.LoadAverage(), clientCPUs: host.allowedCPUs("self")}
	if len(cfg.addrs) == 0 {
		servers, err := bench.StartServers(cfg.n)
		defer func() {
			for _, s := range servers {
				if s != nil {
					s.Close()
				}
			}
		}()
		if err != nil {
			return err
		}
		for _, s := range servers {
			cfg.addrs = append(cfg.addrs, s.Addr())
		}
		say("started %d redis-server on %s", len(servers), strings.Join(cfg.addrs, ", "))
	}
	res.cfg = cfg

	youngest := time.Duration(1<<63 - 1)
	var pids []int
	for _, a := range cfg.addrs {
		info, err := serverInfo(ctx, a)
		if err != nil {
			return err
		}
		res.servers = append(res.servers, info)
		youngest = min(youngest, info.uptime)
		if info.pid > 0 {
			pids = append(pids, info.pid)
		}
	}
	if len(pids) < len(cfg.addrs) {
		pids = nil // the server columns need every server's counts
		say("not every server's process can be read here: no server CPU columns")
	}
	if wait := cfg.ttl + bench.SlotAgeSlack - youngest; cfg.quarantine && wait > 0 && slices.ContainsFunc(cfg.libs, isRedlock) {
		say("waiting %v for the servers to age past the TTL of %v (restart quarantine is on)", wait.Round(time.Second), cfg.ttl)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}

	o := opts{addrs: cfg.addrs, ttl: cfg.ttl, quarantine: cfg.quarantine}
	ps := make([]pairer, 0, len(cfg.libs))
	defer func() {
		for _, p := range ps {
			p.close()
		}
	}()
	for _, l := range cfg.libs {
		p, err := open(l, o)
		if err != nil {
			return err
		}
		ps = append(ps, p)
		if _, _, err := loop(ctx, p, cfg.warmup, new(hist), new(hist)); err != nil {
			return fmt.Errorf("%s: warming up: %w", l, err)
		}
	}

	s := newSampler(host, pids)
	res.tallies = make([]*tally, len(ps))
	for i, l := range cfg.libs {
		res.tallies[i] = &tally{lib: l}
	}
	say("%d slices of %v per library: %s", cfg.slices, cfg.slice, strings.Join(cfg.libs, ", "))
	for round := range cfg.slices {
		for k := range ps {
			i := (round + k) % len(ps) // each round starts with the next library
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := s.slice(ctx, ps[i], cfg.slice, res.tallies[i]); err != nil {
				return fmt.Errorf("%s: %w", cfg.libs[i], err)
			}
		}
	}
	res.loadAfter = bench.LoadAverage()

	if cfg.traceFile != "" {
		say("tracing %d pairs of each library into %s", cfg.tracePairs, cfg.traceFile)
		f, err := os.Create(cfg.traceFile)
		if err != nil {
			return err
		}
		err = traceRun(ctx, f, cfg.libs, ps, cfg.tracePairs)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("trace: %w", err)
		}
		if res.traced, err = summarizeTraceFile(cfg.traceFile); err != nil {
			return fmt.Errorf("reading the trace back: %w", err)
		}
	}
	res.when = time.Now()
	fmt.Fprint(stdout, res.markdown())
	return nil
}

// A server is one redis-server as INFO describes it.
type server struct {
	addr    string
	version string
	pid     int // 0 when its process is not one this machine shows
	cpus    string
	uptime  time.Duration
}

// serverInfo asks the server at addr for its version, process id and
// uptime. The process id counts only if /proc shows a redis-server under
// it: a server in another container or on another host has its own.
func serverInfo(ctx context.Context, addr string) (server, error) {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return server{}, fmt.Errorf("%s: INFO server: %w", addr, err)
	}
	s := server{addr: addr, version: infoField(info, "redis_version"), cpus: "?"}
	secs, _ := strconv.Atoi(infoField(info, "uptime_in_seconds"))
	s.uptime = time.Duration(secs) * time.Second
	if pid, err := strconv.Atoi(infoField(info, "process_id")); err == nil && strings.HasPrefix(host.command(strconv.Itoa(pid)), "redis") {
		s.pid = pid
		s.cpus = host.allowedCPUs(strconv.Itoa(pid))
	}
	return s, nil
}

// infoField returns the value of field name in an INFO reply, or "".
func infoField(info, name string) string {
	for line := range strings.Lines(info) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == name {
			return v
		}
	}
	return ""
}

// list splits a comma-separated list, dropping empty items.
func list(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
