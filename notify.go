package redlock

import (
	"context"
	mathrand "math/rand/v2"
	"sync"
	"time"
)

// A Notifier is a Node that can tell the client when a lock is released,
// so that Lock wakes its waiters at once instead of polling. The release
// script publishes on a channel per key; Notify subscribes to it.
//
// Nodes that do not implement Notifier still work: their waiters poll,
// every Options.RetryDelay on average.
type Notifier interface {
	// Notify subscribes to channel and, for every message published on
	// it until ctx is done, sends on wake without blocking (a wake that
	// finds wake full is dropped). It returns once the subscription is in
	// place, or with an error if it cannot be made.
	Notify(ctx context.Context, channel string, wake chan<- struct{}) error
}

// releasedPrefix starts the name of the channel on which the release
// script announces that a key was deleted (lua/release.lua).
const releasedPrefix = "redlock:released:"

// subscribe asks every node that is a Notifier to wake the caller when key
// is released, until ctx is done. It returns the wake channel, or nil when
// no node could be subscribed.
func (c *Client) subscribe(ctx context.Context, key string) <-chan struct{} {
	wake := make(chan struct{}, 1)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := false
	for _, n := range c.nodes {
		nf, isNotifier := n.(Notifier)
		if !isNotifier {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sctx, cancel := context.WithTimeout(ctx, c.opts.ReleaseTimeout)
			defer cancel()
			// The subscription itself must outlive sctx's timeout: only
			// making it is bounded.
			err := subscribeBounded(sctx, ctx, nf, releasedPrefix+key, wake)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				c.log.Debug("redlock: cannot subscribe to releases; polling instead", "node", n.Name(), "err", err)
				return
			}
			ok = true
		}()
	}
	wg.Wait()
	if !ok {
		return nil
	}
	return wake
}

// subscribeBounded runs nf.Notify for as long as life lasts, but gives up
// waiting for the subscription to be made when setup ends.
func subscribeBounded(setup, life context.Context, nf Notifier, channel string, wake chan<- struct{}) error {
	done := make(chan error, 1)
	go func() { done <- nf.Notify(life, channel, wake) }()
	select {
	case err := <-done:
		return err
	case <-setup.Done():
		return setup.Err()
	}
}

// wakeWindow bounds how long a waiter woken by a release waits before it
// tries: a fifth of RetryDelay, at least 2ms and at most 10ms. Below 2ms,
// as with a RetryDelay of 1ms, woken waiters collide so often that fewer
// of them get the lock (W2 in BENCHMARKS.md, tuned: 356 instead of 488
// hand-overs a second over go-redis). Waiting a random time within
// it keeps many waiters woken at once from sending their rounds together
// and splitting the votes; a round on a local network takes well under a
// millisecond, so the first few apart usually settle it.
func (c *Client) wakeWindow() time.Duration {
	return min(max(c.opts.RetryDelay/5, 2*time.Millisecond), 10*time.Millisecond)
}

// wakeDelay draws the pause after a wake of a waiter that has waited for
// waited: from [0, wakeWindow] for a waiter that has only just begun, and
// from a range that shrinks as the wait grows, to wakeWindow/(1+k) after k
// wake windows. Waiters woken together then mostly try in the order in
// which they began to wait, as in a queue, though no one keeps a queue;
// the randomness still parts waiters that began at about the same time.
func (c *Client) wakeDelay(waited time.Duration) time.Duration {
	w := c.wakeWindow()
	bound := time.Duration(float64(w) * float64(w) / float64(w+max(waited, 0)))
	return time.Duration(mathrand.Int64N(int64(bound) + 1))
}

// A gate lets one goroutine at a time of a Client contend for a key; the
// others wait behind it in the process instead of sending rounds of their
// own that would split the votes.
type gate struct {
	sem     chan struct{} // holds a token while a goroutine contends
	waiters int           // goroutines holding or waiting for the gate; guarded by Client.gmu
}

// enter waits for the gate of key; it returns a function that leaves it.
func (c *Client) enter(ctx context.Context, key string) (func(), error) {
	c.gmu.Lock()
	g := c.gates[key]
	if g == nil {
		g = &gate{sem: make(chan struct{}, 1)}
		c.gates[key] = g
	}
	g.waiters++
	c.gmu.Unlock()
	forget := func() {
		c.gmu.Lock()
		defer c.gmu.Unlock()
		if g.waiters--; g.waiters == 0 {
			delete(c.gates, key)
		}
	}
	select {
	case g.sem <- struct{}{}:
		return func() { <-g.sem; forget() }, nil
	case <-ctx.Done():
		forget()
		return nil, ctx.Err()
	}
}

// handoffWindow is how long a client that has just released a key, and
// woken others with it, holds back before it contends for that key again:
// twice the longest wake delay and then some, so that a woken waiter has
// had the time to finish its round.
func (c *Client) handoffWindow() time.Duration {
	return 2*c.wakeWindow() + 2*time.Millisecond
}

// noteHandoff records that a release of key woke waiters.
func (c *Client) noteHandoff(key string) {
	c.gmu.Lock()
	defer c.gmu.Unlock()
	if len(c.handoffs) >= 1024 { // forget stale entries rather than grow
		now := time.Now()
		for k, t := range c.handoffs {
			if now.Sub(t) > c.handoffWindow() {
				delete(c.handoffs, k)
			}
		}
	}
	c.handoffs[key] = time.Now()
}

// handoffWait returns how long Lock should hold back before contending for
// key, because this client released it moments ago to waiting clients.
func (c *Client) handoffWait(key string) time.Duration {
	c.gmu.Lock()
	defer c.gmu.Unlock()
	t, ok := c.handoffs[key]
	if !ok {
		return 0
	}
	delete(c.handoffs, key)
	return c.handoffWindow() - time.Since(t)
}
