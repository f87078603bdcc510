package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock"
)

// This file holds RW, the read-mostly mix on a read-write lock, which no
// peer library offers over N masters: G goroutines share one client, as
// W1's do, and lock one key in turn, 95% of the time as readers and 5% as
// writers; the same loop on a plain Lock of the key, every operation
// exclusive, is the cell it is compared with. Only this module's adapters
// run it.

// RW is the read-mostly mix: G goroutines (Config.Contenders) share one
// client and each, in turn, holds one key as a reader (RWLock.RLock) or,
// one time in rwWriteEvery, as its writer (RWLock.Lock), and releases it
// at once; with Cell.Mutex every operation is a plain Lock of the key
// instead. This module's client only.
const RW = "RW"

// rwWriteEvery makes one operation in this many a write: 5%.
const rwWriteEvery = 20

// rwCells returns the RW cells of cfg: for each number of nodes, the
// read-write lock and the plain Lock beside it.
func (cfg *Config) rwCells() []Cell {
	var cells []Cell
	for _, n := range cfg.Nodes {
		cells = append(cells, Cell{Workload: RW, N: n, G: cfg.Contenders}, Cell{Workload: RW, N: n, G: cfg.Contenders, Mutex: true})
	}
	return cells
}

// rwString names an RW cell: "RW N=5 G=16 rwlock", or "... lock".
func (c Cell) rwString() string {
	return fmt.Sprintf("%s N=%d G=%d %s", c.Workload, c.N, c.G, c.rwKind())
}

// rwKind is what an RW cell locks with: "rwlock" or "lock".
func (c Cell) rwKind() string {
	if c.Mutex {
		return "lock"
	}
	return "rwlock"
}

// rwWorker is one goroutine of an RW cell.
type rwWorker struct {
	c     *redlock.Client
	mutex bool
	ttl   time.Duration
	key   string
	rw    *redlock.RWLock
	g     *gstate // acq: every acquisition; rel: every release
	// reads and writes time the acquisitions of each kind; nreads and
	// nwrites count the pairs completed.
	reads, writes   hist
	nreads, nwrites uint64
}

// reset points w at key, the key of one slice.
func (w *rwWorker) reset(key string) {
	w.key = key
	w.rw = w.c.RWLock(key)
}

// obtain takes the key as a writer or a reader; with mutex, as a plain
// Lock either way.
func (w *rwWorker) obtain(ctx context.Context, write bool) (*redlock.Lock, error) {
	switch {
	case w.mutex:
		return w.c.Lock(ctx, w.key, w.ttl)
	case write:
		return w.rw.Lock(ctx, w.ttl)
	}
	return w.rw.RLock(ctx, w.ttl)
}

// warm takes key a few times as a reader and once as a writer, so that
// connections are made and scripts cached.
func (w *rwWorker) warm(ctx context.Context, key string) error {
	w.reset(key)
	for i := range 4 {
		l, err := w.obtain(ctx, i == 3)
		if err != nil {
			return err
		}
		if err := l.Release(ctx); err != nil {
			return err
		}
	}
	return nil
}

// rwShared is what the goroutines of an RW slice share: the harness's
// own count of the holders, against which exclusion and fences are
// checked.
type rwShared struct {
	holders    atomic.Int32 // readers and writers holding now, as they see it
	writers    atomic.Int32 // writers holding now
	maxFence   atomic.Int64 // the largest fence seen
	lastWriter atomic.Int64 // the fence of the last writer
	violations atomic.Uint64
}

// raiseFence records f as the largest fence seen if it is.
func (sh *rwShared) raiseFence(f int64) {
	for {
		m := sh.maxFence.Load()
		if f <= m || sh.maxFence.CompareAndSwap(m, f) {
			return
		}
	}
}

// check counts the violations of a hold that begins, of the kind given,
// with fence f: a writer (or any plain Lock) beside another holder or
// with a fence not above every fence seen before; a reader beside a
// writer or with a fence below the last writer's.
func (sh *rwShared) check(exclusive bool, f int64) {
	h := sh.holders.Add(1)
	if exclusive {
		if sh.writers.Add(1) > 1 || h > 1 || f <= sh.maxFence.Load() {
			sh.violations.Add(1)
		}
		sh.lastWriter.Store(f)
	} else if sh.writers.Load() > 0 || f < sh.lastWriter.Load() {
		sh.violations.Add(1)
	}
	sh.raiseFence(f)
}

// done undoes check, before the release is sent.
func (sh *rwShared) done(exclusive bool) {
	if exclusive {
		sh.writers.Add(-1)
	}
	sh.holders.Add(-1)
}

// loopRW locks and releases the worker's key in turn until stop, one time
// in rwWriteEvery as a writer, starting at an offset of its own so that
// the goroutines' writes are spread out. Each acquisition is timed from
// the call to its return, the wait behind the other kind included; a wait
// that the end of the slice cuts off is counted and not timed.
func loopRW(ctx context.Context, w *rwWorker, id int, stop *atomic.Bool, sh *rwShared) {
	bg := context.Background()
	g := w.g
	for i := id; !stop.Load(); i++ {
		write := i%rwWriteEvery == 0
		t0 := time.Now()
		l, err := w.obtain(ctx, write)
		t1 := time.Now()
		if err != nil {
			if ctx.Err() != nil {
				g.cutOff++
				break
			}
			g.fail(err)
			continue
		}
		d := t1.Sub(t0)
		g.acq.record(d)
		if write {
			w.writes.record(d)
		} else {
			w.reads.record(d)
		}
		exclusive := write || w.mutex
		sh.check(exclusive, l.Fence())
		runtime.Gosched() // as W2 does: another holder would be seen
		sh.done(exclusive)
		err = l.Release(bg) // released even when the run has stopped
		g.rel.record(time.Since(t1))
		if err != nil {
			g.fail(err)
			continue
		}
		g.ops++
		if write {
			w.nwrites++
		} else {
			w.nreads++
		}
	}
}

