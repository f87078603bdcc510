package faulttest

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/admin"
	"github.com/quorumlock/redlock/internal/wire"
	"github.com/quorumlock/redlock/observe"
)

// scenarios is every fault scenario, in the order they run. SAFETY.md says
// which guarantee each one proves, and which assumption each canary drops.
var scenarios = []scenario{
	{name: "baseline", nodes: 5, clients: 4, fault: "none", body: baseline},
	{name: "minority-sigkill-delayed-restart", nodes: 5, clients: 4, fault: "SIGKILL 2 of 5, restart empty after 3 TTLs; quarantine on", body: minorityKill},
	{name: "canary-restart-no-quarantine", nodes: 3, clients: 2, fault: "SIGKILL 2 of 3 under a held lock, restart empty at once; quarantine off", canary: []Kind{Overlap}, body: func(r *run) { restartUnderLock(r, false) }},
	{name: "restart-with-quarantine", nodes: 3, clients: 2, fault: "as the canary, quarantine on", body: func(r *run) { restartUnderLock(r, true) }},
	{name: "restart-after-full-hearing", nodes: 3, clients: 2, fault: "b has heard every node; then SIGKILL 2 of 3 under a's longer lock, restart empty; quarantine on", body: restartAfterFullHearing},
	{name: "restart-persistent", nodes: 3, clients: 2, fault: "SIGKILL 2 of 3 under a held lock, restart at once from an fsync-always AOF; quarantine off", persist: true, body: restartPersistent},
	{name: "failover-replicated", nodes: 3, clients: 3, replicated: true, fault: "3 master/replica pairs; replication streams of 2 cut; a locks on all 3 masters; those 2 masters SIGKILLed and their replicas promoted; 2 contenders keep trying; quarantine on", body: func(r *run) { failoverReplicated(r, true) }},
	{name: "canary-failover-no-quarantine", nodes: 3, clients: 3, replicated: true, fault: "as failover-replicated, the contenders without quarantine", canary: []Kind{Overlap}, body: func(r *run) { failoverReplicated(r, false) }},
	{name: "failover-sentinel", nodes: 3, clients: 3, replicated: true, sentinels: true, fault: "3 master/replica pairs, each watched by a Redis Sentinel that the clients ask for the master; replication streams of 2 cut; a locks (TTL 6s) on all 3 masters; those 2 masters SIGKILLed, the Sentinels promote their replicas; 2 contenders keep trying; quarantine on", body: func(r *run) { failoverSentinel(r, true) }},
	{name: "canary-failover-sentinel-no-quarantine", nodes: 3, clients: 3, replicated: true, sentinels: true, fault: "as failover-sentinel, the contenders without quarantine", canary: []Kind{Overlap}, body: func(r *run) { failoverSentinel(r, false) }},
	{name: "cluster-restart-with-quarantine", nodes: 3, clients: 3, clusterMasters: 3, fault: "3 Redis Clusters of 3 masters; a locks on all 3; the lock slot's master SIGKILLed and restarted empty in 2 clusters; 2 contenders keep trying; quarantine on", body: func(r *run) { clusterRestart(r, true) }},
	{name: "canary-cluster-restart-no-quarantine", nodes: 3, clients: 3, clusterMasters: 3, fault: "as cluster-restart-with-quarantine, the contenders without quarantine", canary: []Kind{Overlap}, body: func(r *run) { clusterRestart(r, false) }},
	{name: "cluster-reshard", nodes: 3, clients: 3, clusterMasters: 3, fault: "3 Redis Clusters of 3 masters; the lock's slot moves to the next master in all 3 at once, 100ms half-moved each time, under contention; quarantine on", body: clusterReshard},
	{name: "restart-late-in-second", nodes: 3, clients: 2, fault: "SIGKILL 2 of 3 under a held lock, restart empty just before a wall-clock second ends; quarantine on", body: uptimeRounding},
	{name: "sigstop-one", nodes: 3, clients: 3, fault: "SIGSTOP 1 of 3 for a third of the run (1.5s), ReleaseTimeout 100ms", body: func(r *run) { sigstop(r, 1) }},
	{name: "sigstop-majority", nodes: 3, clients: 3, fault: "SIGSTOP 2 of 3 for a third of the run (1.5s)", body: func(r *run) { sigstop(r, 2) }},
	{name: "cut-minority", nodes: 5, clients: 3, fault: "client c0 cut off (blackhole) from 2 of 5", body: func(r *run) { cutOff(r, 2) }},
	{name: "cut-majority", nodes: 5, clients: 3, fault: "client c0 cut off (blackhole) from 3 of 5", body: func(r *run) { cutOff(r, 3) }},
	{name: "overlapping-partitions", nodes: 5, clients: 2, fault: "a sees nodes 0-1-2 only, b sees 2-3-4 only", body: overlappingPartitions},
	{name: "latency-2-of-5", nodes: 5, clients: 3, fault: "200ms latency to 2 of 5 for every client", body: latencyTwoOfFive},
	{name: "latency-eats-validity", nodes: 3, clients: 1, fault: "150ms latency to every node, TTL 100ms", body: latencyEatsValidity},
	{name: "lost-replies", nodes: 3, clients: 3, fault: "replies of applied acquire/extend/release scripts lost at random", body: lostReplies},
	{name: "client-pause", nodes: 3, clients: 2, fault: "holder pauses for 2 TTLs", body: clientPause},
	{name: "force-release-stalled-holder", nodes: 3, clients: 3, fault: "node 0's clock +1s (TTL 1.5s); a's lock, fenced from node 0, removed by an operator's ForceRelease while a is stalled; b, cut from node 0, takes it; a wakes and writes", shim: true, body: func(r *run) { forceRelease(r, removeForce) }},
	{name: "canary-force-release-by-del", nodes: 3, clients: 3, fault: "as force-release-stalled-holder, the operator DELs the key on every node instead", shim: true, canary: []Kind{Fence, Stale}, body: func(r *run) { forceRelease(r, removeByHand) }},
	{name: "canary-force-release-unread-node", nodes: 3, clients: 3, fault: "as force-release-stalled-holder, the operator cut off from node 0", shim: true, canary: []Kind{Fence, Stale}, body: func(r *run) { forceRelease(r, removeUnreadNode) }},
	{name: "clock-forward-one", nodes: 3, clients: 2, fault: "1 of 3 node clocks jumps +1.5s under a 2s lock", shim: true, body: clockForwardOne},
	{name: "canary-clock-forward-majority", nodes: 3, clients: 2, fault: "2 of 3 node clocks jump +30s under a 2s lock", shim: true, canary: []Kind{Overlap, Quorum}, body: clockForwardMajority},
	{name: "clock-backward", nodes: 3, clients: 2, fault: "2 of 3 node clocks jump -2s; liveness measured", shim: true, body: clockBackward},
	{name: "canary-fence-clock-skew", nodes: 3, clients: 2, fault: "1 node clock +60s (more than the TTL); holders' quorums differ", shim: true, canary: []Kind{Fence}, body: fenceClockSkew},
	{name: "node-clock-rate-within", nodes: 3, clients: 2, fault: "node clocks run 0.5% fast (2 of 3) and 0.5% slow (1): within the drift allowance (1% + 2ms)", shim: true, body: func(r *run) { nodeClockRate(r, pick(2, 6), 1.005, 1.005, 0.995) }},
	{name: "node-clock-slow-beyond", nodes: 3, clients: 2, fault: "2 of 3 node clocks run 10% slow", shim: true, body: func(r *run) { nodeClockRate(r, pick(2, 6), 0.9, 0.9, 1) }},
	{name: "canary-node-clock-fast-beyond", nodes: 3, clients: 2, fault: "2 of 3 node clocks run 10% fast (drift allowance 1% + 2ms)", shim: true, canary: []Kind{Overlap, Quorum}, body: func(r *run) { nodeClockRate(r, 1, 1.1, 1.1, 1) }},
	{name: "clock-forward-then-restart", nodes: 3, clients: 2, fault: "node 0's clock +2s, then node 0 restarted empty, under a lock on nodes 0 and 2 only; then its clock put right; quarantine on", shim: true, body: clockForwardThenRestart},
	{name: "canary-restart-then-clock-forward", nodes: 3, clients: 2, fault: "node 0 restarted empty under a lock on nodes 0 and 2 only, then its clock +5s; quarantine on", shim: true, canary: []Kind{Overlap}, body: restartThenClockForward},
	{name: "canary-fence-counter-ahead", nodes: 3, clients: 2, fault: "node 0's clock +2s while its fence counter is written, then put right; a 500ms lock takes its fence from that counter, the next holder's quorum avoids node 0", shim: true, canary: []Kind{Fence}, body: fenceCounterAhead},
	{name: "client-drift-below", nodes: 3, clients: 2, fault: "holder's clock 0.5% slow (drift factor 1%)", body: func(r *run) { clientDrift(r, 0.5) }},
	{name: "canary-client-drift-above", nodes: 3, clients: 2, fault: "holder's clock 10% slow (drift factor 1%)", canary: []Kind{Overlap, Quorum}, body: func(r *run) { clientDrift(r, 10) }},
	{name: "release-expired", nodes: 3, clients: 2, fault: "Release and Extend after the lock expired and changed hands", body: releaseExpired},
	{name: "extend-races-expiry", nodes: 3, clients: 2, fault: "Extend within ±4ms of the deadline while another client polls", body: extendRacesExpiry},
	{name: "late-extend-release", nodes: 3, clients: 2, fault: "holder's Extend and Release delayed 400ms, arriving after a new holder took over", body: lateExtendRelease},
	{name: "many-clients-one-try", nodes: 5, clients: 16, fault: "none; every client makes one TryLock per round at once", body: manyClientsOneTry},
	{name: "slow-node", nodes: 5, clients: 3, fault: "1s latency to 1 of 5, NodeTimeout 250ms", body: slowNode},
	{name: "canary-eviction-allkeys-lru", nodes: 3, clients: 2, fault: "2 of 3 nodes at maxmemory with allkeys-lru, filled under a held lock; quarantine on", canary: []Kind{Overlap, Quorum}, body: func(r *run) { evictUnderLock(r, "allkeys-lru") }},
	{name: "canary-eviction-volatile-lru", nodes: 3, clients: 2, fault: "as the canary above with volatile-lru, the filler keys with an expiry", canary: []Kind{Overlap, Quorum}, body: func(r *run) { evictUnderLock(r, "volatile-lru") }},
	{name: "full-noeviction", nodes: 3, clients: 2, fault: "2 of 3 nodes at maxmemory with noeviction, filled under a held lock, then given room", body: fullNoEviction},
	{name: "autoextend-under-faults", nodes: 5, clients: 3, fault: "holders keep the lock with AutoExtend while nodes are killed, restarted, stopped, holders cut off from 2 or 3 nodes and extend replies lost, in turn; quarantine on", body: autoExtendUnderFaults},
	{name: "semaphore-under-faults", nodes: 5, clients: 4, fault: "4 clients share a semaphore of 2 permits (Acquire, TTL 400ms): hold, extend, release or let expire, while faults come in turn: SIGKILL + restart, a client cut from 2 or 3 nodes, lost acquire/extend/release replies, SIGKILL of 2 restarted later, SIGSTOP; quarantine on", body: semaphoreUnderFaults},
	{name: "semaphore-restart-with-quarantine", nodes: 3, clients: 3, fault: "2 holders of a semaphore of 2 permits, each on all 3 nodes; SIGKILL 2 of 3, restart empty at once; a contender polls TryAcquire; quarantine on", body: func(r *run) { restartUnderPrimitive(r, semaphorePrim, true) }},
	{name: "canary-semaphore-restart-no-quarantine", nodes: 3, clients: 3, fault: "as semaphore-restart-with-quarantine, the contender without quarantine", canary: []Kind{Permits}, body: func(r *run) { restartUnderPrimitive(r, semaphorePrim, false) }},
	{name: "election-under-faults", nodes: 5, clients: 3, fault: "3 candidates campaign (TTL 400ms); a leader holds 2-5 TTLs by automatic renewal, writing with its term, and resigns, while faults come in turn: SIGKILL + restart, the leader cut from 2 or 3 nodes, lost replies, SIGKILL of 2 restarted later, SIGSTOP; quarantine on", body: electionUnderFaults},
	{name: "election-restart-with-quarantine", nodes: 3, clients: 2, fault: "a leads, renewing itself, on all 3 nodes; SIGKILL 2 of 3, restart empty at once; a contender campaigns; quarantine on", body: func(r *run) { restartUnderPrimitive(r, electionPrim, true) }},
	{name: "canary-election-restart-no-quarantine", nodes: 3, clients: 2, fault: "as election-restart-with-quarantine, the contender without quarantine", canary: []Kind{Leaders}, body: func(r *run) { restartUnderPrimitive(r, electionPrim, false) }},
	{name: "lockall-under-faults", nodes: 5, clients: 4, fault: "4 clients take overlapping key sets ({a,b}, {b,c}, {a,c}, {a,b,c} with LockAll, {b} with Lock; TTL 400ms) while faults come in turn: SIGKILL + restart, a client cut from 2 or 3 nodes, lost acquire/extend/release replies, SIGKILL of 2 restarted later, SIGSTOP; quarantine on", body: lockAllUnderFaults},
	{name: "lockall-restart-with-quarantine", nodes: 3, clients: 2, fault: "a holds LockAll {a,b} on all 3 nodes; SIGKILL 2 of 3, restart empty at once; a contender polls TryLockAll {b,c}; quarantine on", body: func(r *run) { restartUnderPrimitive(r, lockAllPrim, true) }},
	{name: "canary-lockall-restart-no-quarantine", nodes: 3, clients: 2, fault: "as lockall-restart-with-quarantine, the contender without quarantine", canary: []Kind{Overlap}, body: func(r *run) { restartUnderPrimitive(r, lockAllPrim, false) }},
	{name: "mixed", nodes: 5, clients: 4, fault: "random kills, restarts, pauses, latency, blackholes, resets and lost replies, healed in turn; quarantine on", body: mixed},
}

