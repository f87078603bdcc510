package drivertest

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/internal/wire"
)

// The schedules of this file each broke a guarantee of an earlier client
// on real servers: two holders after a restart, with default options; a
// lower fence after Adopt; one server voting twice, four ways. Each is
// the schedule that broke it, run as it was found.

// testHoles runs them.
func (s *suite) testHoles(t *testing.T) {
	t.Run("RestartAcrossSlotsN3", func(t *testing.T) { s.testRestartAcrossSlots(t, 3, 2) })
	t.Run("RestartAcrossSlotsN5", func(t *testing.T) { s.testRestartAcrossSlots(t, 5, 3) })
	t.Run("RestartSurvivorSilent", s.testRestartSurvivorSilent)
	t.Run("AdoptFenceNodePaused", func(t *testing.T) { s.testAdoptFenceNodePaused(t, "lock") })
	t.Run("AdoptReaderFenceNodePaused", func(t *testing.T) { s.testAdoptFenceNodePaused(t, "reader") })
	t.Run("IdentityRestartBetweenProbes", s.testIdentityRestartBetweenProbes)
	t.Run("IdentityBusyProbe", s.testIdentityBusyProbe)
	t.Run("IdentityExtendAdopt", s.testIdentityExtendAdopt)
	t.Run("IdentityNoInfo", s.testIdentityNoInfo)
}

