// Command lockbench starts local redis-server processes and measures
// redlock side by side with redsync, bsm/redislock and a raw go-redis
// floor, interleaved, in one run. It prints progress to stderr, writes a
// dated Markdown report to stdout and, with -out, into a file between the
// markers <!-- lockbench:begin --> and <!-- lockbench:end --> (the rest of
// the file is kept).
//
// Run it from the bench module:
//
//	cd bench && go run ./cmd/lockbench -out ../BENCHMARKS.md
//
// A smoke run of a few hundred milliseconds:
//
//	go run ./cmd/lockbench -duration 20ms -reps 1 -n 1,3 -g 2 -contenders 3
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/quorumlock/redlock/bench"
	"github.com/quorumlock/redlock/redistest"
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
	var (
		duration   = fs.Duration("duration", def.Duration, "measured time of each library in each cell, split into -reps interleaved slices")
		reps       = fs.Int("reps", def.Reps, "number of interleaved slices per cell")
		workloads  = fs.String("workloads", strings.Join(def.Workloads, ","), "workloads to run: W1, W2 (a client per contender), W2s (one client shared)")
		libs       = fs.String("libs", strings.Join(def.Libraries, ","), "libraries to compare, comma-separated: "+strings.Join(bench.Libraries(), ", "))
		nodes      = fs.String("n", ints(def.Nodes), "numbers of nodes, N")
		goroutines = fs.String("g", ints(def.Goroutines), "numbers of goroutines of W1, G")
		contenders = fs.Int("contenders", def.Contenders, "number of contenders of W2")
		retries    = fs.String("retry", "default,tuned", "retry settings of W2: default, tuned")
		tuned      = fs.Duration("tuned-delay", def.TunedDelay, "retry delay of the tuned setting")
		ttl        = fs.Duration("ttl", def.TTL, "time to live of every lock")
		quarantine = fs.Bool("quarantine", def.Quarantine, "run redlock with its restart quarantine on, as shipped (the fresh servers are first left to age past -ttl); false sets Options.DisableQuarantine")
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

	nservers := 0
	for _, n := range cfg.Nodes {
		nservers = max(nservers, n)
	}
	servers, err := startServers(nservers)
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
	if cfg.Quarantine {
		// A node younger than the TTL stays out of every quorum (restart
		// quarantine): fresh servers must first age past it, as those of
		// a deployment minutes old have.
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "lockbench: waiting %v for the fresh servers to age past the TTL (restart quarantine is on)\n", cfg.TTL)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(cfg.TTL + 100*time.Millisecond):
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
	rep.Command = command(args)
	md := rep.Markdown()
	fmt.Fprint(stdout, md)
	if runErr != nil {
		return runErr // a partial report is not written to -out
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

// startServers starts n redis-server processes on loopback ports at once.
// It returns those that started even when some did not.
func startServers(n int) ([]*redistest.Server, error) {
	servers := make([]*redistest.Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { servers[i], errs[i] = redistest.New(redistest.Config{}) })
	}
	wg.Wait()
	return servers, errors.Join(errs...)
}

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

// command returns the command line as one would type it at the root of
// the repository.
func command(args []string) string {
	words := []string{"cd bench && go run ./cmd/lockbench"}
	for _, a := range args {
		if strings.ContainsAny(a, " \t'\"$") {
			a = strconv.Quote(a)
		}
		words = append(words, a)
	}
	return strings.Join(words, " ")
}

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
