package redlock

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/quorumlock/redlock/driver"
	"github.com/quorumlock/redlock/internal/wire"
)

// This file is how a lock is acquired, to be read from the top down. First
// one round, in the order of the steps of the Redis page "Distributed
// locks with Redis":
//
//  1. t0: the time on the client's monotonic clock just before the first
//     request goes out;
//  2. the request, to take the key with a fresh random token for ttl,
//     sent to all N nodes at once, each bounded by the node timeout;
//  3. the count: the lock is taken when a quorum of N/2+1 nodes granted
//     it and validity is left, ttl − elapsed − drift > 0;
//  4. the validity, counted from t0, before the first request went out;
//  5. on failure, the release of the round on every node.
//
// Then the loop of rounds, which tries again after a random pause; the
// entry points; and, last, what the wait between rounds is made of: the
// announcements of releases, and the queue of one Client's goroutines that
// want the same key. The fan-out of a round to the nodes, the counting of
// its answers and the clean-up of step 5 are in round.go; the quarantine's
// bar, and what the client learns of its nodes, in quarantine.go.

// acquire makes round n of the acquisition of ks for ttl. The caller
// checks ctx before and after: whether the round may be sent, and whether
// a failed round was cut short by the end of ctx.
func (c *Client) acquire(ctx context.Context, ks *keyset, ttl time.Duration, n int) (*Lock, *OpError) {
	// One server, one vote: the client learns which server each node is
	// at its first round, and again when a node's server may have changed.
	if err := c.identify(ctx, c.nodeTimeout(ttl)); err != nil {
		return nil, &OpError{Op: "acquire", Key: ks.Name, Quorum: c.quorum, Rounds: n - 1, Err: err}
	}
	token := newToken(cmp.Or(ks.owner, c.opts.Owner)) // carries the owner's label
	if ks.Permits > 0 {
		ks.From = int(c.randN(int64(ks.Permits))) // where the nodes start looking for a free slot
	}
	q := c.quarantineFor(ttl)
	t := c.tally(ks, q) // what the client knew before the round

	// Steps 1 and 2: t0 is read (r.start) just before the first request
	// goes out; SET key token NX PX ttl goes to all N nodes at once, each
	// request bounded by the node timeout. The script also returns the
	// node's fence and what the quarantine needs: the node's age and the
	// largest TTL it knows in the key's hash slot.
	r := c.send(ctx, c.nodeTimeout(ttl), 1, ks.Acquire(token, ttl, q), nil)

	// Step 3: a quorum of grants that count (from nodes known to be
	// servers of their own, out of quarantine), with validity left: ttl −
	// elapsed − drift > 0. A semaphore's grants count for the slot they
	// are of: the permit is the slot a quorum granted.
	granted := r.collect(&t)
	until := validUntil(r.start, ttl, c.drift(ttl))
	valid := granted && time.Now().Before(until)
	r.decide(valid)

	var l *Lock
	var e *OpError
	var clean *round
	if valid {
		// Step 4: the lock is valid until t0 + ttl − drift, on the
		// client's monotonic clock.
		_, slot := r.votes()
		set := ks.Set
		if ks.Permits > 0 {
			set.Slot = slot
		}
		l = &Lock{c: c, ks: keyset{Set: set, owner: ks.owner, slots: ks.slots}, token: token, ttl: ttl, fence: r.fenceOf(slot),
			start: r.start, until: until, last: r, long: ttl > wire.LongGrant}
		l.covered = r.covering(l.fence)
	} else {
		// Step 5: a failed round is undone on every node; the caller's
		// cancellation does not cut it short. The clean-up waits for the
		// round's late answers, which then tell why it failed.
		clean = c.cleanUp(context.WithoutCancel(ctx), ks.Name, r)
		t.judge(r)
		e = r.opError("acquire", ks.Name, r.why(failure{op: "acquire", late: granted}))
		e.Rounds = n
	}
	c.heard(ctx, r, &t)
	c.hooks.round(ctx, "acquire", ks.Name, n, r)
	if clean != nil {
		c.hooks.round(ctx, "cleanup", ks.Name, n, clean)
	}
	return l, e
}

