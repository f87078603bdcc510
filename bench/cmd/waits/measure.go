package main

import (
	"context"
	"runtime"
	"runtime/metrics"
	"strconv"
	"time"
)

// counters are what is read before and after a slice; the difference is
// what the slice cost. Each group of fields has its ok flag, false when
// the counts could not be read.
type counters struct {
	allocs, bytes, goroutines uint64 // runtime/metrics: heap objects, heap bytes, goroutines created
	metricsOK                 bool

	switches   int64 // voluntary context switches of this process (getrusage)
	switchesOK bool

	clientRun, clientWait int64 // this process's threads: ns on a CPU, ns runnable waiting for one
	clientOK              bool

	serverRun      int64 // the servers' threads: ns on a CPU
	serverSwitches int64 // the servers' threads: voluntary context switches
	serverOK       bool

	idle   int64 // the machine's entries into a CPU idle state other than POLL
	idleOK bool

	busy   int64 // the machine's busy CPU time, in ticks
	busyOK bool

	inNode   time.Duration // inside the library's nodes' calls
	inNodeOK bool
}

// runtime/metrics read for the allocations and the goroutines.
var metricNames = []string{"/gc/heap/allocs:objects", "/gc/heap/allocs:bytes", "/sched/goroutines-created:goroutines"}

// A sampler reads counters without allocating between its runtime
// readings, so that a slice's allocations are the library's.
type sampler struct {
	k       kernel
	servers []string // the pids of the redis-servers, as strings; empty when unknown
	samples []metrics.Sample
}

func newSampler(k kernel, serverPIDs []int) *sampler {
	s := &sampler{k: k, samples: make([]metrics.Sample, len(metricNames))}
	for i, n := range metricNames {
		s.samples[i].Name = n
	}
	for _, p := range serverPIDs {
		s.servers = append(s.servers, strconv.Itoa(p))
	}
	return s
}

// readKernel fills in what the kernel counts. It allocates.
func (s *sampler) readKernel(c *counters) {
	c.clientRun, c.clientWait, c.clientOK = s.k.schedstat("self")
	c.serverOK = len(s.servers) > 0
	for _, pid := range s.servers {
		run, _, ok1 := s.k.schedstat(pid)
		sw, ok2 := s.k.voluntarySwitches(pid)
		c.serverRun += run
		c.serverSwitches += sw
		c.serverOK = c.serverOK && ok1 && ok2
	}
	c.idle, c.idleOK = s.k.idleEntries()
	c.busy, c.busyOK = s.k.busyTicks()
}

// readProcess fills in what this process counts itself, without
// allocating.
func (s *sampler) readProcess(c *counters, p pairer) {
	c.switches, c.switchesOK = selfVoluntarySwitches()
	c.inNode, c.inNodeOK = p.inNode()
	metrics.Read(s.samples)
	c.metricsOK = true
	for i, v := range []*uint64{&c.allocs, &c.bytes, &c.goroutines} {
		if s.samples[i].Value.Kind() != metrics.KindUint64 {
			c.metricsOK = false
			continue
		}
		*v = s.samples[i].Value.Uint64()
	}
}

// A tally adds up what one library did over its slices.
type tally struct {
	lib       string
	acq, rel  hist // every pair of every slice
	sliceAcq  []time.Duration
	sliceRel  []time.Duration // the p50 of each slice
	pairs     int64
	wall      time.Duration
	cost      counters // differences, summed over slices
	sliceAcqH hist     // the slice being run
	sliceRelH hist
}

// add adds the difference between after and before to t.cost. An ok flag
// stays true only while every slice could read its group.
func (t *tally) add(before, after counters, first bool) {
	d := &t.cost
	and := func(ok *bool, b, a bool) {
		*ok = (first || *ok) && b && a
	}
	d.allocs += after.allocs - before.allocs
	d.bytes += after.bytes - before.bytes
	d.goroutines += after.goroutines - before.goroutines
	and(&d.metricsOK, before.metricsOK, after.metricsOK)
	d.switches += after.switches - before.switches
	and(&d.switchesOK, before.switchesOK, after.switchesOK)
	d.clientRun += after.clientRun - before.clientRun
	d.clientWait += after.clientWait - before.clientWait
	and(&d.clientOK, before.clientOK, after.clientOK)
	d.serverRun += after.serverRun - before.serverRun
	d.serverSwitches += after.serverSwitches - before.serverSwitches
	and(&d.serverOK, before.serverOK, after.serverOK)
	d.idle += after.idle - before.idle
	and(&d.idleOK, before.idleOK, after.idleOK)
	d.busy += after.busy - before.busy
	and(&d.busyOK, before.busyOK, after.busyOK)
	d.inNode += after.inNode - before.inNode
	and(&d.inNodeOK, before.inNodeOK, after.inNodeOK)
}

// loop runs lock+release pairs of p until d has passed, cycling over its
// keys, and records each call's latency in acq and rel. It returns the
// pairs completed and the time they took; it stops at the first error.
func loop(ctx context.Context, p pairer, d time.Duration, acq, rel *hist) (int64, time.Duration, error) {
	start := time.Now()
	end := start.Add(d)
	t0 := start
	var n int64
	for t0.Before(end) {
		if err := p.lock(ctx, int(n%keysPerLib)); err != nil {
			return n, time.Since(start), err
		}
		t1 := time.Now()
		if err := p.unlock(ctx); err != nil {
			return n, time.Since(start), err
		}
		t2 := time.Now()
		acq.add(t1.Sub(t0))
		rel.add(t2.Sub(t1))
		n++
		t0 = t2
	}
	return n, t0.Sub(start), nil
}

// pairsFor runs n pairs of p, for the trace; keys as loop does.
func pairsFor(ctx context.Context, p pairer, n int) error {
	for i := range n {
		if err := p.lock(ctx, i%keysPerLib); err != nil {
			return err
		}
		if err := p.unlock(ctx); err != nil {
			return err
		}
	}
	return nil
}

// slice runs one measured slice of p for d and adds it to t.
func (s *sampler) slice(ctx context.Context, p pairer, d time.Duration, t *tally) error {
	first := len(t.sliceAcq) == 0
	t.sliceAcqH.reset()
	t.sliceRelH.reset()
	runtime.GC() // every slice starts from a collected heap
	var before, after counters
	s.readKernel(&before)
	s.readProcess(&before, p)
	n, took, err := loop(ctx, p, d, &t.sliceAcqH, &t.sliceRelH)
	s.readProcess(&after, p)
	s.readKernel(&after)
	if err != nil {
		return err
	}
	t.add(before, after, first)
	t.pairs += n
	t.wall += took
	t.acq.merge(&t.sliceAcqH)
	t.rel.merge(&t.sliceRelH)
	t.sliceAcq = append(t.sliceAcq, t.sliceAcqH.quantile(0.5))
	t.sliceRel = append(t.sliceRel, t.sliceRelH.quantile(0.5))
	return nil
}
