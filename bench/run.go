package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The workloads.
const (
	// W1 is uncontended: G goroutines share one client, each locking and
	// unlocking keys of its own.
	W1 = "W1"
	// W2 is contended: G contenders, each with a client of its own, lock
	// and unlock one key.
	W2 = "W2"
	// W2Shared is W2 with one client shared by the G contenders, as
	// goroutines of one process would share it.
	W2Shared = "W2s"
)

// Workloads returns the names of every workload, in the order a full run
// runs them.
func Workloads() []string { return []string{W1, W2, W2Shared, RW} }

// contended reports whether w is W2 or W2Shared.
func contended(w string) bool { return w == W2 || w == W2Shared }

// keysPerWorker is how many keys each W1 goroutine cycles through.
const keysPerWorker = 8

// Config says what a run measures and how long.
type Config struct {
	// Addrs are the "host:port" addresses of the servers; a cell with N
	// nodes uses the first N. There must be at least max(Nodes).
	Addrs []string
	// ServerAddrs, if set, are the servers' own addresses when Addrs are
	// proxies in front of them (see StartNetwork): INFO cpu is read there.
	ServerAddrs []string
	// Network describes the simulated network between the clients and the
	// servers, or is empty on loopback.
	Network string `json:"-"`
	// CountPairs is how many lock+release pairs each library makes, one
	// at a time, on the first server, while the
	// servers count the commands they run (see CommandCount); 0 counts
	// nothing.
	CountPairs int
	// Duration is the measured time of each library in each cell. It is
	// split into Reps slices, and the libraries of a cell take turns
	// slice by slice, so that drift on a noisy machine hits them alike.
	Duration time.Duration
	// Reps is the number of slices Duration is split into.
	Reps int
	// Workloads lists the workloads to run (see Workloads).
	Workloads []string
	// Libraries lists the libraries to compare (see Libraries).
	Libraries []string
	// Nodes lists the numbers of nodes, N.
	Nodes []int
	// Goroutines lists the numbers of goroutines of W1, G.
	Goroutines []int
	// Contenders is the number of contenders of W2.
	Contenders int
	// Retries lists the retry settings W2 runs with.
	Retries []Retry
	// TunedDelay is the retry delay of RetryTuned.
	TunedDelay time.Duration
	// TTL is the time to live of every lock.
	TTL time.Duration
	// Quarantine runs redlock with its restart quarantine on, as shipped;
	// false sets Options.DisableQuarantine. With it on, the servers must
	// have run for longer than TTL before Run, or no node votes.
	Quarantine bool
	// Progress, if not nil, receives a line for each library in each cell
	// as it completes.
	Progress io.Writer `json:"-"`
	// SlowAbove, if positive, makes each W1 row count the lock calls
	// that took at least this long: with Network, its shortest stall, so
	// that the count is of the calls that waited for a stalled server (or
	// for a machine as slow).
	SlowAbove time.Duration

	// Keys lists the numbers of distinct keys of KEYS (see
	// KeysWorkload), and FenceRetentions the Options.FenceRetention of
	// this module's client in it, 0 for the default.
	Keys            []int
	FenceRetentions []time.Duration
	// Waiters lists the numbers of waiting goroutines of WAITERS (see
	// WaitersWorkload), which runs on the first Nodes[0] servers.
	Waiters []int
}

// DefaultConfig returns the configuration of a full run, without Addrs.
func DefaultConfig() Config {
	return Config{
		Duration:   5 * time.Second,
		Reps:       5,
		Workloads:  Workloads(),
		Libraries:  DefaultLibraries(),
		Nodes:      []int{1, 3, 5},
		Goroutines: []int{1, 16, 64},
		Contenders: 16,
		Retries:    []Retry{RetryDefault, RetryTuned},
		TunedDelay: time.Millisecond,
		TTL:        10 * time.Second,
		Quarantine: true,

		CountPairs: 1000,

		Keys:            []int{10000, 100000, 1000000},
		FenceRetentions: []time.Duration{0, time.Second},
		Waiters:         []int{1000, 10000},
	}
}

