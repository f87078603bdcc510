// Command lockbench starts local redis-server processes, and a Redis
// Cluster of three masters, and measures redlock side by side with
// redsync, bsm/redislock and a raw go-redis floor, interleaved, in one
// run. It prints progress to stderr, writes a dated Markdown report to
// stdout and, with -out, into a file between the markers
// <!-- lockbench:begin --> and <!-- lockbench:end --> (the rest of the
// file is kept).
//
// Run it from the bench module:
//
//	cd bench && go run ./cmd/lockbench -out ../BENCHMARKS.md
//
// A smoke run of a few seconds after the servers' wait:
//
//	go run ./cmd/lockbench -duration 20ms -reps 1 -n 1,3 -g 2 -contenders 3
//
// The cluster's cells, and the plain N = 1 cells beside them, alone:
//
//	go run ./cmd/lockbench -n 1 -g 1,64
//
// the cluster's alone with -n "", and none of them with -cluster=false.
// The semaphore and the election, this module's client only, over one
// server and five, with a plain Lock beside the semaphore:
//
//	go run ./cmd/lockbench -workloads SEM,ELECT -n 1,5 -cluster=false -count 0
//
// The read-write lock, a read-mostly mix (RW): 16 goroutines sharing one
// client on one key, 95% reads and 5% writes, beside a plain Lock doing
// the same operations, on five servers:
//
//	go run ./cmd/lockbench -workloads RW -n 5 -cluster=false -count 0
//
// The commands each library's lock+release costs the servers, counted
// over 20,000 pairs, without any cell:
//
//	go run ./cmd/lockbench -workloads "" -n 1 -count 20000
//
// A realistic network: with -net realistic each server is reached through
// a delay proxy, all of them in a second process (lockbench started
// again), which holds what the clients send for its server's round trip
// plus a jitter and relays the replies as they come. The round trips are
// spread evenly over -net-rtt from the first server to the last, the
// jitter is exponentially distributed with mean -net-jitter, and server
// -net-stall-node stalls for -net-stall (uniform) after gaps of mean
// -net-stall-every (exponential), as a server forking for an RDB snapshot
// or waiting on a slow fsync does. The cluster is not started. W1 on five
// nodes, ours against redsync with and without WithFailFast and the
// floors of the quorum-th and the slowest node:
//
//	go run ./cmd/lockbench -net realistic -workloads W1 -n 5 -g 1,16 -count 0 \
//	    -libs "redlock/go-redis,redlock/rueidis,redsync,redsync/failfast,raw go-redis,quorum floor"
//
// Scale: W1 against the number of nodes and of goroutines, the server's
// memory per distinct key (KEYS, each number of keys on a fresh server,
// with the default fence retention and a short one) and the client's
// memory per goroutine waiting in Lock (WAITERS), each run saved as JSON
// and their plots drawn as SVG from every saved run:
//
//	go run ./cmd/lockbench -workloads W1 -n 3,5,7,9 -g 1,64 -cluster=false -count 0 -json n1.json
//	go run ./cmd/lockbench -workloads KEYS -keys 10000,100000,1000000 -fence-retention default,1s \
//	    -libs redlock/rueidis -n 1 -cluster=false -count 0 -quarantine=false -json keys1.json
//	go run ./cmd/lockbench -workloads WAITERS -waiters 1000,10000 -n 5 -cluster=false -count 0 -quarantine=false
//	go run ./cmd/lockbench -plot n1.json,keys1.json -svg ../docs/bench
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/quorumlock/redlock/bench"
	"github.com/quorumlock/redlock/redistest"
)

func main() {
	bench.ServeNetworkIfChild() // the network's process of -net realistic
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "lockbench:", err)
		os.Exit(1)
	}
}

