package bench

import (
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"sync"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/goredisnode"
	"github.com/quorumlock/redlock/rueidisnode"
	"github.com/redis/go-redis/v9"
)

// tunedDelay is the retry delay of W2's tuned cells (Cell.Tuned), where
// each library retries this often, as many times as fit in a TTL; the
// other cells run each library's retry as shipped.
const tunedDelay = time.Millisecond

// The names of the libraries compared.
const (
	LibRedlockGoRedis = "redlock/go-redis" // this module's client through goredisnode
	LibRedlockRueidis = "redlock/rueidis"  // this module's client through rueidisnode
	LibRedsync        = "redsync"          // github.com/go-redsync/redsync/v4 with go-redis v9 pools
	LibRedsyncFast    = "redsync/failfast" // redsync with WithFailFast(true): a round ends at the quorum
	LibBSM            = "bsm/redislock"    // github.com/bsm/redislock, single node only
	LibRaw            = "raw go-redis"     // the naive floor: SET NX PX and EVALSHA delete, in parallel
	LibQuorumFloor    = "quorum floor"     // W1 only: SET and DEL on every node, each call ending at the quorum-th reply
)

// Libraries returns the names of every library the harness knows, in the
// order the tables list them.
func Libraries() []string {
	return []string{LibRedlockGoRedis, LibRedlockRueidis, LibRedsync, LibRedsyncFast, LibBSM, LibRaw, LibQuorumFloor}
}

// supports reports whether library lib can run cell c: bsm/redislock
// locks one node only, only this module's client has a read-write lock,
// and the quorum floor, which does not lock, runs W1 only.
func supports(lib string, c Cell) bool {
	switch {
	case c.Workload == RW:
		return ours(lib)
	case lib == LibQuorumFloor:
		return c.Workload == W1
	}
	return lib != LibBSM || c.N == 1
}

// rawDefaultDelay is the raw floor's retry delay when it is not tuned: the
// mean pause between attempts, drawn from [d/2, 3d/2) as the Redis page on
// distributed locks suggests (a "random delay").
const rawDefaultDelay = 50 * time.Millisecond

// settings is what a library's client is opened with.
type settings struct {
	tuned      bool // retry every tunedDelay
	ttl        time.Duration
	quarantine bool // redlock: restart quarantine on (the default)
}

// A client is one library's client for a set of nodes, as one process
// would hold it.
type client interface {
	// worker returns the state one goroutine needs to lock the given keys
	// through this client. Everything it needs is allocated here, not
	// while it runs.
	worker(keys []string) worker
	close() error
}

// A worker locks and unlocks keys for one goroutine.
type worker interface {
	// lock obtains keys[i] with the library's retry behaviour. It returns
	// false and a nil error when the library gave up because the lock is
	// taken, and an error for anything else.
	lock(ctx context.Context, i int) (bool, error)
	// unlock releases the lock the last successful lock obtained.
	unlock(ctx context.Context) error
}

// open connects library lib to the servers at t, a node each.
func open(lib string, t []string, s settings) (client, error) {
	switch lib {
	case LibRedlockGoRedis, LibRedlockRueidis:
		c, err := openRedlock(lib, t, s)
		if err != nil {
			return nil, err // not a typed nil in the interface
		}
		return c, nil
	case LibRedsync, LibRedsyncFast:
		return openRedsync(t, s, lib == LibRedsyncFast), nil
	case LibBSM:
		if len(t) != 1 {
			return nil, fmt.Errorf("%s supports a single node only", lib)
		}
		return openBSM(t, s), nil
	case LibRaw:
		return openRaw(t, s)
	case LibQuorumFloor:
		return openFloor(t, s), nil
	}
	return nil, fmt.Errorf("unknown library %q", lib)
}

// closer is a node or a client that must be closed.
type closer interface{ Close() error }

func closeAll[T closer](cs []T) error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// --- redlock ---------------------------------------------------------------

type redlockClient struct {
	c    *redlock.Client
	done func() error // closes c and its nodes
	ttl  time.Duration
}

// openRedlock opens this module's client through the adapter lib names,
// with the default options, or with the restart quarantine off if s says
// so. With it on, the servers must be older than the TTL to vote.
func openRedlock(lib string, t []string, s settings) (*redlockClient, error) {
	opts := &redlock.Options{DisableQuarantine: !s.quarantine}
	if s.tuned {
		opts.RetryDelay = tunedDelay
	}
	c, closeC, err := dialRedlock(lib, t, opts)
	if err != nil {
		return nil, err
	}
	return &redlockClient{c: c, done: closeC, ttl: s.ttl}, nil
}