// newToken returns the value of a fresh acquisition: a random token, 24
// bytes from crypto/rand in 32 characters of URL-safe base64, a space and
// the owner's label.
func newToken(owner string) string {
	var b [24]byte
	rand.Read(b[:]) // never fails; see crypto/rand.Read
	var enc [32]byte
	base64.RawURLEncoding.Encode(enc[:], b[:])
	var sb strings.Builder
	sb.Grow(len(enc) + 1 + len(owner))
	sb.Write(enc[:])
	sb.WriteByte(' ')
	sb.WriteString(owner)
	return sb.String()
}

// lock makes acquisition rounds until one succeeds, or only one without
// wait: after a failed round it tries again after a random pause, or
// sooner when a release is announced (see waiter.wait). It returns the
// number of rounds it made. The error, when there is one, is an *OpError.
// A round that failed with ErrRefused ends the wait: the nodes that
// refused will refuse again. When the caller's context ends the wait, the
// reason is that of the last round that completed.
func (c *Client) lock(ctx context.Context, ks keyset, ttl time.Duration, wait bool) (*Lock, int, error) {
	w := waiter{c: c, ks: ks, queue: wait, begin: time.Now()}
	defer w.stop()
	var e, last *OpError // the failure of the latest round, and of the one before
	for n := 1; ; n++ {
		if e != nil { // round n-1 failed
			if e.Rounds == n-1 { // it was made: did ctx cut it short?
				e.ctxErr = expired(ctx)
			}
			if e.ctxErr != nil {
				return nil, e.Rounds, e.cutShort(last)
			}
			if !wait || e.Err == ErrRefused || errors.Is(e.Err, ErrInvalid) || c.opts.Tries > 0 && n-1 >= c.opts.Tries {
				return nil, n - 1, e
			}
			last = e
			// A round that failed for want of a quorum (nodes
			// unreachable, refusing for now, or sitting out their
			// quarantine) is not followed at the announcement of a
			// release: the nodes that kept it from a quorum are no closer
			// to answering, and the clean-up of every failed round is
			// itself a release.
			w.paced = e.Err == ErrNoQuorum
		}
		err := w.wait(ctx, n)
		if err == nil {
			err = expired(ctx) // a round sent now would fail for want of time
		}
		if err != nil {
			e = &OpError{Op: "acquire", Key: ks.Name, Quorum: c.quorum, Rounds: n - 1, ctxErr: err}
			return nil, e.Rounds, e.cutShort(last)
		}
		var l *Lock
		if l, e = c.acquire(ctx, &ks, ttl, n); e == nil {
			return l, n, nil
		}
	}
}

// cutShort returns e, the failure of a wait that ctx ended, with the
// reason of last, the last round that completed, if there was one.
func (e *OpError) cutShort(last *OpError) *OpError {
	e.Err = nil
	if last != nil {
		e.Err = last.Err
		if e.Nodes == nil {
			e.Nodes = last.Nodes
		}
	}
	return e
}

// retryDelay draws the pause before the next round when no release was
// announced: from [RetryDelay/2, 3*RetryDelay/2).
func (c *Client) retryDelay() time.Duration {
	d := c.opts.RetryDelay
	half, x := d/2, time.Duration(c.randN(int64(d)))
	if x > math.MaxInt64-half { // only for RetryDelays of centuries
		return math.MaxInt64
	}
	return half + x
}

