package drivertest

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/internal/wire"
	"github.com/quorumlock/redlock/observe"
)

// clusterKeys are lock keys of every shape that Redis Cluster hashes
// differently: without braces, with a hash tag, with braces that make no
// tag, with several tags, in UTF-8 and in bytes that are not.
var clusterKeys = []string{
	"orders",
	"{user:42}:cart",
	"a{b",
	"a{}b",
	"}{",
	"{}",
	"{}{tag}",
	"{a}{b}",
	"x{y}z{w}",
	"{{nested}}",
	"заказ:17",
	"注文{顧客}",
	"\x00\xff{\xfe\x01}\x80",
	"\xc3\x28{",
}

// testClusterNode uses one Redis Cluster of three masters as the single
// node of a Client. Every script call must reach the master of the lock
// key's slot, and the lock's fence counter and node marker must be in that
// slot, for keys of every shape: otherwise the cluster refuses the call
// (CROSSSLOT, MOVED) and no lock is granted. Fences must grow, batches
// and subscriptions must work through the cluster (ExerciseCluster), and
// a waiter must be woken by a release announced through the cluster.
func (s *suite) testClusterNode(t *testing.T) {
	cl := redistest.StartCluster(t, 3, redistest.Config{})
	// A generous node timeout: the first round learns the cluster's
	// slots, which took longer than the default for a 10s lock, 250ms,
	// on a loaded machine.
	c := s.client(t, []string{cl.URL()}, &redlock.Options{NodeTimeout: 2 * time.Second})
	ctx := ctxT(t)
	keys := append([]string(nil), clusterKeys...)
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
	for range 4 {
		b := make([]byte, 1+r.IntN(12))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		keys = append(keys, string(b))
	}
	served := make(map[*redistest.Server]bool)
	for i, key := range keys {
		key := key + ":" + t.Name()
		master, err := cl.MasterOf(key)
		if err != nil {
			t.Fatal(err)
		}
		if i < len(clusterKeys) {
			served[master] = true
		}
		l, err := c.TryLock(ctx, key, 10*time.Second)
		if err != nil {
			t.Fatalf("TryLock(%q): %v", key, err)
		}
		if got, _ := master.MustDo(t, "GET", key).(string); tokenOf(got) != nodeToken(l.Token()) {
			t.Fatalf("key %q holds %#v on the master of its slot, want the token", key, got)
		}
		if got := master.MustDo(t, "HGET", wire.MarkerKey(key), wire.MarkerFence); got != strconv.FormatInt(l.Fence(), 10) {
			t.Fatalf("key %q: fence counter %#v on the master of its slot, want %d", key, got, l.Fence())
		}
		if got := master.MustDo(t, "EXISTS", wire.MarkerKey(key)); got != int64(1) {
			t.Fatalf("key %q: no node marker on the master of its slot", key)
		}
		until := l.Until()
		if err := l.Extend(ctx, 20*time.Second); err != nil {
			t.Fatalf("Extend(%q): %v", key, err)
		}
		if !l.Until().After(until) {
			t.Fatalf("Extend(%q) did not move the deadline", key)
		}
		if pttl, _ := master.MustDo(t, "PTTL", key).(int64); pttl <= 10000 {
			t.Fatalf("key %q: PTTL %d ms after extending to 20s", key, pttl)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release(%q): %v", key, err)
		}
		if got := master.MustDo(t, "EXISTS", key); got != int64(0) {
			t.Fatalf("key %q still exists after Release", key)
		}
		l2, err := c.TryLock(ctx, key, 10*time.Second)
		if err != nil {
			t.Fatalf("TryLock(%q) after Release: %v", key, err)
		}
		if l2.Fence() <= l.Fence() {
			t.Fatalf("key %q: fence %d after %d", key, l2.Fence(), l.Fence())
		}
		if err := l2.Release(ctx); err != nil {
			t.Fatalf("Release(%q): %v", key, err)
		}
	}
	if len(served) != 3 {
		t.Fatalf("the keys reached %d of the 3 masters", len(served))
	}

	// The node on its own, as the client drives it: scripts, batches
	// and subscriptions routed to the masters.
	ExerciseCluster(t, s.dial(t, cl.URL()), cl, ":exercise:"+t.Name())

	// Notified waiting: B, whose URL names the cluster by one address,
	// polls once an hour, and wakes on A's release.
	one := "redis://" + cl.Addrs()[1] + "?cluster=true"
	b := s.client(t, []string{one}, &redlock.Options{RetryDelay: time.Hour})
	key := "waited{" + t.Name() + "}"
	la, err := c.TryLock(ctx, key, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *redlock.Lock, 1)
	errs := make(chan error, 1)
	go func() {
		lb, err := b.Lock(ctx, key, 30*time.Second)
		if err != nil {
			errs <- err
			return
		}
		got <- lb
	}()
	time.Sleep(100 * time.Millisecond) // B fails a round and waits
	if err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case lb := <-got:
		if lb.Fence() <= la.Fence() {
			t.Fatalf("waiter's fence %d is not above %d", lb.Fence(), la.Fence())
		}
		if err := lb.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
	case err := <-errs:
		t.Fatalf("waiter: %v", err)
	case <-ctx.Done():
		t.Fatal("the waiter did not wake on the release")
	}
}

