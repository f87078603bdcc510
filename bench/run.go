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

// Workloads returns the names of every workload of a full run, in order.
func Workloads() []string { return []string{W1, W2, W2Shared, RW} }

// allWorkloads are those of a full run and those it leaves out.
var allWorkloads = append(Workloads(), KeysWorkload, WaitersWorkload)

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
	// proxies in front of them (see StartNetwork): INFO is read there.
	ServerAddrs []string
	// Network describes the simulated network between the clients and the
	// servers, or is empty on loopback.
	Network string `json:"-"`
	// CountPairs is how many lock+release pairs each library makes on
	// the first server while it counts the commands (see CommandCount);
	// 0 counts nothing.
	CountPairs int
	// Duration is the measured time of each library in each cell, split
	// into Reps slices; the libraries of a cell take turns slice by
	// slice, so that drift on a noisy machine hits them alike.
	Duration time.Duration
	Reps     int
	// Workloads and Libraries list what to run (see Workloads, Libraries).
	Workloads, Libraries []string
	// Nodes lists the numbers of nodes, N; Goroutines those of
	// goroutines of W1, G.
	Nodes, Goroutines []int
	// Contenders is the number of contenders of W2 and goroutines of RW.
	Contenders int
	// TTL is the time to live of every lock.
	TTL time.Duration
	// Quarantine runs redlock with its restart quarantine on, as shipped;
	// false sets Options.DisableQuarantine. With it on, the servers must
	// have run for longer than TTL before Run, or no node votes.
	Quarantine bool
	// Progress, if not nil, receives a line for each row as it completes.
	Progress io.Writer `json:"-"`
	// Keys lists the numbers of distinct keys of KEYS. Waiters lists the
	// numbers of waiting goroutines of WAITERS, which runs on the first
	// Nodes[0] servers.
	Keys    []int
	Waiters []int
}

// DefaultConfig returns the configuration of a full run, without Addrs.
func DefaultConfig() Config {
	return Config{
		Duration:   5 * time.Second,
		Reps:       5,
		Workloads:  Workloads(),
		Libraries:  []string{LibRedlockGoRedis, LibRedlockRueidis, LibRedsync, LibBSM, LibRaw}, // the realistic runs add the rest
		Nodes:      []int{1, 3, 5},
		Goroutines: []int{1, 16, 64},
		Contenders: 16,
		TTL:        10 * time.Second,
		Quarantine: true,
		CountPairs: 1000,
		Keys:       []int{10000, 100000, 1000000},
		Waiters:    []int{1000, 10000},
	}
}

// validate checks cfg.
func (cfg *Config) validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if cfg.Duration <= 0 || cfg.Reps <= 0 || cfg.TTL <= 0 || cfg.CountPairs < 0 {
		bad("duration, reps and TTL must be positive, the pairs to count not negative")
	}
	for _, w := range cfg.Workloads {
		if !slices.Contains(allWorkloads, w) {
			bad("unknown workload %q (known: %s)", w, strings.Join(allWorkloads, ", "))
		}
	}
	for _, l := range cfg.Libraries {
		if !slices.Contains(Libraries(), l) {
			bad("unknown library %q (known: %s)", l, strings.Join(Libraries(), ", "))
		}
	}
	for _, n := range cfg.Nodes {
		if n < 1 || n > len(cfg.Addrs) {
			bad("cannot run on %d nodes with %d servers", n, len(cfg.Addrs))
		}
	}
	for _, v := range slices.Concat(cfg.Goroutines, cfg.Keys, cfg.Waiters) {
		if v < 1 {
			bad("bad number of goroutines, keys or waiters %d", v)
		}
	}
	if cfg.Contenders < 1 {
		bad("bad number of contenders %d", cfg.Contenders)
	}
	if slices.Contains(cfg.Workloads, WaitersWorkload) && len(cfg.Nodes) == 0 {
		bad("WAITERS runs on the first of the numbers of nodes: none given")
	}
	return errors.Join(errs...)
}

