package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/bench"
	"github.com/quorumlock/redlock/driver"
	"github.com/quorumlock/redlock/goredisnode"
	"github.com/redis/go-redis/v9"
)

// The libraries, and the two floors that split a redlock pair's cost
// between the client and its scripts.
const (
	libGoRedis = "redlock/go-redis" // this module's client over goredisnode.Dial
	libRueidis = "redlock/rueidis"  // this module's client over rueidisnode.Dial
	libRedsync = "redsync"          // go-redsync/redsync/v4, a go-redis v9 pool per node
	libBSM     = "bsm/redislock"    // bsm/redislock over one go-redis client
	libScripts = "redlock-scripts"  // redlock's own acquire and release calls, sent by a plain go-redis client
	libSetNX   = "setnx-cad"        // SET NX PX, then a compare-and-delete script, by a plain go-redis client
)

// libraries lists every library in the order of the tables.
func libraries() []string {
	return []string{libGoRedis, libRueidis, libRedsync, libBSM, libScripts, libSetNX}
}

// singleNode reports whether lib runs on one node only.
func singleNode(lib string) bool {
	return lib == libBSM || lib == libScripts || lib == libSetNX
}

// isRedlock reports whether lib sends redlock's scripts, which a node
// younger than the TTL refuses while restart quarantine is on.
func isRedlock(lib string) bool {
	return lib == libGoRedis || lib == libRueidis || lib == libScripts
}

// A pairer takes and releases locks, one pair at a time, on one goroutine.
type pairer interface {
	// lock takes the lock on key number i (of keysPerLib) and fails if it
	// is not granted at once.
	lock(ctx context.Context, i int) error
	// unlock releases the lock the last lock took.
	unlock(ctx context.Context) error
	// inNode returns the time spent so far inside the nodes' Eval and
	// EvalBatch, summed over nodes, and whether it is measured.
	inNode() (time.Duration, bool)
	close() error
}

// keysPerLib is how many keys each library cycles through.
const keysPerLib = 8

// opts is what every library is opened with.
type opts struct {
	addrs      []string
	ttl        time.Duration
	quarantine bool // redlock: restart quarantine on, as shipped
}

// keys returns the keys of lib, distinct from every other library's and
// from another run's on the same servers.
func keys(lib string) []string {
	ks := make([]string, keysPerLib)
	for i := range ks {
		ks[i] = fmt.Sprintf("waits:%d:%s:%d", os.Getpid(), lib, i)
	}
	return ks
}

// open opens lib on the servers of o.
func open(lib string, o opts) (pairer, error) {
	if singleNode(lib) && len(o.addrs) != 1 {
		return nil, fmt.Errorf("%s runs on one node only, not %d", lib, len(o.addrs))
	}
	switch lib {
	case libGoRedis, libRueidis:
		return openRedlock(lib, o)
	case libRedsync:
		return openRedsync(o), nil
	case libBSM:
		return openBSM(o), nil
	case libScripts:
		return openScripts(o)
	case libSetNX:
		return openSetNX(o)
	}
	return nil, fmt.Errorf("unknown library %q (known: %v)", lib, libraries())
}

// --- redlock ------------------------------------------------------------

// A clock adds up the time spent inside a node's calls. The nodes of one
// client may be called at once, so it is atomic.
type clock struct{ ns atomic.Int64 }

func (c *clock) since(t time.Time) { c.ns.Add(int64(time.Since(t))) }

// timed is a node that times its Eval calls on a clock. Wrapped around an
// adapter's node it costs two clock readings per call.
type timed struct {
	driver.Node
	clock *clock
}

func (t timed) Eval(ctx context.Context, s *driver.Script, keys, args []string) (any, error) {
	defer t.clock.since(time.Now())
	return t.Node.Eval(ctx, s, keys, args)
}

// timedBatcher is a timed node that is also a driver.Batcher.
type timedBatcher struct {
	timed
	b driver.Batcher
}

func (t timedBatcher) EvalBatch(ctx context.Context, calls []driver.Call) {
	defer t.clock.since(time.Now())
	t.b.EvalBatch(ctx, calls)
}

// timedNotifier is a timed node that is also a driver.Notifier.
type timedNotifier struct {
	timed
	driver.Notifier
}

// timedBoth is a timed node that is a driver.Batcher and a
// driver.Notifier, as both adapters' nodes are.
type timedBoth struct {
	timedBatcher
	driver.Notifier
}

// timeNode wraps n so that its calls are timed on c, keeping the optional
// interfaces n implements and no other, so that the client treats it as it
// treats n.
func timeNode(n driver.Node, c *clock) driver.Node {
	t := timed{Node: n, clock: c}
	b, isBatcher := n.(driver.Batcher)
	nf, isNotifier := n.(driver.Notifier)
	switch {
	case isBatcher && isNotifier:
		return timedBoth{timedBatcher{t, b}, nf}
	case isBatcher:
		return timedBatcher{t, b}
	case isNotifier:
		return timedNotifier{t, nf}
	}
	return t
}

