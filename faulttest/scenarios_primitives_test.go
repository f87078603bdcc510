package faulttest

import (
	"context"
	"fmt"
	"github.com/quorumlock/redlock/faulttest/history"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock"
)

// The scenarios of the primitives built on the lock: a semaphore's
// permits, an election's leaderships and locks on several keys (LockAll).
// The checker judges them as it judges locks, with the kinds of their own
// guarantees: permits (at most n held at once, one per slot), leaders (at
// most one at once), term (terms rise) and partial (a node holds all of a
// LockAll's keys or none).

const (
	semKey   = "ft:sem"
	electKey = "ft:election"
)

// faultsInTurn injects one fault at a time until ctx ends, each lasting
// about ttl and healed before the next: SIGKILL with an immediate restart,
// a client cut off from 2 nodes, the loss of the next replies of one of
// scripts, SIGKILL of 2 nodes restarted ttl later, SIGSTOP of one node, a
// client cut off from 3 nodes. The client faults hit victim(). It returns
// how many faults of each kind it injected.
func faultsInTurn(r *run, ctx context.Context, ttl time.Duration, scripts []string, victim func() *Client) map[string]int {
	kinds := []string{"kill+restart", "cut from 2", "lost replies", "kill 2, restart later", "pause", "cut from 3"}
	count := make(map[string]int)
	n := r.c.N()
	for k := 0; ; k++ {
		time.Sleep(150*time.Millisecond + rand.N(150*time.Millisecond))
		if ctx.Err() != nil {
			return count
		}
		i, j := rand.N(n), rand.N(n)
		for j == i {
			j = rand.N(n)
		}
		kind := kinds[k%len(kinds)]
		count[kind]++
		switch kind {
		case "kill+restart":
			r.c.Kill(i)
			r.c.Restart(i)
		case "kill 2, restart later":
			r.c.Kill(i)
			r.c.Kill(j)
			time.Sleep(ttl)
			r.c.Restart(i)
			r.c.Restart(j)
		case "pause":
			r.c.Pause(i)
			time.Sleep(ttl)
			r.c.Resume(i)
		case "cut from 2", "cut from 3":
			cl, size := victim(), 2
			if kind == "cut from 3" {
				size = 3
			}
			nodes := rand.Perm(n)[:size]
			cl.Cut(true, nodes...)
			time.Sleep(ttl)
			cl.Cut(false, nodes...)
		case "lost replies":
			victim().DropReplies(i, 2, scripts[rand.N(len(scripts))])
			time.Sleep(ttl)
		}
	}
}

// holdInTurn has each of cls obtain something with obtain, hold it with
// holdWriting, release it and start again, until ctx ends. It returns
// current, which returns the client that holds, waiting up to a TTL for
// one, or else any client; and wait, which waits for the clients to stop
// and returns how many holds ended before their release (lost).
func holdInTurn(r *run, ctx context.Context, cls []*Client, ttl time.Duration, obtain func(context.Context, *Client) (*Held, error)) (current func() *Client, wait func() int32) {
	var holder atomic.Pointer[Client]
	var lost atomic.Int32
	var wg sync.WaitGroup
	for _, cl := range cls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				hl, err := obtain(ctx, cl)
				if err != nil {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				holder.Store(cl)
				if !holdWriting(r, hl, ttl) {
					lost.Add(1)
				}
				holder.CompareAndSwap(cl, nil)
				hl.Release(context.Background())
				time.Sleep(rand.N(20 * time.Millisecond))
			}
		}()
	}
	current = func() *Client {
		for range 20 {
			if cl := holder.Load(); cl != nil {
				return cl
			}
			time.Sleep(ttl / 20)
		}
		return cls[rand.N(len(cls))]
	}
	wait = func() int32 {
		wg.Wait()
		return lost.Load()
	}
	return current, wait
}

// holdWriting holds hl for 2 to 5 TTLs, writing to the fenced resource
// every quarter TTL while hl is valid, and reports whether it held that
// long: false if hl's context ended first (the lock, permit or leadership
// was lost).
func holdWriting(r *run, hl *Held, ttl time.Duration) bool {
	done := hl.Context().Done()
	hold := time.After(time.Duration(2+rand.N(4)) * ttl)
	tick := time.NewTicker(ttl / 4)
	defer tick.Stop()
	for {
		if hl.Valid() {
			r.res.Write(hl)
		}
		select {
		case <-done:
			return false
		case <-hold:
			return true
		case <-tick.C:
		}
	}
}

