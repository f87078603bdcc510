package sim

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/cryptotest"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/internal/mutant"
)

var (
	seedFlag   = flag.Uint64("sim.seed", 0, "replay this one seed")
	baseFlag   = flag.Uint64("sim.base", 0, "the first seed of a search (default: drawn afresh, and printed)")
	timeFlag   = flag.Duration("sim.time", 0, "search fresh seeds for this long (default: $REDLOCK_SIM_TIME, else 10s)")
	mutantFlag = flag.String("sim.mutant", "", "turn this mutant on (a build tagged redlock_mutants) and search until the checker fires")
	canaryFlag = flag.String("sim.canary", "", "break this assumption (see Canaries) and search until the checker fires")
	replays    = flag.Int("sim.replays", 0, "with -sim.seed: replay it this many times and compare the hashes")
	verbose    = flag.Bool("sim.v", false, "print every history's summary")
	traceFlag  = flag.Bool("sim.trace", false, "with -sim.seed: log every request the servers run, and every operation")
	procs      = flag.Int("sim.procs", 2, "search in this many processes")
	shardFlag  = flag.String("sim.shard", "", "i/n: make this process's share of a search (for the process that runs the search)")
)

// budget returns how long TestSim searches.
func budget() time.Duration {
	if *timeFlag > 0 {
		return *timeFlag
	}
	if s := os.Getenv("REDLOCK_SIM_TIME"); s != "" {
		if d, err := time.ParseDuration(s); err == nil {
			return d
		}
	}
	return 10 * time.Second
}

// replay is the command that replays seed.
func replay(seed uint64) string {
	cmd := fmt.Sprintf("cd faulttest && GOWORK=off go test ./sim -run 'TestSim$' -sim.seed=%d", seed)
	if *mutantFlag != "" {
		cmd = fmt.Sprintf("cd faulttest && GOWORK=off go test -tags redlock_mutants ./sim -run 'TestSim$' -sim.seed=%d -sim.mutant=%s", seed, *mutantFlag)
	}
	if *canaryFlag != "" {
		cmd += " -sim.canary=" + *canaryFlag
	}
	return cmd
}

// runSeed makes the history of seed in a bubble of its own. Everything
// the history draws comes from the seed: the faults and the workload from
// their own streams, crypto/rand (the clients' tokens and the seeds of
// their own random sources) from a stream that cryptotest sets for the
// whole process. So histories run one at a time in a process; a search
// runs them in parallel in processes of its own (see TestSim).
func runSeed(t *testing.T, seed uint64) *Result {
	var res *Result
	cfg := DefaultConfig(seed)
	cfg.Canary = *canaryFlag
	if *traceFlag {
		cfg.Trace = func(line string) { t.Log(line) }
	}
	cryptotest.SetGlobalRandom(t, seed)
	synctest.Test(t, func(t *testing.T) { res = Run(cfg) })
	return res
}

