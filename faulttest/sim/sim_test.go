package sim

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
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

// runSeed makes the history of seed in a bubble of its own.
func runSeed(t *testing.T, seed uint64) *Result {
	var res *Result
	cfg := DefaultConfig(seed)
	cfg.Canary = *canaryFlag
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
		report(t, res, *mutantFlag != "" || *canaryFlag != "")
		return
	}
	base := *baseFlag
	if base == 0 {
		base = rand.Uint64() >> 1
	}
	hunting := *mutantFlag != "" || *canaryFlag != ""
	d := budget()
	t.Logf("searching seeds from %d for %v (replay one: %s)", base, d, replay(base))
	began := time.Now()
	deadline := began.Add(d)
	var (
		next  atomic.Uint64
		mu    sync.Mutex
		runs  int
		ops   int
		first uint64 // the first seed that failed
		wg    sync.WaitGroup
	)
	next.Store(base)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				mu.Lock()
				stop := first != 0
				mu.Unlock()
				if stop {
					return
				}
				seed := next.Add(1) - 1
				var res *Result
				t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
					res = runSeed(t, seed)
					if *verbose {
						t.Logf("seed %d: %d ops, %d faults, %d violations, hash %s", seed, res.Ops, res.Faults, len(res.Violations), res.Hash)
					}
					if len(res.Violations) > 0 && !hunting {
						report(t, res, false)
					}
				})
				mu.Lock()
				runs++
				ops += res.Ops
				if len(res.Violations) > 0 && (first == 0 || seed < first) {
					first = seed
					if hunting {
						t.Logf("found after %d seeds: seed %d\n%s", seed-base+1, seed, summary(res))
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	took := time.Since(began)
	t.Logf("%d histories, %d operations in %v: %.0f histories a minute", runs, ops, took.Round(time.Second), float64(runs)/took.Minutes())
	if hunting {
		if first == 0 {
			t.Errorf("%s%s: no violation in %d seeds from %d", *mutantFlag, *canaryFlag, runs, base)
		} else {
			fmt.Printf("SEEDS-TO-FIRST-FAILURE %s%s base=%d seeds=%d seed=%d\n", *mutantFlag, *canaryFlag, base, first-base+1, first)
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
