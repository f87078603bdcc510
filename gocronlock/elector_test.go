package gocronlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/jonboulle/clockwork"
	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/gocronlock"
	"github.com/quorumlock/redlock/internal/redistest"
)

// run starts e.Run and returns a function that cancels it and returns
// what it returned; the test's end calls it too.
func run(t *testing.T, e *gocronlock.Elector) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			err = <-done
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

// waitLeader waits until one of es leads, and returns its index.
func waitLeader(ctx context.Context, t *testing.T, es []*gocronlock.Elector) int {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	won := make(chan int, len(es))
	for i, e := range es {
		go func() {
			if _, err := e.Elected(ctx); err == nil {
				won <- i
			}
		}()
	}
	select {
	case i := <-won:
		return i
	case <-ctx.Done():
		t.Fatalf("nobody was elected: %v", ctx.Err())
		return -1
	}
}

// TestElectorOneLeaderRunsJobs runs a job on two schedulers, with a Client
// and an Elector each, that reach every tick together: the leader's
// scheduler runs the job at each tick, the other's skips it. When the
// leader's Run returns, the other instance takes over.
func TestElectorOneLeaderRunsJobs(t *testing.T) {
	ctx := ctxT(t)
	servers := redistest.StartN(t, 3, redistest.Config{})
	clock := clockwork.NewFakeClockAt(epoch)
	led := newLedger()
	const instances, interval, job = 2, time.Minute, "report"
	electors := make([]*gocronlock.Elector, instances)
	stops := make([]func() error, instances)
	for inst := range instances {
		e, err := gocronlock.NewElector(newClient(t, servers, nil), "gocron:leader", &gocronlock.ElectorOptions{TTL: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		electors[inst], stops[inst] = e, run(t, e)
		s := newScheduler(t, gocron.WithClock(clock),
			gocron.WithDistributedElector(&recordingElector{inner: e, led: led, inst: inst, job: job}))
		if _, err := s.NewJob(gocron.DurationJob(interval), gocron.NewTask(func() { led.ran(t, job, inst)() }), gocron.WithName(job)); err != nil {
			t.Fatal(err)
		}
	}

	tick := 0
	// runTicks makes n ticks while the instance leader leads in term.
	runTicks := func(n, leader int, term *gocronlock.Term) {
		t.Helper()
		for range n {
			tick++
			led.setTick(tick)
			if err := clock.BlockUntilContext(ctx, instances); err != nil {
				t.Fatalf("tick %d: the schedulers did not set their timers: %v", tick, err)
			}
			clock.Advance(interval)
			if err := led.wait(ctx, func() bool { return led.settled(tick, job, instances, true) }); err != nil {
				t.Fatalf("tick %d: the instances did not all attempt it: %v", tick, err)
			}
			runs := 0
			attempts := led.snapshot(tick, job)
			for _, a := range attempts {
				if a.ran {
					runs++
				}
			}
			if runs > 1 {
				t.Errorf("tick %d: %s ran %d times", tick, job, runs)
			}
			if term.Context().Err() != nil {
				// The leader lost its lock during the tick, which a loaded
				// machine can do to a 5s lock; what ran is not decided.
				t.Logf("tick %d: the term ended: %v", tick, context.Cause(term.Context()))
				continue
			}
			for _, a := range attempts {
				switch {
				case a.inst == leader && !a.ran:
					t.Errorf("%v: the leader's scheduler did not run it", &a)
				case a.inst != leader && !errors.Is(a.err, gocronlock.ErrNotLeader):
					t.Errorf("%v: IsLeader = %v, want ErrNotLeader", &a, a.err)
				}
			}
		}
	}

	leader := waitLeader(ctx, t, electors)
	term := electors[leader].Term()
	if term == nil {
		t.Fatal("elected, but Term is nil")
	}
	follower := 1 - leader
	if err := electors[follower].IsLeader(ctx); !errors.Is(err, gocronlock.ErrNotLeader) {
		t.Errorf("the follower's IsLeader: %v, want ErrNotLeader", err)
	}
	runTicks(3, leader, term)

	// The leader stops: its term ends, and the follower takes over.
	if err := stops[leader](); !errors.Is(err, context.Canceled) {
		t.Errorf("Run returned %v, want context.Canceled", err)
	}
	if cause := context.Cause(term.Context()); !errors.Is(cause, gocronlock.ErrResigned) || !errors.Is(cause, context.Canceled) {
		t.Errorf("the term ended with %v, want ErrResigned and context.Canceled", cause)
	}
	if err := electors[leader].IsLeader(ctx); !errors.Is(err, gocronlock.ErrNotLeader) {
		t.Errorf("IsLeader after Run returned: %v, want ErrNotLeader", err)
	}
	next, err := electors[follower].Elected(ctx)
	if err != nil {
		t.Fatalf("the follower was not elected: %v", err)
	}
	if next.Fence() <= term.Fence() {
		t.Errorf("the next term's fence %d is not above the last one's %d", next.Fence(), term.Fence())
	}
	runTicks(3, follower, next)
}

// TestElectorLoss shows a leader that loses its lock: the keys vanish
// from every node, or a majority of the nodes stops answering. The term's
// context ends with redlock.ErrLockLost, and the Elector leads again once
// it can take the lock.
func TestElectorLoss(t *testing.T) {
	ctx := ctxT(t)
	servers := redistest.StartN(t, 3, redistest.Config{})
	const key = "gocron:leader"
	e, err := gocronlock.NewElector(newClient(t, servers, nil), key, &gocronlock.ElectorOptions{TTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	run(t, e)
	term, err := e.Elected(ctx)
	if err != nil {
		t.Fatal(err)
	}

	ended := func(term *gocronlock.Term) {
		t.Helper()
		select {
		case <-term.Context().Done():
		case <-ctx.Done():
			t.Fatalf("the term did not end: %v", ctx.Err())
		}
		if cause := context.Cause(term.Context()); !errors.Is(cause, redlock.ErrLockLost) {
			t.Errorf("the term ended with %v, want ErrLockLost", cause)
		}
	}
	reelected := func(last *gocronlock.Term) *gocronlock.Term {
		t.Helper()
		next, err := e.Elected(ctx)
		if err != nil {
			t.Fatalf("not elected again: %v", err)
		}
		if next == last || next.Fence() <= last.Fence() {
			t.Errorf("new term with fence %d after a term with fence %d", next.Fence(), last.Fence())
		}
		return next
	}

	// The keys vanish: the next extension finds the lock gone.
	for _, s := range servers {
		s.MustDo(t, "DEL", key)
	}
	ended(term)
	term = reelected(term)

	// Two of three nodes stop answering: extensions fail until the lock's
	// validity ends, and no new term can begin until they answer again.
	for _, s := range servers[:2] {
		if err := s.Pause(); err != nil {
			t.Fatal(err)
		}
	}
	ended(term)
	if err := e.IsLeader(ctx); !errors.Is(err, gocronlock.ErrNotLeader) {
		t.Errorf("IsLeader without a quorum: %v, want ErrNotLeader", err)
	}
	for _, s := range servers[:2] {
		if err := s.Resume(); err != nil {
			t.Fatal(err)
		}
	}
	reelected(term)
}

// TestElectorErrors checks the errors of NewElector, Run and IsLeader.
func TestElectorErrors(t *testing.T) {
	ctx := ctxT(t)
	servers := redistest.StartN(t, 3, redistest.Config{})
	c := newClient(t, servers, nil)

	for _, tc := range []struct {
		c    *redlock.Client
		key  string
		opts *gocronlock.ElectorOptions
		name string
	}{
		{nil, "k", nil, "client"},
		{c, "", nil, "key"},
		{c, "k", &gocronlock.ElectorOptions{TTL: -time.Second}, "ElectorOptions.TTL"},
	} {
		e, err := gocronlock.NewElector(tc.c, tc.key, tc.opts)
		var oe *gocronlock.OptionError
		if e != nil || !errors.As(err, &oe) || oe.Name != tc.name || !errors.Is(err, redlock.ErrInvalid) {
			t.Errorf("NewElector(%v, %q, %+v) = %v, %v; want an *OptionError for %s wrapping redlock.ErrInvalid", tc.c, tc.key, tc.opts, e, err, tc.name)
		}
	}

	// A key or TTL the Client refuses ends Run at once.
	for _, tc := range []struct {
		key string
		ttl time.Duration
	}{{"redlock:node", 0}, {"gocron:leader", time.Millisecond}} {
		e, err := gocronlock.NewElector(c, tc.key, &gocronlock.ElectorOptions{TTL: tc.ttl})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Run(ctx); !errors.Is(err, redlock.ErrInvalid) {
			t.Errorf("Run on %q for %v: %v, want ErrInvalid", tc.key, tc.ttl, err)
		}
	}

	// Before Run, and while another instance holds the lock, the Elector
	// does not lead; a campaign that fails is visible in IsLeader.
	const key = "gocron:leader"
	holder, err := newClient(t, servers, nil).Lock(ctx, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	once := newClient(t, servers, func(o *redlock.Options) { o.Tries = 1 })
	e, err := gocronlock.NewElector(once, key, &gocronlock.ElectorOptions{TTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.IsLeader(ctx); err != gocronlock.ErrNotLeader || e.Term() != nil {
		t.Errorf("before Run: IsLeader = %v, Term = %v; want ErrNotLeader and nil", err, e.Term())
	}
	run(t, e)
	for {
		err := e.IsLeader(ctx)
		if errors.Is(err, redlock.ErrTaken) {
			if !errors.Is(err, gocronlock.ErrNotLeader) {
				t.Errorf("IsLeader after a failed campaign: %v, want ErrNotLeader too", err)
			}
			break
		}
		if err == nil {
			t.Fatal("leads while another holds the lock")
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no failed campaign seen: %v", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := e.Run(ctx); !errors.Is(err, gocronlock.ErrRunning) {
		t.Errorf("a second Run: %v, want ErrRunning", err)
	}
	// Once the lock is free, the next campaign wins.
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Elected(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.IsLeader(ctx); err != nil {
		t.Errorf("IsLeader once elected: %v", err)
	}
}
