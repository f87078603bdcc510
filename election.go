package redlock

import (
	"context"
	"math"
	"time"

	"github.com/quorumlock/redlock/internal/wire"
)

// An Election chooses one leader among the candidates that campaign on a
// key, with a term number that rises from each leader to the next: leader
// election in the manner of etcd's concurrency.Election, on the Client's
// nodes.
//
// Leadership is a Lock on the key whose token carries the leader's value,
// renewed in the background (Lock.AutoExtend) for as long as the process
// runs, and lost, visibly, when a renewal cannot be made within its
// validity: the Lock's Context ends, with a cause wrapping ErrLockLost.
// Release resigns. At most one candidate leads at any moment, under the
// lock's assumptions (see the package documentation). The leader's term
// is the Lock's Fence: greater than every earlier leader's term, under the
// assumptions of Lock.Fence, so a resource that rejects writes with a term
// lower than the highest it has seen is safe from a leader that lost its
// leadership without noticing.
//
// An Election is safe for concurrent use.
type Election struct {
	c   *Client
	key string
	ttl time.Duration
}

// Election returns the election on key, whose leaders hold their
// leadership for ttl at a time, renewing it before it runs out. It does
// not talk to any node. A bad key or ttl makes Campaign fail with an error
// wrapping ErrInvalid. Every candidate of an election should use the same
// ttl: it also bounds how long a leader that dies keeps the others
// waiting.
func (c *Client) Election(key string, ttl time.Duration) *Election {
	return &Election{c: c, key: key, ttl: ttl}
}

// Campaign waits until this candidate leads, or until ctx is done, and
// returns its leadership: a Lock that renews itself until Release, whose
// Fence is the leader's term. The value, at most 64 bytes of
// UTF-8 text such as an address, is what Leader and Observe tell others of
// the leader; an empty value stands for the Client's Options.Owner.
//
// Campaign waits as Lock does, woken when a leader resigns. Once it holds
// the lock it records its term on the nodes; if a quorum does not confirm
// that within the lock's validity, it gives the lock up and campaigns on
// after a pause as long as Lock's between rounds. The errors are those of
// Lock.
func (e *Election) Campaign(ctx context.Context, value string) (*Lock, error) {
	bad := checkKey(e.key)
	if bad == nil {
		bad = checkLabel("value", value)
	}
	ks := keyset{Set: wire.One(e.key), owner: value}
	for {
		l, err := e.c.obtain(ctx, ks, bad, e.ttl, true)
		if err != nil {
			return nil, err
		}
		if e.c.publishTerm(ctx, l) {
			l.AutoExtend(0)
			return l, nil
		}
		// The lock ends by its TTL if this release fails too.
		_ = l.Release(ctx)
		// Nodes that could not record the term may still be failing:
		// campaign again after the pause Lock makes between rounds, not
		// at once.
		if err := sleep(ctx, e.c.retryDelay()); err != nil {
			return nil, &OpError{Op: "acquire", Key: e.key, Quorum: e.c.quorum, ctxErr: err}
		}
	}
}

// publishTerm records l's term in the election's term record on every
// node, and reports whether a quorum did so within l's validity.
func (c *Client) publishTerm(ctx context.Context, l *Lock) bool {
	timeout := min(time.Until(l.Until()), c.nodeTimeout(l.ttl))
	if timeout <= 0 {
		return false
	}
	l.op.Lock()
	defer l.op.Unlock()
	r := c.send(ctx, timeout, 1, wire.Elect(l.ks.Name, l.token, l.fence, termTTL(l.ttl)), l.last)
	// The lock's later rounds follow this one on each node, as they
	// follow each other (see Lock.last).
	l.last = r
	t := c.tally(nil, 0)
	ok := r.collect(&t)
	if !ok {
		r.drain()
		t.judge(r)
	}
	r.decide(ok)
	c.hooks.round(ctx, "elect", l.ks.Name, 1, r)
	return ok && time.Now().Before(l.Until())
}

