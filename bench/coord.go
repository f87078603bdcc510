package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/wire"
)

// This file holds the workloads of this module's coordination primitives,
// which no peer library offers over N masters: a semaphore (SEM) and an
// election (ELECT). Only this module's adapters run them.

// epoch is the origin of the monotonic instants that the goroutines of an
// election cell pass to each other (see coordShared.resignAt).
var epoch = time.Now()

// since returns the monotonic time since epoch, in nanoseconds.
func since() int64 { return int64(time.Since(epoch)) }

// coordShared is what the goroutines of a SEM or ELECT cell share in one
// slice: the harness's own count of who holds what, against which the
// library's guarantees are checked.
type coordShared struct {
	// holders are the permits (SEM) or leaderships (ELECT) held now, as
	// the holders see them: raised after an acquisition returns, lowered
	// before the release is sent.
	holders atomic.Int32
	maxHeld atomic.Int32
	// violations counts what must never happen: more than n holders at
	// once, two holders of one slot, a slot out of range, a fence or term
	// that does not rise.
	violations atomic.Uint64
	// occupied counts the holders of each slot (SEM; a lock has slot 0).
	occupied [wire.MaxPermits]atomic.Int32
	// fences holds the last fence granted on each slot (SEM) and, in
	// fences[0], the last term (ELECT).
	fences [wire.MaxPermits]atomic.Int64

	// ELECT only.
	resignAt   atomic.Int64 // since() when the last leader began to resign; 0: none yet
	lastLeader atomic.Int32 // the candidate that led last, or -1
	handovers  atomic.Uint64
	cross      atomic.Uint64 // handovers to another candidate than the last leader
}

// hold raises the holder count, notes the peak, and counts a violation if
// it is above limit.
func (sh *coordShared) hold(limit int32) {
	h := sh.holders.Add(1)
	if h > limit {
		sh.violations.Add(1)
	}
	for {
		m := sh.maxHeld.Load()
		if h <= m || sh.maxHeld.CompareAndSwap(m, h) {
			return
		}
	}
}

// fence records fence f on slot i, and counts a violation unless it is
// above the last one granted there.
func (sh *coordShared) fence(i int, f int64) {
	if prev := sh.fences[i].Swap(f); f <= prev {
		sh.violations.Add(1)
	}
}

// --- the semaphore ------------------------------------------------------------

// semWorker is one contender of a SEM cell: a Client of its own, as a
// process would have, acquiring a permit of the cell's semaphore, or, with
// permits 0, the plain Lock on the same key that the semaphore is compared
// with.
type semWorker struct {
	c       *redlock.Client
	permits int // 0: a Lock
	ttl     time.Duration
	key     string
	sem     *redlock.Semaphore
	permit  *redlock.Permit
	lock    *redlock.Lock
}

// reset points w at the semaphore (or lock) on key, the key of one slice.
func (w *semWorker) reset(key string) {
	w.key = key
	if w.permits > 0 {
		w.sem = w.c.Semaphore(key, w.permits)
	}
}

// limit is how many may hold at once.
func (w *semWorker) limit() int { return max(w.permits, 1) }

// acquire waits for a permit (or the lock) and returns its slot and fence.
func (w *semWorker) acquire(ctx context.Context) (slot int, fence int64, err error) {
	if w.permits == 0 {
		l, err := w.c.Lock(ctx, w.key, w.ttl)
		if err != nil {
			return 0, 0, err
		}
		w.lock = l
		return 0, l.Fence(), nil
	}
	p, err := w.sem.Acquire(ctx, w.ttl)
	if err != nil {
		return 0, 0, err
	}
	w.permit = p
	return p.Slot(), p.Fence(), nil
}

func (w *semWorker) release(ctx context.Context) error {
	if w.permits == 0 {
		l := w.lock
		w.lock = nil
		return l.Release(ctx)
	}
	p := w.permit
	w.permit = nil
	return p.Release(ctx)
}

// warm acquires and releases a permit on key a few times, so that
// connections are made and scripts cached.
func (w *semWorker) warm(ctx context.Context, key string) error {
	w.reset(key)
	for range 3 {
		if _, _, err := w.acquire(ctx); err != nil {
			return err
		}
		if err := w.release(ctx); err != nil {
			return err
		}
	}
	return nil
}

