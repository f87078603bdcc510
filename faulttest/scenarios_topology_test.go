package faulttest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/internal/wire"
	"github.com/quorumlock/redlock/observe"
)

// The scenarios of this file: an operator's removal of a stalled holder's
// lock, and the failovers and reshards of nodes that are master/replica
// pairs or Redis Clusters.

// How forceRelease's operator removes the lock.
const (
	removeForce      = iota // ForceRelease, reaching every node
	removeByHand            // DEL on every node, no fence counter raised
	removeUnreadNode        // ForceRelease, from an operator cut off from node 0
)

// forceRelease: a holder stalls, and an operator removes its lock while it
// is still valid. Node 0's clock is 1s ahead, less than the 1.5s TTL, as
// A4 allows. a takes the lock on every node with its fence from node 0,
// writes to the fenced resource and stalls, as in a long GC pause, with
// more than a second of validity left. The operator removes the lock; b,
// cut off from node 0, takes it at once from nodes 1 and 2 and writes; a
// wakes, writes three more times and tries to extend and release.
//
// A lock that ends by expiry changes hands a TTL after its grant, by which
// time the other nodes' clocks have passed the fence the fast node gave
// (A4). A removal hands the lock over at once, and b's fence, from nodes 1
// and 2, exceeds a's only because ForceRelease read every node's counter
// and clock, node 0's among them, and raised every counter to the
// largest. With removeForce every write a makes after the removal comes
// after b's and is rejected, and a's Extend and Release report the loss.
// The canaries drop that: a DEL of the key by hand raises no counter
// (removeByHand), and an operator who cannot reach node 0 reads no
// counter or clock as high as a's fence (removeUnreadNode, ForceRelease
// still confirmed by nodes 1 and 2). b's fence is then below a's: the
// checker finds the fence that goes back, and a's writes after b's,
// accepted by the resource (stale).
func forceRelease(r *run, how int) {
	const ttl, skew = 1500 * time.Millisecond, time.Second
	const key = "ft:lock"
	opts := redlock.Options{NodeTimeout: 50 * time.Millisecond, ReleaseTimeout: 100 * time.Millisecond}
	a := r.client("a", false, opts)
	b := r.client("b", false, opts)
	op := r.client("operator", false, opts)
	ctx := context.Background()
	r.c.JumpClock(0, skew)
	b.Cut(true, 0)
	if how == removeUnreadNode {
		op.Cut(true, 0)
	}
	var notes []string
	for range pick(2, 6) {
		ha := lockFencedAhead(r, a, key, ttl, skew)
		if !r.res.Write(ha) {
			r.Fatal("the resource rejected the write of the lock's holder")
		}
		// a stalls; the operator removes its lock.
		left := time.Until(ha.ClaimedUntil())
		if how == removeByHand {
			r.c.DeleteByHand(op.Name, key)
		} else if err := op.ForceRelease(ctx, key); err != nil {
			r.Fatalf("ForceRelease: %v", err)
		}
		hb := pollUntil(b, key, ttl, time.Now().Add(5*time.Second))
		if hb == nil {
			r.Fatal("b never obtained the lock after the removal")
		}
		bWrote := r.res.Write(hb)
		// a wakes and goes on writing.
		accepted := 0
		for range 3 {
			if r.res.Write(ha) {
				accepted++
			}
			time.Sleep(2 * time.Millisecond)
		}
		extendErr, releaseErr := ha.Extend(ctx, ttl), ha.Release(ctx)
		if how == removeForce {
			if !bWrote {
				r.Errorf("the resource rejected b's write (fence %d) after the removal of a's lock (fence %d)", hb.Op.Fence, ha.Op.Fence)
			}
			if accepted > 0 {
				r.Errorf("the resource accepted %d of a's writes after b's: fence %d, b's %d", accepted, ha.Op.Fence, hb.Op.Fence)
			}
			if !gone(extendErr) || !gone(releaseErr) {
				r.Errorf("the removed holder's Extend: %v; Release: %v; want ErrLockLost or ErrExpired", extendErr, releaseErr)
			}
		}
		at := grantMicros(r, ha)
		notes = append(notes, fmt.Sprintf("removed with %v left; fences past a's grant: a's %+.3fs, b's %+.3fs",
			left.Round(time.Millisecond), float64(ha.Op.Fence-at)/1e6, float64(hb.Op.Fence-at)/1e6))
		hb.Release(ctx)
	}
	made, rejected := RemovedWrites(r.c.H)
	if made == 0 {
		r.Error("the removed holder made no write after the removal: the scenario shows nothing")
	}
	r.note("%d writes of removed holders, %d rejected by fence; first round: %s", made, rejected, notes[0])
}