// run runs the command with the given arguments, writing the report to
// stdout and progress to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	def := bench.DefaultConfig()
	defNet := bench.DefaultNetConfig()
	fs := flag.NewFlagSet("lockbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	libsHelp := "libraries to compare, comma-separated: " + strings.Join(bench.Libraries(), ", ") +
		" (redsync/failfast: redsync with WithFailFast(true); quorum floor: W1 only, not a lock: SET and DEL on every node, each call ending at the quorum-th reply)"
	var (
		duration  = fs.Duration("duration", def.Duration, "measured time of each library in each cell, split into -reps interleaved slices")
		reps      = fs.Int("reps", def.Reps, "number of interleaved slices per cell")
		workloads = fs.String("workloads", strings.Join(def.Workloads, ","), "workloads to run: W1, W2 (a client per contender), W2s (one client shared), SEM (a semaphore), ELECT (an election); "+
			"and, not in a full run, KEYS (server memory per distinct key, see -keys) and WAITERS (client memory per waiting goroutine, see -waiters)")
		libs       = fs.String("libs", strings.Join(def.Libraries, ","), libsHelp)
		nodes      = fs.String("n", ints(def.Nodes), "numbers of nodes, N")
		goroutines = fs.String("g", ints(def.Goroutines), "numbers of goroutines of W1, G")
		contenders = fs.Int("contenders", def.Contenders, "number of contenders of W2 and SEM, and of goroutines of RW")
		retries    = fs.String("retry", "default,tuned", "retry settings of W2: default, tuned")
		permits    = fs.String("permits", permitList(def.Permits), "numbers of permits of SEM's semaphore; lock (or 0): a plain Lock, to compare")
		candidates = fs.Int("candidates", def.Candidates, "number of candidates of ELECT")
		hold       = fs.Duration("hold", def.Hold, "how long SEM's holders keep a permit and ELECT's leaders lead before they release or resign")
		tuned      = fs.Duration("tuned-delay", def.TunedDelay, "retry delay of the tuned setting")
		ttl        = fs.Duration("ttl", def.TTL, "time to live of every lock")
		quarantine = fs.Bool("quarantine", def.Quarantine, "run redlock with its restart quarantine on, as shipped (the fresh servers are first left to age past -ttl); false sets Options.DisableQuarantine")
		cluster    = fs.Bool("cluster", true, "also start a Redis Cluster of 3 masters and run every workload on it as the one node (N=1), beside the plain N=1 cells (not with -net realistic)")
		network    = fs.String("net", "loopback", "the network between the clients and the servers: loopback, or realistic: a delay proxy in front of each server, all in a second process, as the -net-* flags say")
		netRTT     = fs.String("net-rtt", durRange(defNet.MinRTT, defNet.MaxRTT), "-net realistic: base round trips, spread evenly from the first server to the last (min-max, or one for all)")
		netJitter  = fs.Duration("net-jitter", defNet.Jitter, "-net realistic: mean of the jitter added to each round trip, exponentially distributed")
		netStall   = fs.String("net-stall", durRange(defNet.StallMin, defNet.StallMax), "-net realistic: how long a stall lasts, drawn uniformly (min-max)")
		netEvery   = fs.Duration("net-stall-every", defNet.StallEvery, "-net realistic: mean gap from one stall to the next, exponentially distributed; 0: no stalls")
		netNode    = fs.Int("net-stall-node", defNet.StallNode, "-net realistic: the server that stalls, from 1 (the first has the shortest round trip); 0: none")
		clusterG   = fs.String("cluster-g", ints(def.ClusterGoroutines), "numbers of goroutines of W1 on the cluster")
		count      = fs.Int("count", def.CountPairs, "lock+release pairs per library for counting the commands the servers run, on one server and on the cluster; 0 counts nothing")
		keys       = fs.String("keys", ints(def.Keys), "KEYS: numbers of distinct keys locked at once, each on a fresh server")
		retention  = fs.String("fence-retention", retentionList(def.FenceRetentions), "KEYS: Options.FenceRetention of each measurement (default: the client's default)")
		waiters    = fs.String("waiters", ints(def.Waiters), "WAITERS: numbers of goroutines waiting in Lock, on the first of -n servers")
		jsonOut    = fs.String("json", "", "file to write the report into as JSON, for -plot")
		svgDir     = fs.String("svg", "", "directory to draw the report's plots into as SVG files (with -plot: those reports' plots)")
		plotFrom   = fs.String("plot", "", "comma-separated JSON reports (-json) to draw plots from with -svg, without running anything")
		out        = fs.String("out", "", "file to write the report into, between the lockbench markers (e.g. ../BENCHMARKS.md)")
		cpuprofile = fs.String("cpuprofile", "", "write a CPU profile of the measured run to this file")
		memprofile = fs.String("memprofile", "", "write an allocation profile of the run to this file")
		memrate    = fs.Int("memprofilerate", 0, "runtime.MemProfileRate while -memprofile is set (0: the runtime's default; 1: every allocation)")
		quiet      = fs.Bool("q", false, "no progress lines")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}

	cfg := def
	cfg.Duration, cfg.Reps, cfg.Contenders, cfg.TunedDelay, cfg.TTL = *duration, *reps, *contenders, *tuned, *ttl
	cfg.Quarantine = *quarantine
	cfg.Workloads = list(*workloads)
	cfg.Libraries = list(*libs)
	var err error
	if cfg.Nodes, err = parseInts(*nodes); err != nil {
		return fmt.Errorf("-n: %w", err)
	}
	if cfg.Goroutines, err = parseInts(*goroutines); err != nil {
		return fmt.Errorf("-g: %w", err)
	}
	if cfg.ClusterGoroutines, err = parseInts(*clusterG); err != nil {
		return fmt.Errorf("-cluster-g: %w", err)
	}
	cfg.CountPairs = *count
	if cfg.Keys, err = parseInts(*keys); err != nil {
		return fmt.Errorf("-keys: %w", err)
	}
	if cfg.Waiters, err = parseInts(*waiters); err != nil {
		return fmt.Errorf("-waiters: %w", err)
	}
	cfg.FenceRetentions = nil
	for _, r := range list(*retention) {
		d := time.Duration(0)
		if r != "default" {
			if d, err = time.ParseDuration(r); err != nil {
				return fmt.Errorf("-fence-retention: %w", err)
			}
		}
		cfg.FenceRetentions = append(cfg.FenceRetentions, d)
	}
	if *plotFrom != "" {
		if *svgDir == "" {
			return errors.New("-plot needs -svg")
		}
		reps, err := bench.ReadReports(list(*plotFrom))
		if err != nil {
			return err
		}
		return writePlots(*svgDir, reps, stderr)
	}
	cfg.Candidates, cfg.Hold = *candidates, *hold
	cfg.Permits = nil
	for _, p := range list(*permits) {
		if p == "lock" {
			p = "0"
		}
		v, err := strconv.Atoi(p)
		if err != nil {
			return fmt.Errorf("-permits: %w", err)
		}
		cfg.Permits = append(cfg.Permits, v)
	}
	cfg.Retries = nil
	for _, r := range list(*retries) {
		switch r {
		case "default":
			cfg.Retries = append(cfg.Retries, bench.RetryDefault)
		case "tuned":
			cfg.Retries = append(cfg.Retries, bench.RetryTuned)
		default:
			return fmt.Errorf("-retry: unknown setting %q", r)
		}
	}
	if !*quiet {
		cfg.Progress = stderr
	}
	var netCfg *bench.NetConfig
	switch *network {
	case "loopback":
	case "realistic":
		nc := defNet
		if nc.MinRTT, nc.MaxRTT, err = parseDurRange(*netRTT); err != nil {
			return fmt.Errorf("-net-rtt: %w", err)
		}
		if nc.StallMin, nc.StallMax, err = parseDurRange(*netStall); err != nil {
			return fmt.Errorf("-net-stall: %w", err)
		}
		nc.Jitter, nc.StallEvery, nc.StallNode = *netJitter, *netEvery, *netNode
		netCfg = &nc
		if explicit(fs, "cluster") && *cluster {
			return errors.New("-net realistic runs without the cluster, whose redirections would bypass the proxies")
		}
		*cluster = false
	default:
		return fmt.Errorf("-net: unknown network %q (loopback, realistic)", *network)
	}

	nservers := 0
	for _, n := range cfg.Nodes {
		nservers = max(nservers, n)
	}
	// The servers start while the cluster forms, which takes a few
	// seconds.
	var (
		cl         *redistest.Cluster
		clusterErr error
		formed     = make(chan struct{})
	)
	go func() {
		defer close(formed)
		if *cluster {
			cl, clusterErr = redistest.NewCluster(clusterMasters, redistest.Config{})
		}
	}()
	servers, err := bench.StartServers(nservers)
	<-formed
	defer func() {
		for _, s := range servers {
			if s != nil {
				s.Close()
			}
		}
		if cl != nil {
			cl.Close()
		}
	}()
	if err = errors.Join(err, clusterErr); err != nil {
		return err
	}
	for _, s := range servers {
		cfg.Addrs = append(cfg.Addrs, s.Addr())
	}
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "lockbench: %d redis-server processes on %s\n", len(servers), strings.Join(cfg.Addrs, ", "))
	}
	if netCfg != nil {
		nw, err := bench.StartNetwork(cfg.Addrs, *netCfg)
		if err != nil {
			return fmt.Errorf("-net realistic: %w", err)
		}
		defer nw.Close()
		cfg.Network, cfg.Addrs = nw, nw.Addrs()
		// The calls that waited for a stall, or for a machine as slow;
		// counted without stalls too, for the machine's share.
		cfg.SlowAbove = netCfg.StallMin
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "lockbench: the clients reach the servers through the proxies on %s: %s\n", strings.Join(cfg.Addrs, ", "), nw.Describe())
		}
	}
	if cl != nil {
		cfg.ClusterAddrs = cl.Addrs()
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "lockbench: a Redis Cluster of %d masters on %s\n", clusterMasters, strings.Join(cfg.ClusterAddrs, ", "))
		}
	}
	if cfg.Quarantine {
		// A node younger than the TTL stays out of every quorum (restart
		// quarantine): fresh servers must first age past it, as those of
		// a deployment minutes old have. A hash slot's record of the
		// server's start is made from its uptime in whole seconds, less
		// one, so a slot first used now may take the server for up to 2s
		// younger than it is: the wait covers that too.
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "lockbench: waiting %v for the fresh servers to age past the TTL of %v (restart quarantine is on)\n", cfg.TTL+bench.SlotAgeSlack, cfg.TTL)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(cfg.TTL + bench.SlotAgeSlack):
		}
	}

	if *memprofile != "" && *memrate > 0 {
		runtime.MemProfileRate = *memrate
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	rep, runErr := bench.Run(ctx, cfg)
	if *cpuprofile != "" {
		pprof.StopCPUProfile()
	}
	if *memprofile != "" {
		if err := writeHeapProfile(*memprofile); err != nil {
			return err
		}
	}
	if rep == nil {
		return runErr
	}
	rep.Command = bench.CommandLine("lockbench", args)
	md := rep.Markdown()
	fmt.Fprint(stdout, md)
	if runErr != nil {
		return runErr // a partial report is not written to -out
	}
	if *jsonOut != "" {
		if err := rep.WriteJSON(*jsonOut); err != nil {
			return err
		}
	}
	if *svgDir != "" {
		if err := writePlots(*svgDir, []*bench.Report{rep}, stderr); err != nil {
			return err
		}
	}
	if *out != "" {
		if err := bench.WriteSection(*out, md); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "lockbench: report written to %s\n", *out)
	}
	if err := rep.Failures(); err != nil {
		return fmt.Errorf("the run saw failures:\n%w", err)
	}
	return nil
}