func (rc *redlockClient) close() error { return rc.done() }

// A closingNode is a node from an adapter's Dial, which its caller closes.
type closingNode interface {
	redlock.Node
	Close() error
}

// dialRedlock makes a client of lib over the servers at addrs, a node
// each from the Dial of the adapter lib names (rueidisnode for
// LibRedlockRueidis, goredisnode for LibRedlockGoRedis), and a function that closes it and its
// nodes.
func dialRedlock(lib string, addrs []string, opts *redlock.Options) (*redlock.Client, func() error, error) {
	var nodes []redlock.Node
	var dialed []closingNode
	for _, a := range addrs {
		var n closingNode
		var err error
		if lib == LibRedlockRueidis {
			n, err = rueidisnode.Dial("redis://" + a)
		} else {
			n, err = goredisnode.Dial("redis://" + a)
		}
		if err != nil {
			closeAll(dialed)
			return nil, nil, err
		}
		nodes, dialed = append(nodes, n), append(dialed, n)
	}
	c, err := redlock.New(nodes, opts)
	if err != nil {
		closeAll(dialed)
		return nil, nil, err
	}
	return c, func() error { c.Close(); return closeAll(dialed) }, nil
}

func (rc *redlockClient) worker(keys []string) worker {
	return &redlockWorker{c: rc.c, keys: keys, ttl: rc.ttl}
}

type redlockWorker struct {
	c    *redlock.Client
	keys []string
	ttl  time.Duration
	held *redlock.Lock
}

func (w *redlockWorker) lock(ctx context.Context, i int) (bool, error) {
	l, err := w.c.Lock(ctx, w.keys[i], w.ttl)
	if err != nil {
		if errors.Is(err, redlock.ErrTaken) && ctx.Err() == nil {
			return false, nil // Options.Tries ran out (never, with the defaults)
		}
		return false, err
	}
	w.held = l
	return true, nil
}

func (w *redlockWorker) unlock(ctx context.Context) error {
	l := w.held
	w.held = nil
	return l.Release(ctx)
}

// --- redsync ---------------------------------------------------------------

type redsyncClient struct {
	rs       *redsync.Redsync
	clients  []*redis.Client
	opts     []redsync.Option
	failFast bool
}

// openRedsync opens redsync over one go-redis client (a pool) per node,
// each with go-redis's default options. With failFast, its rounds end as soon as a quorum
// has granted (or refused), as WithFailFast(true) has them; by default
// they wait for every node.
func openRedsync(t []string, s settings, failFast bool) *redsyncClient {
	rc := &redsyncClient{opts: []redsync.Option{redsync.WithExpiry(s.ttl)}, failFast: failFast}
	if failFast {
		rc.opts = append(rc.opts, redsync.WithFailFast(true))
	}
	pools := make([]redsyncredis.Pool, 0, len(t))
	for _, a := range t {
		c := redis.NewClient(&redis.Options{Addr: a})
		rc.clients = append(rc.clients, c)
		pools = append(pools, redsyncgoredis.NewPool(c))
	}
	if s.tuned {
		rc.opts = append(rc.opts,
			redsync.WithRetryDelay(tunedDelay),
			redsync.WithTries(max(1, int(s.ttl/tunedDelay))))
	}
	rc.rs = redsync.New(pools...)
	return rc
}

func (rc *redsyncClient) worker(keys []string) worker {
	// A Mutex is made once per key and reused for every acquisition, as a
	// program holding a mutex per resource would; this spares redsync the
	// allocations of NewMutex in the loop.
	//
	// Not with WithFailFast: its Unlock returns while goroutines of its
	// round have still to read the Mutex's value (redsync v4.18.1,
	// mutex.go:144), which the next Lock of the same Mutex writes
	// (mutex.go:117). The race detector reports it, and a late release
	// would carry the next lock's value. So each lock gets a new Mutex, as
	// a program using WithFailFast must do.
	w := &redsyncWorker{mus: make([]*redsync.Mutex, len(keys))}
	if rc.failFast {
		w.fresh, w.keys = rc, keys
		return w
	}
	for i, k := range keys {
		w.mus[i] = rc.rs.NewMutex(k, rc.opts...)
	}
	return w
}

func (rc *redsyncClient) close() error { return closeAll(rc.clients) }

type redsyncWorker struct {
	mus  []*redsync.Mutex
	held *redsync.Mutex
	// fresh, if not nil, makes a new Mutex of keys[i] for each lock.
	fresh *redsyncClient
	keys  []string
}

