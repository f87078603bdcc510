package redlock

import (
	"crypto/rand"
	"log/slog"
	mathrand "math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/quorumlock/redlock/driver"
	"github.com/quorumlock/redlock/observe"
)

// A Node is one vote of the lock client: an independent Redis master, a
// master with replicas behind Sentinel, or a Redis Cluster. The
// goredisnode and rueidisnode modules make Nodes from go-redis and rueidis
// clients; package driver says what any other client must do to be one.
type Node = driver.Node

// The defaults of Options, and the limits of a lock's arguments.
const (
	defaultDriftFactor    = 0.01
	defaultMinDrift       = 2 * time.Millisecond
	defaultMaxNodeTimeout = 250 * time.Millisecond
	defaultRetryDelay     = 50 * time.Millisecond
	defaultReleaseTimeout = time.Second
	defaultMaxTTL         = time.Hour

	// minValidity is the least validity a TTL must be able to give after
	// the drift allowance is taken off; shorter TTLs are rejected.
	minValidity = 5 * time.Millisecond

	// maxOwnerLen is the longest Options.Owner, and the longest value an
	// election's candidate campaigns with, in bytes.
	maxOwnerLen = 64
	// maxKeyLen is the longest key, in bytes, that a lock, semaphore,
	// election or read-write lock may have (see CheckKey).
	maxKeyLen = 1024
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
	// By default (0) the quarantine is learned, per cluster hash slot: it
	// is the largest TTL that the lock asks for, that this client has
	// seen in use, or that a node reports for the lock key's slot (each
	// node records the TTLs used in each slot). Only the nodes that kept
	// a lock know its TTL, so a node that started within the hour votes
	// only once the client has heard every node in the key's slot since
	// it started, in this round or an earlier one; a round waits for
	// those answers, and without them, at the node timeout, the node does
	// not vote. That is safe as long as every valid lock is still held by
	// some node that did not restart without its data: with fewer than
	// N/2+1 nodes restarted within the largest TTL in use, always (see
	// SAFETY.md, "Restarts, per hash slot"). While a node is down for
	// good, a fresh client counts no node that started within the hour.
	//
	// Set Quarantine to the largest TTL any client of these nodes uses to
	// be safe beyond that, and to let a young node vote while another is
	// down: a node then votes once it has run that long, whatever the
	// client heard. It never shortens the learned value.
	Quarantine time.Duration

	// MaxTTL is the longest TTL the client accepts: Lock, TryLock,
	// LockAll, Extend and the TTLs of RWLock, Semaphore and Election
	// refuse a longer one with an error wrapping ErrInvalid before
	// anything is sent. Default 1 hour. A job that runs longer holds a
	// shorter lock and keeps it with AutoExtend or Extend.
	//
	// The cap bounds the harm of a mistaken TTL: every node must sit out a
	// restart for as long as the longest lock it may have lost could be
	// valid, and the client learns that bar from the TTLs it sees. A TTL
	// weighs on the bar only until a lock taken with it could no longer be
	// held, so one long lock does not hold nodes back once it has ended.
	// Quarantine must not be above MaxTTL.
	MaxTTL time.Duration

	// DisableQuarantine lets every node vote however recently it started.
	// Set it only for nodes that keep their keys across restarts
	// (appendonly yes with appendfsync always), or for nodes that nobody
	// locked anything on before.
	DisableQuarantine bool

	// Owner labels the locks the client takes, so that Inspect and the
	// redlock command can say who holds one. It is stored on the nodes
	// with each lock's token, at no extra cost in requests, and anyone who
	// can read the nodes can read it. At most 64 bytes of UTF-8,
	// without control characters. Default: the host name and the process
	// ID, "host:pid", cut to 64 bytes.
	Owner string

	// Logger receives the client's logs: at Warn level, once each, a node
	// that stops answering, answers again, or refuses for good (with the
	// cause and the fix); at Info level, a node's quarantine, once per
	// quarantine, so that a program whose first lock waits on fresh
	// servers learns why; at Debug level, the detail of rounds. Default:
	// slog.Default() as it is when New is called. For no logs, pass
	// slog.New(slog.DiscardHandler).
	Logger *slog.Logger

	// Observer is told of every operation, round, lost lock and change of
	// a node's health, for metrics and traces. Default: none.
	Observer observe.Observer
}