// testClusterRestartEmpty: three Redis Clusters of three masters each, as
// the three nodes of a Client. A holds a lock; in two of the clusters, the
// master of the key's slot is killed and restarts empty, with its node
// configuration, so that it serves the slot again without A's key. B, a
// new client, must not obtain the lock while A's is valid: a restarted
// master is quarantined for the keys it served. A canary, a new client
// with quarantine disabled that tries in turn with B, must obtain the lock
// while A's is valid, which shows that the test can fail.
//
// A restarted cluster master answers CLUSTERDOWN for its first two
// seconds, so A's TTL leaves B and the canary more than three seconds to
// try once the restarted masters serve again. (With a TTL of 4s, which
// left about one, a loaded machine once gave B no refusal by quarantine
// and the canary no grant in 31 tries.)
func (s *suite) testClusterRestartEmpty(t *testing.T) {
	const ttlA, ttlB = 6 * time.Second, time.Second
	clusters := startClusters(t, 3)
	started := time.Now() // after the last master started
	ctx, key := ctxT(t), keyFor(t)
	urls := make([]string, len(clusters))
	masters := make([]*redistest.Server, len(clusters))
	for i, cl := range clusters {
		urls[i] = cl.URL()
		var err error
		if masters[i], err = cl.MasterOf(key); err != nil {
			t.Fatal(err)
		}
	}
	// Every master has run for longer than A's TTL, as masters in
	// service would have. (uptime_in_seconds counts whole seconds, so it
	// may read a second less than the time run, and the marker takes a
	// second less again for the age.)
	time.Sleep(time.Until(started.Add(ttlA + 2100*time.Millisecond)))
	opts := redlock.Options{NodeTimeout: 500 * time.Millisecond}
	a := s.quarantineClient(t, urls, &opts)
	la := lockOnAll(t, ctx, a, key, ttlA, masters)
	for i, m := range masters[:2] {
		if err := m.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := m.Restart(); err != nil {
			t.Fatal(err)
		}
		if n := m.MustDo(t, "DBSIZE"); n != int64(0) {
			t.Fatalf("cluster %d: the restarted master has %v keys, want none", i, n)
		}
	}

	b := s.quarantineClient(t, urls, &opts)
	canaryOpts := opts
	canaryOpts.DisableQuarantine = true
	canary := s.quarantineClient(t, urls, &canaryOpts)
	tryDuring(t, ctx, la, key, ttlB, b, canary, "quarantined,quarantined,taken")
	expectHealth(t, b, la, observe.NodeQuarantined, observe.NodeQuarantined, observe.NodeHealthy)
	for _, cl := range clusters[:2] {
		if err := cl.WaitOK(); err != nil {
			t.Fatal(err)
		}
	}
	// Liveness: once the restarted masters have run for A's TTL, B gets
	// in.
	lockAfterQuarantine(t, ctx, b, key, ttlB)
}