// Lock obtains the lock on key for ttl, waiting for it as long as needed.
//
// Lock makes rounds until one succeeds, ctx is done, or Options.Tries
// rounds have failed. Each round uses a fresh token, and every failed
// round is cleaned up on all nodes before the next one starts.
//
// Lock does not poll blindly. After its first failed round it subscribes
// on every node that announces releases to the announcements of the key's
// release, and tries again as soon as one comes, after a short random
// pause that keeps woken waiters from colliding; without an announcement
// it tries again after a random pause around Options.RetryDelay. After a
// round that failed for want of a quorum (nodes unreachable, busy or in
// quarantine) it always waits that pause: announcements cannot bring the
// missing nodes back.
// Goroutines of one Client that wait for the same key queue up in the
// process, so that only one of them contends at a time, and a Release by
// one of them wakes the next without a trip through the nodes. A Client
// that has just released a key to waiters of other clients holds back
// briefly before taking it again, so that one of them gets its turn.
//
// A key is at most 1024 bytes, and ttl at most Options.MaxTTL (an hour by
// default); other arguments give an error wrapping ErrInvalid, and
// nothing is sent.
//
// Lock returns at once, with an error wrapping ErrRefused, when so many
// nodes refused a round in a way that trying again cannot change (a wrong
// password, a missing permission, a key of another type, a replica) that
// no quorum is possible: waiting would not end on its own. When ctx ends
// the wait, the error wraps ctx.Err() as well as the reason of the last
// completed round.
func (c *Client) Lock(ctx context.Context, key string, ttl time.Duration) (*Lock, error) {
	return c.obtain(ctx, keyset{Set: wire.One(key)}, checkKey(key), ttl, true)
}

// TryLock makes one attempt to obtain the lock on key for ttl.
//
// On success the returned Lock is held until Lock.Until, unless it is
// extended. On failure no key of the attempt is left on any node, and the
// error is an *OpError wrapping ErrTaken, ErrNoQuorum, ErrRefused or
// ErrExpired; a bad key or ttl gives an error wrapping ErrInvalid.
func (c *Client) TryLock(ctx context.Context, key string, ttl time.Duration) (*Lock, error) {
	return c.obtain(ctx, keyset{Set: wire.One(key)}, checkKey(key), ttl, false)
}

// LockAll obtains one lock on all of keys for ttl, waiting for it as
// Lock does: on every node the keys are taken together or not at all, in
// one script call per node and round. Repeated keys count once. The lock's
// fence is greater than that of every earlier owner of any of the keys.
// Extend, AutoExtend and Release act on all the keys; a node counts for
// an extension only if it still holds every key.
//
// Two LockAll calls whose key sets overlap cannot deadlock: neither ever
// holds a part of its keys while it waits for the rest. Lock on one of the
// keys and LockAll exclude each other as two Locks on the key do.
//
// On a Redis Cluster node, a script's keys must share a hash slot: give
// the keys one hash tag, as in "{order:42}:items" and "{order:42}:invoice";
// keys in several slots are refused there (CROSSSLOT). At most 64
// keys are taken at once.
func (c *Client) LockAll(ctx context.Context, keys []string, ttl time.Duration) (*Lock, error) {
	ks, err := newKeyset(keys)
	return c.obtain(ctx, ks, err, ttl, true)
}

// TryLockAll makes one attempt to obtain the lock on all of keys for ttl,
// as TryLock does for one key; see LockAll.
func (c *Client) TryLockAll(ctx context.Context, keys []string, ttl time.Duration) (*Lock, error) {
	ks, err := newKeyset(keys)
	return c.obtain(ctx, ks, err, ttl, false)
}

// A keyset is what a lock is on (see wire.Set), and the label its tokens
// carry when it is not the Client's Options.Owner: an election
// candidate's value.
type keyset struct {
	wire.Set
	owner string
	slots []uint16 // the cluster hash slots of its keys, each once (see withSlots)
}

// withSlots returns ks with its slots named.
func (ks keyset) withSlots() keyset {
	for _, k := range ks.All() {
		if s := wire.Slot(k); !slices.Contains(ks.slots, s) {
			ks.slots = append(ks.slots, s)
		}
	}
	return ks
}