// A Client obtains locks on a fixed set of independent Redis masters with
// the Redlock algorithm. A Client is safe for concurrent use by multiple
// goroutines.
type Client struct {
	nodes  []Node
	quorum int
	opts   Options
	log    *slog.Logger
	hooks  hooks   // tells Options.Observer what the client does
	lanes  []*lane // for each node that is a driver.Batcher; nil for others
	flying flight  // requests sent and not yet answered

	learned learning // the TTLs seen, each while a lock with it may be held
	hearing hearing  // which nodes the client heard in each hash slot, and when

	ids identities // which Redis server each node is (see identify)

	mu     sync.Mutex // guards states and quarantineLogged
	states []observe.NodeState
	// quarantineLogged holds, for each node, the end of the latest
	// quarantine the log was told of (see heard).
	quarantineLogged []time.Time

	// rnd draws the random pauses and choices of the client. It is seeded
	// from crypto/rand by New, so that a test that makes crypto/rand
	// deterministic (testing/cryptotest.SetGlobalRandom) makes the client
	// so too. Guarded by rmu.
	rmu sync.Mutex
	rnd *mathrand.Rand

	gmu      sync.Mutex           // guards gates and handoffs
	gates    map[string]*gate     // keys that goroutines of this client wait for
	spare    []*gate              // gates to reuse (see spareGates)
	handoffs map[string]time.Time // keys whose release woke waiters, and when
}

// New returns a Client for the given nodes, which must be independent of
// each other: no node may replicate another's data. Each is a Redis
// master, a master with replicas of its own behind Sentinel, or a Redis
// Cluster (docs/production.md, "Deployments", says what each guarantees).
// Any number of nodes is allowed, but an odd number is best: four nodes
// survive one failure, as three do.
//
// One server has one vote. New refuses two nodes of the same name, and
// the first acquisition round that reaches two nodes that are the same
// Redis server (the same run_id: say, redis://h:6379/0 and
// redis://h:6379/1, or localhost and 127.0.0.1 for one server, or two
// entries for one cluster) fails with an error wrapping ErrInvalid that
// names both; so does every acquisition after it. New itself sends
// nothing, so that a client can be made while nodes are down. What no
// client can see, `redlock doctor` checks: servers that replicate one
// another, persistence, and the other parts of a deployment's
// independence.
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
		hearing:          hearing{born: time.Now(), n: len(nodes), slots: map[uint16][]int64{}},
		nodes:            append([]Node(nil), nodes...),
		quorum:           len(nodes)/2 + 1,
		opts:             o,
		log:              o.Logger,
		hooks:            newHooks(o.Observer, len(nodes)/2+1),
		lanes:            make([]*lane, len(nodes)),
		states:           make([]observe.NodeState, len(nodes)),
		quarantineLogged: make([]time.Time, len(nodes)),
		gates:            make(map[string]*gate),
		handoffs:         make(map[string]time.Time),
	}
	c.flying.init()
	c.ids.init(len(nodes))
	var seed [32]byte
	rand.Read(seed[:]) // never fails; see crypto/rand.Read
	c.rnd = mathrand.New(mathrand.NewChaCha8(seed))
	for i, n := range nodes {
		c.states[i].Node = n.Name()
		if b, ok := n.(driver.Batcher); ok {
			c.lanes[i] = newLane(b)
		}
	}
	return c, nil
}

// randN returns a random number in [0, n), n > 0.
func (c *Client) randN(n int64) int64 {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	return c.rnd.Int64N(n)
}

// fill checks the options and sets the defaults of the zero values.
func (o *Options) fill() error {
	if err := o.check(); err != nil {
		return err
	}
	if o.Owner == "" {
		o.Owner = defaultOwner()
	}
	if o.DriftFactor == 0 {
		o.DriftFactor = defaultDriftFactor
	}
	if o.MinDrift == 0 {
		o.MinDrift = defaultMinDrift
	}
	if o.RetryDelay == 0 {
		o.RetryDelay = defaultRetryDelay
	}
	if o.ReleaseTimeout == 0 {
		o.ReleaseTimeout = defaultReleaseTimeout
	}
	if o.MaxTTL == 0 {
		o.MaxTTL = defaultMaxTTL
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
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

// nodeNames returns the names of the client's nodes, in order.
func (c *Client) nodeNames() []string {
	names := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		names[i] = n.Name()
	}
	return names
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
	return min(ttl/10, defaultMaxNodeTimeout)
}

// defaultOwner returns "host:pid", cut to maxOwnerLen bytes at a rune
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
	for len(host)+len(pid) > maxOwnerLen {
		_, n := utf8.DecodeLastRuneInString(host)
		host = host[:len(host)-n]
	}
	return host + pid
}
