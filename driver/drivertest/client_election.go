package drivertest

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/clientx"
	"github.com/quorumlock/redlock/internal/wire"
)

// testElection: leader election with terms (Client.Election).
func (s *suite) testElection(t *testing.T) {
	t.Run("CampaignResignObserve", s.testElectionTurns)
	t.Run("RenewsItself", s.testElectionRenews)
	t.Run("LossIsVisible", s.testElectionLoss)
	t.Run("NotEstablished", s.testElectionNotEstablished)
	t.Run("Invalid", s.testElectionInvalid)
}

// testElectionTurns: one candidate leads, Leader and Observe name it and
// its term; a second waits, and leads with a higher term once the first
// resigns; Observe reports the change.
func (s *suite) testElectionTurns(t *testing.T) {
	cl := startCluster(t, 3, false)
	ctx, key := ctxT(t), keyFor(t)
	// Candidates poll once an hour, the watcher every quarter hour, and
	// leaderships last a minute: only the nodes' announcements of a
	// resignation and of a new leader make the second candidate try
	// again, and the watcher look again, within the test's time.
	opts := &redlock.Options{RetryDelay: time.Hour}
	ea := s.client(t, cl.urls(), opts).Election(key, time.Minute)
	eb := s.client(t, cl.urls(), opts).Election(key, time.Minute)
	watcher := s.client(t, cl.urls(), nil).Election(key, time.Hour)

	octx, stop := context.WithCancel(ctx)
	defer stop()
	seen := watcher.Observe(octx)
	if info := next(t, seen); info.Term != 0 {
		t.Fatalf("Observe before any campaign: %+v, want no leader", info)
	}

	a, err := ea.Campaign(ctx, "a:9000")
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	if strings.Contains(a.Token(), "a:9000") || a.Fence() <= 0 {
		t.Errorf("leadership: token %q, term %d", a.Token(), a.Fence())
	}
	info, err := watcher.Leader(ctx)
	if err != nil {
		t.Fatalf("Leader: %v", err)
	}
	if info.Value != "a:9000" || info.Term != a.Fence() || info.ID != a.ID() || !info.Ends.After(time.Now()) {
		t.Errorf("Leader() = %+v, want a:9000 with term %d", info, a.Fence())
	}
	if info := next(t, seen); info.Value != "a:9000" || info.Term != a.Fence() {
		t.Errorf("Observe after the campaign: %+v, want a:9000 with term %d", info, a.Fence())
	}

	got := make(chan *redlock.Lock, 1)
	go func() {
		b, err := eb.Campaign(ctx, "b:9000")
		if err != nil {
			t.Errorf("the second Campaign: %v", err)
		}
		got <- b
	}()
	time.Sleep(200 * time.Millisecond) // let the second candidate try once and subscribe
	select {
	case <-got:
		t.Fatal("a second candidate leads while the first has not resigned")
	default:
	}
	if err := a.Release(ctx); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	var b *redlock.Lock
	select {
	case b = <-got:
	case <-time.After(15 * time.Second):
		t.Fatal("the second candidate was not woken by the resignation")
	}
	if b == nil {
		return
	}
	defer b.Release(ctx)
	if b.Fence() <= a.Fence() {
		t.Errorf("the second leader's term %d is not above the first's %d", b.Fence(), a.Fence())
	}
	if cause := context.Cause(a.Context()); !errors.Is(cause, redlock.ErrReleased) {
		t.Errorf("the resigned leadership's context: %v, want ErrReleased", cause)
	}
	// Observe may report the moment without a leader in between.
	for info := next(t, seen); info.Term != b.Fence(); info = next(t, seen) {
		if info.Term != 0 {
			t.Fatalf("Observe reported %+v between the leaders", info)
		}
	}
}

// next returns the next report of an Observe channel, within 10s.
func next(t *testing.T, ch <-chan redlock.LeaderInfo) redlock.LeaderInfo {
	t.Helper()
	select {
	case info, ok := <-ch:
		if !ok {
			t.Fatal("Observe's channel closed")
		}
		return info
	case <-time.After(10 * time.Second):
		t.Fatal("Observe reported nothing for 10s")
	}
	return redlock.LeaderInfo{}
}