// grantMicros returns when hl's call returned, in microseconds of real
// time, to compare fences with.
func grantMicros(r *run, hl *Held) int64 {
	return r.c.H.Time(hl.Op.Return).UnixMicro()
}

// lockFencedAhead has cl take key on every node with a fence that node 0,
// whose clock is skew ahead, gave from its clock: node 0's fence counter
// holds the lock's fence, which is more than half the skew ahead of real
// time. A round returns on a quorum, and its fence is the largest among
// the grants counted; a lock whose round did not count node 0's grant, or
// whose fence came from a counter that an earlier release raised, is
// released and taken again.
func lockFencedAhead(r *run, cl *Client, key string, ttl, skew time.Duration) *Held {
	r.Helper()
	for range 10 {
		hl := lockEverywhere(r, cl, ttl, nil)
		counter, err := r.c.Server(0).Do("HGET", wire.MarkerKey(key), wire.MarkerFence)
		if err != nil {
			r.Fatal(err)
		}
		if atoi(counter) == hl.Op.Fence && hl.Op.Fence-grantMicros(r, hl) > skew.Microseconds()/2 {
			return hl
		}
		hl.Release(context.Background())
	}
	r.Fatalf("%s: in 10 tries, no lock took its fence from node 0's clock", cl.Name)
	return nil
}

// failoverReplicated: every node is a master with a replica, and every
// process has run for longer than a's TTL. The node markers of the lock's
// slot, which hold a's TTL, reach the replicas; then the replication
// streams of nodes 0 and 1 are cut, and a takes the lock on all three
// masters, its grants reaching no replica of those two. Two contenders try
// all along (they write to the fenced resource when they get the lock);
// the masters of nodes 0 and 1 are killed and their replicas promoted, as
// a failover does, without a's key. With quarantine on, the promoted nodes
// count as just started in the lock's slot (their marker saw another
// replication ID) and refuse until a's TTL has passed since the promotion:
// no contender gets in while a holds the lock, and they get it once its
// lock is over. The canary's contenders have quarantine off: they get the
// lock from the two promoted nodes a few milliseconds after the failover.
func failoverReplicated(r *run, quarantine bool) {
	failover(r, quarantine, time.Second, func() {
		r.c.Failover(0)
		r.c.Failover(1)
	})
}

// failoverSentinel is failoverReplicated with the failover made by Redis
// Sentinel, one per node, and every client following its Sentinels
// (go-redis failover clients): Sentinel takes a master that has not
// answered for a second to be down, then promotes its replica, which takes
// it one to three seconds more. a's TTL is 6s, so that the promotions come
// while a holds the lock.
func failoverSentinel(r *run, quarantine bool) {
	failover(r, quarantine, 6*time.Second, func() { r.c.SentinelFailover(0, 1) })
}

