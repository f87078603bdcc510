package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/quorumlock/redlock"
)

// This example locks order 42 over three independent Redis masters, does
// the work, and releases the lock.
//
// The nodes here keep their keys in memory, so that the example runs
// anywhere. Real code makes one Node per master with the goredisnode or
// rueidisnode module, for instance:
//
//	node, err := goredisnode.Dial("redis://10.0.0.7:6379/0")
func Example() {
	nodes := []redlock.Node{
		newMemoryNode("redis-a:6379"),
		newMemoryNode("redis-b:6379"),
		newMemoryNode("redis-c:6379"),
	}
	c, err := redlock.New(nodes, &redlock.Options{Owner: "invoice-worker"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close() // close the client before its nodes

	ctx := context.Background()
	l, err := c.Lock(ctx, "orders:42", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	// Work on order 42: finish before l.Until(), or extend the lock in
	// time; stop when l.Context() is done; send l.Fence() with every write.
	fmt.Println("locked", l.Key(), "valid:", l.Context().Err() == nil)

	if err := l.Release(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("released, valid:", l.Context().Err() == nil)
	// Output:
	// locked orders:42 valid: true
	// released, valid: false
}

// Lock waits while another owner holds the lock, and returns once that
// owner releases it (or its TTL runs out).
func ExampleClient_Lock() {
	nodes := memoryNodes(3)
	c, err := redlock.New(nodes, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	first, err := c.Lock(ctx, "orders:42", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(100 * time.Millisecond) // the first owner's work
		fmt.Println("first owner: releasing")
		first.Release(ctx)
	}()

	// Wait for the lock at most a minute.
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	second, err := c.Lock(wctx, "orders:42", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer second.Release(ctx)
	fmt.Println("second owner: locked", second.Key())
	<-done
	// Output:
	// first owner: releasing
	// second owner: locked orders:42
}

// TryLock makes one attempt and fails at once if another owner holds the
// lock. The *OpError says what each node did.
func ExampleClient_TryLock() {
	nodes := []redlock.Node{
		newMemoryNode("redis-a:6379"),
		newMemoryNode("redis-b:6379"),
		newMemoryNode("redis-c:6379"),
		newMemoryNode("redis-d:6379"),
		newMemoryNode("redis-e:6379"),
	}
	ctx := context.Background()

	// Another process took the lock on order 42 for a minute, and exited,
	// closing its client, without releasing the lock.
	other, err := redlock.New(nodes, &redlock.Options{Owner: "other-process"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := other.TryLock(ctx, "orders:42", time.Minute); err != nil {
		log.Fatal(err)
	}
	other.Close()

	c, err := redlock.New(nodes, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	_, err = c.TryLock(ctx, "orders:42", 10*time.Second)
	if errors.Is(err, redlock.ErrTaken) {
		fmt.Println("orders:42 is taken; try again later")
	}
	var oe *redlock.OpError
	if errors.As(err, &oe) {
		fmt.Printf("%s %s needed %d of %d nodes:\n", oe.Op, oe.Key, oe.Quorum, len(oe.Nodes))
		for _, n := range oe.Nodes {
			// For a taken node, n.TTL is how long the holder has left there.
			fmt.Printf("%s: %s, expires in about %v\n", n.Node, n.Outcome, n.TTL.Round(time.Minute))
		}
	}
	// Output:
	// orders:42 is taken; try again later
	// acquire orders:42 needed 3 of 5 nodes:
	// redis-a:6379: taken, expires in about 1m0s
	// redis-b:6379: taken, expires in about 1m0s
	// redis-c:6379: taken, expires in about 1m0s
	// redis-d:6379: taken, expires in about 1m0s
	// redis-e:6379: taken, expires in about 1m0s
}

// Every owner of a lock gets a greater fence than the owners before it.
// A resource that refuses writes with a fence below the largest it has
// accepted is safe even from an owner that paused past its deadline.
func ExampleLock_Fence() {
	nodes := memoryNodes(3)
	c, err := redlock.New(nodes, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	// storage stands for a database that checks the fence of each write.
	var highest int64
	storage := func(fence int64, what string) {
		if fence < highest {
			fmt.Println("refused:", what)
			return
		}
		highest = fence
		fmt.Println("accepted:", what)
	}

	first, err := c.Lock(ctx, "orders:42", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	storage(first.Fence(), "first owner's write")
	first.Release(ctx)

	second, err := c.Lock(ctx, "orders:42", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer second.Release(ctx)
	fmt.Println("second fence > first fence:", second.Fence() > first.Fence())
	storage(second.Fence(), "second owner's write")
	// A late write of the first owner, made after it lost the lock.
	storage(first.Fence(), "first owner's late write")
	// Output:
	// accepted: first owner's write
	// second fence > first fence: true
	// accepted: second owner's write
	// refused: first owner's late write
}

// Work done under a lock should stop when the lock's context ends: here,
// the lock runs out because the work takes longer than the TTL and nobody
// extends it.
func ExampleLock_Context() {
	nodes := memoryNodes(3)
	c, err := redlock.New(nodes, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	l, err := c.Lock(ctx, "reports:nightly", 200*time.Millisecond)
	if err != nil {
		log.Fatal(err)
	}
	select {
	case <-l.Context().Done():
		fmt.Println("work stopped; lock lost:", errors.Is(context.Cause(l.Context()), redlock.ErrLockLost))
	case <-time.After(time.Minute): // the work
		fmt.Println("work done")
	}
	err = l.Release(ctx)
	fmt.Println("release after the deadline:", errors.Is(err, redlock.ErrExpired))
	// Output:
	// work stopped; lock lost: true
	// release after the deadline: true
}

// Extend gives the owner more time, counted from the extension.
func ExampleLock_Extend() {
	nodes := memoryNodes(3)
	c, err := redlock.New(nodes, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	l, err := c.Lock(ctx, "imports:batch-7", 5*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer l.Release(ctx)
	deadline := l.Until()

	// The import needs longer than planned.
	if err := l.Extend(ctx, 30*time.Second); err != nil {
		log.Fatal(err) // errors.Is(err, redlock.ErrLockLost): stop the work
	}
	fmt.Println("deadline moved out:", l.Until().After(deadline))
	fmt.Println("valid:", l.Context().Err() == nil)
	// Output:
	// deadline moved out: true
	// valid: true
}

// The client's errors wrap the sentinel errors of this package; test for
// them with errors.Is.
func Example_errors() {
	nodes := memoryNodes(3)
	c, err := redlock.New(nodes, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	// A TTL too short to leave any validity after the drift allowance.
	_, err = c.TryLock(ctx, "orders:42", time.Microsecond)
	fmt.Println("bad TTL:", errors.Is(err, redlock.ErrInvalid))

	l, err := c.Lock(ctx, "orders:42", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}

	// Lock gives up when its context ends. The error wraps the context's
	// error and the reason the last round failed.
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = c.Lock(wctx, "orders:42", 10*time.Second)
	cancel()
	fmt.Println("gave up:", errors.Is(err, context.DeadlineExceeded), errors.Is(err, redlock.ErrTaken))

	if err := l.Release(ctx); err != nil {
		log.Fatal(err)
	}
	err = l.Release(ctx)
	fmt.Println("second release:", errors.Is(err, redlock.ErrReleased))
	err = l.Extend(ctx, 10*time.Second)
	fmt.Println("extend after release:", errors.Is(err, redlock.ErrReleased))
	// Output:
	// bad TTL: true
	// gave up: true true
	// second release: true
	// extend after release: true
}

// Readers of an RWLock share it; a writer waits until they are done, and
// while it waits no new reader comes in.
func ExampleClient_RWLock() {
	c, err := redlock.New(memoryNodes(3), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	rw := c.RWLock("catalog")

	r1, err := rw.RLock(ctx, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	r2, err := rw.RLock(ctx, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("two readers:", r1.Context().Err() == nil, r2.Context().Err() == nil)

	_, err = rw.TryLock(ctx, 10*time.Second)
	fmt.Println("writer while they read:", errors.Is(err, redlock.ErrTaken))

	r1.Release(ctx)
	r2.Release(ctx)
	w, err := rw.Lock(ctx, 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("writer after them, fence above theirs:", w.Fence() > r1.Fence() && w.Fence() > r2.Fence())
	w.Release(ctx)
	// Output:
	// two readers: true true
	// writer while they read: true
	// writer after them, fence above theirs: true
}

// A dispatcher takes a lock and hands it to a worker, which adopts it by
// its token, extends it, and releases it when the job is done.
func ExampleClient_Adopt() {
	nodes := memoryNodes(3)
	dispatcher, err := redlock.New(nodes, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer dispatcher.Close()
	worker, err := redlock.New(nodes, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer worker.Close()
	ctx := context.Background()

	l, err := dispatcher.Lock(ctx, "jobs:7", 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	token := l.Token() // sent to the worker with the job

	adopted, err := worker.Adopt(ctx, "jobs:7", token)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("same hold:", adopted.ID() == l.ID(), "fence at least the dispatcher's:", adopted.Fence() >= l.Fence())
	if err := adopted.Extend(ctx, time.Minute); err != nil {
		log.Fatal(err)
	}
	if err := adopted.Release(ctx); err != nil {
		log.Fatal(err)
	}

	_, err = worker.Adopt(ctx, "jobs:7", token)
	fmt.Println("adopt once released:", errors.Is(err, redlock.ErrLockLost))
	// Output:
	// same hold: true fence at least the dispatcher's: true
	// adopt once released: true
}