// validate checks cfg.
func (cfg *Config) validate() error {
	var errs []error
	if cfg.Duration <= 0 || cfg.Reps <= 0 {
		errs = append(errs, errors.New("duration and reps must be positive"))
	}
	for _, w := range cfg.Workloads {
		if !slices.Contains(Workloads(), w) && !scaleWorkload(w) {
			errs = append(errs, fmt.Errorf("unknown workload %q (known: %s)", w, strings.Join(append(Workloads(), ScaleWorkloads()...), ", ")))
		}
	}
	for _, l := range cfg.Libraries {
		if !slices.Contains(Libraries(), l) {
			errs = append(errs, fmt.Errorf("unknown library %q (known: %s)", l, strings.Join(Libraries(), ", ")))
		}
	}
	for _, n := range cfg.Nodes {
		if n < 1 || n > len(cfg.Addrs) {
			errs = append(errs, fmt.Errorf("cannot run on %d nodes with %d servers", n, len(cfg.Addrs)))
		}
	}
	for _, g := range cfg.Goroutines {
		if g < 1 {
			errs = append(errs, fmt.Errorf("bad number of goroutines %d", g))
		}
	}
	if slices.Contains(cfg.Workloads, KeysWorkload) {
		for _, k := range cfg.Keys {
			if k < 1 {
				errs = append(errs, fmt.Errorf("bad number of keys %d", k))
			}
		}
		for _, r := range cfg.FenceRetentions {
			if r < 0 {
				errs = append(errs, fmt.Errorf("bad fence retention %v", r))
			}
		}
	}
	if slices.Contains(cfg.Workloads, WaitersWorkload) {
		if len(cfg.Nodes) == 0 {
			errs = append(errs, errors.New("WAITERS runs on the first of the numbers of nodes: none given"))
		}
		for _, k := range cfg.Waiters {
			if k < 1 {
				errs = append(errs, fmt.Errorf("bad number of waiters %d", k))
			}
		}
	}
	if cfg.CountPairs < 0 {
		errs = append(errs, fmt.Errorf("bad number of pairs to count %d", cfg.CountPairs))
	}
	if slices.ContainsFunc(cfg.Workloads, func(w string) bool { return contended(w) || w == RW }) && cfg.Contenders < 1 {
		errs = append(errs, fmt.Errorf("bad number of contenders %d", cfg.Contenders))
	}
	if cfg.TunedDelay <= 0 || cfg.TTL <= 0 {
		errs = append(errs, errors.New("tuned delay and TTL must be positive"))
	}
	return errors.Join(errs...)
}

// A Cell is one combination of a workload and its parameters.
type Cell struct {
	Workload string
	N        int   // nodes
	G        int   // goroutines (W1, RW) or contenders (W2)
	Retry    Retry // W2 and W2Shared only
	// Mutex makes an RW cell's every operation a plain Lock, to compare.
	Mutex bool
}

// String names the cell, as in "W1 N=5 G=64", "W2 N=5 G=16 tuned" or
// "RW N=5 G=16".
func (c Cell) String() string {
	if c.Workload == RW {
		return c.rwString()
	}
	s := fmt.Sprintf("%s N=%d G=%d", c.Workload, c.N, c.G)
	if contended(c.Workload) {
		s += " " + c.Retry.String()
	}
	return s
}

// tag is the cell's name as a part of a Redis key.
func (c Cell) tag() string {
	return strings.ReplaceAll(c.String(), " ", ":")
}