// background runs f in a goroutine and returns a function that waits for it.
func background(f func()) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	return func() { <-done }
}

// standard is the load of most scenarios.
func standard(ttl time.Duration) load {
	return load{key: "ft:lock", ttl: ttl, hold: ttl / 10, extend: 0.3, expire: 0.1, gap: 5 * time.Millisecond}
}

// baseline: contention without faults.
func baseline(r *run) {
	cls := r.clients(4, false, redlock.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), pick(2*time.Second, 15*time.Second))
	defer cancel()
	r.contend(ctx, cls, standard(500*time.Millisecond))
	ok := len(r.ops(succeeded))
	if ok == 0 {
		r.Error("no client ever obtained the lock")
	}
	r.note("%d fenced writes", len(r.c.H.Writes))
}

// minorityKill: two of five nodes are killed while clients contend, and
// come back empty three TTLs later, then sit out their quarantine. The
// lock stays available throughout from the other three.
func minorityKill(r *run) {
	const ttl = 400 * time.Millisecond
	r.aged(ttl)
	cls := r.clients(4, true, redlock.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), pick(3*time.Second, 20*time.Second))
	defer cancel()
	l := standard(ttl)
	l.wait = ttl
	wait := background(func() { r.contend(ctx, cls, l) })
	type window struct{ down, up Mono }
	var outages []window
	for cycle := 0; ; cycle++ {
		time.Sleep(pick(500*time.Millisecond, 2*time.Second))
		if ctx.Err() != nil {
			break
		}
		a, b := (2*cycle)%5, (2*cycle+1)%5
		r.c.Kill(a)
		r.c.Kill(b)
		w := window{down: r.c.H.Now()}
		time.Sleep(3 * ttl)
		w.up = r.c.H.Now()
		r.c.Restart(a)
		r.c.Restart(b)
		outages = append(outages, w)
	}
	wait()
	during := len(r.ops(func(op *Op) bool {
		for _, w := range outages {
			if op.OK && op.Start > w.down && op.Return < w.up {
				return true
			}
		}
		return false
	}))
	if during == 0 {
		r.Error("no acquisition succeeded while two of five nodes were down")
	}
	r.note("%d outages; %d obtained while 2 nodes down", len(outages), during)
	r.note("failed calls' node outcomes: %s", countOutcomes(r.ops(func(op *Op) bool { return !op.OK })))
}