// testRestartAcrossSlots: H holds, in one hash slot, a lock, a permit, a
// writer, a reader and a leadership, on all n nodes. restarted of them
// restart empty. Once they have run longer than a second, fresh clients
// with default options each take and give back a lock in another slot,
// then try, for a second each, every kind of hold in H's slot. None may
// get one while H's hold is valid: the nodes that kept H's holds know
// their TTL, and a restarted node must not vote until the client has
// heard them in that slot.
//
// A client that counted a hearing of every node in one slot for every
// slot let 8 of 20 fresh clients take H's lock.
func (s *suite) testRestartAcrossSlots(t *testing.T, n, restarted int) {
	cl := startCluster(t, n, false)
	h := s.client(t, cl.urls(), nil) // H's servers are new: H sits out no quarantine
	ctx := ctxT(t)
	const ttl = 15 * time.Second
	lock := lockOnAll(t, ctx, h, "{t}a", ttl, cl.servers)
	permit := cl.permitOnAll(t, ctx, h.Semaphore("{t}s", 1), ttl)
	writer := onAll(t, ctx, cl.servers, ttl/4,
		func() (*redlock.Lock, error) { return h.RWLock("{t}w").TryLock(ctx, ttl) },
		func(l *redlock.Lock) []string { return l.Keys() })
	reader := cl.readerOnAll(t, ctx, h.RWLock("{t}r"), ttl)
	leader := onAll(t, ctx, cl.servers, ttl/4,
		func() (*redlock.Lock, error) {
			cctx, cancel := context.WithTimeout(ctx, ttl/4)
			defer cancel()
			return h.Election("{t}e", ttl).Campaign(cctx, "H")
		},
		func(l *redlock.Lock) []string { return l.Keys() })
	until := lock.Until()
	for _, l := range []*redlock.Lock{permit.Lock, writer, reader, leader} {
		if l.Until().Before(until) {
			until = l.Until()
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, restarted)
	for i, srv := range cl.servers[:restarted] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[i] = srv.Kill(); errs[i] == nil {
				errs[i] = srv.Restart()
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	// Older than the fresh clients' TTL, so that the restarted nodes
	// themselves grant it (uptime_in_seconds counts whole seconds).
	time.Sleep(2500 * time.Millisecond)

	tries := map[string]func(c *redlock.Client) (*redlock.Lock, error){
		"Lock": func(c *redlock.Client) (*redlock.Lock, error) { return c.TryLock(ctx, "{t}a", time.Second) },
		"LockAll": func(c *redlock.Client) (*redlock.Lock, error) {
			return c.TryLockAll(ctx, []string{"{t}a", "y"}, time.Second)
		},
		"Semaphore": func(c *redlock.Client) (*redlock.Lock, error) {
			p, err := c.Semaphore("{t}s", 1).TryAcquire(ctx, time.Second)
			return permitLock(p), err
		},
		"RLock": func(c *redlock.Client) (*redlock.Lock, error) { return c.RWLock("{t}w").TryRLock(ctx, time.Second) },
		"WLock": func(c *redlock.Client) (*redlock.Lock, error) { return c.RWLock("{t}r").TryLock(ctx, time.Second) },
		"Campaign": func(c *redlock.Client) (*redlock.Lock, error) {
			cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			return c.Election("{t}e", time.Second).Campaign(cctx, "fresh")
		},
	}
	granted, rounds := map[string]int{}, 0
	for c := 0; c < 20 && time.Now().Add(time.Second).Before(until); c++ {
		fresh := s.quarantineClient(t, cl.urls(), &redlock.Options{})
		if x, err := fresh.TryLock(ctx, "x", time.Second); err == nil {
			x.Release(ctx)
		}
		for name, try := range tries {
			l, err := try(fresh)
			rounds++
			if err == nil {
				if time.Now().Before(until) {
					granted[name]++
				}
				l.Release(ctx)
			}
		}
		fresh.Close()
	}
	if len(granted) > 0 {
		t.Fatalf("with %d of %d nodes restarted, fresh clients got what H held: %v (of %d tries)", restarted, n, granted, rounds)
	}
	if rounds < len(tries) {
		t.Fatalf("no fresh client tried within H's validity: the test shows nothing")
	}
}

// testRestartSurvivorSilent: H holds a lock on all three nodes; two of
// them restart empty, and the third, the only one that knows H's lock
// and its TTL, is paused. Fresh clients with default options try the
// lock: the restarted nodes grant, the third never answers. None may
// get it: a young node's grant counts only once the client has heard
// every node in the key's slot since it started, and a round that ends
// at the node timeout without that answer does not count it.
//
// A client that judged such a round on the answers it had at the node
// timeout gave every fresh client the lock.
func (s *suite) testRestartSurvivorSilent(t *testing.T) {
	cl := startCluster(t, 3, false)
	h := s.client(t, cl.urls(), nil)
	ctx := ctxT(t)
	const ttl = 15 * time.Second
	lock := lockOnAll(t, ctx, h, "{t}a", ttl, cl.servers)
	for _, srv := range cl.servers[:2] {
		if err := srv.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	survivor := cl.servers[2]
	if err := survivor.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { survivor.Resume() })
	// Older than the fresh clients' TTL, so that the restarted nodes
	// themselves grant it (uptime_in_seconds counts whole seconds).
	time.Sleep(2500 * time.Millisecond)
	granted, tries := 0, 0
	for c := 0; c < 5 && time.Now().Add(time.Second).Before(lock.Until()); c++ {
		fresh := s.quarantineClient(t, cl.urls(), &redlock.Options{})
		l, err := fresh.TryLock(ctx, "{t}a", time.Second)
		tries++
		switch {
		case err == nil:
			if time.Now().Before(lock.Until()) {
				granted++
			}
			l.Release(ctx)
		case !errors.Is(err, redlock.ErrNoQuorum) && !errors.Is(err, redlock.ErrRefused):
			t.Errorf("fresh client %d: %v, want ErrNoQuorum or ErrRefused", c, err)
		}
		fresh.Close()
	}
	if granted > 0 {
		t.Fatalf("with two of three nodes restarted and the third paused, %d of %d fresh clients got H's lock", granted, tries)
	}
	if tries == 0 {
		t.Fatal("no fresh client tried within H's validity: the test shows nothing")
	}
}

// permitLock returns p's Lock; nil for a nil p.
func permitLock(p *redlock.Permit) *redlock.Lock {
	if p == nil {
		return nil
	}
	return p.Lock
}

// testAdoptFenceNodePaused: node 0's fence counter runs ahead of the
// others' (as a clock ahead by less than the TTL leaves it), so the
// holder's fence is node 0's. Node 0 is paused; another client adopts
// the hold, and releases it; a third locks. The adopted fence must not
// be below the holder's, and the third's above both.
//
// A client whose Adopt drew its fence only on the nodes that answered
// gave the adopter, and everyone after, a lower fence.
func (s *suite) testAdoptFenceNodePaused(t *testing.T, kind string) {
	cl := startCluster(t, 3, false)
	holder := s.client(t, cl.urls(), nil)
	adopter := s.client(t, cl.urls(), nil)
	third := s.client(t, cl.urls(), nil)
	ctx, key := ctxT(t), keyFor(t)
	const ttl = 10 * time.Second
	ahead := serverMicros(t, cl.servers[0]) + 800_000
	cl.servers[0].MustDo(t, "HSET", wire.MarkerKey(key), wire.MarkerFence, strconv.FormatInt(ahead, 10))
	// The holder's fence is the largest its granting quorum gave: node
	// 0's when node 0 is in that quorum, which a few tries make sure of.
	var h *redlock.Lock
	for try := 1; ; try++ {
		if kind == "reader" {
			// A writer first, so that the reader's fence, the slot's
			// counter, is node 0's.
			w := lockOnAll(t, ctx, holder, key, ttl, cl.servers)
			if err := w.Release(ctx); err != nil {
				t.Fatal(err)
			}
			cl.settle(t, key, "")
			h = cl.readerOnAll(t, ctx, holder.RWLock(key), ttl)
		} else {
			h = lockOnAll(t, ctx, holder, key, ttl, cl.servers)
		}
		if h.Fence() >= ahead {
			break
		}
		if try == 20 {
			t.Fatalf("in %d tries, the holder's fence %d was never node 0's (%d): the test shows nothing", try, h.Fence(), ahead)
		}
		if err := h.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if kind == "reader" {
			cl.awaitReaderGone(t, key, h.Token())
		} else {
			cl.settle(t, key, "")
		}
	}
	if err := cl.servers[0].Pause(); err != nil {
		t.Fatal(err)
	}
	defer cl.servers[0].Resume()
	a, err := adopter.Adopt(ctx, key, h.Token())
	if err != nil {
		t.Fatalf("Adopt with node 0 paused: %v", err)
	}
	if a.Fence() <= h.Fence() {
		t.Errorf("the adopted fence %d is not above the holder's %d", a.Fence(), h.Fence())
	}
	if err := a.Release(ctx); err != nil {
		t.Fatalf("the adopter's Release: %v", err)
	}
	// The release returned once a quorum, nodes 1 and 2, confirmed it.
	x, err := third.TryLock(ctx, key, ttl)
	if err != nil {
		t.Fatalf("the next lock, node 0 paused: %v", err)
	}
	if x.Fence() <= a.Fence() || x.Fence() <= h.Fence() {
		t.Errorf("the next holder's fence %d is not above the adopted %d and the first %d", x.Fence(), a.Fence(), h.Fence())
	}
	x.Release(ctx)
}

// twoEntries returns a client over S directly, S through a relay that is
// down (a blackhole) until the test turns it on, and T: three nodes of
// which two are one server.
func (s *suite) twoEntries(t *testing.T, opts *redlock.Options) (*redlock.Client, *redistest.Server, *redistest.Proxy, *redistest.Server) {
	servers := redistest.StartN(t, 2, redistest.Config{})
	relay := redistest.StartProxy(t, servers[0])
	relay.SetBlackhole(true)
	o := redlock.Options{DisableQuarantine: true, NodeTimeout: 200 * time.Millisecond}
	if opts != nil {
		o = *opts
	}
	c := s.quarantineClient(t, []string{servers[0].URL(), relay.URL(), servers[1].URL()}, &o)
	return c, servers[0], relay, servers[1]
}

// neverOnOneServer tries op, with T paused, until it fails with an error
// that says that two nodes are one server, at most 30 times. Any success
// is a quorum of one server.
func neverOnOneServer(t *testing.T, what string, op func() error) {
	t.Helper()
	for try := 1; ; try++ {
		err := op()
		if err == nil {
			t.Fatalf("%s succeeded (try %d) with only one server answering: one server voted twice", what, try)
		}
		if errors.Is(err, redlock.ErrInvalid) && strings.Contains(err.Error(), "same Redis server") {
			return
		}
		if try == 30 {
			t.Fatalf("%s: after %d tries, still %v; want an error that names the two nodes of one server", what, try, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// testIdentityRestartBetweenProbes: S's second entry is down at the first
// round; S restarts (a new run_id) before it comes up. The two probes of
// S then saw two run_ids; neither may make S a second server.
func (s *suite) testIdentityRestartBetweenProbes(t *testing.T) {
	c, srvS, relay, srvT := s.twoEntries(t, nil)
	ctx := ctxT(t)
	l, err := c.TryLock(ctx, "k", 5*time.Second) // S and T grant; S's relay is down
	if err != nil {
		t.Fatal(err)
	}
	l.Release(ctx)
	if err := srvS.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := srvS.Restart(); err != nil {
		t.Fatal(err)
	}
	relay.SetBlackhole(false)
	if err := srvT.Pause(); err != nil {
		t.Fatal(err)
	}
	defer srvT.Resume()
	neverOnOneServer(t, "TryLock", func() error {
		l, err := c.TryLock(ctx, "k", 5*time.Second)
		if err == nil {
			l.Release(ctx)
		}
		return err
	})
}

// testIdentityBusyProbe: both entries of S answer the first probe with
// BUSY (a slow script). A transient error tells nothing of a server.
func (s *suite) testIdentityBusyProbe(t *testing.T) {
	servers := redistest.StartN(t, 2, redistest.Config{})
	srvS, srvT := servers[0], servers[1]
	srvS.MustDo(t, "CONFIG", "SET", "busy-reply-threshold", "100")
	busy := make(chan error, 1)
	go func() { _, err := srvS.Do("EVAL", "while true do end", "0"); busy <- err }()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := srvS.Do("PING"); err != nil && strings.HasPrefix(err.Error(), "BUSY") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the server never answered BUSY")
		}
	}
	c := s.quarantineClient(t, []string{srvS.URL() + "/0", srvS.URL() + "/1", srvT.URL()}, &redlock.Options{DisableQuarantine: true, NodeTimeout: 200 * time.Millisecond})
	ctx := ctxT(t)
	c.TryLock(ctx, "k", 5*time.Second) // the first round: S answers BUSY to its probes
	if _, err := srvS.Do("SCRIPT", "KILL"); err != nil {
		t.Fatal(err)
	}
	<-busy
	if err := srvT.Pause(); err != nil {
		t.Fatal(err)
	}
	defer srvT.Resume()
	neverOnOneServer(t, "TryLock", func() error {
		l, err := c.TryLock(ctx, "k", 5*time.Second)
		if err == nil {
			l.Release(ctx)
		}
		return err
	})
}

// testIdentityExtendAdopt: the lock is taken while S's second entry is
// down; the entry comes up and T is paused. Extend and Adopt must not
// count S twice.
func (s *suite) testIdentityExtendAdopt(t *testing.T) {
	c, _, relay, srvT := s.twoEntries(t, nil)
	ctx := ctxT(t)
	l, err := c.TryLock(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	relay.SetBlackhole(false)
	if err := srvT.Pause(); err != nil {
		t.Fatal(err)
	}
	defer srvT.Resume()
	neverOnOneServer(t, "Adopt", func() error {
		a, err := c.Adopt(ctx, "k", l.Token())
		if err == nil {
			a.Extend(ctx, 10*time.Second)
		}
		return err
	})
	if err := l.Extend(ctx, 10*time.Second); err == nil {
		t.Fatal("Extend succeeded with only one server answering: one server voted twice")
	}
}

// testIdentityNoInfo: an ACL user without INFO, on S twice (databases 0
// and 1) and T, with markers that another user wrote first, so that the
// scripts' common case needs no INFO. The probe's refusal must not make
// S a second server: the client refuses, naming INFO.
func (s *suite) testIdentityNoInfo(t *testing.T) {
	servers := redistest.StartN(t, 2, redistest.Config{})
	srvS, srvT := servers[0], servers[1]
	ctx := ctxT(t)
	// Markers written by the default user, in both databases.
	for _, url := range []string{srvS.URL() + "/0", srvS.URL() + "/1", srvT.URL()} {
		w := s.client(t, []string{url}, nil)
		l, err := w.Lock(ctx, "k", 5*time.Second) // Lock: a loaded machine may miss a first round
		if err != nil {
			t.Fatal(err)
		}
		l.Release(ctx)
	}
	for _, srv := range servers {
		srv.MustDo(t, "ACL", "SETUSER", "noinfo", "on", ">pw", "~*", "&*", "+@all", "-info")
	}
	url := func(srv *redistest.Server, db string) string {
		return strings.Replace(srv.URL(), "redis://", "redis://noinfo:pw@", 1) + db
	}
	c := s.quarantineClient(t, []string{url(srvS, "/0"), url(srvS, "/1"), url(srvT, "/0")}, &redlock.Options{DisableQuarantine: true})
	if err := srvT.Pause(); err != nil {
		t.Fatal(err)
	}
	defer srvT.Resume()
	l, err := c.TryLock(ctx, "k", 5*time.Second)
	if err == nil {
		l.Release(ctx)
		t.Fatal("TryLock succeeded with only one server answering: one server voted twice")
	}
	if !errors.Is(err, redlock.ErrRefused) || !strings.Contains(err.Error(), "info") {
		t.Fatalf("TryLock by a user without INFO: %v; want ErrRefused naming INFO", err)
	}
}
