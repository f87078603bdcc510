package gocronlock_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/goredisnode"
	"github.com/quorumlock/redlock/internal/redistest"
)

// The tests run gocron schedulers with the Locker and the Elector over real
// Clients, on goredisnode, against real redis-server processes. Two
// schedulers with a Client each stand for two instances of a program. The
// schedulers tick on fake clocks that the tests advance, so that a test
// decides when each instance reaches a tick; the locks, their TTLs and
// HoldAtLeast run on real time. What the tests assert is what the locks
// guarantee, checked on every run and attempt recorded; a tick whose
// outcome depends on luck (a node too slow to answer in time) is logged
// and its count not asserted.

// exampleURLs are the URLs of the servers that TestMain starts for the
// examples.
var exampleURLs []string

func TestMain(m *testing.M) {
	servers, closeAll := redistest.ForMain(3, redistest.Config{})
	exampleURLs = redistest.URLs(servers)
	redistest.Main(m, closeAll)
}

// newClient returns a Client over servers, closed when the test ends. The
// servers are fresh, so quarantine is off; the node timeout is generous,
// for a loaded machine. change, if not nil, changes the options.
func newClient(t *testing.T, servers []*redistest.Server, change func(*redlock.Options)) *redlock.Client {
	t.Helper()
	var nodes []redlock.Node
	for _, s := range servers {
		n, err := goredisnode.Dial(s.URL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		nodes = append(nodes, n)
	}
	o := redlock.Options{DisableQuarantine: true, NodeTimeout: time.Second, ReleaseTimeout: 5 * time.Second}
	if change != nil {
		change(&o)
	}
	c, err := redlock.New(nodes, &o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ctxT returns a context that ends when the test does, or after a minute:
// the bound of every wait in the tests.
func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// waitFree waits until at most most of servers hold each of keys: with
// 0, until the last holder's release, which a quorum confirms, has
// reached every node.
func waitFree(ctx context.Context, t *testing.T, servers []*redistest.Server, most int, keys ...string) {
	t.Helper()
	for {
		free := true
		for _, k := range keys {
			held := 0
			for _, s := range servers {
				if s.MustDo(t, "EXISTS", k) != int64(0) {
					held++
				}
			}
			free = free && held <= most
		}
		if free {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("keys %q still held: %v", keys, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// An attempt is one instance's attempt to run a job at a tick: its call of
// Locker.Lock (or Elector.IsLeader), and the run that followed if it
// succeeded.
type attempt struct {
	tick, inst int
	job        string
	start, end time.Time // around Lock or IsLeader
	err        error     // what Lock or IsLeader returned
	ran        bool      // the job's function ran
	runStart   time.Time
	runEnd     time.Time
	unlocked   bool // Unlock has returned
	unlockErr  error
}

func (a *attempt) String() string {
	s := fmt.Sprintf("tick %d %s on instance %d", a.tick, a.job, a.inst)
	if a.err != nil {
		s += fmt.Sprintf(" (skipped: %v)", a.err)
	}
	return s
}

// A ledger records the attempts of every instance, tick by tick. The test
// sets the tick before it advances the clocks, and waits for the tick's
// attempts before it sets the next one.
type ledger struct {
	mu       sync.Mutex
	changed  chan struct{} // closed and replaced on every change
	tick     int
	attempts []*attempt
}

func newLedger() *ledger { return &ledger{changed: make(chan struct{})} }

func (l *ledger) update(f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f()
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *ledger) setTick(tick int) { l.update(func() { l.tick = tick }) }

// add records an attempt at the current tick.
func (l *ledger) add(a *attempt) {
	l.update(func() {
		a.tick = l.tick
		l.attempts = append(l.attempts, a)
	})
}

// ran records the start of the run that follows inst's successful attempt
// to run job at the current tick, and returns a function that records
// its end.
func (l *ledger) ran(t *testing.T, job string, inst int) (end func()) {
	var a *attempt
	var tick int
	l.update(func() {
		tick = l.tick
		for _, b := range l.attempts {
			if b.tick == l.tick && b.job == job && b.inst == inst && b.err == nil && !b.ran {
				a = b
			}
		}
		if a != nil {
			a.ran, a.runStart = true, time.Now()
		}
	})
	if a == nil {
		t.Errorf("tick %d: %s ran on instance %d without a successful attempt", tick, job, inst)
		return func() {}
	}
	return func() { l.update(func() { a.runEnd = time.Now() }) }
}

// wait waits until cond, called with the ledger locked, holds.
func (l *ledger) wait(ctx context.Context, cond func() bool) error {
	for {
		l.mu.Lock()
		ok, changed := cond(), l.changed
		l.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// snapshot returns copies of the attempts at tick to run job, in the
// order they began, read with the ledger locked: for a test that reads
// them while instances may still record.
func (l *ledger) snapshot(tick int, job string) []attempt {
	l.mu.Lock()
	defer l.mu.Unlock()
	var as []attempt
	for _, a := range l.of(tick, job) {
		as = append(as, *a)
	}
	return as
}

// of returns the attempts at tick to run job, in the order they began.
// The ledger must be locked, or no longer in use.
func (l *ledger) of(tick int, job string) []*attempt {
	var as []*attempt
	for _, a := range l.attempts {
		if a.tick == tick && a.job == job {
			as = append(as, a)
		}
	}
	sort.Slice(as, func(i, j int) bool { return as[i].start.Before(as[j].start) })
	return as
}

// settled reports whether every instance of n has attempted job at tick,
// and every successful attempt's run has ended and been unlocked. With
// elected set, attempts are IsLeader calls, which have nothing to unlock.
func (l *ledger) settled(tick int, job string, n int, elected bool) bool {
	as := l.of(tick, job)
	if len(as) < n {
		return false
	}
	for _, a := range as {
		if a.err == nil && (!a.ran || a.runEnd.IsZero() || !elected && !a.unlocked) {
			return false
		}
	}
	return true
}

// runs returns the successful attempts to run job, in all ticks, in the
// order they began. The ledger must no longer be in use.
func (l *ledger) runs(job string) []*attempt {
	var as []*attempt
	for _, a := range l.attempts {
		if a.job == job && a.err == nil {
			as = append(as, a)
		}
	}
	sort.Slice(as, func(i, j int) bool { return as[i].start.Before(as[j].start) })
	return as
}

// A recordingLocker is a gocron.Locker that records each attempt of an
// instance in a ledger, around the Locker under test.
type recordingLocker struct {
	inner gocron.Locker
	led   *ledger
	inst  int
}

func (r *recordingLocker) Lock(ctx context.Context, job string) (gocron.Lock, error) {
	a := &attempt{inst: r.inst, job: job, start: time.Now()}
	l, err := r.inner.Lock(ctx, job)
	a.end, a.err = time.Now(), err
	r.led.add(a)
	if err != nil {
		return nil, err
	}
	return &recordingLock{inner: l, led: r.led, a: a}, nil
}

type recordingLock struct {
	inner gocron.Lock
	led   *ledger
	a     *attempt
}

func (r *recordingLock) Unlock(ctx context.Context) error {
	err := r.inner.Unlock(ctx)
	r.led.update(func() { r.a.unlocked, r.a.unlockErr = true, err })
	return err
}

// A recordingElector is a gocron.Elector that records each question of an
// instance's scheduler in a ledger, around the Elector under test. The
// scheduler asks before each run; the job's name is not passed, so a
// recordingElector serves a scheduler with one job.
type recordingElector struct {
	inner gocron.Elector
	led   *ledger
	inst  int
	job   string
}

func (r *recordingElector) IsLeader(ctx context.Context) error {
	a := &attempt{inst: r.inst, job: r.job, start: time.Now()}
	err := r.inner.IsLeader(ctx)
	a.end, a.err = time.Now(), err
	r.led.add(a)
	return err
}

// newScheduler returns a started scheduler with the options given, shut
// down when the test ends.
func newScheduler(t *testing.T, opts ...gocron.SchedulerOption) gocron.Scheduler {
	t.Helper()
	s, err := gocron.NewScheduler(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Shutdown(); err != nil {
			t.Error(err)
		}
	})
	s.Start()
	return s
}
