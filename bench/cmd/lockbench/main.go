// Command lockbench starts local redis-server processes and measures
// redlock side by side with redsync, bsm/redislock and raw go-redis
// floors, interleaved, in one run. It prints progress to stderr and a
// Markdown report to stdout; -json saves the report, and -svg draws its
// plots (with -plot, those of saved reports). BENCHMARKS.md at the root of
// the repository gives the command behind each result.
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
	fs := flag.NewFlagSet("lockbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	var (
		duration  = fs.Duration("duration", def.Duration, "measured time of each library in each cell, split into -reps interleaved slices")
		reps      = fs.Int("reps", def.Reps, "number of interleaved slices per cell")
		workloads = fs.String("workloads", strings.Join(def.Workloads, ","), "workloads: W1, W2 (a client per contender), W2s (one client shared), RW (a read-mostly mix on a read-write lock); "+
			"not in a full run: KEYS (server memory per distinct key, see -keys), WAITERS (client memory per waiting goroutine, see -waiters)")
		libs = fs.String("libs", strings.Join(def.Libraries, ","), "libraries, comma-separated: "+strings.Join(bench.Libraries(), ", ")+
			" (redsync/failfast: WithFailFast(true); quorum floor: W1 only, SET and DEL on every node, each call ending at the quorum-th reply)")
		nodes      = fs.String("n", ints(def.Nodes), "numbers of nodes, N")
		goroutines = fs.String("g", ints(def.Goroutines), "numbers of goroutines of W1, G")
		contenders = fs.Int("contenders", def.Contenders, "number of contenders of W2, and of goroutines of RW")
		ttl        = fs.Duration("ttl", def.TTL, "time to live of every lock")
		quarantine = fs.Bool("quarantine", def.Quarantine, "redlock with its restart quarantine on, as shipped (the fresh servers first age past -ttl); false sets Options.DisableQuarantine")
		network    = fs.String("net", "loopback", "network between clients and servers: loopback, or realistic (a delay proxy in front of each server, see DefaultNetConfig)")
		stallNode  = fs.Int("net-stall-node", bench.DefaultNetConfig().StallNode, "-net realistic: the server that stalls now and then, from 1; 0: none")
		count      = fs.Int("count", def.CountPairs, "lock+release pairs per library for counting the commands the first server runs; 0 counts nothing")
		keys       = fs.String("keys", ints(def.Keys), "KEYS: numbers of distinct keys locked at once, each on a fresh server")
		waiters    = fs.String("waiters", ints(def.Waiters), "WAITERS: numbers of goroutines waiting in Lock, on the first of -n servers")
		jsonOut    = fs.String("json", "", "file to save the report into as JSON, for -plot")
		svgDir     = fs.String("svg", "", "directory to draw the report's plots into as SVG files (with -plot: those of the saved reports)")
		plotFrom   = fs.String("plot", "", "comma-separated saved reports (-json) to draw with -svg, running nothing")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
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

	cfg := def
	cfg.Duration, cfg.Reps, cfg.Contenders, cfg.TTL, cfg.Quarantine = *duration, *reps, *contenders, *ttl, *quarantine
	cfg.Workloads, cfg.Libraries, cfg.CountPairs, cfg.Progress = list(*workloads), list(*libs), *count, stderr
	var err error
	for _, f := range []struct {
		name string
		s    string
		v    *[]int
	}{{"-n", *nodes, &cfg.Nodes}, {"-g", *goroutines, &cfg.Goroutines}, {"-keys", *keys, &cfg.Keys}, {"-waiters", *waiters, &cfg.Waiters}} {
		if *f.v, err = parseInts(f.s); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	if *network != "loopback" && *network != "realistic" {
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
	fmt.Fprintf(stderr, "lockbench: %d redis-server processes on %s\n", len(servers), strings.Join(cfg.Addrs, ", "))
	if *network == "realistic" {
		nc := bench.DefaultNetConfig()
		nc.StallNode = *stallNode
		nw, err := bench.StartNetwork(servers, nc)
		if err != nil {
			return fmt.Errorf("-net realistic: %w", err)
		}
		defer nw.Close()
		cfg.Network, cfg.ServerAddrs, cfg.Addrs = nw.Describe(), cfg.Addrs, nw.Addrs()
		fmt.Fprintf(stderr, "lockbench: the clients reach the servers through the proxies on %s: %s\n", strings.Join(cfg.Addrs, ", "), cfg.Network)
	}
	if cfg.Quarantine {
		// A node younger than the TTL stays out of every quorum (restart
		// quarantine): fresh servers first age past it, as those of a
		// deployment minutes old have.
		fmt.Fprintf(stderr, "lockbench: waiting %v for the fresh servers to age past the TTL of %v (restart quarantine is on)\n", cfg.TTL+bench.SlotAgeSlack, cfg.TTL)
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
	fmt.Fprint(stdout, rep.Markdown())
	if runErr != nil {
		return runErr // a partial report is not saved
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
	if err := rep.Failures(); err != nil {
		return fmt.Errorf("the run saw failures:\n%w", err)
	}
	return nil
}

// usage heads the -help text.
const usage = `Usage: lockbench [flags]

lockbench starts redis-server processes on loopback ports, measures this
module's client side by side with redsync, bsm/redislock and raw go-redis
floors, and writes a Markdown report. BENCHMARKS.md gives the command
behind each of its results. A smoke run:

  lockbench -duration 20ms -reps 1 -n 1,3 -g 2 -contenders 3 -count 20

Flags:
`

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

func ints(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
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
