package redlock

import (
	"context"
	"math"
	mathrand "math/rand/v2"
	"sync"
	"time"

	"github.com/quorumlock/redlock/driver"
)

// This file is how Lock waits: the loop of rounds, the pauses between
// them, the announcements of releases that cut a pause short, and the
// queue of one Client's goroutines that want the same key.

// lock makes acquisition rounds until one succeeds, or only one without
// wait: it is Lock, or TryLock, after the checks. It returns the number of
// rounds it made. The error, when there is one, is an *OpError. A round
// that failed with ErrRefused ends the wait: the nodes that refused will
// refuse again.
func (c *Client) lock(ctx context.Context, ks keyset, ttl time.Duration, wait bool) (*Lock, int, error) {
	key := ks.name
	w := waiter{c: c, ks: ks, queue: wait, begin: time.Now()}
	defer w.stop()
	var last *OpError // the last completed round's failure
	for round := 1; ; round++ {
		err := w.wait(ctx, round)
		if err == nil {
			err = expired(ctx)
		}
		if err != nil {
			e := &OpError{Op: "acquire", Key: key, Quorum: c.quorum, Rounds: round - 1, ctxErr: err}
			if last != nil {
				e.Nodes, e.Err = last.Nodes, last.Err
			}
			return nil, round - 1, e
		}
		l, e := c.acquire(ctx, ks, ttl, round)
		if e == nil {
			return l, round, nil
		}
		e.Rounds = round
		if err := expired(ctx); err != nil {
			// The round was cut short: its reason is the context's.
			e.ctxErr, e.Err = err, nil
			if last != nil {
				e.Err = last.Err
			}
			return nil, round, e
		}
		if !wait || e.Err == ErrRefused || c.opts.Tries > 0 && round >= c.opts.Tries {
			return nil, round, e
		}
		last = e
	}
}

// expired returns ctx.Err(), or context.DeadlineExceeded once ctx's
// deadline has passed though ctx is not done yet: the timer that ends a
// context fires late on a loaded machine, and a round sent after the
// deadline fails for want of time (its requests' deadlines have passed),
// not for anything the nodes said, so it must not stand as the reason of
// the wait's end.
func expired(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// A waiter is the waiting of one Lock call between its rounds.
type waiter struct {
	c     *Client
	ks    keyset // the lock's keys; its name names its queue in the Client
	queue bool   // wait behind the Client's other goroutines (Lock, not TryLock)
	begin time.Time

	gate   *gate           // the key's gate, once entered
	wake   <-chan struct{} // the key's release announcements; nil if none
	cancel func()          // ends the subscription
}

// wait returns when round may be sent, or with the context's error.
//
// Before the first round it queues behind the Client's other goroutines
// that wait for the key, and holds back if this Client has just released
// the key to waiters of other clients. Before the second it subscribes to
// the key's release announcements and, once subscribed, returns at once:
// a release between the first round and the subscription would otherwise
// go unnoticed. Before later rounds it waits for an announcement, or for
// a release by another goroutine of this Client, then a short random
// pause; or else a random pause around Options.RetryDelay.
func (w *waiter) wait(ctx context.Context, round int) error {
	c := w.c
	switch round {
	case 1:
		if !w.queue {
			return ctx.Err()
		}
		g, err := c.enter(ctx, w.ks.name)
		if err != nil {
			return err
		}
		w.gate = g
		return sleep(ctx, c.handoffWait(w.ks.name))
	case 2:
		sctx, cancel := context.WithCancel(ctx)
		w.cancel = cancel
		if w.wake = c.subscribe(sctx, w.ks.channels()); w.wake != nil {
			return ctx.Err()
		}
	}
	var local <-chan struct{} // releases by this Client's goroutines
	if w.gate != nil {
		local = w.gate.wake
	}
	t := time.NewTimer(c.retryDelay())
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	case <-w.wake:
	case <-local:
	}
	return sleep(ctx, c.wakeDelay(time.Since(w.begin)))
}

// stop ends the subscription and leaves the gate.
func (w *waiter) stop() {
	if w.cancel != nil {
		w.cancel()
	}
	if w.gate != nil {
		w.c.leave(w.ks.name, w.gate)
	}
}