// startClusters starts n clusters of three masters at once, and closes
// them when t ends.
func startClusters(t *testing.T, n int) []*redistest.Cluster {
	t.Helper()
	clusters := make([]*redistest.Cluster, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range clusters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			clusters[i], errs[i] = redistest.NewCluster(3, redistest.Config{})
		}()
	}
	wg.Wait()
	for _, cl := range clusters {
		if cl != nil {
			t.Cleanup(func() {
				if err := cl.Close(); err != nil {
					t.Error(err)
				}
			})
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return clusters
}

// testClusterReshard: clients contend for a key on one cluster while its
// hash slot moves from master to master, as a reshard moves it: the lock
// key, its fence counter and its node marker go together with MIGRATE.
// Mutual exclusion must hold and fences must grow throughout. Then a lock
// is held while a move of its slot begins: another client finds it taken
// on the old owner, the holder extends and releases it there, and a
// waiter, which the old owner answers TRYAGAIN (the slot's companion keys
// are there, the lock key is not) until the move ends, then gets it from
// the new owner with a greater fence.
func (s *suite) testClusterReshard(t *testing.T) {
	cl := redistest.StartCluster(t, 3, redistest.Config{})
	ctx, key := ctxT(t), keyFor(t)
	slot, err := cl.Slot(key)
	if err != nil {
		t.Fatal(err)
	}
	masters := cl.Masters()
	next := func() *redistest.Server {
		for i, m := range masters {
			if m == cl.Owner(slot) {
				return masters[(i+1)%len(masters)]
			}
		}
		return nil
	}
	clients := make([]*redlock.Client, 3)
	for i := range clients {
		clients[i] = s.client(t, []string{cl.URL()}, &redlock.Options{RetryDelay: 2 * time.Millisecond})
	}
	fences := &fenceLog{t: t}
	// The slot moves while the clients contend, and they contend until
	// it has moved four times. A reshard moves a slot once; the pauses
	// let the clients' maps of the slots catch up between the moves, as
	// a client that follows MOVED redirections only so many times in a
	// row needs.
	moved := make(chan error, 1)
	go func() {
		var err error
		for i := 0; i < 4 && err == nil; i++ {
			time.Sleep(50 * time.Millisecond)
			err = cl.MoveSlot(slot, next())
		}
		moved <- err
	}()
	for done := false; !done; {
		contend(t, ctx, key, 5*time.Second, 5, clients, func(l *redlock.Lock) error {
			time.Sleep(2 * time.Millisecond)
			return fences.check("holder", l)
		})
		select {
		case err := <-moved:
			if err != nil {
				t.Fatal(err)
			}
			done = true
		default:
		}
	}
	t.Logf("%d fences in order across four moves of the slot", fences.n)

	a, b, c := clients[0], clients[1], clients[2]
	la, err := a.TryLock(ctx, key, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	fences.add("holder when the move begins", la)
	to := next()
	move, err := cl.BeginMove(slot, to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryLock(ctx, key, 10*time.Second); !errors.Is(err, redlock.ErrTaken) {
		t.Fatalf("TryLock of a lock held while its slot moves: %v, want ErrTaken", err)
	}
	if err := la.Extend(ctx, 10*time.Second); err != nil {
		t.Fatalf("Extend while the slot moves: %v", err)
	}
	got := make(chan *redlock.Lock, 1)
	failed := make(chan error, 1)
	go func() {
		lc, err := c.Lock(ctx, key, 10*time.Second)
		if err != nil {
			failed <- err
			return
		}
		got <- lc
	}()
	if err := la.Release(ctx); err != nil {
		t.Fatalf("Release while the slot moves: %v", err)
	}
	if err := move.Finish(); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{wire.MarkerKey(key)} {
		if got := to.MustDo(t, "EXISTS", k); got != int64(1) {
			t.Fatalf("%q did not move with the slot", k)
		}
	}
	select {
	case lc := <-got:
		fences.add("waiter after the move", lc)
		if v, _ := to.MustDo(t, "GET", key).(string); tokenOf(v) != nodeToken(lc.Token()) {
			t.Fatalf("the new owner holds %#v, want the waiter's token", v)
		}
		if err := lc.Release(ctx); err != nil {
			t.Fatal(err)
		}
	case err := <-failed:
		t.Fatalf("waiter: %v", err)
	}
}