// A Cell is one combination of a workload and its parameters.
type Cell struct {
	Workload string
	N        int  // nodes
	G        int  // goroutines (W1, RW) or contenders (W2)
	Tuned    bool // W2 and W2Shared: retry every tunedDelay, not as shipped
	// Mutex makes an RW cell's every operation a plain Lock, to compare.
	Mutex bool
}

// String names the cell, as in "W1 N=5 G=64", "W2 N=5 G=16 tuned" or
// "RW N=5 G=16 rwlock".
func (c Cell) String() string {
	s := fmt.Sprintf("%s N=%d G=%d", c.Workload, c.N, c.G)
	switch {
	case contended(c.Workload):
		s += " " + c.retry()
	case c.Workload == RW:
		s += " " + c.rwKind()
	}
	return s
}

// retry names a W2 cell's retry setting: "default" or "tuned".
func (c Cell) retry() string {
	if c.Tuned {
		return "tuned"
	}
	return "default"
}

// cells lists the cells of cfg in the order they run: for each workload,
// those of each number of nodes.
func (cfg *Config) cells() []Cell {
	var cells []Cell
	for _, w := range cfg.Workloads {
		for _, n := range cfg.Nodes {
			switch {
			case w == W1:
				for _, g := range cfg.Goroutines {
					cells = append(cells, Cell{Workload: W1, N: n, G: g})
				}
			case w == RW:
				cells = append(cells, Cell{Workload: RW, N: n, G: cfg.Contenders}, Cell{Workload: RW, N: n, G: cfg.Contenders, Mutex: true})
			case contended(w):
				cells = append(cells, Cell{Workload: w, N: n, G: cfg.Contenders}, Cell{Workload: w, N: n, G: cfg.Contenders, Tuned: true})
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

// progress writes a line to cfg.Progress, if set.
func (cfg *Config) progress(format string, a ...any) {
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, format+"\n", a...)
	}
}

// Run measures every cell of cfg against the servers at cfg.Addrs and
// returns the results, with a description of the machine. It stops early,
// with the rows done so far and the context's error, when ctx ends.
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
	cutOff   uint64 // W2, RW: waits cut off by the end of a slice
	gaveUp   uint64 // acquisitions the library gave up on
	errs     uint64 // errors other than giving up
	firstErr error
	// RW: the acquisitions of each kind, timed, and the pairs completed.
	reads, writes   hist
	nreads, nwrites uint64
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

// shared is what the goroutines of one slice share.
type shared struct {
	key string // RW: the slice's key
	// W2: the protected counter of the lost-update detector, the
	// acquisitions counted under the lock, the contender that held the
	// lock last (or -1), and the acquisitions by another one than it.
	counter  atomic.Int64
	acquired atomic.Uint64
	last     atomic.Int32
	cross    atomic.Uint64
	rw       rwShared
}

// A libRun is one library in one cell: its clients, its goroutines' loop
// and what they recorded over every slice.
type libRun struct {
	lib   string
	cell  Cell
	close func()
	gs    []*gstate
	// loop runs goroutine g of a slice until stop.
	loop func(ctx context.Context, g int, stop *atomic.Bool, sh *shared)

	elapsed        time.Duration
	mallocs, bytes uint64
	serverCPU      time.Duration // the servers' CPU time (INFO cpu) over the slices
	stats          *serverStats
	slices         int

	// W2: acquisitions, those that had a previous one in their slice, and
	// those by another contender; lost updates. RW: violations.
	acquired, transitions, cross, lost uint64
	violations                         uint64
}

// runCell runs every library of cfg on cell c, the libraries taking turns
// slice by slice, and returns a row for each.
func runCell(ctx context.Context, cfg *Config, c Cell) ([]Row, error) {
	s := settings{tuned: c.Tuned, ttl: cfg.TTL, quarantine: cfg.Quarantine}
	stats := newServerStats(cfg.servers()[:c.N])
	defer stats.close()
	var runs []*libRun
	defer func() {
		for _, lr := range runs {
			lr.close()
		}
	}()
	for _, lib := range cfg.Libraries {
		if !supports(lib, c) {
			continue
		}
		lr, err := newLibRun(ctx, lib, c, cfg.Addrs[:c.N], s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", lib, err)
		}
		lr.stats = stats
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
	var rows []Row
	for _, lib := range cfg.Libraries {
		i := slices.IndexFunc(runs, func(lr *libRun) bool { return lr.lib == lib })
		switch {
		case i >= 0:
			row := runs[i].row()
			rows = append(rows, row)
			cfg.progress("%s", row.progress())
		case c.Workload != RW: // no peer offers RW: no n/a rows
			rows = append(rows, Row{Cell: c, Library: lib, NA: true})
		}
	}
	return rows, nil
}

// newLibRun opens lib's clients for cell c and warms them up: every
// goroutine locks and unlocks a key of its own a few times, so that
// connections are made and scripts cached before anything is measured.
func newLibRun(ctx context.Context, lib string, c Cell, addrs []string, s settings) (*libRun, error) {
	lr := &libRun{lib: lib, cell: c}
	var clients []client
	lr.close = func() {
		for _, cl := range clients {
			cl.close()
		}
	}
	nclients := 1
	if c.Workload == W2 {
		nclients = c.G // each contender has a client of its own, as a process would
	}
	for range nclients {
		cl, err := open(lib, addrs, s)
		if err != nil {
			lr.close()
			return nil, err
		}
		clients = append(clients, cl)
	}
	tag := strings.ReplaceAll(c.String()+":"+lib, " ", ":")
	workers := make([]worker, c.G)
	errs := make([]error, c.G)
	var wg sync.WaitGroup
	for g := range c.G {
		lr.gs = append(lr.gs, new(gstate))
		cl := clients[g%nclients]
		keys := []string{"lockbench:" + tag}
		if c.Workload == W1 {
			keys = nil
			for k := range keysPerWorker {
				keys = append(keys, fmt.Sprintf("lockbench:%s:g%d:k%d", tag, g, k))
			}
		}
		workers[g] = cl.worker(keys)
		warmKey := fmt.Sprintf("lockbench:warm:%s:g%d", tag, g)
		wg.Go(func() {
			if c.Workload == RW {
				errs[g] = rwWarm(ctx, cl.(*redlockClient), warmKey)
			} else {
				errs[g] = pairs(ctx, cl.worker([]string{warmKey}), 3, 1)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		lr.close()
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	lr.loop = func(ctx context.Context, g int, stop *atomic.Bool, sh *shared) {
		switch c.Workload {
		case W1:
			loopW1(workers[g], lr.gs[g], stop)
		case RW:
			loopRW(ctx, clients[0].(*redlockClient), c.Mutex, lr.gs[g], g, stop, sh)
		default:
			loopW2(ctx, workers[g], lr.gs[g], stop, sh, int32(g))
		}
	}
	return lr, nil
}

// pairs locks and unlocks w's first k keys in turn, n times in all.
func pairs(ctx context.Context, w worker, n, k int) error {
	for i := range n {
		ok, err := w.lock(ctx, i%k)
		if err == nil && !ok {
			err = errors.New("not obtained without contention")
		}
		if err == nil {
			err = w.unlock(ctx)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// stuckAfter is how long a slice waits for its goroutines to return once
// it has ended before it gives up on them.
const stuckAfter = 30 * time.Second

// slice runs lr's goroutines for d and adds what they did to lr. The
// goroutines are started, and the heap collected, before the clock and
// the counters are read (the two timers of the slice count for nothing
// against its pairs). It fails if a goroutine is still in the library
// stuckAfter after the slice ended.
func (lr *libRun) slice(ctx context.Context, d time.Duration) error {
	var (
		ready, done sync.WaitGroup
		start       = make(chan struct{})
		stop        atomic.Bool
		sh          shared
	)
	// RW: a key that no earlier slice used, so that a writer's intent left
	// by a wait cut short does not slow the next slice's readers.
	lr.slices++
	sh.key = fmt.Sprintf("lockbench:%s:%s:s%d", strings.ReplaceAll(lr.cell.String(), " ", ":"), lr.lib, lr.slices)
	sh.last.Store(-1)
	lockCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	for g := range lr.gs {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			lr.loop(lockCtx, g, &stop, &sh)
		}()
	}
	ready.Wait()
	halt := func() {
		stop.Store(true)
		cancel()
	}
	defer context.AfterFunc(ctx, halt)()
	finished := make(chan struct{})
	go func() {
		done.Wait()
		close(finished)
	}()
	st0, err := lr.stats.read(ctx, "cpu")
	if err != nil {
		halt()
		done.Wait()
		return err
	}
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	t0 := time.Now()
	close(start)
	defer time.AfterFunc(d, halt).Stop()
	select {
	case <-finished:
	case <-time.After(d + stuckAfter):
		return fmt.Errorf("%s: goroutines still in the library %v after the slice ended", lr.lib, stuckAfter)
	}
	elapsed := time.Since(t0)
	runtime.ReadMemStats(&m1)
	st1, err := lr.stats.read(ctx, "cpu")
	if err != nil {
		return err
	}
	lr.serverCPU += st1.cpu - st0.cpu
	lr.elapsed += elapsed
	lr.mallocs += m1.Mallocs - m0.Mallocs
	lr.bytes += m1.TotalAlloc - m0.TotalAlloc
	acquired := sh.acquired.Load()
	lr.acquired += acquired
	if acquired > 0 {
		lr.transitions += acquired - 1
	}
	lr.cross += sh.cross.Load()
	lr.lost += acquired - uint64(sh.counter.Load())
	lr.violations += sh.rw.violations.Load()
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
	start, waiting := time.Now(), false
	for !stop.Load() {
		waiting = true
		ok, err := w.lock(ctx, 0)
		if err != nil && ctx.Err() != nil {
			break // stopped while waiting
		}
		if !ok {
			g.fail(err)
			continue
		}
		t1 := time.Now()
		waiting = false
		g.acq.record(t1.Sub(start))
		g.acquired++

		if prev := sh.last.Swap(id); prev >= 0 && prev != id {
			sh.cross.Add(1)
		}
		v := sh.counter.Load()
		runtime.Gosched()
		sh.counter.Store(v + 1)
		sh.acquired.Add(1)

		t2 := time.Now()
		err = w.unlock(bg) // released even when the run has stopped
		start = time.Now()
		g.rel.record(start.Sub(t2))
		if err != nil {
			g.fail(err)
			continue
		}
		g.ops++
	}
	if waiting {
		g.acq.record(time.Since(start))
		g.cutOff++
	}
}

// row sums up lr.
func (lr *libRun) row() Row {
	r := Row{Cell: lr.cell, Library: lr.lib, Elapsed: lr.elapsed}
	var acq, rel, reads, writes hist
	var busiest uint64
	for _, g := range lr.gs {
		acq.merge(&g.acq)
		rel.merge(&g.rel)
		reads.merge(&g.reads)
		writes.merge(&g.writes)
		r.Ops += g.ops
		r.GaveUp += g.gaveUp
		r.Errors += g.errs
		r.CutOff += g.cutOff
		r.ReadOps += g.nreads
		r.WriteOps += g.nwrites
		if g.firstErr != nil && r.FirstError == "" {
			r.FirstError = g.firstErr.Error()
		}
		busiest = max(busiest, g.acquired)
	}
	if secs := lr.elapsed.Seconds(); secs > 0 {
		r.OpsPerSec = float64(r.Ops) / secs
	}
	r.Acquire, r.Release = acq.latencies(), rel.latencies()
	if r.Ops > 0 {
		r.AllocsPerOp = share(lr.mallocs, r.Ops)
		r.BytesPerOp = share(lr.bytes, r.Ops)
		r.ServerCPUPerOp = lr.serverCPU / time.Duration(r.Ops)
	}
	if lr.cell.Workload == RW {
		r.ReadAcquire, r.WriteAcquire, r.Violations = reads.latencies(), writes.latencies(), lr.violations
	}
	if contended(lr.cell.Workload) {
		r.Acquisitions, r.Cross, r.LostUpdates = lr.acquired, lr.cross, lr.lost
		r.BusiestShare = share(busiest, r.Acquisitions)
		r.HandoffShare = share(lr.cross, lr.transitions)
	}
	return r
}