// loopSem contends for a permit until stop. The wait of an acquisition
// runs from the end of the contender's previous release (or its start) to
// holding the permit; a wait still going on when the slice ends is
// recorded as it stands and counted as cut off, as in W2. Holding the
// permit, the contender checks it against the others' (no more than n at
// once, no two on a slot, fences rising on each slot) and sleeps for hold,
// the work.
func loopSem(ctx context.Context, w *semWorker, g *gstate, stop *atomic.Bool, sh *coordShared, hold time.Duration) {
	bg := context.Background()
	limit := w.limit()
	wc := newWaitClock(g)
	defer wc.stop()
	for !stop.Load() {
		wc.attempt()
		slot, fence, err := w.acquire(ctx)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			g.fail(err)
			continue
		}
		t1 := wc.granted()

		sh.hold(int32(limit))
		inRange := slot >= 0 && slot < limit
		if !inRange {
			sh.violations.Add(1)
		} else {
			if sh.occupied[slot].Add(1) > 1 {
				sh.violations.Add(1)
			}
			sh.fence(slot, fence)
		}
		time.Sleep(hold)
		if inRange {
			sh.occupied[slot].Add(-1)
		}
		sh.holders.Add(-1)

		t2 := time.Now()
		g.held += t2.Sub(t1)
		wc.released(t2, w.release(bg)) // released even when the run has stopped
	}
}

// --- the election -------------------------------------------------------------

// candidate is one candidate of an ELECT cell, with a Client of its own.
type candidate struct {
	c     *redlock.Client
	ttl   time.Duration
	value string
	e     *redlock.Election
}

// reset points the candidate at the election on key, the key of one
// slice.
func (cd *candidate) reset(key string) { cd.e = cd.c.Election(key, cd.ttl) }

// warm campaigns and resigns on key a few times, and reads the leader.
func (cd *candidate) warm(ctx context.Context, key string) error {
	cd.reset(key)
	for range 3 {
		l, err := cd.e.Campaign(ctx, cd.value)
		if err != nil {
			return err
		}
		if _, err := cd.e.Leader(ctx); err != nil {
			return err
		}
		if err := l.Release(ctx); err != nil {
			return err
		}
	}
	return nil
}

// loopCandidate campaigns until stop. Leading, the candidate checks that
// it is the only leader and that its term is above the last leader's,
// records the handover, the time from the moment the last leader began to
// resign to its own Campaign's return, stays leader for hold, and
// resigns. Its acquire latency is its own wait, from the end of its last
// Resign (or its start) to leading, cut off at the end of the slice as in
// W2.
func loopCandidate(ctx context.Context, cd *candidate, g *gstate, stop *atomic.Bool, sh *coordShared, id int32, hold time.Duration) {
	bg := context.Background()
	wc := newWaitClock(g)
	defer wc.stop()
	for !stop.Load() {
		wc.attempt()
		l, err := cd.e.Campaign(ctx, cd.value)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			g.fail(err)
			continue
		}
		now := since()
		t1 := wc.granted()

		sh.hold(1)
		sh.fence(0, l.Fence())
		if at := sh.resignAt.Load(); at != 0 {
			g.hand.record(time.Duration(now - at))
			sh.handovers.Add(1)
			if sh.lastLeader.Load() != id {
				sh.cross.Add(1)
			}
		}
		time.Sleep(hold)
		sh.holders.Add(-1)
		sh.lastLeader.Store(id)
		sh.resignAt.Store(since())

		t2 := time.Now()
		g.held += t2.Sub(t1)
		wc.released(t2, l.Release(bg)) // resigned even when the run has stopped
	}
}

// loopReader reads the election's leader with Leader, back to back, until
// stop: one more process that only watches. Its acquire histogram holds
// the reads' latencies; a read that finds no leader (between two
// leaderships) counts in noLeader.
func loopReader(ctx context.Context, cd *candidate, g *gstate, stop *atomic.Bool) {
	for !stop.Load() {
		t0 := time.Now()
		info, err := cd.e.Leader(ctx)
		d := time.Since(t0)
		switch {
		case err == nil && info.Term > 0:
			g.ops++
		case errors.Is(err, redlock.ErrNoLeader):
			g.noLeader++
		case ctx.Err() != nil:
			return
		case err == nil:
			err = fmt.Errorf("leader %q with term %d", info.Value, info.Term)
			fallthrough
		default:
			g.fail(err)
			continue
		}
		g.acq.record(d)
	}
}

// --- the cells ------------------------------------------------------------------