// TestSim searches fresh seeds for the time budget (-sim.time or
// REDLOCK_SIM_TIME), or replays one (-sim.seed). With a mutant or a
// canary it searches until the checker fires, and reports how many seeds
// that took.
func TestSim(t *testing.T) {
	if err := mutant.Set(*mutantFlag); err != nil {
		t.Fatalf("-sim.mutant=%s: %v (build with -tags redlock_mutants)", *mutantFlag, err)
	}
	defer mutant.Set("")
	// The histories allocate much and keep little.
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	if *seedFlag != 0 || *shardFlag != "" {
		// One history at a time, on one thread: goroutines that are ready
		// at one virtual instant then run one after another rather than
		// at once, which makes a replay as close to the history it
		// replays as the Go scheduler allows.
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	}
	if *seedFlag != 0 {
		n := max(*replays, 1)
		hashes := map[string]int{}
		var res, bad *Result
		failed := 0
		for range n {
			res = runSeed(t, *seedFlag)
			hashes[res.Hash]++
			if len(res.Violations) > 0 {
				failed++
				if bad == nil {
					bad = res
				}
			}
		}
		t.Logf("seed %d: %d ops, %d faults, %v virtual, %d violations; over %d replays, %d with violations, %d distinct hashes: %v",
			res.Seed, res.Ops, res.Faults, res.Took, len(res.Violations), n, failed, len(hashes), hashes)
		if bad != nil {
			res = bad // a replay that failed: the one to report
		}
		if *traceFlag {
			for _, op := range res.History.Ops {
				b, _ := json.Marshal(op)
				t.Logf("op %s", b)
			}
			for _, rm := range res.History.Removals {
				b, _ := json.Marshal(rm)
				t.Logf("removal %s", b)
			}
		}
		report(t, res, *mutantFlag != "" || *canaryFlag != "")
		return
	}
	if *shardFlag != "" {
		shard(t)
		return
	}
	base := *baseFlag
	if base == 0 {
		base = rand.Uint64() >> 1
	}
	hunting := *mutantFlag != "" || *canaryFlag != ""
	d := budget()
	t.Logf("searching seeds from %d for %v in %d processes (replay one: %s)", base, d, *procs, replay(base))
	began := time.Now()
	var (
		mu     sync.Mutex
		runs   int
		ops    int
		first  uint64             // the least seed that failed
		last   = map[int]uint64{} // by shard: the last seed it made
		logs   = map[uint64][]string{}
		cmds   []*exec.Cmd
		wg     sync.WaitGroup
		doneCh = make(chan struct{})
	)
	// settled reports whether no shard can still find a seed below first.
	settled := func() bool {
		for i := range *procs {
			if l, ok := last[i]; !ok || l < first {
				return false
			}
		}
		return true
	}
	for i := range *procs {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSim$", "-test.timeout=0",
			fmt.Sprintf("-sim.shard=%d/%d", i, *procs), fmt.Sprintf("-sim.base=%d", base), fmt.Sprintf("-sim.time=%v", d),
			"-sim.mutant="+*mutantFlag, "-sim.canary="+*canaryFlag)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { mu.Lock(); last[i] = ^uint64(0); mu.Unlock() }()
			sc := bufio.NewScanner(out)
			var seed uint64
			for sc.Scan() {
				line := sc.Text()
				var h struct {
					seed             uint64
					ops, faults, bad int
					hash             string
				}
				if _, err := fmt.Sscanf(line, "SIM %d %d %d %d %s", &h.seed, &h.ops, &h.faults, &h.bad, &h.hash); err == nil {
					mu.Lock()
					seed, runs, ops = h.seed, runs+1, ops+h.ops
					last[i] = h.seed
					if h.bad > 0 && (first == 0 || h.seed < first) {
						first = h.seed
					}
					if *verbose {
						t.Logf("seed %d: %d ops, %d faults, %d violations, hash %s", h.seed, h.ops, h.faults, h.bad, h.hash)
					}
					mu.Unlock()
					continue
				}
				if rest, ok := strings.CutPrefix(line, "SIMLOG "); ok {
					mu.Lock()
					logs[seed] = append(logs[seed], rest)
					mu.Unlock()
					continue
				}
				if *verbose {
					t.Log(line)
				}
			}
			cmd.Wait()
		}()
	}
	go func() { wg.Wait(); close(doneCh) }()
	// Once a seed has failed, the shards that have passed it are stopped.
	for stop := false; !stop; {
		select {
		case <-doneCh:
			stop = true
		case <-time.After(100 * time.Millisecond):
			mu.Lock()
			if first != 0 && settled() {
				for _, c := range cmds {
					c.Process.Kill()
				}
			}
			mu.Unlock()
		}
	}
	took := time.Since(began)
	t.Logf("%d histories, %d operations in %v: %.0f histories a minute", runs, ops, took.Round(time.Second), float64(runs)/took.Minutes())
	log := strings.Join(logs[first], "\n")
	switch {
	case hunting && first == 0:
		t.Errorf("%s%s: no violation in %d seeds from %d", *mutantFlag, *canaryFlag, runs, base)
	case hunting:
		t.Logf("found after %d seeds: seed %d\n%s", first-base+1, first, log)
		fmt.Printf("SEEDS-TO-FIRST-FAILURE %s%s base=%d seeds=%d seed=%d\n", *mutantFlag, *canaryFlag, base, first-base+1, first)
	case first != 0:
		t.Errorf("%s\nreplay: %s", log, replay(first))
	}
}

// shard makes one process's share of a search (-sim.shard=i/n): the
// seeds base+i, base+i+n, ..., one at a time, until the time is up or one
// fails. It prints a line for each history, and the summary of a failure,
// for the process that started it.
func shard(t *testing.T) {
	var i, n uint64
	if _, err := fmt.Sscanf(*shardFlag, "%d/%d", &i, &n); err != nil || n == 0 || i >= n {
		t.Fatalf("-sim.shard=%s: want i/n", *shardFlag)
	}
	deadline := time.Now().Add(budget())
	for seed := *baseFlag + i; time.Now().Before(deadline); seed += n {
		var res *Result
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) { res = runSeed(t, seed) })
		fmt.Printf("SIM %d %d %d %d %s\n", seed, res.Ops, res.Faults, len(res.Violations), res.Hash)
		if len(res.Violations) > 0 {
			for _, line := range strings.Split(strings.TrimRight(summary(res), "\n"), "\n") {
				fmt.Printf("SIMLOG %s\n", line)
			}
			return
		}
	}
}

// summary returns the violations of res and its schedule.
func summary(res *Result) string {
	s := fmt.Sprintf("seed %d: %d ops, %d faults\n", res.Seed, res.Ops, res.Faults)
	for i, v := range res.Violations {
		if i == 5 {
			s += fmt.Sprintf("  ... %d more\n", len(res.Violations)-5)
			break
		}
		s += "  " + v.String() + "\n"
	}
	return s + res.Schedule()
}

// report fails t with res's violations and the command that replays it,
// unless they are expected.
func report(t *testing.T, res *Result, expected bool) {
	t.Helper()
	if len(res.Violations) == 0 {
		if expected {
			t.Errorf("seed %d: no violation", res.Seed)
		}
		return
	}
	if expected {
		t.Logf("%s", summary(res))
		return
	}
	t.Errorf("%s\nreplay: %s", summary(res), replay(res.Seed))
}