type redlockLib struct {
	c     *redlock.Client
	nodes []interface{ Close() error }
	clock clock
	keys  []string
	ttl   time.Duration
	held  *redlock.Lock
}

// dial makes the node of the server at addr with lib's adapter
// (bench.DialNode), and keeps it for close.
func (r *redlockLib) dial(lib, addr string) (driver.Node, error) {
	n, err := bench.DialNode(lib, addr)
	if err != nil {
		return nil, err
	}
	r.nodes = append(r.nodes, n)
	return n, nil
}

// openRedlock opens this module's client, with its default options (or
// restart quarantine off), over one node per server from the adapter's
// Dial, each timed.
func openRedlock(lib string, o opts) (*redlockLib, error) {
	r := &redlockLib{keys: keys(lib), ttl: o.ttl}
	var nodes []driver.Node
	for _, a := range o.addrs {
		n, err := r.dial(lib, a)
		if err != nil {
			r.close()
			return nil, err
		}
		nodes = append(nodes, timeNode(n, &r.clock))
	}
	c, err := redlock.New(nodes, &redlock.Options{DisableQuarantine: !o.quarantine})
	if err != nil {
		r.close()
		return nil, err
	}
	r.c = c
	return r, nil
}

func (r *redlockLib) lock(ctx context.Context, i int) (err error) {
	r.held, err = r.c.Lock(ctx, r.keys[i], r.ttl)
	return err
}

func (r *redlockLib) unlock(ctx context.Context) error { return r.held.Release(ctx) }

func (r *redlockLib) inNode() (time.Duration, bool) {
	return time.Duration(r.clock.ns.Load()), true
}

func (r *redlockLib) close() error {
	var errs []error
	if r.c != nil {
		errs = append(errs, r.c.Close()) // before the nodes, as Close asks
	}
	for _, n := range r.nodes {
		errs = append(errs, n.Close())
	}
	return errors.Join(errs...)
}

// --- redsync ------------------------------------------------------------

type redsyncLib struct {
	clients []*redis.Client
	mutexes []*redsync.Mutex // one per key, made once, as a program keeps them
	held    *redsync.Mutex
}

func openRedsync(o opts) *redsyncLib {
	r := &redsyncLib{}
	var pools []redsyncredis.Pool
	for _, a := range o.addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		r.clients = append(r.clients, c)
		pools = append(pools, redsyncgoredis.NewPool(c))
	}
	rs := redsync.New(pools...)
	for _, k := range keys(libRedsync) {
		r.mutexes = append(r.mutexes, rs.NewMutex(k, redsync.WithExpiry(o.ttl)))
	}
	return r
}

func (r *redsyncLib) lock(ctx context.Context, i int) error {
	r.held = r.mutexes[i]
	return r.held.LockContext(ctx)
}

func (r *redsyncLib) unlock(ctx context.Context) error {
	ok, err := r.held.UnlockContext(ctx)
	if err == nil && !ok {
		err = errors.New("redsync: unlock reported no quorum")
	}
	return err
}

func (r *redsyncLib) inNode() (time.Duration, bool) { return 0, false }

func (r *redsyncLib) close() error { return closeClients(r.clients) }

func closeClients(cs []*redis.Client) error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// --- bsm/redislock --------------------------------------------------------

type bsmLib struct {
	rc   *redis.Client
	c    *redislock.Client
	keys []string
	ttl  time.Duration
	held *redislock.Lock
}

func openBSM(o opts) *bsmLib {
	rc := redis.NewClient(&redis.Options{Addr: o.addrs[0]})
	return &bsmLib{rc: rc, c: redislock.New(rc), keys: keys(libBSM), ttl: o.ttl}
}

func (b *bsmLib) lock(ctx context.Context, i int) (err error) {
	b.held, err = b.c.Obtain(ctx, b.keys[i], b.ttl, nil)
	return err
}

func (b *bsmLib) unlock(ctx context.Context) error { return b.held.Release(ctx) }

func (b *bsmLib) inNode() (time.Duration, bool) { return 0, false }

func (b *bsmLib) close() error { return b.rc.Close() }

// --- the floors -----------------------------------------------------------

// A call is one script call as a node received it.
type call struct {
	script     *driver.Script
	keys, args []string
}

// recorder is a node that keeps the calls made through it.
type recorder struct {
	driver.Node
	mu    sync.Mutex
	calls []call
}

func (r *recorder) Eval(ctx context.Context, s *driver.Script, keys, args []string) (any, error) {
	r.mu.Lock()
	r.calls = append(r.calls, call{s, slices.Clone(keys), slices.Clone(args)})
	r.mu.Unlock()
	return r.Node.Eval(ctx, s, keys, args)
}