// anyOf returns a victim function that picks a client at random.
func anyOf(cls []*Client) func() *Client {
	return func() *Client { return cls[rand.N(len(cls))] }
}

// obtainInTurn has each of cls, on a goroutine of its own, obtain
// something with obtain, given at most a TTL, hold it with holdAndRelease
// and start again, until ctx ends; obtain is told the client's index in
// cls and how many tries it made before. It returns a function that waits
// for the clients to stop.
func obtainInTurn(ctx context.Context, cls []*Client, ttl time.Duration, obtain func(ctx context.Context, cl *Client, i, try int) (*Held, error)) (wait func()) {
	var wg sync.WaitGroup
	for i, cl := range cls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for try := 0; ctx.Err() == nil; try++ {
				octx, stop := context.WithTimeout(ctx, ttl)
				hl, err := obtain(octx, cl, i, try)
				stop()
				if err != nil {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				holdAndRelease(hl, ttl)
			}
		}()
	}
	return wg.Wait
}

// holdAndRelease is what a holder of a lock or a permit does in the
// scenarios under faults: it works up to a third of the TTL, maybe (30%)
// extends and works again, and releases, or (10%) lets its hold expire.
func holdAndRelease(hl *Held, ttl time.Duration) {
	time.Sleep(rand.N(ttl / 3))
	if rand.Float64() < 0.3 && hl.Extend(context.Background(), ttl) == nil {
		time.Sleep(rand.N(ttl / 3))
	}
	if rand.Float64() < 0.1 {
		time.Sleep(time.Until(hl.ClaimedUntil()))
	} else {
		hl.Release(context.Background())
	}
	time.Sleep(rand.N(10 * time.Millisecond))
}

// mostAtOnce returns the most of ops held at one instant, by the
// checker's account of holding.
func mostAtOnce(ops []*Op) int {
	return history.MostAtOnce(ops)
}

// semaphoreUnderFaults: four clients share a semaphore of two permits
// while faults come in turn. Beyond the checker: permits were obtained,
// and at some moment both were held.
func semaphoreUnderFaults(r *run) {
	const ttl, n = 400 * time.Millisecond, 2
	r.aged(ttl)
	cls := r.clients(4, true, redlock.Options{ReleaseTimeout: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), pick(4*time.Second, 30*time.Second))
	defer cancel()
	wait := obtainInTurn(ctx, cls, ttl, func(ctx context.Context, cl *Client, _, _ int) (*Held, error) {
		return cl.Acquire(ctx, semKey, n, ttl)
	})
	kinds := faultsInTurn(r, ctx, ttl, []string{"acquire_permit", "extend", "release_permit"}, anyOf(cls))
	wait()
	ops := r.ops(succeeded)
	slots := make(map[int]int)
	for _, op := range ops {
		slots[op.Slot]++
	}
	most := mostAtOnce(ops)
	if most < n {
		r.Errorf("at most %d permits were held at once: the semaphore of %d was never full, and the scenario shows nothing", most, n)
	}
	r.note("%d permits (by slot %v), at most %d held at once; faults %v", len(ops), slots, most, kinds)
	r.note("failed calls' node outcomes: %s", countOutcomes(r.ops(func(op *Op) bool { return !op.OK })))
}

// electionUnderFaults: three candidates campaign; a leader keeps its
// leadership by the automatic renewal for 2 to 5 TTLs, writing to a
// resource fenced by its term while it is valid, and resigns; or it sees
// its leadership end (a renewal found it lost, or none succeeded within
// its validity) and resigns then. Faults come in turn, the client faults
// on the leader. Beyond the checker: some leadership was kept past its
// TTL by renewals, some renewal failed under a fault, and the lead
// changed hands.
func electionUnderFaults(r *run) {
	const ttl = 400 * time.Millisecond
	r.aged(ttl)
	cls := r.clients(3, true, redlock.Options{ReleaseTimeout: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), pick(5*time.Second, 30*time.Second))
	defer cancel()
	current, wait := holdInTurn(r, ctx, cls, ttl, func(ctx context.Context, cl *Client) (*Held, error) {
		ctx, stop := context.WithTimeout(ctx, 2*ttl)
		defer stop()
		return cl.Campaign(ctx, electKey, ttl, cl.Name)
	})
	kinds := faultsInTurn(r, ctx, ttl, []string{"acquire", "elect", "extend", "release"}, current)
	lost := wait()
	ops := r.ops(succeeded)
	var renewed, failed, pastTTL int
	leaders := make(map[string]int)
	for _, op := range ops {
		leaders[op.Client]++
		until := op.Until
		for _, e := range op.Extends {
			if e.OK {
				renewed++
				until = e.Until
			} else {
				failed++
			}
		}
		if until > op.Return+Mono(ttl) {
			pastTTL++
		}
	}
	if renewed == 0 || pastTTL == 0 {
		r.Errorf("%d renewals succeeded, %d leaderships held past their TTL: no leader kept its lead by renewal", renewed, pastTTL)
	}
	if failed == 0 {
		r.Error("no renewal failed: the faults never reached a leader, and the scenario shows nothing")
	}
	if len(ops) < 2 {
		r.Errorf("%d leaderships: no term followed another", len(ops))
	}
	made, rejected := 0, 0
	for _, w := range r.c.H.Writes {
		made++
		if !w.Accepted {
			rejected++
		}
	}
	r.note("%d leaderships (by candidate %v), %d kept past their TTL; renewals %d ok, %d failed; %d ended before resigning; %d writes with the term, %d rejected; faults %v",
		len(ops), leaders, pastTTL, renewed, failed, lost, made, rejected, kinds)
}