func (w *redsyncWorker) lock(ctx context.Context, i int) (bool, error) {
	m := w.mus[i]
	if w.fresh != nil {
		m = w.fresh.rs.NewMutex(w.keys[i], w.fresh.opts...)
	}
	err := m.LockContext(ctx)
	if err == nil {
		w.held = m
		return true, nil
	}
	if ctx.Err() == nil && redsyncGaveUp(err) {
		return false, nil
	}
	return false, err
}

// redsyncGaveUp reports whether err says only that the lock was taken on
// every try, and no node failed.
func redsyncGaveUp(err error) bool {
	var (
		re        *redsync.RedisError
		taken     *redsync.ErrTaken
		nodeTaken *redsync.ErrNodeTaken
	)
	if errors.As(err, &re) {
		return false
	}
	return errors.Is(err, redsync.ErrFailed) || errors.As(err, &taken) || errors.As(err, &nodeTaken)
}

func (w *redsyncWorker) unlock(ctx context.Context) error {
	m := w.held
	w.held = nil
	ok, err := m.UnlockContext(ctx)
	if err == nil && !ok {
		err = errors.New("redsync: unlock reported no quorum")
	}
	return err
}

// --- bsm/redislock -----------------------------------------------------------

type bsmClient struct {
	rc   *redis.Client
	c    *redislock.Client
	ttl  time.Duration
	opts *redislock.Options
}

// openBSM opens bsm/redislock over one go-redis client with default
// options. Its default is not to retry; tuned, it retries every
// tunedDelay (LinearBackoff) until the TTL has passed.
func openBSM(t []string, s settings) *bsmClient {
	rc := redis.NewClient(&redis.Options{Addr: t[0]})
	c := &bsmClient{rc: rc, c: redislock.New(rc), ttl: s.ttl}
	if s.tuned {
		c.opts = &redislock.Options{RetryStrategy: redislock.LinearBackoff(tunedDelay)}
	}
	return c
}

func (c *bsmClient) worker(keys []string) worker {
	return &bsmWorker{c: c, keys: keys}
}

func (c *bsmClient) close() error { return c.rc.Close() }

type bsmWorker struct {
	c    *bsmClient
	keys []string
	held *redislock.Lock
}

func (w *bsmWorker) lock(ctx context.Context, i int) (bool, error) {
	l, err := w.c.c.Obtain(ctx, w.keys[i], w.c.ttl, w.c.opts)
	if err != nil {
		if errors.Is(err, redislock.ErrNotObtained) && ctx.Err() == nil {
			return false, nil
		}
		return false, err
	}
	w.held = l
	return true, nil
}

func (w *bsmWorker) unlock(ctx context.Context) error {
	l := w.held
	w.held = nil
	return l.Release(ctx)
}

// --- the raw floor -------------------------------------------------------------

// rawRelease deletes KEYS[1] if it holds ARGV[1].
const rawRelease = `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`

// rawClient is the floor: what a naive Redlock over go-redis does, with
// one goroutine per node for each request, no pipelining, and a fresh
// random token per attempt.
type rawClient struct {
	clients []*redis.Client
	sha     string
	quorum  int
	ttlMs   int64
	delay   time.Duration
}

func openRaw(t []string, s settings) (*rawClient, error) {
	sum := sha1.Sum([]byte(rawRelease))
	c := &rawClient{
		sha:    hex.EncodeToString(sum[:]),
		quorum: len(t)/2 + 1,
		ttlMs:  s.ttl.Milliseconds(),
		delay:  rawDefaultDelay,
	}
	if s.tuned {
		c.delay = tunedDelay
	}
	ctx := context.Background()
	for _, a := range t {
		rc := redis.NewClient(&redis.Options{Addr: a})
		c.clients = append(c.clients, rc)
		if err := rc.ScriptLoad(ctx, rawRelease).Err(); err != nil {
			closeAll(c.clients)
			return nil, fmt.Errorf("raw: SCRIPT LOAD on %s: %w", a, err)
		}
	}
	return c, nil
}

func (c *rawClient) worker(keys []string) worker {
	return &rawWorker{c: c, keys: keys}
}

func (c *rawClient) close() error { return closeAll(c.clients) }

type rawWorker struct {
	c          *rawClient
	keys       []string
	key, token string
}

// lock tries until it holds a quorum or ctx ends, pausing a random time
// around the retry delay between attempts.
func (w *rawWorker) lock(ctx context.Context, i int) (bool, error) {
	key := w.keys[i]
	for {
		ok, err := w.try(ctx, key)
		if ok || err != nil {
			return ok, err
		}
		d := w.c.delay/2 + time.Duration(mathrand.Int64N(int64(w.c.delay)))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return false, ctx.Err()
		case <-t.C:
		}
	}
}

