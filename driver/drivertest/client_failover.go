package drivertest

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/admin"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/internal/wire"
	"github.com/quorumlock/redlock/observe"
)

// testFailoverQuarantine: three nodes, each a master with a replica that
// replicates through a proxy. The links of two replicas lose what their
// masters send; A locks, and its grant reaches the three masters but not
// those two replicas; the two masters die and their replicas are promoted,
// as a failover would, without A's key. B, a new client, must not obtain
// the lock while A's is valid: a promoted node is quarantined as if it had
// just started, although its process is old and it has its master's
// records. A canary, a new client with quarantine disabled that tries in
// turn with B, must obtain the lock while A's is valid, which shows that
// the scenario hands the lock out twice without quarantine: that the test
// can fail.
//
// The node marker of the key's slot is written on each master, and
// replicated, before the links are cut: the promoted replicas have the
// marker their masters wrote, with its replication ID.
func (s *suite) testFailoverQuarantine(t *testing.T) {
	// A's validity is the window in which the canary must get in: two
	// masters are killed and their replicas promoted within it first,
	// which took most of a 1s window on a loaded machine.
	const ttlA, ttlB = 2 * time.Second, 600 * time.Millisecond
	masters := redistest.StartN(t, 3, redistest.Config{})
	links := make([]*redistest.Proxy, 3)
	replicas := make([]*redistest.Server, 3)
	for i, m := range masters {
		links[i] = redistest.StartProxy(t, m)
		replicas[i] = redistest.StartReplica(t, m, links[i], redistest.Config{})
	}
	// Every process has run for longer than A's TTL, as processes in
	// service would have: no node is young enough to be quarantined for
	// its age. (uptime_in_seconds counts whole seconds, and a node takes
	// its age to be a second less than it says.)
	time.Sleep(ttlA + 1100*time.Millisecond)
	opts := redlock.Options{NodeTimeout: 500 * time.Millisecond}
	a := s.quarantineClient(t, redistest.URLs(masters), &opts)
	ctx, key := ctxT(t), keyFor(t)

	// The markers of the key's slot, and the TTL A uses, reach the
	// replicas. TryLock and Release return on a quorum: the test takes
	// the lock until its grant, which writes the marker, is on the third
	// master too, and waits for every master's release before it reads
	// the masters' replication offsets. A replica would otherwise miss
	// the marker, or keep this lock's key once its link is cut and be
	// promoted holding it.
	cl := &cluster{servers: masters}
	l := lockOnAll(t, ctx, a, key, ttlA, masters)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	cl.settle(t, key, "")
	marker := wire.MarkerKey(key)
	for i, r := range replicas {
		if err := r.CaughtUp(masters[i]); err != nil {
			t.Fatal(err)
		}
		want := strconv.FormatInt(ttlA.Milliseconds(), 10)
		if got := r.MustDo(t, "HGET", marker, "ttl2"); got != want {
			t.Fatalf("replica %d: the marker's ttl2 is %#v, want A's TTL, %s", i, got, want)
		}
	}

	links[0].SetBlackhole(true)
	links[1].SetBlackhole(true)
	la := lockOnAll(t, ctx, a, key, ttlA, masters)
	for _, m := range masters[:2] {
		if err := m.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range replicas[:2] {
		if err := r.Promote(); err != nil {
			t.Fatal(err)
		}
		// The failover lost A's grant: the promoted replica is a threat.
		if got := r.MustDo(t, "GET", key); got != nil {
			whose := "an unknown token"
			switch s, _ := got.(string); tokenOf(s) {
			case nodeToken(la.Token()):
				whose = "A's token: its link was not cut"
			case nodeToken(l.Token()):
				whose = "the token of the lock that wrote the markers, released before the link was cut"
			}
			t.Fatalf("promoted replica %d holds the key (%#v), %s", i, got, whose)
		}
	}

	urls := []string{replicas[0].URL(), replicas[1].URL(), masters[2].URL()}
	b := s.quarantineClient(t, urls, &opts)
	canaryOpts := opts
	canaryOpts.DisableQuarantine = true
	canary := s.quarantineClient(t, urls, &canaryOpts)
	tryDuring(t, ctx, la, key, ttlB, b, canary, "quarantined,quarantined,taken")
	expectHealth(t, b, la, observe.NodeQuarantined, observe.NodeQuarantined, observe.NodeHealthy)
	// Liveness: once the promoted nodes have served for A's TTL, B gets in.
	lockAfterQuarantine(t, ctx, b, key, ttlB)
}

// tryDuring has b and canary, two clients whose nodes lost the grant of
// l, another owner's lock, try in turn to take key with TryLock and ttl,
// until l's validity ends. b has quarantine on and must never obtain the
// lock while l is valid, and some of its rounds must fail with ErrNoQuorum
// and the node outcomes refusedBy, such as
// "quarantined,quarantined,taken"; others may fail otherwise, as while a
// node restarts. canary has quarantine off and must obtain the lock at
// least once while l is valid, or the scenario shows nothing.
func tryDuring(t *testing.T, ctx context.Context, l *redlock.Lock, key string, ttl time.Duration, b, canary *redlock.Client, refusedBy string) {
	t.Helper()
	seen := map[string]int{} // how the rounds that failed ended, for the log
	// try has c try once; it reports whether c obtained the lock while l
	// was valid, and whether the round failed with the outcomes refusedBy.
	try := func(who string, c *redlock.Client) (double, refused bool) {
		t.Helper()
		lc, err := c.TryLock(ctx, key, ttl)
		if err == nil {
			double = time.Now().Before(l.Until())
			if err := lc.Release(ctx); err != nil && !errors.Is(err, redlock.ErrExpired) {
				t.Fatal(err)
			}
			return double, false
		}
		var oe *redlock.OpError
		if !errors.As(err, &oe) {
			seen[who+": "+err.Error()]++
			return false, false
		}
		seen[who+": "+outcomes(oe)]++
		if outcomes(oe) == refusedBy {
			if !errors.Is(err, redlock.ErrNoQuorum) {
				t.Fatalf("a round refused by quarantine: %v, want ErrNoQuorum", err)
			}
			return false, true
		}
		return false, false
	}
	var tries, refused, doubles, canaryDoubles int
	for time.Now().Before(l.Until()) {
		tries++
		if double, _ := try("canary", canary); double {
			canaryDoubles++
		}
		double, r := try("B", b)
		if double {
			doubles++
		}
		if r {
			refused++
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("during A's validity, %d tries: B refused by quarantine %d times; the canary got in %d times; the rounds that failed ended so: %v", tries, refused, canaryDoubles, seen)
	if doubles > 0 {
		t.Errorf("B obtained the lock %d times in %d tries while A held it", doubles, tries)
	}
	if refused == 0 {
		t.Errorf("none of B's %d rounds was refused by quarantine (%s); the log above says how the rounds that failed ended", tries, refusedBy)
	}
	if canaryDoubles == 0 {
		t.Errorf("without quarantine, the canary never obtained the lock during A's validity in %d tries: the scenario shows nothing; the log above says how the rounds that failed ended", tries)
	}
	if t.Failed() {
		t.FailNow()
	}
}

// expectHealth fails t unless the nodes of c are in the states want, and
// those quarantined are so until l's validity ends, at least: their
// quarantine began after l was granted, and lasts l's TTL.
func expectHealth(t *testing.T, c *redlock.Client, l *redlock.Lock, want ...observe.NodeHealth) {
	t.Helper()
	for i, st := range admin.New(c).States() {
		if st.Health != want[i] {
			t.Errorf("node %d (%s): %v, want %v", i, st.Node, st.Health, want[i])
		}
		if st.Health == observe.NodeQuarantined && st.Until.Before(l.Until()) {
			t.Errorf("node %d: quarantined until %v, before the end of the lock it lost, %v", i, st.Until, l.Until())
		}
	}
}

// lockAfterQuarantine fails t unless c takes key with Lock within 20s.
func lockAfterQuarantine(t *testing.T, ctx context.Context, c *redlock.Client, key string, ttl time.Duration) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	l, err := c.Lock(wctx, key, ttl)
	if err != nil {
		t.Fatalf("after the quarantine: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
