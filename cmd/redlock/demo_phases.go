package main

import (
	"context"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/admin"
	"github.com/quorumlock/redlock/observe"
)

// contend runs phases 1 and 2: the workers contend for the lock while all
// nodes are up, and then while a minority is down.
func (d *demo) contend(ctx context.Context) {
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	d.start = time.Now()
	d.enter(1, fmt.Sprintf("phase 1: all %d nodes up", len(d.names)))
	for i, c := range d.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.worker(wctx, i, c)
		}()
	}
	d.say("")
	d.say("phase 1: all %d nodes up, for %v", len(d.names), d.df.phase)
	d.progress(ctx, d.df.phase)

	n := len(d.names)
	down := (n - 1) / 2 // the most that can fail with a quorum left
	if down > 0 {
		d.say("")
		d.say("phase 2: %s; %d of %d nodes up, quorum %d, for %v", d.stopping(n-down, n), n-down, n, admin.New(d.monitor).Quorum(), d.df.phase)
		d.stopNodes(n-down, n)
		d.enter(2, fmt.Sprintf("phase 2: %d of %d nodes up", n-down, n))
		d.progress(ctx, d.df.phase)
	}
	stop()
	wg.Wait()
}

// stopping says what stopping the nodes from..to-1 means here.
func (d *demo) stopping(from, to int) string {
	if d.embedded != nil {
		return "stopping " + d.nodeList(from, to)
	}
	if to-from == 1 {
		return "cutting off " + d.nodeList(from, to) + " (the demo stops talking to it; the server keeps running)"
	}
	return "cutting off " + d.nodeList(from, to) + " (the demo stops talking to them; the servers keep running)"
}

// nodeList names nodes from..to-1.
func (d *demo) nodeList(from, to int) string {
	var s []string
	for i := from; i < to; i++ {
		s = append(s, fmt.Sprintf("node %d", i+1))
	}
	return strings.Join(s, " and ")
}

// enter starts a phase of the demo.
func (d *demo) enter(phase int, label string) {
	d.phase.Store(int32(phase))
	d.phases = append(d.phases, demoPhase{start: time.Now(), label: label})
}

// stopNodes stops nodes from..to-1, or cuts the demo off from them.
func (d *demo) stopNodes(from, to int) {
	for i := from; i < to; i++ {
		d.stops = append(d.stops, nodeStop{node: i, at: time.Now()})
		if d.embedded != nil {
			d.embedded.stop(i)
		} else {
			d.cut[i].Store(true)
		}
	}
}

// worker takes the lock over and over until ctx is done.
func (d *demo) worker(ctx context.Context, i int, c *redlock.Client) {
	for ctx.Err() == nil {
		called := time.Now()
		l, err := c.Lock(ctx, d.key, d.df.ttl)
		if err != nil {
			d.hist.addMiss(miss{worker: i + 1, called: called, returned: time.Now(), err: err})
			sleepCtx(ctx, 50*time.Millisecond) // ctx is done, or a round failed
			continue
		}
		acquired := time.Now()
		phase := int(d.phase.Load())
		// The protected work: an increment that loses updates unless the
		// lock keeps the workers apart.
		v := d.counter.Load()
		time.Sleep(time.Duration(5+mathrand.IntN(20)) * time.Millisecond)
		d.counter.Store(v + 1)
		d.store.write(l.Fence())
		released, until := time.Now(), l.Until()
		l.Release(context.Background())
		d.hist.add(hold{worker: i + 1, fence: l.Fence(), called: called, acquired: acquired, released: released, until: until, phase: phase})
		d.perWorker[i].Add(1)
		// A pause outside the lock, as real work would have.
		sleepCtx(ctx, time.Duration(mathrand.IntN(10))*time.Millisecond)
	}
}

// progress prints a line every second for d.
func (d *demo) progress(ctx context.Context, dur time.Duration) {
	end := time.Now().Add(dur)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	prev := len(d.hist.sorted())
	for time.Now().Before(end) && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
		case <-time.After(time.Until(end)):
		}
		holds := d.hist.sorted()
		var per []string
		for i := range d.perWorker {
			per = append(per, fmt.Sprintf("%3d", d.perWorker[i].Load()))
		}
		fence := "-"
		if len(holds) > 0 {
			fence = fmt.Sprint(holds[len(holds)-1].fence)
		}
		d.say("  %5.1fs  holds %4d (+%d)  per worker [%s]  last fence %s  %s",
			time.Since(d.start).Seconds(), len(holds), len(holds)-prev, strings.Join(per, " "), fence, d.nodesLine(ctx))
		prev = len(holds)
	}
}