// try makes one attempt: SET NX PX on every node at once; with fewer than
// a quorum of grants it deletes its token everywhere.
func (w *rawWorker) try(ctx context.Context, key string) (bool, error) {
	var b [16]byte
	rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	granted, err := w.c.all(func(rc *redis.Client) (bool, error) {
		return rc.SetNX(ctx, key, token, time.Duration(w.c.ttlMs)*time.Millisecond).Result()
	})
	if granted >= w.c.quorum {
		w.key, w.token = key, token
		return true, nil
	}
	w.release(context.WithoutCancel(ctx), key, token)
	return false, err
}

func (w *rawWorker) unlock(ctx context.Context) error {
	deleted, err := w.release(ctx, w.key, w.token)
	if err == nil && deleted < w.c.quorum {
		err = fmt.Errorf("raw: released on %d of %d nodes", deleted, len(w.c.clients))
	}
	return err
}

// release runs the compare-and-delete script on every node at once and
// returns how many nodes deleted the key.
func (w *rawWorker) release(ctx context.Context, key, token string) (int, error) {
	return w.c.all(func(rc *redis.Client) (bool, error) {
		n, err := rc.EvalSha(ctx, w.c.sha, []string{key}, token).Int64()
		return n == 1, err
	})
}

// all runs call on every node at once, one goroutine each, and returns
// how many returned true, and the first error.
func (c *rawClient) all(call func(*redis.Client) (bool, error)) (int, error) {
	type result struct {
		ok  bool
		err error
	}
	ch := make(chan result, len(c.clients))
	for _, rc := range c.clients {
		go func() {
			ok, err := call(rc)
			ch <- result{ok, err}
		}()
	}
	n := 0
	var first error
	for range c.clients {
		r := <-ch
		n += int(btoi(r.ok))
		if first == nil {
			first = r.err
		}
	}
	return n, first
}

// --- the quorum floor ------------------------------------------------------------

// floorClient is the network's floor for a quorum lock, W1 only: what no
// client that waits for a quorum can beat. Its lock sends SET key token
// PX ttl to every node at once (one goroutine per node, as the raw floor)
// and returns as soon as a quorum has answered OK; its unlock sends DEL
// key the same way and returns at the quorum-th answer. The commands are
// unconditional, so that an unlock that overtakes its lock on a slow node
// (the rest of each round goes on in the background) leaves at most a
// key that expires, and nothing fails. Each call is one round trip to the
// quorum-th node to answer; the raw floor, which waits for every node, is
// one round trip to the slowest.
type floorClient struct {
	clients []*redis.Client
	quorum  int
	ttl     time.Duration
	late    sync.WaitGroup // the requests still out after their round ended
}

func openFloor(t []string, s settings) *floorClient {
	c := &floorClient{quorum: len(t)/2 + 1, ttl: s.ttl}
	for _, a := range t {
		c.clients = append(c.clients, redis.NewClient(&redis.Options{Addr: a}))
	}
	return c
}

func (c *floorClient) worker(keys []string) worker {
	var b [8]byte
	rand.Read(b[:])
	return &floorWorker{c: c, keys: keys, token: hex.EncodeToString(b[:])}
}

// close waits for the requests still out, then closes the clients.
func (c *floorClient) close() error {
	c.late.Wait()
	return closeAll(c.clients)
}

type floorWorker struct {
	c     *floorClient
	keys  []string
	token string
	key   string
}

func (w *floorWorker) lock(ctx context.Context, i int) (bool, error) {
	key, token, ttl := w.keys[i], w.token, w.c.ttl
	w.key = key
	err := w.c.round(ctx, func(rc *redis.Client) redis.Cmder { return rc.Set(ctx, key, token, ttl) })
	return err == nil, err
}

func (w *floorWorker) unlock(ctx context.Context) error {
	key := w.key
	return w.c.round(ctx, func(rc *redis.Client) redis.Cmder { return rc.Del(ctx, key) })
}

// round runs call on every node at once and returns once a quorum has
// answered without an error, or with the first error once a quorum can no
// longer answer so. The other requests go on in the background.
func (c *floorClient) round(ctx context.Context, call func(*redis.Client) redis.Cmder) error {
	ch := make(chan error, len(c.clients))
	c.late.Add(len(c.clients))
	for _, rc := range c.clients {
		go func() {
			defer c.late.Done()
			ch <- call(rc).Err()
		}()
	}
	ok, failed := 0, 0
	var first error
	for ok < c.quorum {
		err := <-ch
		if err == nil {
			ok++
			continue
		}
		if first == nil {
			first = err
		}
		if failed++; failed > len(c.clients)-c.quorum {
			return first
		}
	}
	return nil
}