// termTTL returns how long an election's term record outlives the
// leader's latest Campaign: ten TTLs, at least a minute. A reader trusts
// the record only while the lock holds the leader's token, so it needs
// only to outlive the leadership.
func termTTL(ttl time.Duration) time.Duration {
	if ttl > math.MaxInt64/10 { // only for TTLs of decades
		return math.MaxInt64
	}
	return max(10*ttl, time.Minute)
}

// LeaderInfo is what Leader and Observe tell of an election's leader.
type LeaderInfo struct {
	// Value is the leader's value (see Campaign); ID identifies its
	// leadership (see Lock.ID).
	Value string
	ID    string
	// Term is the leader's term; 0 when no candidate leads (Observe only).
	Term int64
	// Ends is when fewer than a quorum of nodes will hold the leadership
	// if it is not renewed, estimated from the nodes' remaining TTLs.
	Ends time.Time
}

// Leader reads who leads the election, in one round that changes nothing.
// When no candidate leads, or one has taken the lock but not yet recorded
// its term on a quorum (Campaign has not returned), it returns a
// LeaderInfo with Term 0, as Observe reports it, and no error. It returns
// an error wrapping ErrRefused when so many nodes refused the read that no
// quorum could answer, and one wrapping ErrNoQuorum when too few nodes
// answered to tell.
func (e *Election) Leader(ctx context.Context) (LeaderInfo, error) {
	if err := checkKey(e.key); err != nil {
		return LeaderInfo{}, &OpError{Op: "leader", Key: e.key, Err: err}
	}
	c := e.c
	r, fail := c.inquire(ctx, "leader", e.key, c.opts.ReleaseTimeout, 2, wire.Leader(e.key), true, nil)
	if fail != nil {
		return LeaderInfo{}, fail
	}
	if id, nodes := r.held(); id != "" {
		info := LeaderInfo{ID: id}
		ttls := make([]time.Duration, 0, len(nodes))
		for _, i := range nodes {
			d := r.decoded[i]
			info.Value = d.Owner
			info.Term = max(info.Term, d.Fence)
			ttls = append(ttls, d.TTL)
		}
		if info.Term != 0 {
			info.Ends = r.ends(ttls)
			return info, nil
		}
	}
	return LeaderInfo{}, nil
}

// Observe reports the election's leader on the returned channel: at once,
// and then whenever it changes, until ctx is done, when the channel is
// closed. A LeaderInfo with Term 0 says that no candidate leads. Observe
// learns of a new leader and of a resignation from the nodes'
// announcements, and of a leadership that ran out by reading the nodes
// again when it should end; it also reads them every quarter of the
// election's TTL, and at least every second when no node can announce
// (a Node that is not a driver.Notifier, or an ACL without the channels).
// A reader that falls behind misses intermediate leaders, not the latest.
func (e *Election) Observe(ctx context.Context) <-chan LeaderInfo {
	out := make(chan LeaderInfo, 1)
	go e.observe(ctx, out)
	return out
}

func (e *Election) observe(ctx context.Context, out chan LeaderInfo) {
	defer close(out)
	wake := e.c.subscribe(ctx, []string{wire.ReleasedChannel(e.key), wire.LeaderChannel(e.key)})
	poll := max(e.ttl/4, 10*time.Millisecond)
	if wake == nil {
		// No node announces changes: poll often enough to see them.
		poll = min(poll, time.Second)
	}
	first := true
	var last LeaderInfo
	for {
		info, err := e.Leader(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			if first || info.ID != last.ID || info.Term != last.Term {
				// Keep only the latest in the channel's one place.
				select {
				case <-out:
				default:
				}
				out <- info
				first, last = false, info
			}
		}
		next := poll
		if info.Term != 0 {
			next = min(next, max(time.Until(info.Ends), time.Millisecond))
		}
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-wake:
		case <-t.C:
		}
		t.Stop()
	}
}