// failover runs the scenario of failoverReplicated, with a's TTL ttlA and
// promote killing the masters of nodes 0 and 1 and promoting their
// replicas.
func failover(r *run, quarantine bool, ttlA time.Duration, promote func()) {
	const ttlB = 300 * time.Millisecond
	const key = "ft:lock"
	r.aged(ttlA)
	a := r.client("a", true, redlock.Options{})
	opts := redlock.Options{NodeTimeout: 30 * time.Millisecond, ReleaseTimeout: 100 * time.Millisecond}
	cs := []*Client{r.client("b", quarantine, opts), r.client("c", quarantine, opts)}
	ctx := context.Background()
	mustLock(r, a, ttlA).Release(ctx)
	for i := range r.c.N() {
		r.c.CaughtUp(i)
	}
	r.c.CutReplication(0, true)
	r.c.CutReplication(1, true)
	ha := lockEverywhere(r, a, ttlA, nil)
	r.res.Write(ha)
	end := ha.ClaimedUntil()
	if quarantine {
		end = end.Add(ttlA)
	}
	cctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	l := standard(ttlB)
	wait := background(func() { r.contend(cctx, cs, l) })
	time.Sleep(30 * time.Millisecond) // the contenders find the lock taken
	promote()
	failedOver := r.c.H.Now()
	if ha.Op.Until < failedOver {
		r.Fatalf("the failover ended %v after a's lock: the scenario shows nothing", time.Duration(failedOver-ha.Op.Until).Round(time.Millisecond))
	}
	// (A contender without quarantine may have its own grant there by
	// now.)
	for i := range 2 {
		if v, _ := r.c.Server(i).Do("GET", key); v != nil && wire.Token(v.(string)) == wire.HandoverToken(ha.L.Token()) {
			r.Fatalf("the promoted replica of node %d holds a's lock: its replication stream was not cut", i)
		}
	}
	wait()
	contenders := func(op *Op) bool { return op.Client != "a" && op.Start > failedOver }
	got := r.ops(func(op *Op) bool { return contenders(op) && op.OK })
	refused := 0
	for _, op := range r.ops(func(op *Op) bool { return contenders(op) && !op.OK }) {
		for _, o := range op.Outcomes {
			if o == observe.OutcomeQuarantined.String() {
				refused++
				break
			}
		}
	}
	if len(got) == 0 {
		r.Fatal("no contender obtained the lock after the failover")
	}
	first := time.Duration(got[0].Return - ha.Op.Until).Round(time.Millisecond)
	if quarantine {
		if refused == 0 {
			r.Error("no contender's attempt was refused by a quarantined node: the scenario shows nothing")
		}
		r.note("%d attempts after the failover refused by quarantine; first contender in %v after a's lock ended; %d locks after", refused, first, len(got))
		return
	}
	r.note("first contender in %v before a's lock ended (failover %v before it)", -first, time.Duration(ha.Op.Until-failedOver).Round(time.Millisecond))
}

// clusterRestart: every node is a Redis Cluster of three masters, each
// master older than a's TTL of 3s. a takes the lock on all three; then
// in clusters 0 and 1 the master of the lock's slot is killed and started
// again at once, empty, with its node configuration: it serves the slot
// again about two seconds later (until then it answers CLUSTERDOWN),
// without a's key, while a's lock has about a second to run. Two
// contenders try all along. With quarantine on, the restarted masters
// refuse until a's TTL has passed since they started, and the contenders
// get the lock after a's has ended. The canary's contenders have
// quarantine off and get it from the two restarted masters as soon as
// they serve.
func clusterRestart(r *run, quarantine bool) {
	const ttlA, ttlB = 3 * time.Second, 300 * time.Millisecond
	const key = "ft:lock"
	r.aged(ttlA)
	opts := redlock.Options{NodeTimeout: 100 * time.Millisecond, ReleaseTimeout: 200 * time.Millisecond}
	a := r.client("a", true, opts)
	cs := []*Client{r.client("b", quarantine, opts), r.client("c", quarantine, opts)}
	ctx := context.Background()
	ha := lockEverywhere(r, a, ttlA, nil)
	r.res.Write(ha)
	end := ha.ClaimedUntil()
	if quarantine {
		end = end.Add(2 * time.Second)
	}
	cctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	wait := background(func() { r.contend(cctx, cs, standard(ttlB)) })
	time.Sleep(30 * time.Millisecond) // the contenders find the lock taken
	for i := range 2 {
		m := r.c.MasterOf(i, key)
		r.c.KillMaster(i, m)
		r.c.RestartMaster(i, m)
	}
	restarted := r.c.H.Now()
	wait()
	got := r.ops(func(op *Op) bool { return op.Client != "a" && op.OK && op.Start > restarted })
	if len(got) == 0 {
		r.Fatal("no contender obtained the lock after the restarts")
	}
	first := time.Duration(got[0].Return - ha.Op.Until).Round(time.Millisecond)
	outcomes := countOutcomes(r.ops(func(op *Op) bool { return op.Client != "a" && !op.OK && op.Start > restarted }))
	if quarantine {
		r.note("first contender in %v after a's lock ended; failed attempts' outcomes after the restarts: %s", first, outcomes)
		return
	}
	r.note("first contender in %v before a's lock ended, %v after the restarts", -first, time.Duration(got[0].Return-restarted).Round(time.Millisecond))
}