// scriptsLib sends the acquire and release calls that a redlock client
// made for one Lock and Release, recorded once, again and again through a
// go-redis client with default options: redlock's round trips and server
// time without its client core and adapter.
type scriptsLib struct {
	rc           *redis.Client
	acq, rel     call
	acqArgs      []any
	relArgs      []any
	acqSHA, rSHA string
}

func openScripts(o opts) (*scriptsLib, error) {
	n, err := goredisnode.Dial("redis://" + o.addrs[0])
	if err != nil {
		return nil, err
	}
	defer n.Close()
	rec := &recorder{Node: n}
	c, err := redlock.New([]driver.Node{rec}, &redlock.Options{DisableQuarantine: !o.quarantine})
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	l, err := c.Lock(ctx, keys(libScripts)[0], o.ttl)
	if err == nil {
		err = l.Release(ctx)
	}
	c.Close()
	if err != nil {
		return nil, fmt.Errorf("%s: recording a lock and release: %w", libScripts, err)
	}
	if len(rec.calls) != 2 {
		return nil, fmt.Errorf("%s: a lock and release made %d calls, not 2", libScripts, len(rec.calls))
	}
	s := &scriptsLib{rc: redis.NewClient(&redis.Options{Addr: o.addrs[0]}), acq: rec.calls[0], rel: rec.calls[1]}
	s.acqSHA, s.rSHA = s.acq.script.SHA1(), s.rel.script.SHA1()
	for _, a := range s.acq.args {
		s.acqArgs = append(s.acqArgs, a)
	}
	for _, a := range s.rel.args {
		s.relArgs = append(s.relArgs, a)
	}
	return s, nil
}

// lock sends the recorded acquire call: the same key every time, which
// the last release freed. Its reply starts with 1 when it granted.
func (s *scriptsLib) lock(ctx context.Context, _ int) error {
	v, err := s.rc.EvalSha(ctx, s.acqSHA, s.acq.keys, s.acqArgs...).Slice()
	if err != nil {
		return err
	}
	if len(v) == 0 || v[0] != int64(1) {
		return fmt.Errorf("%s: acquire not granted: %v", libScripts, v)
	}
	return nil
}

// unlock sends the recorded release call. Its reply starts with 1 when it
// deleted the key.
func (s *scriptsLib) unlock(ctx context.Context) error {
	v, err := s.rc.EvalSha(ctx, s.rSHA, s.rel.keys, s.relArgs...).Slice()
	if err != nil {
		return err
	}
	if len(v) == 0 || v[0] != int64(1) {
		return fmt.Errorf("%s: release did not delete: %v", libScripts, v)
	}
	return nil
}

func (s *scriptsLib) inNode() (time.Duration, bool) { return 0, false }

func (s *scriptsLib) close() error { return s.rc.Close() }

// compareAndDelete deletes KEYS[1] if it holds ARGV[1]: the release of
// redsync and bsm/redislock, and of the Redis documentation's single-node
// lock.
const compareAndDelete = `if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`

// setnxLib is the least a lock can send: SET key token NX PX ttl, then
// compare-and-delete, over a go-redis client with default options and one
// token for every pair.
type setnxLib struct {
	rc    *redis.Client
	sha   string
	keys  []string
	token string
	ttl   time.Duration
	key   []string // the held key, as EvalSha takes it
}

func openSetNX(o opts) (*setnxLib, error) {
	rc := redis.NewClient(&redis.Options{Addr: o.addrs[0]})
	sha, err := rc.ScriptLoad(context.Background(), compareAndDelete).Result()
	if err != nil {
		rc.Close()
		return nil, fmt.Errorf("%s: SCRIPT LOAD: %w", libSetNX, err)
	}
	return &setnxLib{rc: rc, sha: sha, keys: keys(libSetNX), token: "waits-token-0123456789abcdef", ttl: o.ttl, key: make([]string, 1)}, nil
}

func (s *setnxLib) lock(ctx context.Context, i int) error {
	ok, err := s.rc.SetNX(ctx, s.keys[i], s.token, s.ttl).Result()
	if err == nil && !ok {
		err = fmt.Errorf("%s: %s is taken", libSetNX, s.keys[i])
	}
	s.key[0] = s.keys[i]
	return err
}

func (s *setnxLib) unlock(ctx context.Context) error {
	n, err := s.rc.EvalSha(ctx, s.sha, s.key, s.token).Int64()
	if err == nil && n != 1 {
		err = fmt.Errorf("%s: %s was not deleted", libSetNX, s.key[0])
	}
	return err
}

func (s *setnxLib) inNode() (time.Duration, bool) { return 0, false }

func (s *setnxLib) close() error { return s.rc.Close() }