// lockAllUnderFaults: four clients take overlapping sets of three keys,
// with LockAll, or one of them with Lock, each client the sets in turn
// from its own first, while faults come in turn. Beyond the checker: two
// LockAlls of different key sets that share a key were obtained.
func lockAllUnderFaults(r *run) {
	const ttl = 400 * time.Millisecond
	r.aged(ttl)
	cls := r.clients(4, true, redlock.Options{ReleaseTimeout: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), pick(4*time.Second, 30*time.Second))
	defer cancel()
	sets := [][]string{{"ft:a", "ft:b"}, {"ft:b", "ft:c"}, {"ft:a", "ft:c"}, {"ft:a", "ft:b", "ft:c"}, {"ft:b"}}
	wait := obtainInTurn(ctx, cls, ttl, func(ctx context.Context, cl *Client, i, try int) (*Held, error) {
		set := sets[(i+try)%len(sets)]
		if len(set) == 1 {
			return cl.Lock(ctx, set[0], ttl)
		}
		return cl.LockAll(ctx, set, ttl)
	})
	kinds := faultsInTurn(r, ctx, ttl, []string{"acquire", "extend", "release"}, anyOf(cls))
	wait()
	bySet := make(map[string]int)
	for _, op := range r.ops(succeeded) {
		bySet[op.Key]++
	}
	met := false
	for i, x := range sets {
		for _, y := range sets[i+1:] {
			shared := slices.ContainsFunc(x, func(k string) bool { return slices.Contains(y, k) })
			met = met || shared && len(x) > 1 && len(y) > 1 && bySet[strings.Join(x, ",")] > 0 && bySet[strings.Join(y, ",")] > 0
		}
	}
	if !met {
		r.Errorf("locks by key set %v: no two LockAlls sharing a key were obtained, and the scenario shows nothing", bySet)
	}
	r.note("locks by key set %v; faults %v", bySet, kinds)
	r.note("failed calls' node outcomes: %s", countOutcomes(r.ops(func(op *Op) bool { return !op.OK })))
}

// A primitive is how the clients of restartUnderPrimitive take one of the
// primitives: holders clients each take it, on every node; a contender
// tries it once, or for a short while.
type primitive struct {
	name    string
	holders int
	hold    func(r *run, cl *Client, ttl time.Duration) *Held
	try     func(cl *Client, ttl time.Duration) (*Held, error)
	cycles  int // short profile; the long makes 4
}

var semaphorePrim = primitive{
	name: "permit", holders: 2, cycles: 1,
	hold: func(r *run, cl *Client, ttl time.Duration) *Held {
		return lockEverywhere(r, cl, ttl, func() *Held {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			hl, err := cl.Acquire(ctx, semKey, 2, ttl)
			if err != nil {
				r.Fatalf("%s: %v", cl.Name, err)
			}
			return hl
		})
	},
	try: func(cl *Client, ttl time.Duration) (*Held, error) {
		return cl.TryAcquire(context.Background(), semKey, 2, ttl)
	},
}