// usage heads the -help text.
const usage = `Usage: lockbench [flags]

lockbench starts redis-server processes on loopback ports (and a Redis
Cluster of 3 masters unless -cluster=false), measures this module's client
side by side with redsync, bsm/redislock and a raw go-redis floor, and
writes a Markdown report (see BENCHMARKS.md at the root of the repository).

RW is a read-mostly mix on a read-write lock, this module's client only:
-contenders goroutines share one client and take one key in turn, one
operation in 20 as its writer (RWLock.Lock) and the others as readers
(RWLock.RLock), releasing each at once; the cell beside it runs the same
operations with a plain Lock. The report gives pairs/s, the ratio to the
Lock's, and read and write latencies:

  lockbench -workloads RW -n 5 -cluster=false -count 0

-net realistic puts a delay proxy in front of each server, all in a second
process: each server gets a base round trip, spread evenly over -net-rtt
from the first server to the last (200us, 400us, 600us, 800us and 1ms over
five), plus an exponentially distributed jitter of mean -net-jitter, and
server -net-stall-node stalls for -net-stall (uniform) after gaps of mean
-net-stall-every (exponential), as during an RDB fork or a slow fsync. Ours
should follow the quorum-th node, not the slowest; compare it with the two
floors:

  lockbench -net realistic -workloads W1 -n 5 -g 1,16 -count 0 \
      -libs "redlock/go-redis,redlock/rueidis,redsync,redsync/failfast,raw go-redis,quorum floor"

Scale: -n 3,5,7,9 and -g 1,4,16,64,256 sweep W1 over nodes and goroutines
(add "quorum floor" to -libs for the network's floor). Two workloads that a
full run leaves out measure memory: KEYS locks -keys distinct keys at once
on a fresh server with each -fence-retention and reads the server's
used_memory per key held, released and expired; WAITERS blocks -waiters
goroutines in Lock on a key another client holds, on the first of -n
servers, and reads the client's heap and stacks per waiter:

  lockbench -workloads KEYS -keys 10000,100000,1000000 -fence-retention default,1s \
      -libs redlock/rueidis -n 1 -cluster=false -count 0 -quarantine=false
  lockbench -workloads WAITERS -waiters 1000,10000 -n 5 -cluster=false -count 0 -quarantine=false

-json FILE saves the report; -svg DIR draws its plots; -plot a.json,b.json
-svg DIR draws the plots of saved runs, each point the mean of the runs
with a bar over their range.

Flags:
`