// nodesLine probes the nodes and says which can vote.
func (d *demo) nodesLine(ctx context.Context) string {
	states := admin.New(d.monitor).Probe(ctx)
	var b strings.Builder
	for _, s := range states {
		switch s.Health {
		case observe.NodeHealthy:
			b.WriteString("+")
		case observe.NodeQuarantined:
			b.WriteString("q")
		default:
			b.WriteString("x")
		}
	}
	return fmt.Sprintf("nodes [%s] %d/%d can vote", b.String(), countHealthy(states), len(states))
}

// withoutQuorum runs phase 3: one more node goes, and every attempt must
// fail with ErrNoQuorum.
func (d *demo) withoutQuorum(ctx context.Context) {
	n := len(d.names)
	down := (n-1)/2 + 1
	d.say("")
	d.say("phase 3: %s; %d of %d nodes up, fewer than the quorum %d, for %v",
		d.stopping(n-down, n-down+1), n-down, n, admin.New(d.monitor).Quorum(), d.df.phase)
	wait := min(time.Second, d.df.phase/3)
	d.say("  each worker keeps trying, waiting up to %v per attempt", wait.Round(time.Millisecond))
	d.stopNodes(n-down, n-down+1)
	d.enter(3, fmt.Sprintf("phase 3: %d of %d nodes up, no quorum", n-down, n))
	end := time.Now().Add(d.df.phase)
	var wg sync.WaitGroup
	for i, c := range d.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.attempt(ctx, i, c, end, wait)
		}()
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	for {
		select {
		case <-done:
			d.say("  phase 3 over: %d attempts, %d granted, %d failed with ErrNoQuorum",
				d.attempts.Load(), d.granted.Load(), d.noQuorum.Load())
			d.errMu.Lock()
			defer d.errMu.Unlock()
			if d.sampleErr != nil {
				var oe *redlock.OpError
				errors.As(d.sampleErr, &oe)
				d.say("  a failed attempt: errors.Is(err, redlock.ErrNoQuorum) = %v; its last round:", errors.Is(d.sampleErr, redlock.ErrNoQuorum))
				if oe != nil {
					for i, r := range oe.Nodes {
						d.say("    node %d  %s", i+1, demoResultText(r))
					}
				}
			}
			return
		case <-tick.C:
			d.phase3Line(ctx)
		}
	}
}

func (d *demo) phase3Line(ctx context.Context) {
	d.say("  %5.1fs  attempts %d  granted %d  failed with ErrNoQuorum %d  %s",
		time.Since(d.start).Seconds(), d.attempts.Load(), d.granted.Load(), d.noQuorum.Load(), d.nodesLine(ctx))
}

// demoResultText describes what a node did in a round that failed.
func demoResultText(r observe.NodeResult) string {
	switch r.Outcome {
	case observe.OutcomeOK:
		return "granted (and was released again: too few grants for a quorum)"
	}
	return resultText(r)
}

// attempt tries to take the lock, waiting up to wait each time, until end
// has passed; none may succeed. Each worker completes one attempt at least.
func (d *demo) attempt(ctx context.Context, i int, c *redlock.Client, end time.Time, wait time.Duration) {
	for first := true; first || time.Now().Before(end); first = false {
		actx, cancel := context.WithTimeout(ctx, wait)
		called := time.Now()
		l, err := c.Lock(actx, d.key, d.df.ttl)
		cancel()
		if err != nil {
			d.hist.addMiss(miss{worker: i + 1, called: called, returned: time.Now(), err: err})
		}
		switch {
		case err == nil:
			d.attempts.Add(1)
			d.granted.Add(1)
			acquired := time.Now()
			d.store.write(l.Fence())
			released, until := time.Now(), l.Until()
			l.Release(context.Background())
			d.hist.add(hold{worker: i + 1, fence: l.Fence(), called: called, acquired: acquired, released: released, until: until, phase: 3})
		case ctx.Err() != nil:
			return // the demo was interrupted
		case errors.Is(err, redlock.ErrNoQuorum):
			d.attempts.Add(1)
			d.noQuorum.Add(1)
			d.errMu.Lock()
			if d.sampleErr == nil {
				d.sampleErr = err
			}
			d.errMu.Unlock()
		default:
			d.attempts.Add(1)
			d.errMu.Lock()
			if d.otherErr == nil {
				d.otherErr = err
			}
			d.errMu.Unlock()
		}
	}
}