var electionPrim = primitive{
	name: "leadership", holders: 1, cycles: 2,
	hold: func(r *run, cl *Client, ttl time.Duration) *Held {
		return lockEverywhere(r, cl, ttl, func() *Held {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			hl, err := cl.Campaign(ctx, electKey, ttl, cl.Name)
			if err != nil {
				r.Fatalf("%s: %v", cl.Name, err)
			}
			return hl
		})
	},
	// A campaign is Lock's wait: it is given a short while.
	try: func(cl *Client, ttl time.Duration) (*Held, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		return cl.Campaign(ctx, electKey, ttl, cl.Name)
	},
}

var lockAllPrim = primitive{
	name: "LockAll", holders: 1, cycles: 1,
	hold: func(r *run, cl *Client, ttl time.Duration) *Held {
		return lockEverywhere(r, cl, ttl, func() *Held {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			hl, err := cl.LockAll(ctx, []string{"ft:a", "ft:b"}, ttl)
			if err != nil {
				r.Fatalf("%s: %v", cl.Name, err)
			}
			return hl
		})
	},
	try: func(cl *Client, ttl time.Duration) (*Held, error) {
		return cl.TryLockAll(context.Background(), []string{"ft:b", "ft:c"}, ttl)
	},
}

// restartUnderPrimitive is restartUnderLock for the primitives: the
// holders (a, or a0 and a1 for the semaphore of two permits) each hold
// what p takes on all three nodes, with quarantine; two nodes are killed
// and restarted at once, empty; b tries all along. A leadership keeps
// renewing itself: its renewals fail on the restarted nodes, and it ends
// at its validity. Without quarantine b gets in from the two empty nodes
// while the holders hold (a third permit, a second leader, an overlap on
// key b), and the checker must say so; with quarantine b gets in only
// once they no longer hold, which the test waits for, for up to 10s. A
// restart that outlasts a holder's validity (on a loaded machine) tests
// nothing: the cycle is done again.
func restartUnderPrimitive(r *run, p primitive, quarantine bool) {
	const ttlA, ttlB = time.Second, 300 * time.Millisecond
	r.aged(ttlA)
	var holders []*Client
	for i := range p.holders {
		name := "a"
		if p.holders > 1 {
			name = fmt.Sprintf("a%d", i)
		}
		holders = append(holders, r.client(name, true, redlock.Options{}))
	}
	b := r.client("b", quarantine, redlock.Options{NodeTimeout: 30 * time.Millisecond})
	ctx := context.Background()
	for cycles, tries := 0, 0; cycles < pick(p.cycles, 4); tries++ {
		if tries == pick(p.cycles, 4)+3 {
			r.Fatalf("%d tries, %d with the holders' %s still valid after the restart", tries, cycles, p.name)
		}
		var hs []*Held
		for _, cl := range holders {
			hs = append(hs, p.hold(r, cl, ttlA))
		}
		for i := range 2 {
			r.c.Kill(i)
			r.c.Restart(i)
		}
		restarted := time.Now()
		first := slices.MinFunc(hs, func(x, y *Held) int { return x.ClaimedUntil().Compare(y.ClaimedUntil()) }).ClaimedUntil()
		if !restarted.Before(first) {
			r.note("a holder's %s ended %v before the restart was done; again", p.name, restarted.Sub(first).Round(time.Millisecond))
			for _, hl := range hs {
				<-hl.Context().Done()
				hl.Release(ctx)
			}
			time.Sleep(ttlA)
			continue
		}
		cycles++
		var hb *Held
		for hb == nil {
			var err error
			if hb, err = p.try(b, ttlB); err == nil {
				break
			}
			if time.Since(restarted) > 10*time.Second {
				r.Fatalf("b: no %s within 10s of the restart: %v", p.name, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
		got := time.Since(restarted)
		var ends []time.Duration
		for _, hl := range hs {
			ends = append(ends, hl.ClaimedUntil().Sub(restarted).Round(time.Millisecond))
		}
		r.note("b's %s in %v after the restart; the holders' ended %v after it", p.name, got.Round(time.Millisecond), ends)
		hb.Release(ctx)
		// Let the holders' hold end, and the restarted nodes age past
		// their TTL. A leadership that renewed itself ends when its
		// renewals fail.
		for _, hl := range hs {
			select {
			case <-hl.Context().Done():
			case <-time.After(10 * time.Second):
				r.Fatalf("the holder's %s did not end within 10s of the restart", p.name)
			}
			hl.Release(ctx)
		}
		time.Sleep(time.Until(slices.MaxFunc(hs, func(x, y *Held) int { return x.ClaimedUntil().Compare(y.ClaimedUntil()) }).ClaimedUntil()) + ttlA)
	}
}