// clusterMasters is the number of masters of the cluster.
const clusterMasters = 3

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// explicit reports whether the flag name was set on the command line.
func explicit(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// parseDurRange parses "min-max", such as "200us-1ms", or one duration
// for both.
func parseDurRange(s string) (lo, hi time.Duration, err error) {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		b = a
	}
	if lo, err = time.ParseDuration(strings.TrimSpace(a)); err != nil {
		return 0, 0, err
	}
	if hi, err = time.ParseDuration(strings.TrimSpace(b)); err != nil {
		return 0, 0, err
	}
	if hi < lo {
		return 0, 0, fmt.Errorf("%q: the maximum is below the minimum", s)
	}
	return lo, hi, nil
}

// durRange formats a range as parseDurRange takes it.
func durRange(lo, hi time.Duration) string { return lo.String() + "-" + hi.String() }

func list(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range list(s) {
		v, err := strconv.Atoi(f)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// writePlots draws the plots of reps into dir.
func writePlots(dir string, reps []*bench.Report, stderr io.Writer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	figs := bench.Figures(reps)
	if len(figs) == 0 {
		return errors.New("-svg: nothing to plot in these reports")
	}
	for _, f := range figs {
		path := filepath.Join(dir, f.Name)
		if err := os.WriteFile(path, f.SVG, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "lockbench: plot written to %s\n", path)
	}
	return nil
}

// retentionList formats fence retentions as -fence-retention takes them.
func retentionList(v []time.Duration) string {
	s := make([]string, len(v))
	for i, d := range v {
		s[i] = d.String()
		if d == 0 {
			s[i] = "default"
		}
	}
	return strings.Join(s, ",")
}

// permitList formats numbers of permits as -permits takes them.
func permitList(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
		if x == 0 {
			s[i] = "lock"
		}
	}
	return strings.Join(s, ",")
}

func ints(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}
