package goredisnode_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/admin"
	"github.com/quorumlock/redlock/goredisnode"
)

// exampleClient returns a Client over the example's nodes, with owner as
// the label of its locks, and a function that closes it all.
func exampleClient(owner string) (*redlock.Client, func()) {
	var nodes []*goredisnode.Node
	var lockNodes []redlock.Node
	for _, url := range exampleURLs {
		node, err := goredisnode.Dial(url)
		if err != nil {
			log.Fatal(err)
		}
		nodes = append(nodes, node)
		lockNodes = append(lockNodes, node)
	}
	c, err := redlock.New(lockNodes, &redlock.Options{Owner: owner})
	if err != nil {
		log.Fatal(err)
	}
	return c, func() {
		c.Close()
		for _, n := range nodes {
			n.Close()
		}
	}
}

// Inspect shows who holds a lock, on how many nodes and for how long,
// without the token that would let its reader release the lock.
func Example_inspect() {
	worker, closeWorker := exampleClient("report-worker-7")
	defer closeWorker()
	ctx := context.Background()
	l, err := worker.Lock(ctx, "example:nightly-report", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Release(ctx)

	ops, closeOps := exampleClient("operator")
	defer closeOps()
	ins, err := admin.New(ops).Inspect(ctx, "example:nightly-report")
	if err != nil {
		log.Fatal(err)
	}
	held := 0
	for _, v := range ins.Nodes {
		if v.Held && v.Holder == ins.Holder {
			held++
		}
	}
	fmt.Println(ins.State, "by", ins.Owner)
	fmt.Println("holder is the worker's lock:", ins.Holder == l.ID())
	fmt.Println("ends within the TTL:", time.Until(ins.Ends) <= 10*time.Second)
	fmt.Println("on a quorum:", held >= admin.New(ops).Quorum())
	// Output:
	// held by report-worker-7
	// holder is the worker's lock: true
	// ends within the TTL: true
	// on a quorum: true
}

// ForceRelease removes a lock whose owner is gone, and the next owner's
// fence exceeds the removed one's, so that a resource that checks fences
// refuses the removed owner's late writes.
func Example_forceRelease() {
	crashed, closeCrashed := exampleClient("crashed-worker")
	defer closeCrashed()
	ctx := context.Background()
	stuck, err := crashed.Lock(ctx, "example:stuck", 10*time.Second) // never released
	if err != nil {
		log.Fatal(err)
	}

	ops, closeOps := exampleClient("operator")
	defer closeOps()
	removed, err := admin.New(ops).ForceRelease(ctx, "example:stuck")
	if err != nil {
		log.Fatal(err)
	}
	for _, v := range removed[:1] {
		fmt.Println("removed the lock of", v.Owner)
	}
	next, err := ops.TryLock(ctx, "example:stuck", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer next.Release(ctx)
	fmt.Println("next fence is greater:", next.Fence() > stuck.Fence())
	// Output:
	// removed the lock of crashed-worker
	// next fence is greater: true
}

// LockAll takes several keys together, or none of them.
func Example_lockAll() {
	locks, closeAll := exampleClient("")
	defer closeAll()
	ctx := context.Background()
	// One hash tag keeps the keys in one slot, as a Redis Cluster node
	// requires of one lock's keys.
	l, err := locks.LockAll(ctx, []string{"{order:42}:stock", "{order:42}:invoice"}, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(l.Keys())
	if _, err := locks.TryLock(ctx, "{order:42}:stock", time.Second); err != nil {
		fmt.Println("one of the keys alone is taken too")
	}
	if err := l.Release(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// [{order:42}:invoice {order:42}:stock]
	// one of the keys alone is taken too
}

// A Semaphore lets at most n holders in at once, each with a fenced
// permit on a slot of its own.
func Example_semaphore() {
	locks, closeAll := exampleClient("")
	defer closeAll()
	ctx := context.Background()
	encoders := locks.Semaphore("video-encoders", 2)
	var permits []*redlock.Permit
	for range 2 {
		p, err := encoders.Acquire(ctx, 10*time.Second)
		if err != nil {
			log.Fatal(err)
		}
		permits = append(permits, p)
	}
	fmt.Println("two permits on different slots:", permits[0].Slot != permits[1].Slot)
	if _, err := encoders.TryAcquire(ctx, 10*time.Second); errors.Is(err, redlock.ErrTaken) {
		fmt.Println("a third waits")
	}
	for _, p := range permits {
		if err := p.Release(ctx); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// two permits on different slots: true
	// a third waits
}

// admin.Client.InspectSemaphore shows who holds each slot of a semaphore,
// and ForceReleasePermit frees the slot of a permit whose holder is gone.
func Example_semaphoreOperator() {
	worker, closeWorker := exampleClient("encoder-3")
	defer closeWorker()
	ctx := context.Background()
	p, err := worker.Semaphore("example:encoders", 2).Acquire(ctx, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}

	ops, closeOps := exampleClient("operator")
	defer closeOps()
	encoders := ops.Semaphore("example:encoders", 2)
	slots, err := admin.New(ops).InspectSemaphore(ctx, encoders)
	if err != nil {
		log.Fatal(err)
	}
	for i, slot := range slots {
		if slot.State == admin.KeyHeld {
			fmt.Println("slot held by", slot.Owner, "- the worker's permit:", i == p.Slot && slot.Holder == p.ID())
		}
	}
	if _, err := admin.New(ops).ForceReleasePermit(ctx, encoders, p.Slot); err != nil {
		log.Fatal(err)
	}
	if err := p.Extend(ctx, 10*time.Second); errors.Is(err, redlock.ErrLockLost) {
		fmt.Println("the worker learns it lost its permit")
	}
	// Output:
	// slot held by encoder-3 - the worker's permit: true
	// the worker learns it lost its permit
}

// An Election chooses one leader at a time; its term rises from each
// leader to the next, and fences out a leader that lost its lead.
func Example_election() {
	locks, closeAll := exampleClient("")
	defer closeAll()
	ctx := context.Background()
	election := locks.Election("scheduler-leader", 10*time.Second)
	lead, err := election.Campaign(ctx, "10.0.0.7:8080")
	if err != nil {
		log.Fatal(err)
	}
	// Others read who leads, and its term.
	leader, err := election.Leader(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("leader:", leader.Value, "same term:", leader.Term == lead.Fence())
	// The leadership renews itself; work done as leader stops when
	// lead.Context() is done.
	if err := lead.Release(ctx); err != nil {
		log.Fatal(err)
	}
	if info, err := election.Leader(ctx); err == nil && info.Term == 0 {
		fmt.Println("no leader after resigning")
	}
	// Output:
	// leader: 10.0.0.7:8080 same term: true
	// no leader after resigning
}