// sleep waits for d or until ctx is done, and returns ctx.Err() if ctx
// ended first.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// retryDelay draws the pause before the next round when no release was
// announced: from [RetryDelay/2, 3*RetryDelay/2).
func (c *Client) retryDelay() time.Duration {
	d := c.opts.RetryDelay
	half, x := d/2, time.Duration(mathrand.Int64N(int64(d)))
	if x > math.MaxInt64-half { // only for RetryDelays of centuries
		return math.MaxInt64
	}
	return half + x
}

// wakeWindow bounds how long a waiter woken by a release waits before it
// tries: a fifth of RetryDelay, at least 2ms and at most 10ms. Waiting a
// random time within it keeps many waiters woken at once from sending
// their rounds together and splitting the votes; a round on a local
// network takes well under a millisecond, so the first few apart usually
// settle it. Below 2ms woken waiters collide so often that fewer of them
// get the lock (BENCHMARKS.md, W2 tuned).
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

// releasedPrefix starts the name of the channel on which the release
// script announces that a key was deleted (lua/release.lua).
const releasedPrefix = "redlock:released:"

// subscribe asks every node that is a driver.Notifier to wake the caller
// when a message is published on one of channels, until ctx is done. It
// returns the wake channel, or nil when no node could be subscribed.
func (c *Client) subscribe(ctx context.Context, channels []string) <-chan struct{} {
	wake := make(chan struct{}, 1)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := false
	for _, n := range c.nodes {
		nf, isNotifier := n.(driver.Notifier)
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
			var err error
			for _, ch := range channels {
				if err = subscribeBounded(sctx, ctx, nf, ch, wake); err != nil {
					break
				}
			}
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
func subscribeBounded(setup, life context.Context, nf driver.Notifier, channel string, wake chan<- struct{}) error {
	done := make(chan error, 1)
	go func() { done <- nf.Notify(life, channel, wake) }()
	select {
	case err := <-done:
		return err
	case <-setup.Done():
		return setup.Err()
	}
}

// A gate lets one goroutine at a time of a Client contend for a key; the
// others wait behind it in the process instead of sending rounds of their
// own that would split the votes.
type gate struct {
	sem     chan struct{} // holds a token while a goroutine contends
	wake    chan struct{} // a release by this Client wakes the contender; cap 1
	waiters int           // goroutines holding or waiting for the gate; guarded by Client.gmu
}

// enter waits for the gate of key, and returns it; leave it with leave.
func (c *Client) enter(ctx context.Context, key string) (*gate, error) {
	c.gmu.Lock()
	g := c.gates[key]
	if g == nil {
		g = &gate{sem: make(chan struct{}, 1), wake: make(chan struct{}, 1)}
		c.gates[key] = g
	}
	g.waiters++
	c.gmu.Unlock()
	select {
	case g.sem <- struct{}{}:
		// A wake meant for an earlier contender: this one tries at once.
		select {
		case <-g.wake:
		default:
		}
		return g, nil
	case <-ctx.Done():
		c.forget(key, g)
		return nil, ctx.Err()
	}
}

// leave leaves the gate g of key that enter returned.
func (c *Client) leave(key string, g *gate) {
	<-g.sem
	c.forget(key, g)
}

// forget drops a goroutine from g's count, and g once nobody holds it or
// waits for it.
func (c *Client) forget(key string, g *gate) {
	c.gmu.Lock()
	defer c.gmu.Unlock()
	if g.waiters--; g.waiters == 0 {
		delete(c.gates, key)
	}
}

// wakeLocal wakes the goroutine of this Client that contends for key, if
// there is one, as the announcement of a release would, but without its
// trip through the nodes. It reports whether any goroutine of this Client
// waits for key.
func (c *Client) wakeLocal(key string) bool {
	c.gmu.Lock()
	defer c.gmu.Unlock()
	g := c.gates[key]
	if g == nil {
		return false
	}
	select {
	case g.wake <- struct{}{}:
	default:
	}
	return true
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