// clusterReshard: every node is a Redis Cluster of three masters, and
// three clients contend for the lock (TryLock, with quarantine on; holders
// write to the fenced resource, extend at times and release) while the
// lock's hash slot moves from master to master in all three clusters, as
// a reshard moves it, the moves of the clusters 60ms apart, so that at
// times one cluster's slot is half-moved, at times two or three: each move
// begins
// (the new owner imports the slot, the old one migrates it), lets the
// clients run against the half-moved slot for 100ms, then migrates the
// keys (the lock key, its fence counter and its node marker, with their
// TTLs) and ends. While a slot migrates, the old owner answers TRYAGAIN to
// a script whose keys it has only some of (the fence counter and the
// marker, not the lock key), which go-redis tries again until the node
// timeout ends the request: while the lock is free, a half-moved slot
// does not vote. The checker must find no overlap, and fences rising
// across the moves; some lock must be obtained by a call made while the
// slot moved, and some after the last move.
func clusterReshard(r *run) {
	const ttl = 500 * time.Millisecond
	const key = "ft:lock"
	r.aged(ttl)
	cls := r.clients(3, true, redlock.Options{NodeTimeout: 100 * time.Millisecond, ReleaseTimeout: 200 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	l := standard(ttl)
	l.expire = 0
	wait := background(func() { r.contend(ctx, cls, l) })
	type window struct{ from, to Mono }
	var moving []window
	moves := pick(5, 20)
	for range moves {
		time.Sleep(50 * time.Millisecond)
		var wg sync.WaitGroup
		w := window{from: r.c.H.Now()}
		for i := range r.c.N() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Duration(i) * 60 * time.Millisecond)
				cl := r.c.RedisCluster(i)
				ms := cl.Masters()
				from := r.c.MasterOf(i, key)
				var to *redistest.Server
				for j, m := range ms {
					if m == from {
						to = ms[(j+1)%len(ms)]
					}
				}
				m := r.c.BeginMove(i, key, to)
				time.Sleep(100 * time.Millisecond)
				r.c.FinishMove(i, m)
			}()
		}
		wg.Wait()
		w.to = r.c.H.Now()
		moving = append(moving, w)
	}
	// The clients go on until a call made after the last move has
	// obtained the lock, for up to 3s.
	last := moving[len(moving)-1].to
	after := func(op *Op) bool { return op.OK && op.Start > last }
	for deadline := time.Now().Add(3 * time.Second); len(r.ops(after)) == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wait()
	var during, failed []*Op
	for _, op := range r.ops(nil) {
		for _, w := range moving {
			if op.Start < w.to && op.Return > w.from {
				if op.OK {
					during = append(during, op)
				} else {
					failed = append(failed, op)
				}
				break
			}
		}
	}
	if n := len(r.ops(after)); len(during) == 0 || n == 0 {
		r.Errorf("%d locks obtained by calls made while the slot moved, %d after the last move: the scenario shows nothing", len(during), n)
	}
	r.note("%d moves of the lock's slot in each cluster; calls made while it moved: %d obtained the lock, %d failed (node outcomes: %s); %d locks in all",
		moves, len(during), len(failed), countOutcomes(failed), len(r.ops(succeeded)))
}
