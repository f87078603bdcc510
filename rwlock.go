package redlock

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"time"

	"github.com/quorumlock/redlock/internal/wire"
	"github.com/quorumlock/redlock/observe"
)

// An RWLock is a read-write lock on a key over the Client's nodes: many
// readers at once, or one writer, never both, within their validity.
//
// RLock and TryRLock obtain a reader's shared hold, Lock and TryLock the
// writer's exclusive hold. Each returns a *Lock, whose Extend, AutoExtend,
// Release, Context, Fence and Until act on that hold alone, with the
// quorum, validity, drift allowance, release on every node, restart and
// failover quarantine, notified waiting and typed errors of Client.Lock.
//
// On each node the writer's hold is the lock key itself, holding the
// writer's token as Client.Lock's key holds its lock's, and the readers
// are a sorted set of tokens, each with its own expiry on the node's clock,
// in a key of their own. A node grants a reader only while no writer holds the
// key and no waiting writer's intent is live, and a writer only while the
// key is free and no reader is live. Exclusion follows as for a lock: any
// two quorums share a node, and that node never grants both kinds at once.
// A writer and Client.Lock on the same key exclude each other too, and a
// Client.Lock excludes readers that come after it; but Client.Lock does
// not look for readers already holding: use RWLock.Lock for a writer.
//
// Each reader expires on its own: a reader that crashed frees its share at
// its own TTL and holds no other reader up, and extending one reader
// changes no other's expiry.
//
// A writer that finds the key held records its intent on the nodes, in a
// key of its own, which keeps new readers out: a stream of overlapping
// readers cannot keep a waiting writer out longer than the longest time
// that the readers already granted hold (their TTLs, and their
// extensions), plus a round and the pause before it. The intent lives
// the longer of ttl and the time between two of the writer's rounds
// (NodeTimeout + ReleaseTimeout + 2·RetryDelay); each of its rounds
// renews it. A writer that gives up (its context ends, Options.Tries is
// spent, TryLock fails) takes it back at once, best effort; a writer that
// crashes while waiting stops blocking readers within that time of its
// last round.
//
// Fences: a writer's fence is drawn as a lock's is, max(counter + 1, node
// clock in µs) on each node, so it is above every earlier writer's and
// reader's fence of the key. A reader's fence is the key's current floor,
// max(counter, node clock in µs), which it writes back to the counter: at
// least the last writer's fence, and below every later writer's. A
// resource that refuses fences below the greatest it has seen thus
// refuses a stale writer once a newer reader has been there. As for a
// lock, this assumes node clocks that differ by less than the TTLs.
//
// On a Redis Cluster node, every record of an RWLock hashes to its key's
// slot. An RWLock is safe for concurrent use.
type RWLock struct {
	c   *Client
	key string
}

// RWLock returns the read-write lock on key. It does not talk to any node.
// A bad key makes every method fail with an error wrapping ErrInvalid.
func (c *Client) RWLock(key string) *RWLock {
	return &RWLock{c: c, key: key}
}

// RLock obtains a reader's hold for ttl, waiting as Client.Lock waits: while
// a writer holds, or a waiting writer's intent keeps new readers out.
// Readers' releases of a key do not wake other readers; a writer's release
// and a writer that gives up wake them.
func (rw *RWLock) RLock(ctx context.Context, ttl time.Duration) (*Lock, error) {
	return rw.obtain(ctx, ttl, wire.Reader, true)
}

// TryRLock makes one attempt to obtain a reader's hold for ttl; see
// Client.TryLock. It fails with an error wrapping ErrTaken while a writer
// holds, or waits, on too many nodes.
func (rw *RWLock) TryRLock(ctx context.Context, ttl time.Duration) (*Lock, error) {
	return rw.obtain(ctx, ttl, wire.Reader, false)
}

// Lock obtains the writer's hold for ttl, waiting as Client.Lock waits:
// while another writer holds, or readers do. While it waits its intent
// keeps new readers out; the release of the last reader, or of the writer,
// wakes it.
func (rw *RWLock) Lock(ctx context.Context, ttl time.Duration) (*Lock, error) {
	return rw.obtain(ctx, ttl, wire.Writer, true)
}

// TryLock makes one attempt to obtain the writer's hold for ttl; see
// Client.TryLock. A failed attempt takes its intent back at once, so a
// TryLock alone never keeps readers out.
func (rw *RWLock) TryLock(ctx context.Context, ttl time.Duration) (*Lock, error) {
	return rw.obtain(ctx, ttl, wire.Writer, false)
}

// intentTTL returns how long a waiting writer's intent to take a lock for
// ttl lives on a node after the writer's latest round: ttl, or, if it is
// longer, the longest time between two rounds of one wait (a round, its
// clean-up and the pause before the next: NodeTimeout + ReleaseTimeout +
// 2·RetryDelay), so that the intent does not lapse while the writer still
// waits. It bounds how long a writer that crashed while waiting keeps new
// readers out.
func (c *Client) intentTTL(ttl time.Duration) time.Duration {
	return max(ttl, c.nodeTimeout(ttl)+c.opts.ReleaseTimeout+2*c.opts.RetryDelay)
}

func (rw *RWLock) obtain(ctx context.Context, ttl time.Duration, kind wire.Kind, wait bool) (*Lock, error) {
	c := rw.c
	ks := keyset{Set: wire.One(rw.key)}
	ks.Kind = kind
	bad := checkKey(rw.key)
	if kind == wire.Writer {
		ks.Intent, ks.IntentTTL = newIntentID(), c.intentTTL(ttl)
	}
	l, err := c.obtain(ctx, ks, bad, ttl, wait)
	if kind != wire.Writer || bad != nil {
		return l, err
	}
	if err != nil {
		if _, invalid := c.checkTTL(ttl); invalid == nil {
			c.dropIntent(ctx, ks, nil)
		}
		return nil, err
	}
	// The nodes that granted dropped the intent; one that refused (a
	// reader live there alone) recorded it, and takes it back in the
	// background: the lock is the caller's now, and its validity runs. A
	// node that answers after the quorum keeps what it recorded until
	// IntentTTL: that slows the readers down on that node only, and
	// never lets anyone in. Close waits for the round.
	if prev := l.last; prev.count(observe.OutcomeTaken) > 0 {
		c.flying.add(1)
		go func() {
			defer c.flying.done()
			c.dropIntent(context.WithoutCancel(ctx), ks, prev)
		}()
	}
	return l, nil
}

// dropIntent takes a writer's intent back on every node, after the
// round prev if there is one, as a release would.
func (c *Client) dropIntent(ctx context.Context, ks keyset, prev *round) {
	r := c.releaseRound(ctx, prev, ks.DropIntent(), false)
	r.decide(r.count(observe.OutcomeOK)+r.count(observe.OutcomeAbsent) >= c.quorum)
	c.hooks.round(ctx, "drop-intent", ks.Name, 1, r)
}

// newIntentID returns a random ID for the intent of one writer's wait:
// 16 bytes from crypto/rand in URL-safe base64.
func newIntentID() string {
	var b [16]byte
	rand.Read(b[:]) // never fails; see crypto/rand.Read
	return base64.RawURLEncoding.EncodeToString(b[:])
}