// cells lists the cells of cfg in the order they run: for each workload,
// those of each number of nodes.
func (cfg *Config) cells() []Cell {
	var cells []Cell
	for _, w := range cfg.Workloads {
		switch {
		case scaleWorkload(w):
			continue // not cells: see runKeys and runWaiters
		case w == RW:
			cells = append(cells, cfg.rwCells()...)
			continue
		}
		for _, n := range cfg.Nodes {
			if w == W1 {
				for _, g := range cfg.Goroutines {
					cells = append(cells, Cell{Workload: W1, N: n, G: g})
				}
				continue
			}
			for _, r := range cfg.Retries {
				cells = append(cells, Cell{Workload: w, N: n, G: cfg.Contenders, Retry: r})
			}
		}
	}
	return cells
}

// servers returns the servers' own addresses.
func (cfg *Config) servers() []string {
	if cfg.ServerAddrs != nil {
		return cfg.ServerAddrs
	}
	return cfg.Addrs
}

// Run measures every cell of cfg against the servers at cfg.Addrs and
// returns the results, with a description of the machine. It stops early, with the rows done so far and the
// context's error, when ctx ends.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	rep := &Report{Started: time.Now(), Config: cfg, Machine: DescribeMachine(), LoadStart: LoadAverage(), Network: cfg.Network}
	defer func() {
		rep.Finished = time.Now()
		rep.LoadEnd = LoadAverage()
	}()
	if err := rep.countCommands(ctx); err != nil {
		return rep, err
	}
	for _, c := range cfg.cells() {
		rows, err := runCell(ctx, &cfg, c)
		rep.Rows = append(rep.Rows, rows...)
		if err != nil {
			return rep, fmt.Errorf("%s: %w", c, err)
		}
	}
	if slices.Contains(cfg.Workloads, KeysWorkload) {
		if err := runKeys(ctx, &cfg, rep); err != nil {
			return rep, err
		}
	}
	if slices.Contains(cfg.Workloads, WaitersWorkload) {
		if err := runWaiters(ctx, &cfg, rep); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// gstate is what one goroutine of a run records. Its histograms are large
// enough that two gstates never share a cache line where it matters.
type gstate struct {
	acq, rel hist
	ops      uint64 // completed lock+unlock pairs
	acquired uint64 // W2: acquisitions
	cutOff   uint64 // W2: waits cut off by the end of a slice
	gaveUp   uint64 // acquisitions the library gave up on
	errs     uint64 // errors other than giving up
	firstErr error
}

// fail records an error, or a give-up when err is nil.
func (g *gstate) fail(err error) {
	if err == nil {
		g.gaveUp++
		return
	}
	g.errs++
	if g.firstErr == nil {
		g.firstErr = err
	}
}

// A libRun is one library in one cell: its clients, its goroutines'
// workers and what they recorded over every slice.
type libRun struct {
	lib     string
	cell    Cell
	clients []client
	workers []worker
	gs      []*gstate

	elapsed        time.Duration
	mallocs, bytes uint64
	serverCPU      time.Duration // the servers' CPU time (INFO cpu) over the slices
	slowAbove      time.Duration // Config.SlowAbove
	cpu            *cpuReader

	// W2 only.
	acquired    uint64 // acquisitions, counted under the lock
	transitions uint64 // acquisitions that had a previous one in their slice
	cross, lost uint64

	// RW only.
	rws        []*rwWorker
	slices     int // slices run, each with a key of its own
	violations uint64
}

// runCell runs every library of cfg on cell c, the libraries taking turns
// slice by slice, and returns a row for each.
func runCell(ctx context.Context, cfg *Config, c Cell) ([]Row, error) {
	t := target(cfg.Addrs[:c.N])
	s := settings{retry: c.Retry, tunedDelay: cfg.TunedDelay, ttl: cfg.TTL, quarantine: cfg.Quarantine}
	cpu := newCPUReader(cfg.servers()[:c.N])
	defer cpu.close()
	var (
		runs []*libRun
		rows []Row
	)
	defer func() {
		for _, lr := range runs {
			lr.close()
		}
	}()
	for _, lib := range cfg.Libraries {
		if !supports(lib, c) {
			continue
		}
		lr, err := newLibRun(ctx, lib, c, t, s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", lib, err)
		}
		lr.slowAbove, lr.cpu = cfg.SlowAbove, cpu
		runs = append(runs, lr)
	}
	slice := cfg.Duration / time.Duration(cfg.Reps)
	for rep := range cfg.Reps {
		for i := range runs {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if err := runs[(i+rep)%len(runs)].slice(ctx, slice); err != nil {
				return nil, err
			}
		}
	}
	for _, lib := range cfg.Libraries {
		i := slices.IndexFunc(runs, func(lr *libRun) bool { return lr.lib == lib })
		if i < 0 && c.Workload == RW {
			continue // no peer offers these: no n/a rows
		}
		if i < 0 {
			rows = append(rows, Row{Cell: c, Library: lib, NA: true})
			continue
		}
		row := runs[i].row()
		rows = append(rows, row)
		if cfg.Progress != nil {
			fmt.Fprintln(cfg.Progress, row.progress())
		}
	}
	return rows, nil
}

// newLibRun opens lib's clients for cell c and warms them up: every
// goroutine locks and unlocks a key of its own a few times, so that
// connections are made and scripts cached before anything is measured.
func newLibRun(ctx context.Context, lib string, c Cell, t target, s settings) (*libRun, error) {
	if c.Workload == RW {
		return newRWRun(ctx, lib, c, t, s)
	}
	lr := &libRun{lib: lib, cell: c}
	nclients := 1
	if c.Workload == W2 {
		nclients = c.G // each contender has a client of its own, as a process would
	}
	// W2Shared: one client for all, as goroutines of one process.
	for range nclients {
		cl, err := open(lib, t, s)
		if err != nil {
			lr.close()
			return nil, err
		}
		lr.clients = append(lr.clients, cl)
	}
	libTag := strings.ReplaceAll(lib, " ", "-")
	warm := make([]worker, c.G)
	for g := range c.G {
		cl := lr.clients[g%nclients]
		var keys []string
		if c.Workload == W1 {
			for k := range keysPerWorker {
				keys = append(keys, fmt.Sprintf("lockbench:%s:%s:g%d:k%d", c.tag(), libTag, g, k))
			}
		} else {
			keys = []string{fmt.Sprintf("lockbench:%s:%s", c.tag(), libTag)}
		}
		lr.workers = append(lr.workers, cl.worker(keys))
		lr.gs = append(lr.gs, new(gstate))
		warm[g] = cl.worker([]string{fmt.Sprintf("lockbench:warm:%s:%s:g%d", c.tag(), libTag, g)})
	}
	errs := make([]error, c.G)
	var wg sync.WaitGroup
	for g, w := range warm {
		wg.Go(func() {
			for range 3 {
				ok, err := w.lock(ctx, 0)
				if err == nil && !ok {
					err = errors.New("warm-up: not obtained")
				}
				if err == nil {
					err = w.unlock(ctx)
				}
				if err != nil {
					errs[g] = err
					return
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		lr.close()
		return nil, err
	}
	return lr, nil
}

func (lr *libRun) close() {
	for _, cl := range lr.clients {
		cl.close()
	}
	lr.clients = nil
}

// shared is what W2's contenders share in one slice.
type shared struct {
	counter  atomic.Int64  // the protected counter of the lost-update detector
	acquired atomic.Uint64 // acquisitions, counted under the lock
	last     atomic.Int32  // the contender that held the lock last, or -1
	cross    atomic.Uint64 // acquisitions by another contender than the last holder
}

// stuckAfter is how long a slice waits for its goroutines to return once
// it has ended before it gives up on them.
const stuckAfter = 30 * time.Second

// slice runs lr's goroutines for d and adds what they did to lr. The
// goroutines are started, and the heap collected, before the clock and
// the allocation counters are read. It fails if a goroutine is still in
// the library stuckAfter after the slice ended.
func (lr *libRun) slice(ctx context.Context, d time.Duration) error {
	var (
		ready, done sync.WaitGroup
		start       = make(chan struct{})
		stop        atomic.Bool
		sh          shared
	)
	sh.last.Store(-1)
	lockCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	for g, w := range lr.workers {
		ready.Add(1)
		done.Add(1)
		gs := lr.gs[g]
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			if lr.cell.Workload == W1 {
				loopW1(w, gs, &stop)
			} else {
				loopW2(lockCtx, w, gs, &stop, &sh, int32(g))
			}
		}()
	}
	rs := lr.startRW(lockCtx, &ready, &done, start, &stop)
	ready.Wait()
	halt := func() {
		stop.Store(true)
		cancel()
	}
	unhook := context.AfterFunc(ctx, halt)
	defer unhook()
	// Everything the harness needs is made before the counters are read.
	finished := make(chan struct{})
	go func() {
		done.Wait()
		close(finished)
	}()
	timer := time.AfterFunc(time.Hour, halt)
	defer timer.Stop()
	watchdog := time.NewTimer(time.Hour)
	defer watchdog.Stop()
	cpu0, err := lr.cpu.read(ctx)
	if err != nil {
		halt()
		done.Wait()
		return err
	}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	t0 := time.Now()
	timer.Reset(d)
	watchdog.Reset(d + stuckAfter)
	close(start)
	select {
	case <-finished:
	case <-watchdog.C:
		return fmt.Errorf("%s: goroutines still in the library %v after the slice ended", lr.lib, stuckAfter)
	}
	elapsed := time.Since(t0)
	runtime.ReadMemStats(&m1)
	cpu1, err := lr.cpu.read(ctx)
	if err != nil {
		return err
	}
	lr.serverCPU += cpu1 - cpu0

	lr.elapsed += elapsed
	lr.mallocs += m1.Mallocs - m0.Mallocs
	lr.bytes += m1.TotalAlloc - m0.TotalAlloc
	if contended(lr.cell.Workload) {
		acquired := sh.acquired.Load()
		lr.acquired += acquired
		if acquired > 0 {
			lr.transitions += acquired - 1
		}
		lr.cross += sh.cross.Load()
		lr.lost += acquired - uint64(sh.counter.Load())
	}
	if rs != nil {
		lr.violations += rs.violations.Load()
	}
	return nil
}

// loopW1 locks and unlocks the worker's keys in turn until stop, timing
// each call. Nothing in it allocates but the library.
func loopW1(w worker, g *gstate, stop *atomic.Bool) {
	ctx := context.Background()
	for i := 0; !stop.Load(); i++ {
		t0 := time.Now()
		ok, err := w.lock(ctx, i%keysPerWorker)
		t1 := time.Now()
		if !ok {
			g.fail(err)
			continue
		}
		g.acq.record(t1.Sub(t0))
		err = w.unlock(ctx)
		g.rel.record(time.Since(t1))
		if err != nil {
			g.fail(err)
			continue
		}
		g.ops++
	}
}

// loopW2 contends for the worker's one key until stop. The wait of an
// acquisition runs from the end of the contender's previous release (or
// its start) to the moment it holds the lock, across every attempt the
// library gave up on; a wait still going on when the slice ends is
// recorded as it stands, the time waited so far, and counted as cut off.
// Under the lock the contender notes a handoff and increments the shared
// counter in two steps with a yield between them, so that two holders at
// once would lose an update.
func loopW2(ctx context.Context, w worker, g *gstate, stop *atomic.Bool, sh *shared, id int32) {
	bg := context.Background()
	wc := newWaitClock(g)
	defer wc.stop()
	for !stop.Load() {
		wc.attempt()
		ok, err := w.lock(ctx, 0)
		if err != nil && ctx.Err() != nil {
			break // stopped while waiting
		}
		if !ok {
			g.fail(err)
			continue
		}
		wc.granted()

		if prev := sh.last.Swap(id); prev >= 0 && prev != id {
			sh.cross.Add(1)
		}
		v := sh.counter.Load()
		runtime.Gosched()
		sh.counter.Store(v + 1)
		sh.acquired.Add(1)

		t2 := time.Now()
		wc.released(t2, w.unlock(bg)) // released even when the run has stopped
	}
}

// A waitClock times one contender's waits (W2): each runs
// from the end of the contender's previous release (or its start) to its
// next grant, across every attempt the library gave up on. A wait still
// going on when the slice ends is recorded as it stands, the time waited
// so far, and counted as cut off.
type waitClock struct {
	g       *gstate
	start   time.Time
	waiting bool // an attempt was made since start
}

func newWaitClock(g *gstate) *waitClock { return &waitClock{g: g, start: time.Now()} }

// attempt notes that the contender tries to get what it waits for.
func (wc *waitClock) attempt() { wc.waiting = true }

// granted records the wait that ends now with a grant, and returns now.
func (wc *waitClock) granted() time.Time {
	t1 := time.Now()
	wc.waiting = false
	wc.g.acq.record(t1.Sub(wc.start))
	wc.g.acquired++
	return t1
}

// released records a release that began at t2 and ended now with err,
// and starts the next wait.
func (wc *waitClock) released(t2 time.Time, err error) {
	wc.start = time.Now()
	wc.g.rel.record(wc.start.Sub(t2))
	if err != nil {
		wc.g.fail(err)
		return
	}
	wc.g.ops++
}

// stop records a wait cut off by the end of the slice.
func (wc *waitClock) stop() {
	if wc.waiting {
		wc.g.acq.record(time.Since(wc.start))
		wc.g.cutOff++
	}
}

// row sums up lr.
func (lr *libRun) row() Row {
	r := Row{Cell: lr.cell, Library: lr.lib, Elapsed: lr.elapsed}
	var acq, rel hist
	var busiest uint64
	for _, g := range lr.gs {
		acq.merge(&g.acq)
		rel.merge(&g.rel)
		r.Ops += g.ops
		r.GaveUp += g.gaveUp
		r.Errors += g.errs
		r.CutOff += g.cutOff
		if g.firstErr != nil && r.FirstError == "" {
			r.FirstError = g.firstErr.Error()
		}
		busiest = max(busiest, g.acquired)
	}
	secs := lr.elapsed.Seconds()
	if secs > 0 {
		r.OpsPerSec = float64(r.Ops) / secs
	}
	r.Acquire = acq.latencies()
	if lr.slowAbove > 0 && lr.cell.Workload == W1 {
		r.SlowAbove, r.SlowAcquires = lr.slowAbove, acq.atLeast(lr.slowAbove)
		r.SlowShare = share(r.SlowAcquires, acq.n)
	}
	r.Release = rel.latencies()
	if r.Ops > 0 {
		r.AllocsPerOp = float64(lr.mallocs) / float64(r.Ops)
		r.BytesPerOp = float64(lr.bytes) / float64(r.Ops)
		r.ServerCPUPerOp = lr.serverCPU / time.Duration(r.Ops)
	}
	if lr.cell.Workload == RW {
		lr.rwRow(&r)
	}
	if contended(lr.cell.Workload) {
		r.Acquisitions = lr.acquired
		r.Cross = lr.cross
		r.LostUpdates = lr.lost
		if secs > 0 {
			r.CrossPerSec = float64(lr.cross) / secs
		}
		if r.Acquisitions > 0 {
			r.BusiestShare = float64(busiest) / float64(r.Acquisitions)
		}
		if lr.transitions > 0 {
			r.HandoffShare = float64(r.Cross) / float64(lr.transitions)
		}
	}
	return r
}