// newRWRun opens lib's one client for an RW cell and warms up each
// goroutine on a key of its own.
func newRWRun(ctx context.Context, lib string, c Cell, t target, s settings) (*libRun, error) {
	lr := &libRun{lib: lib, cell: c}
	rc, err := openRedlock(lib, t, s)
	if err != nil {
		return nil, err
	}
	lr.clients = append(lr.clients, rc)
	libTag := strings.ReplaceAll(lib, " ", "-")
	errs := make([]error, c.G)
	var wg sync.WaitGroup
	for g := range c.G {
		w := &rwWorker{c: rc.c, mutex: c.Mutex, ttl: s.ttl, g: new(gstate)}
		lr.rws = append(lr.rws, w)
		lr.gs = append(lr.gs, w.g)
		key := fmt.Sprintf("lockbench:warm:%s:%s:g%d", c.tag(), libTag, g)
		wg.Go(func() { errs[g] = w.warm(ctx, key) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		lr.close()
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	return lr, nil
}

// startRW starts the goroutines of an RW slice, as slice starts W1's, on
// a key that no earlier slice used, so that a writer's intent left by a
// wait that the end of a slice cut short does not slow the next slice's
// readers. It returns what they share, or nil for the other workloads.
func (lr *libRun) startRW(ctx context.Context, ready, done *sync.WaitGroup, start <-chan struct{}, stop *atomic.Bool) *rwShared {
	if lr.cell.Workload != RW {
		return nil
	}
	lr.slices++
	key := fmt.Sprintf("lockbench:%s:%s:s%d", lr.cell.tag(), strings.ReplaceAll(lr.lib, " ", "-"), lr.slices)
	sh := new(rwShared)
	for g, w := range lr.rws {
		w.reset(key)
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			loopRW(ctx, w, g, stop, sh)
		}()
	}
	return sh
}

// rwRow adds to r what an RW cell measures beyond the common columns.
func (lr *libRun) rwRow(r *Row) {
	var reads, writes hist
	for _, w := range lr.rws {
		reads.merge(&w.reads)
		writes.merge(&w.writes)
		r.ReadOps += w.nreads
		r.WriteOps += w.nwrites
	}
	r.ReadAcquire = latencies{P50: reads.quantile(0.50), P99: reads.quantile(0.99), P999: reads.quantile(0.999), Max: reads.max}
	r.WriteAcquire = latencies{P50: writes.quantile(0.50), P99: writes.quantile(0.99), P999: writes.quantile(0.999), Max: writes.max}
	r.Violations = lr.violations
}

// rwProgress adds an RW row's own figures to its progress line.
func (row Row) rwProgress(b *strings.Builder) {
	fmt.Fprintf(b, "  reads %d p50 %s p99 %s  writes %d p50 %s p99 %s  cut-off %d violations %d",
		row.ReadOps, fmtDur(row.ReadAcquire.P50), fmtDur(row.ReadAcquire.P99),
		row.WriteOps, fmtDur(row.WriteAcquire.P50), fmtDur(row.WriteAcquire.P99), row.CutOff, row.Violations)
}

// rwRule says what an RW row's violations count.
const rwRule = "a writer beside another holder, a reader beside a writer, a writer's fence not above every earlier one, a reader's below the last writer's"

// rwMarkdown writes the table of the RW rows.
func (r *Report) rwMarkdown(b *bytes.Buffer, rows []Row) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "\n#### RW: a read-mostly mix on one key (G goroutines share one client; 1 operation in %d a write, the others reads, each released at once; lock: every operation a plain Lock of the key, run alike)\n\n", rwWriteEvery)
	b.WriteString("No peer library offers a read-write lock over N masters: this module's client only. Pairs/s are the acquisitions and releases per second, reads and writes together; " +
		"× lock is the pairs/s against the plain Lock's in the cell beside it; a read or write is timed from the call to its return, the wait included; " +
		"violations count " + rwRule + ", and must be 0.\n\n")
	b.WriteString("| N | G | lock | library | pairs/s | × lock | reads/s | writes/s | read p50 | p99 | write p50 | p99 | release p50 | p99 | allocs/op | waits cut off | violations | errors |\n")
	b.WriteString("|--:|--:|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, row := range rows {
		c := row.Cell
		vs := ""
		if !c.Mutex {
			m := c
			m.Mutex = true
			if p, ok := r.Find(m, row.Library); ok {
				vs = fmtRatio(ratio(row.OpsPerSec, p.OpsPerSec))
			}
		}
		secs := row.Elapsed.Seconds()
		var rps, wps float64
		if secs > 0 {
			rps, wps = float64(row.ReadOps)/secs, float64(row.WriteOps)/secs
		}
		fmt.Fprintf(b, "| %d | %d | %s | %s | %.0f | %s | %.0f | %.0f | %s | %s | %s | %s | %s | %s | %.1f | %d | %d | %d |\n",
			c.N, c.G, c.rwKind(), row.Library, row.OpsPerSec, vs, rps, wps,
			fmtDur(row.ReadAcquire.P50), fmtDur(row.ReadAcquire.P99), fmtDur(row.WriteAcquire.P50), fmtDur(row.WriteAcquire.P99),
			fmtDur(row.Release.P50), fmtDur(row.Release.P99), row.AllocsPerOp, row.CutOff, row.Violations, row.Errors+row.GaveUp)
	}
}
