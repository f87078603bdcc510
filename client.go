package redlock

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"log/slog"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/quorumlock/redlock/driver"
)

// A Node is one vote of the lock client: an independent Redis master, a
// master with replicas behind Sentinel, or a Redis Cluster. The
// goredisnode and rueidisnode modules make Nodes from go-redis and rueidis
// clients; package driver says what any other client must do to be one.
type Node = driver.Node

// Defaults for the zero values of Options.
const (
	DefaultDriftFactor    = 0.01
	DefaultMinDrift       = 2 * time.Millisecond
	DefaultMaxNodeTimeout = 250 * time.Millisecond
	DefaultRetryDelay     = 50 * time.Millisecond
	DefaultReleaseTimeout = time.Second

	// MinValidity is the least validity a TTL must be able to give after
	// the drift allowance is taken off; shorter TTLs are rejected.
	MinValidity = 5 * time.Millisecond
	// MaxOwnerLen is the longest Options.Owner, in bytes.
	MaxOwnerLen = 64
)

// Options configures a Client. The zero value of every field selects the
// documented default; a nil *Options selects all defaults.
type Options struct {
	// DriftFactor is the share of the TTL set aside for the difference in
	// clock rates between the client and the nodes. Default 0.01. It must
	// be below 0.5; drift compensation cannot be turned off.
	DriftFactor float64

	// MinDrift is added to the drift allowance of every lock, for the
	// granularity of the nodes' expiry. Default 2ms.
	MinDrift time.Duration

	// NodeTimeout bounds how long one round waits for one node. It should
	// be far below the TTL, so that a slow or dead node cannot use up the
	// validity. Default: a tenth of the TTL, at most 250ms.
	NodeTimeout time.Duration

	// RetryDelay is the mean pause between the rounds of Lock. Each pause
	// is drawn at random from [RetryDelay/2, 3*RetryDelay/2), so that
	// contenders that collided do not collide again. Default 50ms. On
	// nodes that announce releases (both adapters do) a release wakes
	// waiters at once, so a shorter delay does not make waiting faster:
	// it only adds rounds that find the lock still held.
	RetryDelay time.Duration

	// Tries bounds the number of rounds Lock makes. Default 0: no bound,
	// Lock keeps trying until it obtains the lock or its context ends.
	Tries int

	// ReleaseTimeout bounds the clean-up after a failed round and the
	// Release of a lock. Both run even when the caller's context is
	// already cancelled, so that no key is left behind to block others.
	// Default 1s.
	ReleaseTimeout time.Duration

	// Quarantine is the least time a node stays out of every quorum after
	// its redis-server process starts. A node that restarts without
	// persistence comes back without the lock keys it held; while any of
	// those locks may still be valid, its vote could hand a lock out twice.
	//
	// By default the quarantine is learned: it is the largest TTL that the
	// lock asks for, that this client has seen, or that any node of the
	// round reports having been asked for (each node records the largest
	// TTL used on it). Learning covers the TTLs of other clients only when
	// a node that saw them answers; set Quarantine to the largest TTL any
	// client of these nodes uses to be sure. Quarantine never shortens the
	// learned value.
	Quarantine time.Duration

	// DisableQuarantine lets every node vote however recently it started.
	// Set it only for nodes that keep their keys across restarts
	// (appendonly yes with appendfsync always), or for nodes that nobody
	// locked anything on before.
	DisableQuarantine bool

	// Owner labels the locks the client takes, so that Inspect and the
	// redlock command can say who holds one. It is stored on the nodes
	// with each lock's token, at no extra cost in requests, and anyone who
	// can read the nodes can read it. At most MaxOwnerLen bytes of UTF-8,
	// without control characters. Default: the host name and the process
	// ID, "host:pid", cut to MaxOwnerLen bytes.
	Owner string

	// Logger receives the client's logs. Default: none.
	Logger *slog.Logger

	// Observer is told of every operation, round, lost lock and change of
	// a node's health, for metrics and traces. Default: none.
	Observer Observer
}