// testElectionRenews: a leadership outlives its TTL several times over
// while its process runs.
func (s *suite) testElectionRenews(t *testing.T) {
	cl := startCluster(t, 3, false)
	ctx, key := ctxT(t), keyFor(t)
	// The leadership renews itself every third of its TTL, so a stall of
	// two thirds is what it tolerates: 670ms, as in testAutoExtend. (With
	// a TTL of 300ms, a stall of 200ms on a loaded machine let the keys
	// expire on every node.)
	const ttl = time.Second
	e := s.client(t, cl.urls(), nil).Election(key, ttl)
	l, err := e.Campaign(ctx, "only")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * ttl)
	select {
	case <-l.Context().Done():
		t.Fatalf("the leadership ended while its process ran: %v", context.Cause(l.Context()))
	default:
	}
	info, err := e.Leader(ctx)
	if err != nil || info.Term != l.Fence() {
		t.Fatalf("Leader() after 3 TTLs = %+v, %v; want term %d; the nodes hold %q and term records %q",
			info, err, l.Fence(), cl.values(t, key), cl.values(t, wire.TermKey(key)))
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if info, err := e.Leader(ctx); err != nil || info.Term != 0 {
		t.Errorf("Leader() after Resign: %+v, %v; want term 0 and no error", info, err)
	}
}

// testElectionLoss: a leader whose lock is gone from a majority finds out
// at its next renewal: its context ends with ErrLockLost.
func (s *suite) testElectionLoss(t *testing.T) {
	cl := startCluster(t, 3, false)
	ctx, key := ctxT(t), keyFor(t)
	e := s.client(t, cl.urls(), nil).Election(key, 600*time.Millisecond)
	// Campaign returns once a quorum has granted the lock and recorded
	// the term. A grant still on its way to a node whose key the test
	// deletes would land after the deletion and keep the leadership on a
	// quorum. So the test waits until every node has recorded the term,
	// which a node does only while its key holds the leader's token; a
	// request cut off by the node timeout never lands, and then the
	// candidate resigns and campaigns again, up to three times.
	var l *redlock.Lock
	for try := 1; ; try++ {
		lt, err := e.Campaign(ctx, "doomed")
		if err != nil {
			t.Fatal(err)
		}
		record := lt.ID() + " " + strconv.FormatInt(lt.Fence(), 10)
		for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if cl.countValue(t, wire.TermKey(key), record) == len(cl.servers) {
				l = lt
				break
			}
		}
		if l != nil {
			break
		}
		if try == 3 {
			t.Fatalf("in 3 campaigns, the term never reached all 3 nodes: the nodes hold %q and term records %q", cl.values(t, key), cl.values(t, wire.TermKey(key)))
		}
		lt.Release(ctx) // or it expires
		cl.settle(t, key, "")
	}
	for _, srv := range cl.servers[:2] {
		srv.MustDo(t, "DEL", key)
	}
	select {
	case <-l.Context().Done():
		if cause := context.Cause(l.Context()); !errors.Is(cause, redlock.ErrLockLost) {
			t.Errorf("the lost leadership's context: %v, want ErrLockLost", cause)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the leadership's context did not end after its lock was gone; the nodes hold %q", cl.values(t, key))
	}
	if info, err := e.Leader(ctx); err != nil || info.Term != 0 {
		t.Errorf("Leader() after the loss: %+v, %v; want term 0 and no error", info, err)
	}
}

// testElectionNotEstablished: a lock on the election's key without a
// recorded term, as a candidate holds it before Campaign returns, is no
// leader yet.
func (s *suite) testElectionNotEstablished(t *testing.T) {
	_, c, ctx, key, l := s.held(t, 10*time.Second)
	if info, err := c.Election(key, time.Second).Leader(ctx); err != nil || info.Term != 0 {
		t.Errorf("Leader() with the key locked but no term: %+v, %v; want term 0 and no error", info, err)
	}
	l.Release(ctx)
}

// testElectionInvalid: a bad value, key or TTL is refused before any node
// is asked.
func (s *suite) testElectionInvalid(t *testing.T) {
	cl := startCluster(t, 1, false)
	c := s.client(t, cl.urls(), nil)
	ctx, key := ctxT(t), keyFor(t)
	for _, tt := range []struct {
		key, value string
		ttl        time.Duration
	}{
		{key, "line\nbreak", time.Second},
		{key, string(make([]byte, clientx.Limits.OwnerLen+1)), time.Second},
		{"", "v", time.Second},
		{wire.TermKey(key), "v", time.Second},
		{key, "v", 0},
	} {
		if _, err := c.Election(tt.key, tt.ttl).Campaign(ctx, tt.value); !errors.Is(err, redlock.ErrInvalid) {
			t.Errorf("Campaign(%q) on %q with TTL %v: %v, want ErrInvalid", tt.value, tt.key, tt.ttl, err)
		}
	}
	if _, err := c.Election("", time.Second).Leader(ctx); !errors.Is(err, redlock.ErrInvalid) {
		t.Errorf("Leader() on an empty key: %v, want ErrInvalid", err)
	}
}
