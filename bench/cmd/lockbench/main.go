// Command lockbench starts local redis-server processes and measures
// redlock side by side with redsync, bsm/redislock and raw go-redis
// floors, interleaved, in one run. It prints progress to stderr, writes a
// dated Markdown report to stdout and, with -out, into a file between the
// markers <!-- lockbench:begin --> and <!-- lockbench:end -->. Run it from
// the bench module (see -help and BENCHMARKS.md for the commands behind
// each result):
//
//	cd bench && go run ./cmd/lockbench -out ../BENCHMARKS.md
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
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/quorumlock/redlock/bench"
)

func main() {
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
		workloads = fs.String("workloads", strings.Join(def.Workloads, ","), "workloads to run: W1, W2 (a client per contender), W2s (one client shared), RW (a read-mostly mix on a read-write lock); "+
			"and, not in a full run, KEYS (server memory per distinct key, see -keys) and WAITERS (client memory per waiting goroutine, see -waiters)")
		libs       = fs.String("libs", strings.Join(def.Libraries, ","), libsHelp)
		nodes      = fs.String("n", ints(def.Nodes), "numbers of nodes, N")
		goroutines = fs.String("g", ints(def.Goroutines), "numbers of goroutines of W1, G")
		contenders = fs.Int("contenders", def.Contenders, "number of contenders of W2, and of goroutines of RW")
		retries    = fs.String("retry", "default,tuned", "retry settings of W2: default, tuned")
		tuned      = fs.Duration("tuned-delay", def.TunedDelay, "retry delay of the tuned setting")
		ttl        = fs.Duration("ttl", def.TTL, "time to live of every lock")
		quarantine = fs.Bool("quarantine", def.Quarantine, "run redlock with its restart quarantine on, as shipped (the fresh servers are first left to age past -ttl); false sets Options.DisableQuarantine")
		network    = fs.String("net", "loopback", "the network between the clients and the servers: loopback, or realistic: a delay proxy in front of each server, all in a second process, as the -net-* flags say")
		netRTT     = fs.String("net-rtt", durRange(defNet.MinRTT, defNet.MaxRTT), "-net realistic: base round trips, spread evenly from the first server to the last (min-max, or one for all)")
		netJitter  = fs.Duration("net-jitter", defNet.Jitter, "-net realistic: mean of the jitter added to each round trip, exponentially distributed")
		netStall   = fs.String("net-stall", durRange(defNet.StallMin, defNet.StallMax), "-net realistic: how long a stall lasts, drawn uniformly (min-max)")
		netEvery   = fs.Duration("net-stall-every", defNet.StallEvery, "-net realistic: mean gap from one stall to the next, exponentially distributed; 0: no stalls")
		netNode    = fs.Int("net-stall-node", defNet.StallNode, "-net realistic: the server that stalls, from 1 (the first has the shortest round trip); 0: none")
		count      = fs.Int("count", def.CountPairs, "lock+release pairs per library for counting the commands the servers run, on one server; 0 counts nothing")
		keys       = fs.String("keys", ints(def.Keys), "KEYS: numbers of distinct keys locked at once, each on a fresh server")
		retention  = fs.String("fence-retention", retentionList(def.FenceRetentions), "KEYS: Options.FenceRetention of each measurement (default: the client's default)")
		waiters    = fs.String("waiters", ints(def.Waiters), "WAITERS: numbers of goroutines waiting in Lock, on the first of -n servers")
		jsonOut    = fs.String("json", "", "file to write the report into as JSON, for -plot")
		svgDir     = fs.String("svg", "", "directory to draw the report's plots into as SVG files (with -plot: those reports' plots)")
		plotFrom   = fs.String("plot", "", "comma-separated JSON reports (-json) to draw plots from with -svg, without running anything")
		out        = fs.String("out", "", "file to write the report into, between the lockbench markers (e.g. ../BENCHMARKS.md)")
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
	default:
		return fmt.Errorf("-net: unknown network %q (loopback, realistic)", *network)
	}

	nservers := 0
	for _, n := range cfg.Nodes {
		nservers = max(nservers, n)
	}
	servers, err := bench.StartServers(nservers)
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
		cfg.Addrs = append(cfg.Addrs, s.Addr())
	}
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "lockbench: %d redis-server processes on %s\n", len(servers), strings.Join(cfg.Addrs, ", "))
	}
	if netCfg != nil {
		nw, err := bench.StartNetwork(servers, *netCfg)
		if err != nil {
			return fmt.Errorf("-net realistic: %w", err)
		}
		defer nw.Close()
		cfg.Network, cfg.ServerAddrs, cfg.Addrs = nw.Describe(), cfg.Addrs, nw.Addrs()
		// The calls that waited for a stall, or for a machine as slow;
		// counted without stalls too, for the machine's share.
		cfg.SlowAbove = netCfg.StallMin
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "lockbench: the clients reach the servers through the proxies on %s: %s\n", strings.Join(cfg.Addrs, ", "), nw.Describe())
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

	rep, runErr := bench.Run(ctx, cfg)
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

lockbench starts redis-server processes on loopback ports, measures this
module's client side by side with redsync, bsm/redislock and raw go-redis
floors, and writes a Markdown report (see BENCHMARKS.md at the root of the
repository). Examples:

  lockbench -duration 20ms -reps 1 -n 1,3 -g 2 -contenders 3   # a smoke run
  lockbench -workloads "" -n 1 -count 20000   # commands per lock+release only
  lockbench -workloads RW -n 5 -count 0       # the read-write lock beside Lock

-net realistic puts a delay proxy in front of each server: base round trips
spread evenly over -net-rtt from the first server to the last, plus an
exponentially distributed jitter of mean -net-jitter; server -net-stall-node
stalls for -net-stall (uniform) after gaps of mean -net-stall-every
(exponential), as during an RDB fork or a slow fsync:

  lockbench -net realistic -workloads W1 -n 5 -g 1,16 -count 0 \
      -libs "redlock/go-redis,redlock/rueidis,redsync,redsync/failfast,raw go-redis,quorum floor"

Scale: -n 3,5,7,9 and -g 1,4,16,64,256 sweep W1. KEYS and WAITERS, not in a
full run, measure the server's memory per distinct key and the client's per
goroutine waiting in Lock:

  lockbench -workloads KEYS -keys 10000,100000,1000000 -fence-retention default,1s \
      -libs redlock/rueidis -n 1 -count 0 -quarantine=false
  lockbench -workloads WAITERS -waiters 1000,10000 -n 5 -count 0 -quarantine=false

-json FILE saves the report; -svg DIR draws its plots; -plot a.json,b.json
-svg DIR draws the plots of saved runs, each point the mean of the runs
with a bar over their range.

Flags:
`

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

func ints(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}