// A Client obtains locks on a fixed set of independent Redis masters with
// the Redlock algorithm. A Client is safe for concurrent use by multiple
// goroutines.
type Client struct {
	nodes  []Node
	quorum int
	opts   Options
	log    *slog.Logger
	obs    Observer // nil: none
	lanes  []*lane  // for each node that is a driver.Batcher; nil for others
	flying flight   // requests sent and not yet answered

	learned  atomic.Int64 // the largest TTL seen, in nanoseconds
	born     time.Time    // when New made the client: the origin of heardAll
	heardAll atomic.Int64 // 1 + nanoseconds from born to the start of the latest round every node answered; 0 if none

	mu     sync.Mutex // guards states
	states []NodeState

	gmu      sync.Mutex           // guards gates and handoffs
	gates    map[string]*gate     // keys that goroutines of this client wait for
	handoffs map[string]time.Time // keys whose release woke waiters, and when
}

// New returns a Client for the given nodes, which must be independent of
// each other: no node may replicate another's data. Each is a Redis
// master, a master with replicas of its own behind Sentinel, or a Redis
// Cluster (see the package documentation on deployments). Any number of
// nodes is allowed, but an odd number is best: four nodes survive one
// failure, as three do.
func New(nodes []Node, opts *Options) (*Client, error) {
	if len(nodes) == 0 {
		return nil, invalidf("no nodes")
	}
	seen := make(map[string]int, len(nodes))
	for i, n := range nodes {
		if n == nil {
			return nil, invalidf("node %d is nil", i)
		}
		name := n.Name()
		if j, dup := seen[name]; dup {
			return nil, invalidf("node %q is given twice (positions %d and %d): the same server would vote twice", name, j, i)
		}
		seen[name] = i
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if err := o.fill(); err != nil {
		return nil, err
	}
	c := &Client{
		born:     time.Now(),
		nodes:    append([]Node(nil), nodes...),
		quorum:   len(nodes)/2 + 1,
		opts:     o,
		log:      o.Logger,
		obs:      o.Observer,
		lanes:    make([]*lane, len(nodes)),
		states:   make([]NodeState, len(nodes)),
		gates:    make(map[string]*gate),
		handoffs: make(map[string]time.Time),
	}
	c.flying.init()
	for i, n := range nodes {
		c.states[i].Node = n.Name()
		if b, ok := n.(driver.Batcher); ok {
			c.lanes[i] = newLane(b)
		}
	}
	return c, nil
}

func (o *Options) fill() error {
	switch {
	case math.IsNaN(o.DriftFactor) || o.DriftFactor < 0 || o.DriftFactor >= 0.5:
		return invalidf("DriftFactor %v is outside [0, 0.5)", o.DriftFactor)
	case o.MinDrift < 0:
		return invalidf("MinDrift %v is negative", o.MinDrift)
	case o.NodeTimeout < 0:
		return invalidf("NodeTimeout %v is negative", o.NodeTimeout)
	case o.RetryDelay < 0:
		return invalidf("RetryDelay %v is negative", o.RetryDelay)
	case o.Tries < 0:
		return invalidf("Tries %d is negative", o.Tries)
	case o.ReleaseTimeout < 0:
		return invalidf("ReleaseTimeout %v is negative", o.ReleaseTimeout)
	case o.Quarantine < 0:
		return invalidf("Quarantine %v is negative", o.Quarantine)
	case o.Quarantine > 0 && o.DisableQuarantine:
		return invalidf("Quarantine %v is set and DisableQuarantine too", o.Quarantine)
	}
	if err := checkLabel("Owner", o.Owner); err != nil {
		return err
	}
	if o.Owner == "" {
		o.Owner = defaultOwner()
	}
	if o.DriftFactor == 0 {
		o.DriftFactor = DefaultDriftFactor
	}
	if o.MinDrift == 0 {
		o.MinDrift = DefaultMinDrift
	}
	if o.RetryDelay == 0 {
		o.RetryDelay = DefaultRetryDelay
	}
	if o.ReleaseTimeout == 0 {
		o.ReleaseTimeout = DefaultReleaseTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Close waits for the client's requests still in flight, such as the
// release of the nodes that Release did not wait for, and ends the
// client's idle goroutines. It does not close the nodes: close them after
// Close, so that no release is cut short. Close is for the end of a
// client's life, after its last Lock, Extend and Release have returned;
// requests that start while it waits, as from an AutoExtend that was
// never stopped, are waited for too, and the client stays usable. Close
// always returns nil.
func (c *Client) Close() error {
	c.flying.wait()
	for _, ln := range c.lanes {
		if ln != nil {
			ln.close()
		}
	}
	return nil
}

// Nodes returns the names of the client's nodes, in order.
func (c *Client) Nodes() []string {
	names := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		names[i] = n.Name()
	}
	return names
}

// Quorum returns the number of nodes that must agree: N/2+1.
func (c *Client) Quorum() int { return c.quorum }

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
// it tries again after a random pause around Options.RetryDelay.
// Goroutines of one Client that wait for the same key queue up in the
// process, so that only one of them contends at a time, and a Release by
// one of them wakes the next without a trip through the nodes. A Client
// that has just released a key to waiters of other clients holds back
// briefly before taking it again, so that one of them gets its turn.
//
// Lock returns at once, with an error wrapping ErrRefused, when so many
// nodes refused a round in a way that trying again cannot change (a wrong
// password, a missing permission, a key of another type, a replica) that
// no quorum is possible: waiting would not end on its own. When ctx ends
// the wait, the error wraps ctx.Err() as well as the reason of the last
// completed round.
func (c *Client) Lock(ctx context.Context, key string, ttl time.Duration) (*Lock, error) {
	return c.obtain(ctx, key, ttl, true)
}

// TryLock makes one attempt to obtain the lock on key for ttl.
//
// On success the returned Lock is held until Lock.Until, unless it is
// extended. On failure no key of the attempt is left on any node, and the
// error is an *OpError wrapping ErrTaken, ErrNoQuorum, ErrRefused or
// ErrExpired; a bad key or ttl gives an error wrapping ErrInvalid.
func (c *Client) TryLock(ctx context.Context, key string, ttl time.Duration) (*Lock, error) {
	return c.obtain(ctx, key, ttl, false)
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
// keys in several slots are refused there (CROSSSLOT). At most MaxKeys
// keys are taken at once.
func (c *Client) LockAll(ctx context.Context, keys []string, ttl time.Duration) (*Lock, error) {
	return c.obtainAll(ctx, keys, ttl, true)
}

// TryLockAll makes one attempt to obtain the lock on all of keys for ttl,
// as TryLock does for one key; see LockAll.
func (c *Client) TryLockAll(ctx context.Context, keys []string, ttl time.Duration) (*Lock, error) {
	return c.obtainAll(ctx, keys, ttl, false)
}

// obtain is Lock when wait is set, and TryLock otherwise.
func (c *Client) obtain(ctx context.Context, key string, ttl time.Duration, wait bool) (l *Lock, err error) {
	return c.obtainSet(ctx, keyset{name: key}, checkKey(key), ttl, wait)
}

// obtainAll is LockAll when wait is set, and TryLockAll otherwise.
func (c *Client) obtainAll(ctx context.Context, keys []string, ttl time.Duration, wait bool) (*Lock, error) {
	ks, err := newKeyset(keys)
	if err != nil {
		ks.name = strings.Join(keys, ",")
	}
	return c.obtainSet(ctx, ks, err, ttl, wait)
}

// obtainSet obtains the lock on ks, whose check gave bad.
func (c *Client) obtainSet(ctx context.Context, ks keyset, bad error, ttl time.Duration, wait bool) (l *Lock, err error) {
	ctx, ev := c.begin(ctx, "acquire", ks.name)
	defer func() {
		if l != nil {
			ev.Fence, ev.Until = l.fence, l.until
		}
		c.end(ctx, ev, err)
	}()
	if bad != nil {
		return nil, bad
	}
	if ev.TTL, err = c.checkTTL(ttl); err != nil {
		return nil, err
	}
	l, ev.Rounds, err = c.lock(ctx, ks, ev.TTL, wait)
	return l, err
}

// begin starts an operation: it returns the context the operation goes on
// with and the OpEvent that end completes. Without an Observer it returns
// ctx itself and costs nothing.
func (c *Client) begin(ctx context.Context, op, key string) (context.Context, OpEvent) {
	ev := OpEvent{Op: op, Key: key, Quorum: c.quorum}
	if c.obs == nil {
		return ctx, ev
	}
	ev.Start = time.Now()
	return c.obs.Start(ctx, op, key), ev
}

// end reports the end of an operation that begin started.
func (c *Client) end(ctx context.Context, ev OpEvent, err error) {
	if c.obs == nil {
		return
	}
	ev.Duration, ev.Err = time.Since(ev.Start), err
	c.obs.Observe(ctx, ev)
}

// checkLock validates a key and a TTL, and returns the TTL truncated to the
// millisecond precision of PX, so that no node is ever given a shorter life
// than the client counts on.
func (c *Client) checkLock(key string, ttl time.Duration) (time.Duration, error) {
	if err := checkKey(key); err != nil {
		return 0, err
	}
	return c.checkTTL(ttl)
}

// checkTTL is checkLock for the TTL.
func (c *Client) checkTTL(ttl time.Duration) (time.Duration, error) {
	ttl = ttl.Truncate(time.Millisecond)
	if v := ttl - c.drift(ttl); v < MinValidity {
		return 0, invalidf("TTL %v leaves a validity of %v after the clock drift allowance %v; the least is %v", ttl, v, c.drift(ttl), MinValidity)
	}
	if c.opts.NodeTimeout >= ttl-c.drift(ttl) {
		return 0, invalidf("NodeTimeout %v is not below the validity %v that TTL %v gives", c.opts.NodeTimeout, ttl-c.drift(ttl), ttl)
	}
	return ttl, nil
}

// checkKey validates a lock key.
func checkKey(key string) error {
	switch {
	case key == "":
		return invalidf("empty key")
	case reserved(key):
		return invalidf("key %q is reserved for the client's own records", key)
	}
	return nil
}

// drift returns the clock drift allowance for a TTL: ttl*DriftFactor +
// MinDrift.
func (c *Client) drift(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*c.opts.DriftFactor) + c.opts.MinDrift
}

// nodeTimeout returns how long a round waits for one node.
func (c *Client) nodeTimeout(ttl time.Duration) time.Duration {
	if c.opts.NodeTimeout > 0 {
		return c.opts.NodeTimeout
	}
	return min(ttl/10, DefaultMaxNodeTimeout)
}

// fenceTTL returns how long a fence counter outlives its lock's last
// grant: ten TTLs, and at least a minute. A counter that has expired is
// harmless (fences also follow the nodes' clocks); one kept longer only
// costs memory.
func (c *Client) fenceTTL(ttl time.Duration) time.Duration {
	return max(10*ttl, time.Minute)
}

// checkLabel checks a label that a lock's token carries: an owner's, or
// an election candidate's value.
func checkLabel(what, label string) error {
	switch {
	case len(label) > MaxOwnerLen:
		return invalidf("%s %q is %d bytes long; the most is %d", what, label, len(label), MaxOwnerLen)
	case !utf8.ValidString(label) || strings.IndexFunc(label, unicode.IsControl) >= 0:
		return invalidf("%s %q is not UTF-8 text without control characters", what, label)
	}
	return nil
}

// defaultOwner returns "host:pid", cut to MaxOwnerLen bytes at a rune
// boundary.
func defaultOwner() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	pid := ":" + strconv.Itoa(os.Getpid())
	host = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return '?'
		}
		return r
	}, strings.ToValidUTF8(host, "?"))
	for len(host)+len(pid) > MaxOwnerLen {
		_, n := utf8.DecodeLastRuneInString(host)
		host = host[:len(host)-n]
	}
	return host + pid
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
