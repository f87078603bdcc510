package main

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// A hold is one time a worker held the lock, on this process's monotonic
// clock.
type hold struct {
	worker   int
	fence    int64
	called   time.Time // when the worker called Lock
	acquired time.Time // when Lock returned
	released time.Time // when the worker called Release
	until    time.Time // the lock's validity deadline at release
	phase    int
}

// end returns when the hold ended: at the release, or at the deadline if
// the worker overran it.
func (h hold) end() time.Time {
	if h.until.Before(h.released) {
		return h.until
	}
	return h.released
}

// A miss is a call of Lock that returned an error: it failed, or the
// phase ended while it waited.
type miss struct {
	worker           int
	called, returned time.Time
	err              error
}

// A history records every hold of the demo's lock, to be checked when the
// demo ends, and the calls that got no lock, to be drawn.
type history struct {
	mu     sync.Mutex
	holds  []hold
	misses []miss
}

func (h *history) add(x hold) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.holds = append(h.holds, x)
}

func (h *history) addMiss(m miss) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.misses = append(h.misses, m)
}

// sorted returns the holds in the order they were acquired.
func (h *history) sorted() []hold {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := slices.Clone(h.holds)
	slices.SortStableFunc(s, func(a, b hold) int { return a.acquired.Compare(b.acquired) })
	return s
}

// missed returns the calls that got no lock.
func (h *history) missed() []miss {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.misses)
}

// An overlap is two holds that overlapped: later began before earlier had
// ended.
type overlap struct{ earlier, later hold }

func (o overlap) String() string {
	return fmt.Sprintf("worker %d acquired the lock (fence %d) %v before worker %d's hold (fence %d) ended",
		o.later.worker, o.later.fence, o.earlier.end().Sub(o.later.acquired), o.earlier.worker, o.earlier.fence)
}

// findOverlaps returns every hold of holds (sorted by acquisition) that
// began before an earlier one had ended, with the earlier one that ends
// latest.
func findOverlaps(holds []hold) []overlap {
	var out []overlap
	var last hold // the hold that ends latest so far
	for i, x := range holds {
		if i > 0 && x.acquired.Before(last.end()) {
			out = append(out, overlap{earlier: last, later: x})
		}
		if i == 0 || x.end().After(last.end()) {
			last = x
		}
	}
	return out
}

// overlaps returns a description of every pair of holds by different
// workers that overlapped: a hold that began before an earlier one had
// ended.
func overlaps(holds []hold) []string {
	var out []string
	for _, o := range findOverlaps(holds) {
		out = append(out, o.String())
	}
	return out
}

// fenceDrops returns the index of every hold whose fence was not greater
// than that of the hold acquired before it.
func fenceDrops(holds []hold) []int {
	var out []int
	for i := 1; i < len(holds); i++ {
		if holds[i].fence <= holds[i-1].fence {
			out = append(out, i)
		}
	}
	return out
}

// fenceErrors returns a description of every hold whose fence was not
// greater than that of the hold acquired before it.
func fenceErrors(holds []hold) []string {
	var out []string
	for _, i := range fenceDrops(holds) {
		out = append(out, fmt.Sprintf("worker %d got fence %d after worker %d had fence %d",
			holds[i].worker, holds[i].fence, holds[i-1].worker, holds[i-1].fence))
	}
	return out
}

// String says how the check went: "PASS  what" or "FAIL  what".
func (r checkResult) String() string {
	if r.ok {
		return "PASS  " + r.text
	}
	return "FAIL  " + r.text
}

func (d *demo) check(ok bool, format string, args ...any) {
	d.results = append(d.results, checkResult{ok: ok, text: fmt.Sprintf(format, args...)})
}

// verdict checks the history and prints a line for each check.
func (d *demo) verdict() error {
	holds := d.hist.sorted()
	n := len(d.names)
	down := (n - 1) / 2
	perPhase := map[int]int{}
	for _, h := range holds {
		perPhase[h.phase]++
	}

	d.check(perPhase[1] > 0, "with all %d nodes up, the lock was granted %d times", n, perPhase[1])
	if down > 0 {
		d.check(perPhase[2] > 0, "with %d of %d nodes down, the lock was still granted %d times", down, n, perPhase[2])
	}
	att, nq := d.attempts.Load(), d.noQuorum.Load()
	switch {
	case att == 0:
		d.check(false, "with %d of %d nodes down, no attempt completed", down+1, n)
	case d.granted.Load() > 0:
		d.check(false, "with %d of %d nodes down, the lock was granted %d times: a quorum was not enforced", down+1, n, d.granted.Load())
	case nq != att:
		d.check(false, "with %d of %d nodes down, %d of %d attempts failed with another error than ErrNoQuorum: %v", down+1, n, att-nq, att, d.otherErr)
	default:
		d.check(true, "with %d of %d nodes down, no lock was granted: all %d attempts failed with ErrNoQuorum", down+1, n, att)
	}
	if ov := overlaps(holds); len(ov) > 0 {
		d.check(false, "%d overlapping holders, for example: %s", len(ov), ov[0])
	} else {
		d.check(true, "no overlapping holders: each of the %d holds ended before the next began", len(holds))
	}
	if fe := fenceErrors(holds); len(fe) > 0 {
		d.check(false, "fences did not always increase (%d times), for example: %s", len(fe), fe[0])
	} else {
		d.check(true, "fences strictly increased over all %d holds", len(holds))
	}
	d.check(d.counter.Load() == int64(len(holds)), "no lost updates: the counter is %d after %d read-pause-write increments", d.counter.Load(), len(holds))
	d.store.mu.Lock()
	rejected := d.store.rejected
	d.store.mu.Unlock()
	d.check(rejected == 0, "the fenced store rejected %d stale writes", rejected)

	d.say("")
	d.say("verdict:")
	failed := 0
	for _, r := range d.results {
		if !r.ok {
			failed++
		}
		d.say("  %s", r)
	}
	if failed > 0 {
		d.say("demo FAILED: %d of %d checks failed", failed, len(d.results))
		return silentExit(exitFailure)
	}
	d.say("demo PASSED: all %d checks passed", len(d.results))
	return nil
}