// restartUnderLock: a holds the lock on all three nodes; two of them are
// killed and restarted at once, empty. b tries all through a's validity.
// Without quarantine b obtains the lock while a holds it, and the checker
// must say so; with quarantine b gets it only once a's lock is over. A
// restart that outlasts a's lock (on a loaded machine) tests nothing: the
// cycle is done again.
func restartUnderLock(r *run, quarantine bool) {
	const ttlA, ttlB = time.Second, 300 * time.Millisecond
	r.aged(ttlA)
	a := r.client("a", true, redlock.Options{})
	b := r.client("b", quarantine, redlock.Options{NodeTimeout: 30 * time.Millisecond})
	ctx := context.Background()
	for cycles, tries := 0, 0; cycles < pick(1, 4); tries++ {
		if tries == pick(1, 4)+3 {
			r.Fatalf("%d tries, %d with a's lock still valid after the restart", tries, cycles)
		}
		ha := lockEverywhere(r, a, ttlA, nil)
		for i := range 2 {
			r.c.Kill(i)
			r.c.Restart(i)
		}
		restarted := time.Now()
		if !restarted.Before(ha.ClaimedUntil()) {
			r.note("a's lock ended %v before the restart was done; again", restarted.Sub(ha.ClaimedUntil()).Round(time.Millisecond))
			time.Sleep(ttlA)
			continue
		}
		cycles++
		var got time.Duration
		for got == 0 {
			hb, err := b.TryLock(ctx, "ft:lock", ttlB)
			if err == nil {
				got = time.Since(restarted)
				hb.Release(ctx)
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		r.note("b in %v after the restart, a's lock ended %v after it", got.Round(time.Millisecond), ha.ClaimedUntil().Sub(restarted).Round(time.Millisecond))
		// Let the lock end and the restarted nodes age past a's TTL.
		time.Sleep(time.Until(ha.ClaimedUntil()) + ttlA)
	}
}

// restartAfterFullHearing covers the client's shortcut for young nodes: a
// client that has heard every node since a node started counts that
// node's grant without waiting for the others. b first makes rounds in
// which every node answers, so it trusts the young nodes from then on.
// Then a takes a lock ten times longer than b's on all three nodes, two of
// them restart empty, and once they are older than b's TTL b tries all
// through a's validity, its requests to the third node delayed so that
// the restarted nodes always answer first. Their grants must not count
// before the third node, which knows a's TTL, has answered: b gets the
// lock only after a's ends. (Counting them, as a client would that took
// its last full hearing for one after the restart, hands the lock out
// twice at b's first try.)
func restartAfterFullHearing(r *run) {
	const ttlA, ttlB = 2 * time.Second, 200 * time.Millisecond
	r.aged(ttlB)
	a := r.client("a", true, redlock.Options{})
	b := r.client("b", true, redlock.Options{NodeTimeout: 60 * time.Millisecond})
	ctx := context.Background()
	for range pick(1, 3) {
		for range 3 {
			hb := mustLock(r, b, ttlB)
			hb.Release(ctx)
		}
		ha := lockEverywhere(r, a, ttlA, nil)
		for i := range 2 {
			r.c.Kill(i)
			r.c.Restart(i)
		}
		restarted := time.Now()
		b.SetLatency(2, 20*time.Millisecond)
		time.Sleep(ttlB + 50*time.Millisecond)
		var got time.Duration
		for got == 0 && time.Since(restarted) < 2*ttlA {
			hb, err := b.TryLock(ctx, "ft:lock", ttlB)
			if err == nil {
				got = time.Since(restarted)
				hb.Release(ctx)
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		b.SetLatency(2, 0)
		if got == 0 {
			r.Error("b never obtained the lock after a's ended")
		}
		r.note("b in %v after the restart, a's lock ended %v after it", got.Round(time.Millisecond), ha.ClaimedUntil().Sub(restarted).Round(time.Millisecond))
		// Let the lock end and the restarted nodes age past a's TTL.
		time.Sleep(time.Until(ha.ClaimedUntil()) + ttlA)
	}
}

// mustLock waits up to 10s for the lock with Lock, and fails the run if it
// does not get it.
func mustLock(r *run, cl *Client, ttl time.Duration) *Held {
	r.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hl, err := cl.Lock(ctx, "ft:lock", ttl)
	if err != nil {
		r.Fatalf("%s: %v", cl.Name, err)
	}
	return hl
}

// lockEverywhere obtains the lock with mustLock, or with take if it is not
// nil, and waits until every node holds it: a round returns on a quorum,
// and the last grant may still be on its way. A grant that never comes (a
// request cut off by the node timeout on a loaded machine) leaves the lock
// on a bare quorum, which the scenarios that kill nodes under a lock
// cannot use; the lock is then released and taken again, for up to 10s.
func lockEverywhere(r *run, cl *Client, ttl time.Duration, take func() *Held) *Held {
	r.Helper()
	if take == nil {
		take = func() *Held { return mustLock(r, cl, ttl) }
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		hl := take()
		if onEveryNode(r, hl) {
			return hl
		}
		hl.Release(context.Background())
		if time.Now().After(deadline) {
			r.Fatalf("%s: no lock reached every node within 10s: %+v", cl.Name, r.c.SampleAll(hl.Op.LockKeys()))
		}
	}
}

// onEveryNode waits until every node holds the lock (each of its keys), and reports whether
// they all did before the validity the lock claimed when it was taken ended. Not the
// validity it claims now: a leadership's renewals keep that moving, also when the
// leadership was won without a node, which then never holds it.
func onEveryNode(r *run, hl *Held) bool {
	until := hl.ClaimedUntil()
	for {
		all := true
		for _, smp := range r.c.SampleAll(hl.Op.LockKeys()) {
			for _, n := range smp.Nodes {
				all = all && n.Value == hl.Op.Token
			}
		}
		if all || time.Now().After(until) {
			return all
		}
		time.Sleep(time.Millisecond)
	}
}

// uptimeRounding guards the restart marker against Redis's rounding of
// uptime_in_seconds (the difference of two clock readings cut to whole
// seconds): a holds a 1s lock on all three nodes; two of them are killed
// and restarted just before a wall-clock second ends, and b, with
// quarantine on, first asks them just after it, when they report a second
// of uptime after a few milliseconds. The marker takes a second less than
// Redis reports, so b must still wait out a's lock; taken at face value,
// the uptime would let b in up to a second before a's lock ends.
func uptimeRounding(r *run) {
	const ttl = time.Second
	r.aged(ttl)
	a := r.client("a", true, redlock.Options{})
	b := r.client("b", true, redlock.Options{NodeTimeout: 30 * time.Millisecond})
	for attempt := 1; ; attempt++ {
		atFraction(700 * time.Millisecond)
		ha := lockEverywhere(r, a, ttl, nil)
		atFraction(850 * time.Millisecond)
		second := time.Now().Truncate(time.Second)
		for i := range 2 {
			r.c.Kill(i)
			r.c.restart(i)
		}
		if time.Now().Truncate(time.Second).Equal(second) {
			time.Sleep(time.Until(second.Add(time.Second + 10*time.Millisecond)))
			hb := pollUntil(b, "ft:lock", ttl, ha.ClaimedUntil())
			if hb == nil {
				r.note("b never got in while a held the lock")
				return
			}
			hb.Release(context.Background())
			var ages []time.Duration
			for _, st := range admin.New(b.RL).Probe(context.Background())[:2] {
				ages = append(ages, st.Age.Round(time.Millisecond))
			}
			r.note("b in %v before a's lock ended; restarted nodes report ages %v, having run %v",
				time.Until(ha.ClaimedUntil()).Round(time.Millisecond), ages, time.Since(second.Add(850*time.Millisecond)).Round(10*time.Millisecond))
			return
		}
		// The restarts ran past the second's end: try again.
		if attempt == 5 {
			r.Fatal("could not restart two nodes within 150ms in 5 attempts")
		}
		time.Sleep(time.Until(ha.ClaimedUntil()) + ttl)
	}
}

// atFraction waits until the wall clock is at least f into a second, and
// not more than 50ms later.
func atFraction(f time.Duration) {
	now := time.Now()
	frac := time.Duration(now.Nanosecond())
	if frac > f+50*time.Millisecond {
		frac -= time.Second
	}
	if frac < f {
		time.Sleep(f - frac)
	}
}

// restartPersistent: as restartUnderLock without quarantine, but the nodes
// keep their keys in an AOF synced on every write: b never gets in while
// a holds the lock.
func restartPersistent(r *run) {
	const ttl = time.Second
	a := r.client("a", false, redlock.Options{})
	b := r.client("b", false, redlock.Options{NodeTimeout: 30 * time.Millisecond})
	ctx := context.Background()
	for range pick(1, 4) {
		ha := lockEverywhere(r, a, ttl, func() *Held {
			ha, err := a.TryLock(ctx, "ft:lock", ttl)
			if err != nil {
				r.Fatalf("a: %v", err)
			}
			return ha
		})
		for i := range 2 {
			r.c.Kill(i)
			r.c.Restart(i)
		}
		tries := 0
		for time.Now().Before(ha.ClaimedUntil()) {
			tries++
			if hb, err := b.TryLock(ctx, "ft:lock", ttl); err == nil {
				hb.Release(ctx)
			}
			time.Sleep(5 * time.Millisecond)
		}
		r.note("b refused %d times", tries)
		time.Sleep(time.Until(ha.ClaimedUntil()) + 100*time.Millisecond)
	}
}

// sigstop: k of three nodes are stopped with SIGSTOP for the middle third
// of a contention run. With one stopped the lock stays available; with two
// it is not, and comes back once they resume.
func sigstop(r *run, k int) {
	const ttl = 500 * time.Millisecond
	cls := r.clients(3, false, redlock.Options{NodeTimeout: 50 * time.Millisecond, ReleaseTimeout: 100 * time.Millisecond})
	d := pick(4500*time.Millisecond, 15*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	wait := background(func() { r.contend(ctx, cls, standard(ttl)) })
	time.Sleep(d / 3)
	stopped := r.c.H.Now()
	for i := range k {
		r.c.Pause(i)
	}
	time.Sleep(d / 3)
	for i := range k {
		r.c.Resume(i)
	}
	resumed := r.c.H.Now()
	wait()
	during := r.ops(func(op *Op) bool { return op.OK && op.Start > stopped && op.Return < resumed })
	after := r.ops(func(op *Op) bool { return op.OK && op.Start > resumed })
	releases := func(from, to Mono) []time.Duration {
		var d []time.Duration
		for _, op := range r.ops(succeeded) {
			if rel := op.Release; rel != nil && rel.Call > from && rel.Return < to {
				d = append(d, time.Duration(rel.Return-rel.Call))
			}
		}
		return d
	}
	switch k {
	case 1:
		if len(during) == 0 {
			r.Error("no acquisition succeeded while one of three nodes was stopped")
		}
		r.note("%d obtained while stopped; Release while stopped %s, before %s", len(during),
			spread(sorted(releases(stopped, resumed))), spread(sorted(releases(0, stopped))))
	default:
		if len(during) > 0 {
			r.Errorf("%d acquisitions succeeded while a majority was stopped", len(during))
		}
		if len(after) == 0 {
			r.Error("no acquisition succeeded after the stopped nodes resumed")
		}
		r.note("0 obtained while stopped, %d after resume", len(after))
	}
}

func sorted(d []time.Duration) []time.Duration {
	slices.Sort(d)
	return d
}

// cutOff: client c0 cannot reach k of five nodes (its links drop
// everything) while c1 and c2 reach all. With a minority cut off c0 still
// obtains the lock; with a majority it never does, and says ErrNoQuorum.
func cutOff(r *run, k int) {
	const ttl = 500 * time.Millisecond
	cls := r.clients(3, false, redlock.Options{NodeTimeout: 50 * time.Millisecond, ReleaseTimeout: 200 * time.Millisecond})
	nodes := make([]int, k)
	for i := range nodes {
		nodes[i] = i
	}
	cls[0].Cut(true, nodes...)
	ctx, cancel := context.WithTimeout(context.Background(), pick(2*time.Second, 10*time.Second))
	defer cancel()
	// Holders rest after each lock, or c0, whose failed attempts wait for
	// the nodes it cannot reach, would rarely find the lock free.
	l := standard(ttl)
	l.rest = 100 * time.Millisecond
	r.contend(ctx, cls, l)
	c0 := len(r.ops(okBy("c0")))
	others := len(r.ops(func(op *Op) bool { return op.OK && op.Client != "c0" }))
	if others == 0 {
		r.Error("the clients that reach every node never obtained the lock")
	}
	// Alone, c0 obtains the free lock if and only if it reaches a quorum.
	r.c.AwaitExpiry(0)
	hl, err := cls[0].TryLock(context.Background(), l.key, ttl)
	if 2*k < r.c.N() {
		if err != nil {
			r.Errorf("c0, cut off from a minority, could not obtain the free lock: %v", err)
		} else {
			hl.Release(context.Background())
		}
	} else {
		if c0 > 0 || err == nil {
			r.Errorf("c0, cut off from a majority, obtained the lock %d times", c0+map[bool]int{true: 1}[err == nil])
		}
		for _, op := range r.ops(by("c0")) {
			if op.Reason != "no quorum" && op.Reason != "context" {
				r.Errorf("c0 failed with %q, want ErrNoQuorum", op.Err)
				break
			}
		}
	}
	r.note("c0 obtained %d under contention, the others %d", c0, others)
}

// overlappingPartitions: a reaches nodes 0, 1, 2 and b reaches 2, 3, 4.
// Each can form a quorum only with all of its nodes, and they share one:
// both get the lock in turn, never together.
func overlappingPartitions(r *run) {
	const ttl = 500 * time.Millisecond
	opts := redlock.Options{NodeTimeout: 50 * time.Millisecond, ReleaseTimeout: 200 * time.Millisecond}
	a, b := r.client("a", false, opts), r.client("b", false, opts)
	a.Cut(true, 3, 4)
	b.Cut(true, 0, 1)
	ctx, cancel := context.WithTimeout(context.Background(), pick(2*time.Second, 10*time.Second))
	defer cancel()
	l := standard(ttl)
	l.rest = 100 * time.Millisecond
	r.contend(ctx, []*Client{a, b}, l)
	na, nb := len(r.ops(okBy("a"))), len(r.ops(okBy("b")))
	// Alone, each side obtains the free lock.
	r.c.AwaitExpiry(0)
	for _, cl := range []*Client{a, b} {
		hl, err := cl.TryLock(context.Background(), l.key, ttl)
		if err != nil {
			r.Errorf("%s, alone, could not obtain the free lock: %v", cl.Name, err)
			continue
		}
		hl.Release(context.Background())
	}
	r.note("a obtained %d, b %d under contention", na, nb)
}

// latencyTwoOfFive: every client's links to two of five nodes add 200ms,
// twice the node timeout; the three fast nodes carry the lock.
func latencyTwoOfFive(r *run) {
	const ttl = time.Second // NodeTimeout 100ms
	cls := r.clients(3, false, redlock.Options{})
	for _, cl := range cls {
		cl.SetLatency(3, 200*time.Millisecond)
		cl.SetLatency(4, 200*time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), pick(2*time.Second, 15*time.Second))
	defer cancel()
	r.contend(ctx, cls, standard(ttl))
	ok := r.ops(succeeded)
	if len(ok) == 0 {
		r.Error("no acquisition succeeded with three fast nodes of five")
	}
	r.note("acquire %s", spread(durations(ok)))
}

// latencyEatsValidity: every request takes longer than the round may wait
// (150ms against a TTL of 100ms and a node timeout of 60ms), yet is
// applied. Every attempt fails with ErrNoQuorum and leaves nothing behind.
func latencyEatsValidity(r *run) {
	const ttl = 100 * time.Millisecond
	a := r.client("a", false, redlock.Options{NodeTimeout: 60 * time.Millisecond})
	ctx := context.Background()
	// Open a connection to each node and load the scripts first: under
	// this latency a new connection's handshake alone outlasts the round,
	// and the grant would never be sent.
	hl, err := a.TryLock(ctx, "ft:lock", ttl)
	if err != nil {
		r.Fatal(err)
	}
	hl.Release(ctx)
	for i := range r.c.N() {
		a.SetLatency(i, 150*time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond) // let the latency events precede the calls
	fences := func() []string {
		f := make([]string, r.c.N())
		for i := range f {
			v, _ := r.c.Server(i).Do("HGET", wire.MarkerKey("ft:lock"), wire.MarkerFence)
			f[i], _ = v.(string)
		}
		return f
	}
	before := fences()
	n := pick(5, 20)
	for range n {
		_, err := a.TryLock(ctx, "ft:lock", ttl)
		if !errors.Is(err, redlock.ErrNoQuorum) {
			r.Errorf("TryLock under latency beyond the validity: %v, want ErrNoQuorum", err)
		}
		// Every grant timed out, so the checker excuses what is left
		// (see LateGrants). But the latency is the same for every
		// command, so the clean-up, sent later, arrives later: nothing
		// may be left.
		s := r.c.Sample("ft:lock")
		for _, nd := range s.Nodes {
			if nd.Value != "" {
				r.Errorf("node %d holds %q after a failed attempt", nd.Node, nd.Value)
			}
		}
	}
	// Each grant moves its node's fence counter: they were applied.
	after := fences()
	for i := range after {
		if after[i] == before[i] {
			r.Errorf("node %d's fence counter did not move: no grant reached it, and the scenario shows nothing", i)
		}
	}
	r.note("%d attempts failed with ErrNoQuorum; the grants applied late were cleaned up", n)
}

// lostReplies: while three clients contend, the proxies apply the acquire,
// extend and release scripts of random clients on random nodes and lose
// their replies.
func lostReplies(r *run) {
	const ttl = 500 * time.Millisecond
	cls := r.clients(3, false, redlock.Options{NodeTimeout: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), pick(3*time.Second, 20*time.Second))
	defer cancel()
	l := standard(ttl)
	l.extend = 0.5
	wait := background(func() { r.contend(ctx, cls, l) })
	scripts := []string{"acquire", "acquire", "extend", "release"}
	for ctx.Err() == nil {
		cl := cls[rand.N(len(cls))]
		cl.DropReplies(rand.N(r.c.N()), 1, scripts[rand.N(len(scripts))])
		time.Sleep(30 * time.Millisecond)
	}
	wait()
	dropped := 0
	for _, cl := range cls {
		dropped += cl.Dropped()
	}
	if dropped == 0 {
		r.Error("no reply was dropped: the scenario shows nothing")
	}
	r.note("%d replies lost", dropped)
}

// clientPause: a holds the lock and stops for two TTLs, as a process would
// in a long GC pause; b takes the lock once it expires and writes. When a
// wakes, the fenced resource rejects its write, and its Extend and Release
// report that the lock is gone.
func clientPause(r *run) {
	const ttl = 300 * time.Millisecond
	a := r.client("a", false, redlock.Options{NodeTimeout: 30 * time.Millisecond})
	b := r.client("b", false, redlock.Options{NodeTimeout: 30 * time.Millisecond})
	ctx := context.Background()
	n := pick(3, 15)
	for range n {
		ha, err := a.TryLock(ctx, "ft:lock", ttl)
		if err != nil {
			r.Fatalf("a: %v", err)
		}
		if !r.res.Write(ha) {
			r.Fatal("the resource rejected the write of the lock's holder")
		}
		// b polls while a is paused.
		var hb *Held
		for hb == nil {
			hb, _ = b.TryLock(ctx, "ft:lock", 2*time.Second)
			time.Sleep(2 * time.Millisecond)
		}
		if !r.res.Write(hb) {
			r.Fatal("the resource rejected the new holder's write")
		}
		time.Sleep(time.Until(ha.L.Until().Add(ttl))) // a wakes two TTLs after it locked
		if r.res.Write(ha) {
			r.Errorf("the resource accepted a stale write with fence %d after fence %d", ha.Op.Fence, hb.Op.Fence)
		}
		if err := ha.Extend(ctx, ttl); !gone(err) {
			r.Errorf("the paused holder's Extend: %v, want ErrExpired or ErrLockLost", err)
		}
		if err := ha.Release(ctx); !gone(err) {
			r.Errorf("the paused holder's Release: %v, want ErrExpired or ErrLockLost", err)
		}
		hb.Probe()
		hb.Release(ctx)
	}
	r.note("%d stale writes rejected by fence", n)
}

// gone reports whether err says that the lock is no longer held.
func gone(err error) bool {
	return errors.Is(err, redlock.ErrExpired) || errors.Is(err, redlock.ErrLockLost)
}

// clockForwardOne: a holds a lock for 2s; the clock of one node of three
// jumps 1.5s ahead, which expires a's key there. b polls throughout and
// must not obtain the lock before a's lock ends.
func clockForwardOne(r *run) {
	const ttl = 2 * time.Second
	a := r.client("a", false, redlock.Options{})
	b := r.client("b", false, redlock.Options{NodeTimeout: 30 * time.Millisecond})
	ctx := context.Background()
	for range pick(1, 3) {
		ha, err := a.TryLock(ctx, "ft:lock", ttl)
		if err != nil {
			r.Fatalf("a: %v", err)
		}
		time.Sleep(700 * time.Millisecond)
		r.c.JumpClock(0, 1500*time.Millisecond)
		ha.Probe()
		hb := pollUntil(b, "ft:lock", ttl, ha.ClaimedUntil().Add(2*ttl))
		if hb == nil {
			r.Fatal("b never obtained the lock")
		}
		r.note("b in %v after a's lock ended", time.Duration(hb.Op.Return-ha.Op.Until).Round(time.Millisecond))
		hb.Release(ctx)
		r.c.JumpClock(0, 0)
	}
}

// intrude has b poll for the lock on "ft:lock" until a's lock, ha, ends,
// notes how long before that end b got in, if it did, and releases b's
// lock: the canaries whose dropped assumption lets b in while a holds it.
func intrude(r *run, b *Client, ha *Held, ttl time.Duration) {
	hb := pollUntil(b, "ft:lock", ttl, ha.ClaimedUntil())
	if hb == nil {
		r.note("b never got in")
		return
	}
	r.note("b in %v before a's lock ended", time.Duration(ha.Op.Until-hb.Op.Return).Round(time.Millisecond))
	hb.Release(context.Background())
}

// pollUntil tries the lock every few milliseconds until it gets it or the
// deadline passes.
func pollUntil(cl *Client, key string, ttl time.Duration, deadline time.Time) *Held {
	for time.Now().Before(deadline) {
		if hl, err := cl.TryLock(context.Background(), key, ttl); err == nil {
			return hl
		}
		time.Sleep(2 * time.Millisecond)
	}
	return nil
}

// clockForwardMajority: as clockForwardOne, but two of three node clocks
// jump 30s ahead. a's keys expire on a majority and b obtains the lock
// while a holds it: the checker must find it.
func clockForwardMajority(r *run) {
	const ttl = 2 * time.Second
	a := r.client("a", false, redlock.Options{})
	b := r.client("b", false, redlock.Options{NodeTimeout: 30 * time.Millisecond})
	ctx := context.Background()
	ha, err := a.TryLock(ctx, "ft:lock", ttl)
	if err != nil {
		r.Fatalf("a: %v", err)
	}
	time.Sleep(500 * time.Millisecond)
	r.c.JumpClock(0, 30*time.Second)
	r.c.JumpClock(1, 30*time.Second)
	ha.Probe()
	intrude(r, b, ha, ttl)
	// The clocks stay ahead: keys written meanwhile expire by them.
}

// clockBackward: two of three node clocks jump 2s back. That is no threat
// to safety (keys live longer), but costs liveness, measured two ways: how
// much longer the lock of an owner that died blocks others, and how long
// nodes that restarted a moment ago refuse to vote for a free lock.
func clockBackward(r *run) {
	const ttl, jump = time.Second, 2 * time.Second
	r.aged(ttl)
	a := r.client("a", true, redlock.Options{})
	b := r.client("b", true, redlock.Options{NodeTimeout: 30 * time.Millisecond})
	ctx := context.Background()
	back := func(offset time.Duration) {
		r.c.JumpClock(0, offset)
		r.c.JumpClock(1, offset)
	}
	for range pick(1, 3) {
		// An owner dies holding the lock; the clocks jump back.
		ha := mustLock(r, a, ttl)
		back(-jump)
		ha.Probe()
		hb := pollUntil(b, "ft:lock", ttl, ha.ClaimedUntil().Add(jump+10*time.Second))
		if hb == nil {
			r.Fatal("b never obtained the lock")
		}
		hb.Release(ctx)
		late := time.Duration(hb.Op.Return - ha.Op.Until)
		r.note("dead owner's lock blocked %v past its validity", late.Round(10*time.Millisecond))
		back(0) // keys written meanwhile expire early: safe

		// Two nodes restart, empty, and sit out their quarantine; then
		// their clocks jump back with no lock held.
		for i := range 2 {
			r.c.Kill(i)
			r.c.Restart(i)
		}
		restarted := r.c.H.Now()
		hb = pollUntil(b, "ft:lock", ttl, time.Now().Add(10*time.Second))
		if hb == nil {
			r.Fatal("b never obtained the lock after the restart")
		}
		hb.Release(ctx)
		age := time.Duration(r.c.H.Now() - restarted)
		back(-jump)
		jumped := r.c.H.Now()
		hb = pollUntil(b, "ft:lock", ttl, time.Now().Add(jump+10*time.Second))
		if hb == nil {
			r.Fatal("b never obtained the free lock after the jump")
		}
		hb.Release(ctx)
		refused := r.ops(func(op *Op) bool { return !op.OK && op.Client == "b" && op.Start > jumped })
		r.note("nodes restarted %v before the jump refused a free lock for %v (%s)", age.Round(10*time.Millisecond),
			time.Duration(hb.Op.Return-jumped).Round(10*time.Millisecond), countOutcomes(refused))
		back(0)
	}
}

// fenceClockSkew: node 0's clock is 60s ahead, more than the TTL. a locks
// through nodes 0 and 1 (it cannot reach 2) and takes its fence from node
// 0's clock; its lock expires. b locks through nodes 1 and 2 (it cannot
// reach 0) and gets a fence from the true time: lower than a's. Mutual
// exclusion holds; fencing does not.
func fenceClockSkew(r *run) {
	const ttl = 500 * time.Millisecond
	r.c.JumpClock(0, time.Minute)
	a := r.client("a", false, redlock.Options{NodeTimeout: 30 * time.Millisecond, ReleaseTimeout: 100 * time.Millisecond})
	b := r.client("b", false, redlock.Options{NodeTimeout: 30 * time.Millisecond, ReleaseTimeout: 100 * time.Millisecond})
	a.Cut(true, 2)
	b.Cut(true, 0)
	ctx := context.Background()
	ha, err := a.TryLock(ctx, "ft:lock", ttl)
	if err != nil {
		r.Fatalf("a: %v", err)
	}
	hb := pollUntil(b, "ft:lock", ttl, ha.ClaimedUntil().Add(5*time.Second))
	if hb == nil {
		r.Fatal("b never obtained the lock")
	}
	r.note("a's fence %d, b's %d", ha.Op.Fence, hb.Op.Fence)
	hb.Release(ctx)
}

// clientDrift: a's clock runs slow by factor × 1% (the drift factor), so
// a believes its lock valid until its own clock reads Lock.Until: later in
// real time. a keeps the lock to the end it believes; b polls and releases
// at once whenever it gets the lock. Below the drift factor a's belief
// ends before the keys expire; above it, b gets in while a still holds.
func clientDrift(r *run, factor float64) {
	const ttl = time.Second
	const driftFactor = 0.01 // the default of Options.DriftFactor
	a := r.client("a", false, redlock.Options{DriftFactor: driftFactor})
	a.Rate = 1 - factor*driftFactor
	b := r.client("b", false, redlock.Options{NodeTimeout: 30 * time.Millisecond})
	ctx := context.Background()
	var gaps []time.Duration
	for range pick(2, 6) {
		ha, err := a.TryLock(ctx, "ft:lock", ttl)
		if err != nil {
			r.Fatalf("a: %v", err)
		}
		hb := pollUntil(b, "ft:lock", ttl, ha.ClaimedUntil().Add(ttl))
		if hb == nil {
			r.Fatal("b never obtained the lock")
		}
		hb.Release(ctx)
		gaps = append(gaps, time.Duration(hb.Op.Return-ha.Op.Until).Round(100*time.Microsecond))
		time.Sleep(time.Until(ha.ClaimedUntil()))
	}
	r.note("a's clock rate %.3f; b got in %v after a's claimed end (negative: before)", a.Rate, gaps)
}

// releaseExpired: a's lock expires and b takes it. a's Extend and Release
// report ErrExpired and leave b's keys alone.
func releaseExpired(r *run) {
	const ttl = 200 * time.Millisecond
	a := r.client("a", false, redlock.Options{NodeTimeout: 20 * time.Millisecond})
	b := r.client("b", false, redlock.Options{NodeTimeout: 20 * time.Millisecond})
	ctx := context.Background()
	n := pick(5, 30)
	for range n {
		ha, err := a.TryLock(ctx, "ft:lock", ttl)
		if err != nil {
			r.Fatalf("a: %v", err)
		}
		hb := pollUntil(b, "ft:lock", 2*time.Second, ha.ClaimedUntil().Add(time.Second))
		if hb == nil {
			r.Fatal("b never obtained the lock")
		}
		if err := ha.Extend(ctx, ttl); !errors.Is(err, redlock.ErrExpired) {
			r.Errorf("Extend of an expired lock: %v, want ErrExpired", err)
		}
		if err := ha.Release(ctx); !errors.Is(err, redlock.ErrExpired) {
			r.Errorf("Release of an expired lock: %v, want ErrExpired", err)
		}
		hb.Probe()
		if err := hb.Release(ctx); err != nil {
			r.Errorf("b's Release: %v", err)
		}
	}
	r.note("%d expired Extend+Release reported ErrExpired; new holder's keys intact", n)
}

// extendRacesExpiry: a extends its 100ms lock at a random moment within
// 4ms either side of its deadline, while b polls.
func extendRacesExpiry(r *run) {
	const ttl = 100 * time.Millisecond
	a := r.client("a", false, redlock.Options{NodeTimeout: 10 * time.Millisecond})
	b := r.client("b", false, redlock.Options{NodeTimeout: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	wait := background(func() {
		for ctx.Err() == nil {
			if hb, err := b.TryLock(ctx, "ft:lock", ttl); err == nil {
				hb.Release(context.Background())
			}
			time.Sleep(time.Millisecond)
		}
	})
	results := make(map[string]int)
	for range pick(20, 150) {
		var ha *Held
		for ha == nil {
			ha, _ = a.TryLock(ctx, "ft:lock", ttl)
		}
		offset := time.Duration(rand.N(8001)-4000) * time.Microsecond
		time.Sleep(time.Until(ha.L.Until().Add(offset)))
		err := ha.Extend(ctx, ttl)
		switch {
		case err == nil:
			results["ok"]++
			ha.Release(ctx)
		case errors.Is(err, redlock.ErrExpired):
			results["expired"]++
		case errors.Is(err, redlock.ErrLockLost):
			results["lost"]++
		case errors.Is(err, redlock.ErrNoQuorum):
			results["no quorum"]++
		default:
			r.Errorf("Extend: %v", err)
		}
	}
	cancel()
	wait()
	r.note("extends: %v", results)
}

// lateExtendRelease: a's links slow down to 400ms just before its 300ms
// lock ends. Its Extend and Release time out or fail, but their commands
// reach the nodes after b has taken the lock. They must not touch b's keys.
func lateExtendRelease(r *run) {
	const ttl, delay = 300 * time.Millisecond, 400 * time.Millisecond
	a := r.client("a", false, redlock.Options{NodeTimeout: 30 * time.Millisecond, ReleaseTimeout: 2 * time.Second})
	b := r.client("b", false, redlock.Options{NodeTimeout: 30 * time.Millisecond})
	ctx := context.Background()
	n := pick(2, 8)
	for range n {
		ha, err := a.TryLock(ctx, "ft:lock", ttl)
		if err != nil {
			r.Fatalf("a: %v", err)
		}
		var hb *Held
		wait := background(func() { hb = pollUntil(b, "ft:lock", 2*time.Second, ha.ClaimedUntil().Add(2*time.Second)) })
		time.Sleep(time.Until(ha.L.Until().Add(-40 * time.Millisecond)))
		for i := range r.c.N() {
			a.SetLatency(i, delay)
		}
		if err := ha.Extend(ctx, ttl); err == nil {
			r.Error("an Extend that could not reach any node in time succeeded")
		}
		err = ha.Release(ctx)
		var oe *redlock.OpError
		if !errors.As(err, &oe) || !gone(err) {
			r.Errorf("a's late Release: %v, want ErrLockLost or ErrExpired", err)
		}
		wait()
		if hb == nil {
			r.Fatal("b never obtained the lock")
		}
		if oe != nil && countOutcome(oe, observe.OutcomeTaken) == 0 {
			r.Errorf("a's release did not arrive after b took over (%v): the scenario shows nothing", oe)
		}
		hb.Probe()
		hb.Release(ctx)
		for i := range r.c.N() {
			a.SetLatency(i, 0)
		}
	}
	r.note("%d late Extend+Release found the new holder's token and left it", n)
}

func countOutcome(oe *redlock.OpError, o observe.Outcome) int {
	n := 0
	for _, r := range oe.Nodes {
		if r.Outcome == o {
			n++
		}
	}
	return n
}

// manyClientsOneTry: in each round every client makes one TryLock at the
// same moment. At most one wins; a round with no winner (the votes split)
// is counted; the losers leave nothing behind.
func manyClientsOneTry(r *run) {
	const ttl = 2 * time.Second
	n := pick(16, 32)
	cls := r.clients(n, false, redlock.Options{Tries: 1})
	rounds := pick(15, 100)
	none := 0
	for range rounds {
		var wg sync.WaitGroup
		var winners atomic.Int32
		start := make(chan struct{})
		held := make([]*Held, n)
		for i, cl := range cls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if hl, err := cl.TryLock(context.Background(), "ft:lock", ttl); err == nil {
					winners.Add(1)
					held[i] = hl
				}
			}()
		}
		close(start)
		wg.Wait()
		if winners.Load() == 0 {
			none++
		}
		for _, hl := range held {
			if hl != nil {
				hl.Release(context.Background())
			}
		}
	}
	r.note("%d rounds, %d without a winner", rounds, none)
}

// slowNode: every client's link to one of five nodes adds 1s. A round that
// gets a quorum from the other four returns at once, while its request to
// the slow node is still on its way.
func slowNode(r *run) {
	const ttl, timeout = 2 * time.Second, 250 * time.Millisecond
	cls := r.clients(3, false, redlock.Options{NodeTimeout: timeout, ReleaseTimeout: 300 * time.Millisecond})
	for _, cl := range cls {
		cl.SetLatency(4, time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), pick(2*time.Second, 15*time.Second))
	defer cancel()
	var notInFlight atomic.Int32
	var wg sync.WaitGroup
	for _, cl := range cls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				hl, err := cl.TryLock(ctx, "ft:lock", ttl)
				if err != nil {
					// A random pause, as Lock's retries take: the
					// calls of a round that split the four fast nodes
					// between the contenders all end at the slow
					// node's timeout, and contenders that tried again
					// in step split them again (seen: no lock in the
					// 2s of the short profile).
					time.Sleep(time.Millisecond + rand.N(30*time.Millisecond))
					continue
				}
				if cl.InFlight(4) == 0 {
					notInFlight.Add(1)
				}
				time.Sleep(rand.N(5 * time.Millisecond))
				hl.Release(context.Background())
			}
		}()
	}
	wg.Wait()
	ok := r.ops(succeeded)
	d := durations(ok)
	if len(d) == 0 {
		r.Fatal("no acquisition succeeded")
	}
	if n := notInFlight.Load(); n > 0 {
		r.Errorf("%d acquisitions returned only after the slow node's request ended", n)
	}
	r.note("acquire %s (node timeout %v); failed calls %s", spread(d), timeout, spread(durations(r.ops(func(op *Op) bool { return !op.OK }))))
}

// mixed: four clients contend while faults come and go at random: kills
// with an immediate or a delayed restart, pauses, latency, blackholes,
// connection resets and lost replies. At most two nodes suffer a process
// fault at a time. Quarantine is on, as it must be for an immediate
// restart to be safe.
func mixed(r *run) {
	const ttl = 400 * time.Millisecond
	r.aged(ttl)
	cls := r.clients(4, true, redlock.Options{ReleaseTimeout: 300 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), pick(4*time.Second, 60*time.Second))
	defer cancel()
	l := standard(ttl)
	l.wait = ttl // Lock, so that calls of several rounds are checked too
	wait := background(func() { r.contend(ctx, cls, l) })
	kinds := make(map[string]int)
	for ctx.Err() == nil {
		heal := injectRandom(r, cls, kinds)
		time.Sleep(100*time.Millisecond + rand.N(300*time.Millisecond))
		heal()
		time.Sleep(rand.N(200 * time.Millisecond))
	}
	wait()
	if len(r.ops(succeeded)) == 0 {
		r.Error("no acquisition succeeded")
	}
	r.note("faults %v", kinds)
}

// injectRandom injects one random fault, counts it in kinds and returns
// what heals it.
func injectRandom(r *run, cls []*Client, kinds map[string]int) (heal func()) {
	n := r.c.N()
	i, j := rand.N(n), rand.N(n)
	for j == i {
		j = rand.N(n)
	}
	cl := cls[rand.N(len(cls))]
	kind := []string{"kill+restart", "kill 2, restart later", "pause", "pause 2", "latency", "blackhole", "reset", "lost replies"}[rand.N(8)]
	kinds[kind]++
	switch kind {
	case "kill+restart":
		r.c.Kill(i)
		r.c.Restart(i)
		return func() {}
	case "kill 2, restart later":
		r.c.Kill(i)
		r.c.Kill(j)
		return func() { r.c.Restart(i); r.c.Restart(j) }
	case "pause":
		r.c.Pause(i)
		return func() { r.c.Resume(i) }
	case "pause 2":
		r.c.Pause(i)
		r.c.Pause(j)
		return func() { r.c.Resume(i); r.c.Resume(j) }
	case "latency":
		d := time.Duration(10+rand.N(20)) * time.Millisecond
		for _, c := range cls {
			c.SetLatency(i, d)
		}
		return func() {
			for _, c := range cls {
				c.SetLatency(i, 0)
			}
		}
	case "blackhole":
		cl.Cut(true, i, j)
		return func() { cl.Cut(false, i, j) }
	case "reset":
		cl.Refuse(i, true)
		cl.ResetConns(i)
		return func() { cl.Refuse(i, false) }
	default:
		cl.DropReplies(i, 2, []string{"acquire", "extend", "release"}[rand.N(3)])
		return func() {}
	}
}

// limitMemory sets node i's maxmemory to what it uses now plus headroom,
// with the given maxmemory-policy.
func limitMemory(r *run, i int, headroom int64, policy string) {
	r.Helper()
	srv := r.c.Server(i)
	used := usedMemory(r, i)
	for _, kv := range [][2]string{{"maxmemory-policy", policy}, {"maxmemory", strconv.FormatInt(used+headroom, 10)}} {
		if _, err := srv.Do("CONFIG", "SET", kv[0], kv[1]); err != nil {
			r.Fatalf("node %d: CONFIG SET %s %s: %v", i, kv[0], kv[1], err)
		}
	}
}

// dropFiller deletes the keys that fillNode wrote.
const dropFiller = `for _, k in ipairs(redis.call('KEYS', 'ft:filler:*')) do redis.call('DEL', k) end`

// fillNode makes up to n writes of 16KiB filler values to node i, with
// an expiry if expiring, as another user of the node would, and stops at
// the first refused with OOM. It reports whether one was: with an
// evicting policy none is.
func fillNode(r *run, i, n int, expiring bool) (full bool) {
	r.Helper()
	value := strings.Repeat("x", 16<<10)
	for k := range n {
		args := []string{"SET", "ft:filler:" + strconv.Itoa(k), value}
		if expiring {
			args = append(args, "EX", "3600")
		}
		if _, err := r.c.Server(i).Do(args...); err != nil {
			if !strings.HasPrefix(err.Error(), "OOM") {
				r.Fatalf("node %d: filling: %v", i, err)
			}
			return true
		}
	}
	return false
}

// usedMemory returns node i's used_memory.
func usedMemory(r *run, i int) int64 {
	r.Helper()
	v, err := r.c.Server(i).Do("INFO", "memory")
	if err != nil {
		r.Fatalf("node %d: INFO memory: %v", i, err)
	}
	info, _ := v.(string)
	_, used, _ := strings.Cut(info, "used_memory:")
	used, _, _ = strings.Cut(used, "\r\n")
	n, err := strconv.ParseInt(used, 10, 64)
	if err != nil {
		r.Fatalf("node %d: used_memory in INFO memory: %v", i, err)
	}
	return n
}

// keepFull lowers node i's maxmemory below what it uses. A node refuses a
// write when its memory, which counts its connections' buffers, is above
// the limit as the command starts; the test's admin commands each open a
// connection, so a node that refused one is only just full, and may take
// writes again once that connection is gone.
func keepFull(r *run, i int) {
	r.Helper()
	limit := strconv.FormatInt(usedMemory(r, i)-128<<10, 10)
	if _, err := r.c.Server(i).Do("CONFIG", "SET", "maxmemory", limit); err != nil {
		r.Fatalf("node %d: CONFIG SET maxmemory %s: %v", i, limit, err)
	}
}

// evictUnderLock: a holds the lock on all three nodes; then two of them,
// given a memory limit with an evicting policy, are filled by another
// user of the nodes until they have evicted a's key, although they never
// restarted. b then obtains the lock while a holds it, and the checker
// must find it. Quarantine is on for both and cannot help: no node
// restarted. docs/production.md, "Eviction", says never to use these policies.
func evictUnderLock(r *run, policy string) {
	const ttl = 3 * time.Second
	// Eviction takes the restart marker too, and the next script writes
	// it anew from the server's uptime in whole seconds: age the nodes
	// well past the TTL, so that they vote without waiting.
	r.aged(2 * ttl)
	a := r.client("a", true, redlock.Options{})
	b := r.client("b", true, redlock.Options{NodeTimeout: 50 * time.Millisecond})
	ha := lockEverywhere(r, a, ttl, nil)
	// Redis's LRU clock counts seconds: let a's key be older than the
	// filler by more than one.
	time.Sleep(1100 * time.Millisecond)
	for i := range 2 {
		limitMemory(r, i, 256<<10, policy)
		fillNode(r, i, 256, policy == "volatile-lru")
	}
	evicted := 0
	for _, n := range r.c.Sample("ft:lock").Nodes {
		if n.Reached && n.Value == "" {
			evicted++
		}
	}
	ha.Probe()
	r.note("%s evicted a's key on %d of 3 nodes", policy, evicted)
	if evicted < 2 {
		r.Fatalf("the filler evicted a's key on only %d of the 2 full nodes", evicted)
	}
	intrude(r, b, ha, ttl)
}

// fullNoEviction: a holds the lock on all three nodes; two of them,
// given a memory limit with noeviction, are filled until they refuse
// writes (and their limit lowered below what they use, so that they stay
// full). b's attempts are refused at once (ErrRefused, and Lock does not
// wait) while a's lock stays safe; a releases on the full nodes, and its
// key is gone from them. Once the nodes have room again b obtains the
// lock.
func fullNoEviction(r *run) {
	const ttl = 2 * time.Second
	r.aged(ttl)
	a := r.client("a", true, redlock.Options{})
	b := r.client("b", true, redlock.Options{NodeTimeout: 50 * time.Millisecond})
	ctx := context.Background()
	for range pick(1, 3) {
		ha := lockEverywhere(r, a, ttl, nil)
		for i := range 2 {
			limitMemory(r, i, 256<<10, "noeviction")
			if !fillNode(r, i, 1<<12, false) {
				r.Fatalf("node %d never refused a write", i)
			}
			keepFull(r, i)
		}
		refused := 0
		for range 5 {
			_, err := b.TryLock(ctx, "ft:lock", ttl)
			switch {
			case err == nil:
				r.Fatal("b obtained the lock on full nodes while a held it")
			case errors.Is(err, redlock.ErrRefused):
				refused++
			}
		}
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := b.Lock(lctx, "ft:lock", ttl)
		cancel()
		if !errors.Is(err, redlock.ErrRefused) || errors.Is(err, context.DeadlineExceeded) {
			r.Errorf("Lock on full nodes: %v, want ErrRefused at once", err)
		}
		r.note("%d of 5 TryLocks refused (OOM) on full nodes", refused)
		if err := ha.Release(ctx); err != nil {
			r.Errorf("a's Release on full nodes: %v", err)
		}
		// Release returns once a quorum confirmed, here the two full
		// nodes, which are what this checks; the third node's release may
		// still be on its way.
		for _, n := range r.c.Sample("ft:lock").Nodes {
			if n.Node < 2 && n.Value != "" {
				r.Errorf("full node %d keeps a's key after its Release", n.Node)
			}
		}
		for i := range 2 {
			if _, err := r.c.Server(i).Do("CONFIG", "SET", "maxmemory", "0"); err != nil {
				r.Fatalf("node %d: %v", i, err)
			}
		}
		hb := mustLock(r, b, ttl)
		hb.Release(ctx)
		for i := range 2 {
			if _, err := r.c.Server(i).Do("EVAL", dropFiller, "0"); err != nil {
				r.Fatalf("node %d: %v", i, err)
			}
		}
	}
}

// nodeClockRate: the wall clocks of the nodes run at rates (one per node),
// set anew from real time before each of a's locks. a takes a 2s lock on
// every node and dies holding it; b polls until it gets the lock, while
// a's key is sampled every 100ms until a's claimed end, and once more
// right after b got in. A node's key lives TTL/rate of real time, and the
// client sets aside DriftFactor × TTL + MinDrift (22ms of 2s) for it: a
// majority of clocks running fast by more than that lets b in while a
// holds the lock, and the samples find a's keys ending early; fast clocks
// within it, and slow clocks at any rate, only make b wait longer.
func nodeClockRate(r *run, rounds int, rates ...float64) {
	const ttl = 2 * time.Second
	a := r.client("a", false, redlock.Options{})
	b := r.client("b", false, redlock.Options{NodeTimeout: 30 * time.Millisecond})
	var gaps []time.Duration
	for range rounds {
		for i, rate := range rates {
			r.c.JumpClock(i, 0)
			r.c.SetClockRate(i, rate)
		}
		ha := lockEverywhere(r, a, ttl, nil)
		probed := background(func() {
			for time.Until(ha.ClaimedUntil()) > 0 {
				ha.Probe()
				time.Sleep(100 * time.Millisecond)
			}
		})
		hb := pollUntil(b, "ft:lock", ttl, ha.ClaimedUntil().Add(ttl))
		if hb == nil {
			r.Fatal("b never obtained the lock")
		}
		ha.Probe()
		hb.Release(context.Background())
		probed()
		gaps = append(gaps, time.Duration(hb.Op.Return-ha.Op.Until).Round(time.Millisecond))
		awaitGone(r, "ft:lock", 10*time.Second)
	}
	r.note("node clock rates %v; b got in %v after a's claimed end (negative: before)", rates, gaps)
}

// awaitGone waits until no node holds key, for up to limit.
func awaitGone(r *run, key string, limit time.Duration) {
	r.Helper()
	deadline := time.Now().Add(limit)
	for {
		left := false
		for _, n := range r.c.Sample(key).Nodes {
			left = left || n.Value != ""
		}
		if !left {
			return
		}
		if time.Now().After(deadline) {
			r.Fatalf("%q still on some node after %v: %+v", key, limit, r.c.Sample(key).Nodes)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// clockForwardThenRestart: a forward step of one node's clock, then a
// restart of the same node, under a lock that the node's quarantine alone
// protects. a cannot reach node 1 and holds a 3s lock on nodes 0 and 2, a
// bare quorum. Node 0's clock steps 2s ahead (a's key there still has
// most of a second to live by it), and node 0 is at once killed and
// restarted, empty, its clock still 2s ahead. b, with quarantine on,
// polls: node 1 is free and node 2 refuses, so only node 0's quarantine
// keeps b out until a's lock has ended. What is checked:
//
//   - quarantine: b gets the lock only after a's lock ended (no overlap),
//     and b's Probe right after the restart finds node 0 quarantined and
//     less than a second old. Redis measures its uptime between two
//     readings of the stepped clock, so the step taken before the start
//     does not make the node look older (were it counted, the node would
//     report at least a second of age);
//   - fences: once node 0 has left its quarantine b takes the lock on
//     every node, and node 0's grant writes its counter from its clock,
//     2s ahead; b releases it. Then node 0's clock is put right, a 2s
//     step back on a node that keeps its counter, and a and b take the
//     lock in turn (released, or every fourth left to expire). No fence
//     may fall (the checker's fence check across the whole run). Every
//     lock has the 3s TTL, more than the 2s by which node 0's clock, and
//     then its counter, are ahead of true time, as A4 asks:
//     canary-fence-counter-ahead shows a shorter TTL after the clock was
//     put right.
func clockForwardThenRestart(r *run) {
	const ttl, step = 3 * time.Second, 2 * time.Second
	r.aged(ttl)
	// a never hears node 1: its quarantine has the floor of the longest
	// TTL in use, so that nodes that started within the hour vote for it
	// once older than that.
	opts := redlock.Options{NodeTimeout: 30 * time.Millisecond, ReleaseTimeout: 100 * time.Millisecond, Quarantine: ttl}
	a := r.client("a", true, opts)
	b := r.client("b", true, opts)
	ctx := context.Background()
	a.Cut(true, 1)
	ha := mustLock(r, a, ttl)
	// A refusal teaches b a's TTL (the nodes report it), which b then asks
	// restarted nodes to wait out.
	if hb, err := b.TryLock(ctx, "ft:lock", ttl); err == nil {
		hb.Release(ctx)
		r.Fatal("b obtained the lock while a held it on two nodes of three")
	}
	r.c.JumpClock(0, step)
	r.c.Kill(0)
	r.c.Restart(0)
	restarted := time.Now()
	st := admin.New(b.RL).Probe(ctx)[0]
	if st.Health != observe.NodeQuarantined {
		r.Errorf("node 0 right after its restart: %v, want quarantined", st.Health)
	}
	if st.Age >= time.Second {
		r.Errorf("node 0 reports an age of %v %v after its restart: the step before it was counted", st.Age, time.Since(restarted))
	}
	hb := pollUntil(b, "ft:lock", ttl, ha.ClaimedUntil().Add(2*ttl))
	if hb == nil {
		r.Fatal("b never obtained the lock")
	}
	hb.Release(ctx)
	r.note("node 0 aged %v right after its restart; b in %v after a's lock ended", st.Age, time.Duration(hb.Op.Return-ha.Op.Until).Round(time.Millisecond))
	a.Cut(false, 1)

	// Once node 0 votes again, a lock on every node has node 0 write its
	// counter from its clock, 2s ahead.
	deadline := time.Now().Add(3 * ttl)
	for admin.New(b.RL).Probe(ctx)[0].Health != observe.NodeHealthy {
		if time.Now().After(deadline) {
			r.Fatal("node 0 never left its quarantine")
		}
		time.Sleep(50 * time.Millisecond)
	}
	hb = lockEverywhere(r, b, ttl, nil)
	hb.Release(ctx)
	r.c.JumpClock(0, 0)
	fences := []int64{ha.Op.Fence, hb.Op.Fence}
	for i := range pick(4, 12) {
		hl := mustLock(r, []*Client{a, b}[i%2], ttl)
		fences = append(fences, hl.Op.Fence)
		if i%4 == 3 {
			time.Sleep(time.Until(hl.ClaimedUntil()))
		} else {
			hl.Release(ctx)
		}
	}
	r.note("fences, in µs past the first, rise across the step back: %v", relative(fences))
}

// fenceCounterAhead: a node's fence counter, written while its clock was
// ahead, outlives the correction of the clock. Node 0's clock is 2s ahead
// while b takes a 3s lock (A4 holds: 2s is less than the TTL), b's
// requests to node 0 delayed so that the round counts nodes 1 and 2 and
// takes its fence from true time; node 0's grant, applied later, writes
// its counter from its clock, 2s ahead, and b's release leaves the higher
// counter as it is. Node 0's clock is then put right, a step back on a
// node that has a counter. a, whose requests to node 2 are delayed, takes
// a 500ms lock counted on nodes 0 and 1, its fence from node 0's counter,
// and dies. b, cut off from node 0, gets the lock from nodes 1 and 2 once
// a's keys expired, its fence from their clocks: more than a second below
// a's. A4 dropped: the counter hands out fences 2s ahead of the other
// nodes' clocks to a lock whose TTL is shorter than that.
func fenceCounterAhead(r *run) {
	const long, short = 3 * time.Second, 500 * time.Millisecond
	opts := redlock.Options{NodeTimeout: 50 * time.Millisecond, ReleaseTimeout: 100 * time.Millisecond}
	a := r.client("a", false, opts)
	b := r.client("b", false, opts)
	ctx := context.Background()
	r.c.JumpClock(0, 2*time.Second)
	b.SetLatency(0, 40*time.Millisecond)
	first := lockEverywhere(r, b, long, nil)
	first.Release(ctx)
	awaitGone(r, "ft:lock", 5*time.Second) // the release reaches node 0 late too
	b.SetLatency(0, 0)
	r.c.JumpClock(0, 0)
	a.SetLatency(2, 40*time.Millisecond)
	ha := mustLock(r, a, short)
	b.Cut(true, 0)
	hb := pollUntil(b, "ft:lock", short, ha.ClaimedUntil().Add(5*time.Second))
	if hb == nil {
		r.Fatal("b never obtained the lock")
	}
	hb.Release(ctx)
	r.note("fences past b's first lock: a's %+.3fs, then b's %+.3fs", float64(ha.Op.Fence-first.Op.Fence)/1e6, float64(hb.Op.Fence-first.Op.Fence)/1e6)
}

// relative returns the fences less the first.
func relative(fences []int64) []int64 {
	out := make([]int64, len(fences))
	for i, f := range fences {
		out[i] = f - fences[0]
	}
	return out
}

// restartThenClockForward: clockForwardThenRestart in the other order. a
// holds a 3s lock on nodes 0 and 2 (it cannot reach node 1); node 0 is
// killed and restarted, empty, and then its clock steps 5s ahead. Redis's
// uptime, the difference of two wall-clock readings, jumps with the
// clock, so the restart marker takes node 0 for 5s old and it leaves its
// quarantine at once: b obtains the lock from nodes 0 and 1 while a holds
// it. The assumption dropped is A1's: no forward step on a node whose vote
// a lock counts. Without the restart the same step would expire a's key
// on node 0 and let b in the same way.
func restartThenClockForward(r *run) {
	const ttl = 3 * time.Second
	r.aged(ttl)
	// As in clockForwardThenRestart, a never hears node 1.
	opts := redlock.Options{NodeTimeout: 30 * time.Millisecond, ReleaseTimeout: 100 * time.Millisecond, Quarantine: ttl}
	a := r.client("a", true, opts)
	b := r.client("b", true, opts)
	ctx := context.Background()
	a.Cut(true, 1)
	ha := mustLock(r, a, ttl)
	if hb, err := b.TryLock(ctx, "ft:lock", ttl); err == nil {
		hb.Release(ctx)
		r.Fatal("b obtained the lock while a held it on two nodes of three")
	}
	r.c.Kill(0)
	r.c.Restart(0)
	before := admin.New(b.RL).Probe(ctx)[0]
	r.c.JumpClock(0, 5*time.Second)
	after := admin.New(b.RL).Probe(ctx)[0]
	r.note("node 0 aged %v (%v) after its restart, %v (%v) after the step", before.Age, before.Health, after.Age, after.Health)
	intrude(r, b, ha, ttl)
}

// autoExtendUnderFaults: three clients take turns at the lock on five
// nodes. Each holder keeps its 400ms lock with Lock.AutoExtend (an
// extension every third of the TTL) for two to five TTLs, writes to the
// fenced resource while the lock is valid, stops early if the lock's
// context ends, and releases it. Meanwhile faults come in turn, each
// healed before the next: a node killed and restarted at once; two nodes
// killed and restarted 400ms later; a node stopped for 400ms; the current
// holder cut off from two nodes, or from three; the holder's extend
// replies lost on one node. Quarantine is on. Every automatic extension
// is in the history (Extend.Auto), and only those that succeeded carry a
// holder's claim, so the checker judges each holder by the validity the
// library gave it. Beyond the checker: some holder kept its lock past its
// TTL by automatic extensions, and some automatic extension failed under
// a fault.
func autoExtendUnderFaults(r *run) {
	const ttl = 400 * time.Millisecond
	r.aged(ttl)
	cls := r.clients(3, true, redlock.Options{ReleaseTimeout: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), pick(5*time.Second, 60*time.Second))
	defer cancel()
	current, wait := holdInTurn(r, ctx, cls, ttl, func(ctx context.Context, cl *Client) (*Held, error) {
		ctx, stop := context.WithTimeout(ctx, ttl)
		defer stop()
		hl, err := cl.Lock(ctx, "ft:lock", ttl)
		if err == nil {
			hl.L.AutoExtend(0)
		}
		return hl, err
	})
	kinds := faultsInTurn(r, ctx, ttl, []string{"extend"}, current)
	lost := wait()
	var autoOK, autoFailed, pastTTL int
	var longest time.Duration
	for _, op := range r.ops(succeeded) {
		until := op.Until
		for _, e := range op.Extends {
			switch {
			case e.Auto && e.OK:
				autoOK++
				until = e.Until
			case e.Auto:
				autoFailed++
			}
		}
		if until > op.Return+Mono(ttl) {
			pastTTL++
		}
		longest = max(longest, time.Duration(until-op.Return))
	}
	if autoOK == 0 || pastTTL == 0 {
		r.Errorf("%d automatic extensions succeeded, %d locks held past their TTL: AutoExtend never kept a lock", autoOK, pastTTL)
	}
	if autoFailed == 0 {
		r.Error("no automatic extension failed: the faults never reached a holder, and the scenario shows nothing")
	}
	r.note("faults %v; %d locks, %d kept past their TTL (longest %.1f TTLs); automatic extensions %d ok, %d failed; %d lock contexts ended before release",
		kinds, len(r.ops(succeeded)), pastTTL, float64(longest)/float64(ttl), autoOK, autoFailed, lost)
}
