package drivertest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/admin"
	"github.com/quorumlock/redlock/internal/clientx"
	"github.com/quorumlock/redlock/observe"
)

// recorder is an Observer that keeps every event with the operation its
// context belongs to.
type recorder struct {
	mu     sync.Mutex
	starts []string // "op key" for every Start
	events []seen
}

type seen struct {
	op string // the operation Start named, from the context; "" if none
	e  observe.Event
}

type opKey struct{}

func (r *recorder) Start(ctx context.Context, op, key string) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts = append(r.starts, op+" "+key)
	return context.WithValue(ctx, opKey{}, op)
}

func (r *recorder) Observe(ctx context.Context, e observe.Event) {
	op, _ := ctx.Value(opKey{}).(string)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, seen{op, e})
}

// has reports whether an event that match accepts has come.
func (r *recorder) has(match func(observe.Event) bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.events {
		if match(s.e) {
			return true
		}
	}
	return false
}

func lostEvent(e observe.Event) bool {
	_, ok := e.(observe.LostEvent)
	return ok
}

// take returns the events so far and forgets them.
func (r *recorder) take() []seen {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev := r.events
	r.events, r.starts = nil, nil
	return ev
}

// one returns the single event of type E that match accepts, and fails t
// unless there is exactly one.
func one[E observe.Event](t *testing.T, events []seen, what string, match func(op string, e E) bool) E {
	t.Helper()
	var found []E
	for _, s := range events {
		if e, ok := s.e.(E); ok && match(s.op, e) {
			found = append(found, e)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d events %s, want 1; all events: %+v", len(found), what, events)
	}
	return found[0]
}

// testObserver follows one lock through its life and checks what the
// Observer is told at each step: the rounds with every node's answer, the
// operations with their outcome, the loss of the lock and the nodes'
// changes of health.
func (s *suite) testObserver(t *testing.T) {
	cl := startCluster(t, 3, false)
	rec := &recorder{}
	// A generous node timeout: the events are those of the first round,
	// and settle below needs its grant on all three nodes, which a 250ms
	// timeout can cut off on a loaded machine.
	c := s.client(t, cl.urls(), &redlock.Options{Observer: rec, Tries: 2, NodeTimeout: 500 * time.Millisecond})
	ctx, key := ctxT(t), keyFor(t)

	l, err := c.TryLock(ctx, key, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ev := rec.take()
	round := one(t, ev, "acquire round", func(op string, e observe.RoundEvent) bool { return op == "acquire" && e.Op == "acquire" })
	if !round.OK || round.Key != key || round.Round != 1 || len(round.Nodes) != 3 || round.Duration <= 0 || round.Start.IsZero() {
		t.Errorf("acquire round %+v, want round 1 of %q granted, with 3 nodes", round, key)
	}
	granted := 0
	for _, n := range round.Nodes {
		if n.Outcome == observe.OutcomeOK {
			granted++
		}
	}
	if granted < 2 {
		t.Errorf("acquire round reports %d grants, want at least the quorum of 2: %v", granted, round.Nodes)
	}
	done := one(t, ev, "acquire done", func(op string, e observe.OpEvent) bool { return op == "acquire" && e.Op == "acquire" })
	if round.Quorum != 2 || done.Quorum != 2 {
		t.Errorf("quorum %d in the round, %d in the operation, want 2", round.Quorum, done.Quorum)
	}
	if done.Err != nil || done.Fence != l.Fence() || done.Rounds != 1 || done.TTL != 10*time.Second || done.Key != key || done.Duration < round.Duration {
		t.Errorf("acquire event %+v, want success with fence %d in 1 round, lasting at least its round (%v)", done, l.Fence(), round.Duration)
	}
	healthy := 0
	for _, s := range ev {
		if e, ok := s.e.(observe.NodeEvent); ok && e.Previous == observe.NodeUnknown && e.State.Health == observe.NodeHealthy {
			healthy++
		}
	}
	if healthy < 2 {
		t.Errorf("%d nodes reported unknown -> healthy after the first grant, want at least 2: %+v", healthy, ev)
	}
	cl.settle(t, key, l.Token())

	// A bad TTL is refused before any round, and still reported.
	if _, err := c.TryLock(ctx, key, time.Millisecond); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("TryLock with a 1ms TTL: %v, want ErrInvalid", err)
	}
	ev = rec.take()
	if e := one(t, ev, "refused acquire", func(op string, e observe.OpEvent) bool { return op == "acquire" }); !errors.Is(e.Err, redlock.ErrInvalid) || len(ev) != 1 {
		t.Errorf("events of an invalid TryLock %+v, want only an acquire event with ErrInvalid", ev)
	}

	// A second attempt finds the key taken: two rounds, each cleaned up.
	_, err = c.Lock(ctx, key, 10*time.Second)
	mustOpError(t, err, redlock.ErrTaken)
	ev = rec.take()
	done = one(t, ev, "failed acquire", func(op string, e observe.OpEvent) bool { return e.Op == "acquire" })
	if !errors.Is(done.Err, redlock.ErrTaken) || done.Rounds != 2 {
		t.Errorf("acquire event %+v, want ErrTaken after 2 rounds", done)
	}
	for n := 1; n <= 2; n++ {
		r := one(t, ev, "acquire round", func(op string, e observe.RoundEvent) bool {
			return op == "acquire" && e.Op == "acquire" && e.Round == n
		})
		taken := 0
		for _, nr := range r.Nodes {
			if nr.Outcome == observe.OutcomeOK {
				t.Errorf("acquire round %d: node %s granted a held lock", n, nr.Node)
			}
			if nr.Outcome == observe.OutcomeTaken {
				taken++
			}
		}
		if r.OK || taken < 2 {
			t.Errorf("acquire round %d %+v, want refused with the key taken on at least 2 nodes", n, r)
		}
		one(t, ev, "cleanup round", func(op string, e observe.RoundEvent) bool {
			return op == "acquire" && e.Op == "cleanup" && e.Round == n
		})
	}

	if err := l.Extend(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	ev = rec.take()
	if e := one(t, ev, "extend round", func(op string, e observe.RoundEvent) bool { return op == "extend" && e.Op == "extend" }); !e.OK {
		t.Errorf("extend round %+v, want OK", e)
	}
	if e := one(t, ev, "extend done", func(op string, e observe.OpEvent) bool { return op == "extend" && e.Op == "extend" }); e.Err != nil {
		t.Errorf("extend event %+v, want success", e)
	}

	// A node goes down: the next round that waits for it, here a probe,
	// reports the change.
	if err := cl.servers[0].Kill(); err != nil {
		t.Fatal(err)
	}
	admin.New(c).Probe(ctx)
	ev = rec.take()
	if e := one(t, ev, "probe round", func(op string, e observe.RoundEvent) bool { return e.Op == "probe" }); e.OK || e.Nodes[0].Outcome != observe.OutcomeFailed {
		t.Errorf("probe round %+v, want node 0 failed", e)
	}
	down := one(t, ev, "node down", func(op string, e observe.NodeEvent) bool { return e.State.Health == observe.NodeUnreachable })
	if down.Previous != observe.NodeHealthy || down.State.Node != clientx.Of(c).Nodes()[0] || down.State.Err == nil {
		t.Errorf("node event %+v, want %s healthy -> unreachable with its error", down, clientx.Of(c).Nodes()[0])
	}

	// The lock disappears from the other two: Extend finds it lost.
	cl.servers[1].MustDo(t, "DEL", key)
	cl.servers[2].MustDo(t, "DEL", key)
	mustOpError(t, l.Extend(ctx, 10*time.Second), redlock.ErrLockLost)
	ev = rec.take()
	lost := one(t, ev, "lost", func(op string, e observe.LostEvent) bool { return op == "extend" })
	if !errors.Is(lost.Cause, redlock.ErrLockLost) || lost.Key != key || lost.Fence != l.Fence() || lost.Held <= 0 {
		t.Errorf("lost event %+v, want the lock's key and fence with a cause wrapping ErrLockLost", lost)
	}
	if e := one(t, ev, "extend done", func(op string, e observe.OpEvent) bool { return e.Op == "extend" }); !errors.Is(e.Err, redlock.ErrLockLost) {
		t.Errorf("extend event %+v, want ErrLockLost", e)
	}

	mustOpError(t, l.Release(ctx), redlock.ErrLockLost)
	ev = rec.take()
	rel := one(t, ev, "release done", func(op string, e observe.OpEvent) bool { return op == "release" && e.Op == "release" })
	if !errors.Is(rel.Err, redlock.ErrLockLost) || rel.Held < lost.Held {
		t.Errorf("release event %+v, want ErrLockLost after holding at least %v", rel, lost.Held)
	}
	one(t, ev, "release round", func(op string, e observe.RoundEvent) bool { return op == "release" && e.Op == "release" })
	for _, s := range ev {
		if _, ok := s.e.(observe.LostEvent); ok {
			t.Errorf("a second LostEvent on Release: %+v", s.e)
		}
	}

	// A lock whose context is in use is lost at its deadline without
	// anyone calling Extend; the event comes from the context's timer.
	short, err := c.TryLock(ctx, key+":short", 600*time.Millisecond) // validity above the node timeout
	if err != nil {
		t.Fatal(err)
	}
	<-short.Context().Done()
	// The event follows the end of the context, from the timer's goroutine.
	for deadline := time.Now().Add(5 * time.Second); !rec.has(lostEvent) && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	ev = rec.take()
	lost = one(t, ev, "lost at the deadline", func(op string, e observe.LostEvent) bool { return e.Key == key+":short" })
	if !errors.Is(lost.Cause, redlock.ErrLockLost) || lost.Cause != context.Cause(short.Context()) {
		t.Errorf("lost event %+v, want the context's cause %v", lost, context.Cause(short.Context()))
	}
}
