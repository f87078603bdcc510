package gocronlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/jonboulle/clockwork"
	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/gocronlock"
	"github.com/quorumlock/redlock/internal/redistest"
)

// epoch is where the tests' fake clocks start.
var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// TestLockerOneRunPerTick runs two jobs on two schedulers, with a Client
// each, that reach every tick together, and shows that each job runs once
// per tick. The instance that gets a job's lock holds it, running, until
// the other instance has made its attempt at the tick, so the attempts
// meet while the lock is held whatever order they come in; that is the
// case the Locker must decide.
func TestLockerOneRunPerTick(t *testing.T) {
	ctx := ctxT(t)
	servers := redistest.StartN(t, 3, redistest.Config{})
	clock := clockwork.NewFakeClockAt(epoch)
	led := newLedger()
	jobs := []string{"report", "cleanup"}
	const instances, ticks, interval = 2, 5, time.Minute

	for inst := range instances {
		locker, err := gocronlock.NewLocker(newClient(t, servers, nil), &gocronlock.LockerOptions{TTL: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		s := newScheduler(t, gocron.WithClock(clock),
			gocron.WithDistributedLocker(&recordingLocker{inner: locker, led: led, inst: inst}))
		for _, job := range jobs {
			_, err := s.NewJob(gocron.DurationJob(interval), gocron.NewTask(func() {
				defer led.ran(t, job, inst)()
				led.wait(ctx, func() bool { return len(led.of(led.tick, job)) >= instances })
			}), gocron.WithName(job))
			if err != nil {
				t.Fatal(err)
			}
		}
	}

	for tick := 1; tick <= ticks; tick++ {
		led.setTick(tick)
		if err := clock.BlockUntilContext(ctx, instances*len(jobs)); err != nil {
			t.Fatalf("tick %d: the schedulers did not set their timers: %v", tick, err)
		}
		clock.Advance(interval)
		for _, job := range jobs {
			if err := led.wait(ctx, func() bool { return led.settled(tick, job, instances, false) }); err != nil {
				t.Fatalf("tick %d: %s: the instances did not all attempt it: %v", tick, job, err)
			}
		}
		waitFree(ctx, t, servers, 0, gocronlock.DefaultKeyPrefix+"report", gocronlock.DefaultKeyPrefix+"cleanup")
	}

	for _, job := range jobs {
		total := 0
		for tick := 1; tick <= ticks; tick++ {
			runs, taken := 0, 0
			for _, a := range led.snapshot(tick, job) {
				switch {
				case a.ran:
					runs++
					if a.unlockErr != nil {
						t.Errorf("%v: Unlock: %v", &a, a.unlockErr)
					}
				case errors.Is(a.err, redlock.ErrTaken):
					taken++
				case errors.Is(a.err, redlock.ErrNoQuorum):
					t.Logf("%v: a node was too slow", &a)
				default:
					t.Errorf("%v: want ErrTaken or ErrNoQuorum", &a)
				}
			}
			total += runs
			switch {
			case runs > 1:
				t.Errorf("tick %d: %s ran %d times", tick, job, runs)
			case runs == 0 && taken == instances:
				// With every node answering, one of two contenders gets a
				// quorum of three; all refused means someone else held it.
				t.Errorf("tick %d: %s did not run, and every attempt found it taken", tick, job)
			case runs == 0:
				t.Logf("tick %d: %s did not run: no quorum for either instance", tick, job)
			}
		}
		if total == 0 {
			t.Errorf("%s never ran", job)
		}
		t.Logf("%s: %d runs in %d ticks", job, total, ticks)
	}
}

// TestLockerHoldAtLeastAcrossSkew runs two schedulers whose clocks differ:
// the second reaches each tick after the first has run the job and
// unlocked it, as an instance whose clock lags would. A job with
// HoldAtLeast still runs once per tick; a job without it runs again on the
// lagging instance, which is the failure HoldAtLeast is for.
func TestLockerHoldAtLeastAcrossSkew(t *testing.T) {
	ctx := ctxT(t)
	servers := redistest.StartN(t, 3, redistest.Config{})
	led := newLedger()
	const (
		instances, ticks, interval = 2, 3, time.Minute
		hold                       = 2 * time.Second
		held, unheld               = "report", "unheld"
	)
	clocks := []*clockwork.FakeClock{clockwork.NewFakeClockAt(epoch), clockwork.NewFakeClockAt(epoch)}
	for inst := range instances {
		c := newClient(t, servers, nil)
		holding, err := gocronlock.NewLocker(c, &gocronlock.LockerOptions{TTL: 30 * time.Second, HoldAtLeast: hold})
		if err != nil {
			t.Fatal(err)
		}
		plain, err := gocronlock.NewLocker(c, &gocronlock.LockerOptions{TTL: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		s := newScheduler(t, gocron.WithClock(clocks[inst]),
			gocron.WithDistributedLocker(&recordingLocker{inner: holding, led: led, inst: inst}))
		for _, job := range []string{held, unheld} {
			opts := []gocron.JobOption{gocron.WithName(job)}
			if job == unheld {
				opts = append(opts, gocron.WithDistributedJobLocker(&recordingLocker{inner: plain, led: led, inst: inst}))
			}
			if _, err := s.NewJob(gocron.DurationJob(interval), gocron.NewTask(func() { led.ran(t, job, inst)() }), opts...); err != nil {
				t.Fatal(err)
			}
		}
	}

	for tick := 1; tick <= ticks; tick++ {
		led.setTick(tick)
		// The instances reach the tick one after the other.
		for inst, clock := range clocks {
			if err := clock.BlockUntilContext(ctx, 2); err != nil {
				t.Fatalf("tick %d: instance %d did not set its timers: %v", tick, inst, err)
			}
			clock.Advance(interval)
			for _, job := range []string{held, unheld} {
				if err := led.wait(ctx, func() bool { return led.settled(tick, job, inst+1, false) }); err != nil {
					t.Fatalf("tick %d: %s: instance %d did not attempt it: %v", tick, job, inst, err)
				}
			}
		}
		// A grant that landed after the extension may hold one node for
		// the TTL; a quorum of free nodes is what the next tick needs.
		waitFree(ctx, t, servers, 1, gocronlock.DefaultKeyPrefix+held, gocronlock.DefaultKeyPrefix+unheld)
	}

	// What HoldAtLeast guarantees: a lock is taken again only once
	// HoldAtLeast has passed since the last taking began.
	runs := led.runs(held)
	for i := 1; i < len(runs); i++ {
		if prev, next := runs[i-1], runs[i]; next.end.Sub(prev.start) < hold {
			t.Errorf("%v got the lock %v after %v began to take it; HoldAtLeast is %v",
				next, next.end.Sub(prev.start), prev, hold)
		}
		if a := runs[i-1]; a.unlockErr != nil {
			t.Errorf("%v: Unlock: %v", a, a.unlockErr)
		}
	}
	// What follows from it when the lagging instance comes within
	// HoldAtLeast, as it does unless the machine stalls for seconds: one
	// run per tick.
	shown, again := 0, 0
	for tick := 1; tick <= ticks; tick++ {
		as := led.of(tick, held)
		first, second := as[0], as[1]
		switch {
		case first.err != nil:
			t.Logf("tick %d: the first instance did not get %s: %v", tick, held, first.err)
		case second.end.Sub(first.start) >= hold:
			t.Logf("tick %d: the second instance came %v after the first began, past HoldAtLeast", tick, second.start.Sub(first.start))
		case errors.Is(second.err, redlock.ErrTaken):
			shown++
		default:
			t.Errorf("%v: want ErrTaken, HoldAtLeast after %v", second, first)
		}
		// Without HoldAtLeast, the lagging instance finds the lock free.
		as = led.of(tick, unheld)
		if as[0].err == nil && as[1].err == nil {
			again++
		} else if errors.Is(as[1].err, redlock.ErrTaken) {
			t.Errorf("%v: the first instance had released it", as[1])
		}
	}
	if shown == 0 {
		t.Errorf("no tick showed HoldAtLeast at work")
	}
	if again == 0 {
		t.Errorf("without HoldAtLeast, no tick ran twice: the canary shows nothing")
	}
	t.Logf("%s ran once in %d of %d ticks; %s ran twice in %d", held, shown, ticks, unheld, again)
}

// TestHoldAtLeastExtends unlocks a lock at once and shows that it stays
// held until HoldAtLeast has passed: Unlock shortens it to what remains
// rather than releasing it.
func TestHoldAtLeastExtends(t *testing.T) {
	ctx := ctxT(t)
	servers := redistest.StartN(t, 3, redistest.Config{})
	const ttl, hold = 30 * time.Second, 3 * time.Second
	locker, err := gocronlock.NewLocker(newClient(t, servers, nil), &gocronlock.LockerOptions{TTL: ttl, HoldAtLeast: hold})
	if err != nil {
		t.Fatal(err)
	}
	other := newClient(t, servers, nil)
	key := gocronlock.DefaultKeyPrefix + "job"

	begin := time.Now()
	l, err := locker.Lock(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// The keys were shortened to what remained of HoldAtLeast (and a
	// millisecond), not left to the TTL nor deleted early, on a quorum of
	// the nodes. The acquiring round returned once a quorum had granted
	// it: on another node the grant may land after the extension, or not
	// yet have landed.
	shortened := 0
	for _, s := range servers {
		switch pttl := s.MustDo(t, "PTTL", key).(int64); {
		case pttl == -1:
			t.Errorf("%s: the key has no expiry", s.Addr())
		case pttl > (hold + time.Millisecond).Milliseconds():
			t.Logf("%s: PTTL %dms: the grant landed after the extension", s.Addr(), pttl)
		case pttl >= 0:
			shortened++
		}
	}
	if shortened < 2 && time.Since(begin) < hold {
		t.Errorf("%d of 3 nodes hold the key for at most HoldAtLeast %v; want a quorum", shortened, hold)
	}
	if err := l.Unlock(ctx); !errors.Is(err, redlock.ErrReleased) {
		t.Errorf("second Unlock: %v, want ErrReleased", err)
	}

	// Another owner gets the lock only once HoldAtLeast has passed.
	refused := 0
	for {
		start := time.Now()
		l2, err := other.TryLock(ctx, key, ttl)
		if err == nil {
			if got := time.Since(begin); got < hold {
				t.Errorf("taken again %v after the first taking began; HoldAtLeast is %v", got, hold)
			}
			l2.Release(ctx)
			break
		}
		if !errors.Is(err, redlock.ErrTaken) {
			t.Fatalf("TryLock: %v, want ErrTaken", err)
		}
		if start.Sub(begin) >= hold {
			t.Logf("TryLock begun %v after the taking found the lock still held", start.Sub(begin))
		}
		refused++
		select {
		case <-ctx.Done():
			t.Fatalf("the lock was never released: %v", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Logf("TryLock refused %d times before HoldAtLeast passed", refused)
}

// TestHoldAtLeastWaits uses a Client whose NodeTimeout makes Extend
// refuse anything as short as HoldAtLeast: Unlock then waits HoldAtLeast
// out and releases the lock, even when its context is cancelled.
func TestHoldAtLeastWaits(t *testing.T) {
	ctx := ctxT(t)
	servers := redistest.StartN(t, 3, redistest.Config{})
	// Extend needs a TTL above 5s here, and no more than 1s ever remains.
	slow := newClient(t, servers, func(o *redlock.Options) { o.NodeTimeout = 5 * time.Second })
	const ttl, hold = 30 * time.Second, time.Second
	locker, err := gocronlock.NewLocker(slow, &gocronlock.LockerOptions{TTL: ttl, HoldAtLeast: hold})
	if err != nil {
		t.Fatal(err)
	}
	other := newClient(t, servers, nil)
	key := gocronlock.DefaultKeyPrefix + "job"

	for _, cancelled := range []bool{false, true} {
		begin := time.Now()
		l, err := locker.Lock(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		uctx := ctx
		if cancelled {
			var cancel context.CancelFunc
			uctx, cancel = context.WithCancel(ctx)
			cancel()
		}
		if err := l.Unlock(uctx); err != nil {
			t.Fatalf("Unlock (context cancelled: %v): %v", cancelled, err)
		}
		if got := time.Since(begin); got < hold {
			t.Errorf("Unlock (context cancelled: %v) returned %v after the taking began; HoldAtLeast is %v", cancelled, got, hold)
		}
		// Released, not left to expire: a quorum has confirmed it.
		l2, err := other.TryLock(ctx, key, ttl)
		if err != nil {
			t.Fatalf("TryLock after Unlock (context cancelled: %v): %v", cancelled, err)
		}
		if err := l2.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestUnlockReleases shows that Unlock releases the lock at once when
// HoldAtLeast is zero or has passed.
func TestUnlockReleases(t *testing.T) {
	ctx := ctxT(t)
	servers := redistest.StartN(t, 3, redistest.Config{})
	other := newClient(t, servers, nil)
	for _, hold := range []time.Duration{0, 300 * time.Millisecond} {
		locker, err := gocronlock.NewLocker(newClient(t, servers, nil), &gocronlock.LockerOptions{HoldAtLeast: hold})
		if err != nil {
			t.Fatal(err)
		}
		l, err := locker.Lock(ctx, "job")
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(hold) // a job that runs for HoldAtLeast
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		l2, err := other.TryLock(ctx, gocronlock.DefaultKeyPrefix+"job", time.Minute)
		if err != nil {
			t.Fatalf("HoldAtLeast %v: TryLock after Unlock: %v", hold, err)
		}
		if err := l2.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLockerLock shows what Lock returns: the key from the Key option, and
// the Client's errors when the lock is held or the TTL is refused.
func TestLockerLock(t *testing.T) {
	ctx := ctxT(t)
	servers := redistest.StartN(t, 3, redistest.Config{})
	c := newClient(t, servers, nil)
	locker, err := gocronlock.NewLocker(c, &gocronlock.LockerOptions{
		Key: func(job string) string { return "billing:jobs:" + job },
	})
	if err != nil {
		t.Fatal(err)
	}
	l, err := locker.Lock(ctx, "invoices")
	if err != nil {
		t.Fatal(err)
	}
	// Lock returns once a quorum has granted it.
	holding := 0
	for _, s := range servers {
		if s.MustDo(t, "EXISTS", "billing:jobs:invoices") == int64(1) {
			holding++
		}
	}
	if holding < 2 {
		t.Errorf("%d of 3 nodes hold billing:jobs:invoices; want a quorum", holding)
	}

	// Another instance skips the run.
	other, err := gocronlock.NewLocker(newClient(t, servers, nil), &gocronlock.LockerOptions{
		Key: func(job string) string { return "billing:jobs:" + job },
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = other.Lock(ctx, "invoices")
	var oe *redlock.OpError
	if !errors.Is(err, redlock.ErrTaken) || !errors.As(err, &oe) || oe.Key != "billing:jobs:invoices" {
		t.Errorf("Lock of a held job: %v, want an *OpError for billing:jobs:invoices wrapping ErrTaken", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	// A TTL the Client refuses fails every Lock, before any round trip.
	short, err := gocronlock.NewLocker(c, &gocronlock.LockerOptions{TTL: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := short.Lock(ctx, "invoices"); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("Lock with TTL 1ms: %v, want ErrInvalid", err)
	}
	// So does a key the Client keeps for itself.
	reserved, err := gocronlock.NewLocker(c, &gocronlock.LockerOptions{Key: func(string) string { return "redlock:node" }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reserved.Lock(ctx, "invoices"); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("Lock of a reserved key: %v, want ErrInvalid", err)
	}
	// A cancelled context ends the attempt.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := locker.Lock(cctx, "invoices"); !errors.Is(err, context.Canceled) {
		t.Errorf("Lock with a cancelled context: %v, want context.Canceled", err)
	}
}

// TestNewLockerRejects checks that bad arguments give an *OptionError
// that wraps redlock.ErrInvalid.
func TestNewLockerRejects(t *testing.T) {
	servers := redistest.StartN(t, 1, redistest.Config{})
	c := newClient(t, servers, nil)
	for _, tc := range []struct {
		c    *redlock.Client
		opts *gocronlock.LockerOptions
		name string
	}{
		{nil, nil, "client"},
		{c, &gocronlock.LockerOptions{TTL: -time.Second}, "LockerOptions.TTL"},
		{c, &gocronlock.LockerOptions{HoldAtLeast: -time.Second}, "LockerOptions.HoldAtLeast"},
		{c, &gocronlock.LockerOptions{TTL: time.Minute, HoldAtLeast: time.Minute + time.Millisecond}, "LockerOptions.HoldAtLeast"},
		{c, &gocronlock.LockerOptions{HoldAtLeast: gocronlock.DefaultLockerTTL + 1}, "LockerOptions.HoldAtLeast"},
	} {
		l, err := gocronlock.NewLocker(tc.c, tc.opts)
		var oe *gocronlock.OptionError
		if l != nil || !errors.As(err, &oe) || oe.Name != tc.name || !errors.Is(err, redlock.ErrInvalid) {
			t.Errorf("NewLocker(%v, %+v) = %v, %v; want an *OptionError for %s wrapping redlock.ErrInvalid", tc.c, tc.opts, l, err, tc.name)
		}
	}
	for _, opts := range []*gocronlock.LockerOptions{nil, {}, {TTL: time.Second, HoldAtLeast: time.Second}} {
		if _, err := gocronlock.NewLocker(c, opts); err != nil {
			t.Errorf("NewLocker(c, %+v): %v", opts, err)
		}
	}
}