// newCoordRun opens lib's clients for a Sem or Elect cell, one per
// contender or candidate and, for Elect, one more for the reader, and
// warms each up on a key of its own with the primitive it will use.
func newCoordRun(ctx context.Context, lib string, c Cell, t target, s settings) (*libRun, error) {
	lr := &libRun{lib: lib, cell: c, hold: s.hold}
	n := c.G
	if c.Workload == Elect {
		n++ // the reader
	}
	libTag := strings.ReplaceAll(lib, " ", "-")
	warm := make([]func() error, 0, n)
	for g := range n {
		rc, err := openRedlock(lib, t, s)
		if err != nil {
			lr.close()
			return nil, err
		}
		lr.clients = append(lr.clients, rc)
		warmKey := fmt.Sprintf("lockbench:warm:%s:%s:g%d", c.tag(), libTag, g)
		if c.Workload == Sem {
			w := &semWorker{c: rc.c, permits: c.Permits, ttl: s.ttl}
			lr.sems = append(lr.sems, w)
			lr.gs = append(lr.gs, new(gstate))
			warm = append(warm, func() error { return w.warm(ctx, warmKey) })
			continue
		}
		cd := &candidate{c: rc.c, ttl: s.ttl, value: fmt.Sprintf("candidate-%d", g)}
		if g == c.G {
			cd.value = "reader"
			lr.reader, lr.readerState = cd, new(gstate)
		} else {
			lr.cands = append(lr.cands, cd)
			lr.gs = append(lr.gs, new(gstate))
		}
		warm = append(warm, func() error { return cd.warm(ctx, warmKey) })
	}
	errs := make([]error, len(warm))
	var wg sync.WaitGroup
	for i, f := range warm {
		wg.Go(func() { errs[i] = f() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		lr.close()
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	return lr, nil
}

// startCoord starts the goroutines of a Sem or Elect slice, as slice
// starts W1's and W2's, on keys that no earlier slice used, so that
// nothing a slice left behind when it was stopped (a Campaign cut short
// between its lock and its term) holds up the next. It returns what they
// share, or nil for the other workloads.
func (lr *libRun) startCoord(ctx context.Context, ready, done *sync.WaitGroup, start <-chan struct{}, stop *atomic.Bool) *coordShared {
	if !coordination(lr.cell.Workload) {
		return nil
	}
	lr.slices++
	key := fmt.Sprintf("lockbench:%s:%s:s%d", lr.cell.tag(), strings.ReplaceAll(lr.lib, " ", "-"), lr.slices)
	sh := new(coordShared)
	sh.lastLeader.Store(-1)
	run := func(f func()) {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			f()
		}()
	}
	for g, w := range lr.sems {
		w.reset(key)
		run(func() { loopSem(ctx, w, lr.gs[g], stop, sh, lr.hold) })
	}
	for g, cd := range lr.cands {
		cd.reset(key)
		run(func() { loopCandidate(ctx, cd, lr.gs[g], stop, sh, int32(g), lr.hold) })
	}
	if cd := lr.reader; cd != nil {
		cd.reset(key)
		run(func() { loopReader(ctx, cd, lr.readerState, stop) })
	}
	return sh
}

// coordRow adds to r what a Sem or Elect cell measures beyond the common
// columns; secs is the measured time.
func (lr *libRun) coordRow(r *Row, secs float64) {
	var held time.Duration
	var busiest, least uint64
	var hand hist
	for i, g := range lr.gs {
		r.Acquisitions += g.acquired
		held += g.held
		busiest = max(busiest, g.acquired)
		if i == 0 || g.acquired < least {
			least = g.acquired
		}
		hand.merge(&g.hand)
	}
	if r.Acquisitions > 0 {
		r.BusiestShare = float64(busiest) / float64(r.Acquisitions)
		r.LeastShare = float64(least) / float64(r.Acquisitions)
	}
	r.Violations = lr.violations
	r.MaxHeld = int(lr.maxHeld)
	if secs > 0 {
		r.MeanHeld = held.Seconds() / secs
	}
	if lr.cell.Workload != Elect {
		return
	}
	r.Handovers, r.Cross = lr.handovers, lr.cross
	r.Handover = latencies{P50: hand.quantile(0.50), P99: hand.quantile(0.99), Max: hand.max}
	if secs > 0 {
		r.HandoversPerSec = float64(r.Handovers) / secs
		r.CrossPerSec = float64(r.Cross) / secs
	}
	if rs := lr.readerState; rs != nil {
		r.Reads, r.NoLeader = rs.ops+rs.noLeader, rs.noLeader
		r.Read = latencies{P50: rs.acq.quantile(0.50), P99: rs.acq.quantile(0.99), Max: rs.acq.max}
		if secs > 0 {
			r.ReadsPerSec = float64(r.Reads) / secs
		}
		r.Errors += rs.errs
		if rs.firstErr != nil && r.FirstError == "" {
			r.FirstError = "reader: " + rs.firstErr.Error()
		}
	}
}
