package redlock

import (
	"context"
	"time"

	"github.com/quorumlock/redlock/internal/mutant"
	"github.com/quorumlock/redlock/internal/wire"
	"github.com/quorumlock/redlock/observe"
)

// tokenLen is the length of every token (Lock.Token): 24 random bytes in
// 32 characters of URL-safe base64, one shell word. Adopt takes no other.
const tokenLen = wire.TokenLen

// Adopt takes over the hold on key that token has, for a process that did
// not obtain it: a dispatcher hands a lock to the worker that finishes the
// job, or a process restarted from a checkpoint takes its own lock back.
// The token is what Lock.Token returned to the holder: the hold's random
// token and its fence. The hold may be a lock's (Client.Lock, TryLock), an
// RWLock's reader or writer, or a Semaphore's permit.
//
// Adopt makes one round on every node, which writes only a fence, and
// waits for every answer, at most the node timeout. It succeeds when a
// quorum of the nodes that count (see Client.Lock) holds token on key, in
// the same way (as the key's holder, as a live reader, or as the permit of
// the same slot). The returned Lock then acts as the holder's: its Extend
// and Release are those of the original hold, on the same token, and the
// original holder's handle still works too; two handles of one hold are
// the caller's to coordinate.
//
// Its fence is the original hold's plus one, which the hand-over carries:
// the node that gave the original fence need not answer. Each holding
// node's counter is raised to it, so that every later hold's fence
// exceeds both; a resource that has seen it refuses the first holder's
// older fence, as a hand-over should.
//
// Its validity ends when fewer than a quorum of the nodes would hold the
// token: the quorum-th longest time left among the holding nodes, counted
// from before the round, less the drift allowance for that time. Its TTL,
// which AutoExtend extends by, is the time the hold had left; call Extend
// with the TTL wanted.
//
// A token that holds on no quorum is refused at once, without a retry,
// with an *OpError wrapping ErrTaken when a quorum of nodes hold the key
// but not all of them for token (another owner holds it), ErrLockLost
// when too few nodes hold the key at all (the hold is gone, or never
// was), ErrExpired when a quorum holds the token but for less than the
// drift allowance, and ErrNoQuorum or ErrRefused when too few nodes
// answered. An empty key, a reserved key, or a token that is not what
// Lock.Token returns gives an error wrapping ErrInvalid before any node
// is asked.
func (c *Client) Adopt(ctx context.Context, key, token string) (l *Lock, err error) {
	ctx, ev := c.hooks.begin(ctx, "adopt", key)
	defer func() {
		if l != nil {
			ev.Fence, ev.Until = l.fence, l.until
		}
		c.hooks.end(ctx, ev, err)
	}()
	if err := checkKey(key); err != nil {
		return nil, err
	}
	tok, fence, ok := wire.ParseHandover(token)
	switch {
	case token == "":
		return nil, invalidf("empty token")
	case !ok && wire.ValidToken(token):
		return nil, invalidf("a token without its fence: pass Lock.Token as it is, the token, a dot and the fence, so that the adopted fence is above the holder's")
	case !ok:
		return nil, invalidf("a malformed token of %d bytes: a token is %d characters of URL-safe base64, a dot and the hold's fence, as Lock.Token returns it", len(token), tokenLen)
	}
	if err := expired(ctx); err != nil {
		return nil, &OpError{Op: "adopt", Key: key, Quorum: c.quorum, ctxErr: err}
	}
	timeout := c.nodeTimeout(time.Duration(1 << 62))
	if err := c.identify(ctx, timeout); err != nil {
		return nil, &OpError{Op: "adopt", Key: key, Quorum: c.quorum, Err: err}
	}
	if mutant.On("adopt-fence-answering") || mutant.On("adopt-no-fence") {
		fence = 0 // the holes put back: the fence comes from the nodes that answer
	}
	// One try: a node whose request failed is not asked again (a retried
	// request that finds nothing counts as a release done, in record).
	var reason error
	r, e := c.inquire(ctx, "adopt", key, timeout, 1, wire.Adopt(key, tok, fence), true, func(r *round) bool {
		l, reason = c.adopted(r, key, tok, fence)
		return l != nil
	})
	if e == nil && l == nil {
		e = r.opError("adopt", key, reason)
	}
	if e != nil {
		if e.Err == ErrNoQuorum {
			e.ctxErr = ctx.Err()
		}
		return nil, e
	}
	return l, nil
}

// adopted returns the Lock on key that the nodes of the adopt round r
// that hold token make, the hold's fence being fence, or, when they make
// none, why: ErrExpired, ErrTaken or ErrLockLost.
func (c *Client) adopted(r *round, key, token string, fence int64) (*Lock, error) {
	best, slot := r.votes()
	if best < c.quorum {
		return nil, r.why(failure{op: "adopt"})
	}
	// The holding nodes of the slot that most of them agree on, and of
	// one kind: a token holds in one way only.
	var left []time.Duration
	var counter int64
	var owner string
	kind := wire.Exclusive
	for i, res := range r.results {
		if res.Outcome == observe.OutcomeOK && r.decoded[i].Slot == slot {
			left = append(left, r.decoded[i].TTL)
			counter = max(counter, res.Fence)
			kind, owner = r.decoded[i].Kind, r.decoded[i].Owner
		}
	}
	rest := quorumTTL(left, c.quorum)
	until := validUntil(r.start, rest, c.drift(rest))
	if !time.Now().Before(until) {
		return nil, ErrExpired
	}
	switch {
	case mutant.On("adopt-fence-answering"):
		fence = counter + 1
	case mutant.On("adopt-no-fence"):
		fence = counter
	default:
		fence++
	}
	ks := keyset{Set: wire.One(key)}
	switch kind {
	case wire.Reader:
		ks.Kind = wire.Reader
	case wire.Permit:
		// Every slot a semaphore may have: its release looks for the
		// token in each (see Set.Release).
		ks.Permits, ks.Slot = wire.MaxPermits, slot
	}
	// The nodes hold the token beside its owner's label, and so do the
	// calls of the hold.
	return &Lock{c: c, ks: ks.withSlots(), token: wire.Value(token, owner), ttl: max(rest.Truncate(time.Millisecond), time.Millisecond),
		fence: fence, start: r.start, until: until, last: r}, nil
}