// obtain obtains the lock on ks, whose check gave bad: waiting for it as
// Lock does when wait is set, and in one attempt otherwise.
func (c *Client) obtain(ctx context.Context, ks keyset, bad error, ttl time.Duration, wait bool) (l *Lock, err error) {
	ctx, ev := c.hooks.begin(ctx, "acquire", ks.Name)
	defer func() {
		if l != nil {
			ev.Fence, ev.Until = l.fence, l.until
		}
		if oe, ok := err.(*OpError); ok && ks.Keys != nil {
			oe.Keys = ks.Keys
		}
		c.hooks.end(ctx, ev, err)
	}()
	if bad != nil {
		return nil, bad
	}
	if ev.TTL, err = c.checkTTL(ttl); err != nil {
		return nil, err
	}
	l, ev.Rounds, err = c.lock(ctx, ks.withSlots(), ev.TTL, wait)
	return l, err
}

// A waiter is the waiting of one Lock call between its rounds.
type waiter struct {
	c     *Client
	ks    keyset // the lock's keys; its Name names its queue in the Client
	queue bool   // wait behind the Client's other goroutines (Lock, not TryLock)
	begin time.Time

	paced  bool            // the last round failed for want of a quorum: wait RetryDelay, ignoring wakes
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
// pause; or else a random pause around Options.RetryDelay. After a round
// that failed for want of a quorum (w.paced) it waits that random pause
// and nothing else: a release cannot bring unreachable nodes back, and
// following announcements then would turn every waiter into a loop of
// rounds woken by each other's clean-ups.
func (w *waiter) wait(ctx context.Context, round int) error {
	c := w.c
	switch round {
	case 1:
		if !w.queue {
			return ctx.Err()
		}
		g, err := c.enter(ctx, w.ks.Name)
		if err != nil {
			return err
		}
		w.gate = g
		return sleep(ctx, c.handoffWait(w.ks.Name))
	case 2:
		sctx, cancel := context.WithCancel(ctx)
		w.cancel = cancel
		if w.wake = c.subscribe(sctx, w.ks.Channels()); w.wake != nil && !w.paced {
			return ctx.Err()
		}
	}
	if w.paced {
		return sleep(ctx, c.retryDelay())
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
		w.c.leave(w.ks.Name, w.gate)
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

// wakeWindow bounds how long a waiter woken by a release waits before it
// tries: a fifth of RetryDelay, at least 2ms and at most 10ms. Waiting a
// random time within it keeps many waiters woken at once from sending
// their rounds together and splitting the votes; a round on a local
// network takes well under a millisecond, so the first few apart usually
// settle it. Below 2ms woken waiters collide so often that fewer of them
// get the lock.
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
	return time.Duration(c.randN(int64(bound) + 1))
}

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

// spareGates is how many gates that no goroutine holds or waits for a
// Client keeps, to reuse for the next key. Every Lock call enters a gate,
// usually a fresh one for a key nobody else in the process waits for;
// reusing one saves its three allocations (the gate and its two
// channels) per call.
const spareGates = 16

// enter waits for the gate of key, and returns it; leave it with leave.
func (c *Client) enter(ctx context.Context, key string) (*gate, error) {
	c.gmu.Lock()
	g := c.gates[key]
	if g == nil {
		if n := len(c.spare); n > 0 {
			g, c.spare = c.spare[n-1], c.spare[:n-1]
		} else {
			g = &gate{sem: make(chan struct{}, 1), wake: make(chan struct{}, 1)}
		}
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
// waits for it: it is kept for reuse as good as new (its sem is empty, as
// nobody holds it, and a wake meant for its last contender is dropped).
func (c *Client) forget(key string, g *gate) {
	c.gmu.Lock()
	defer c.gmu.Unlock()
	if g.waiters--; g.waiters == 0 {
		delete(c.gates, key)
		select {
		case <-g.wake:
		default:
		}
		if len(c.spare) < spareGates {
			c.spare = append(c.spare, g)
		}
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

// expired returns ctx.Err(), or context.DeadlineExceeded once ctx's
// deadline has passed though ctx is not done yet: the timer that ends a
// context fires late on a loaded machine, and a round sent after the
// deadline fails for want of time (its requests' deadlines have passed),
// not for anything the nodes said, so it must not be sent, nor stand as
// the reason of a wait's end.
func expired(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}
