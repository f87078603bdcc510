package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
)

// The scale measurements, which are not cells of Run's tables but
// measure memory: run them with -workloads KEYS,WAITERS.
const (
	// KeysWorkload measures the servers' memory per distinct key locked:
	// Config.Keys distinct keys are locked at once on a fresh server,
	// held, and released, with each of Config.FenceRetentions.
	KeysWorkload = "KEYS"
	// WaitersWorkload measures the client's memory per goroutine blocked
	// in Lock on a key another client holds: Config.Waiters goroutines.
	WaitersWorkload = "WAITERS"
)

// ScaleWorkloads returns the names of the scale measurements, which a
// full run leaves out.
func ScaleWorkloads() []string { return []string{KeysWorkload, WaitersWorkload} }

// scaleWorkload reports whether w is one of ScaleWorkloads.
func scaleWorkload(w string) bool { return slices.Contains(ScaleWorkloads(), w) }

// keysTTL is the TTL of the locks KEYS holds: long enough that the first
// of a million is still held when the last is taken.
const keysTTL = 10 * time.Minute

// keysGoroutines is how many goroutines take and release KEYS's locks.
const keysGoroutines = 256

// expiryTimeout bounds KEYS's wait for the servers to expire the fence
// counters of a short FenceRetention.
const expiryTimeout = 5 * time.Minute

// KeyMem is the server's memory for Keys distinct locks, held and
// released, from one library: this module's client with one
// FenceRetention, or a plain SET NX PX of each key (the reference: what a
// lock that keeps nothing but its key stores).
type KeyMem struct {
	Library string
	// Retention is the Options.FenceRetention the client had; 0 is the
	// default, max(10 TTL, 1 min), here 10 × keysTTL.
	Retention time.Duration
	Keys      int
	// UsedBase, UsedHeld and UsedReleased are INFO memory used_memory
	// before the first lock, with every lock held, and just after every
	// lock was released; UsedExpired, with a short retention, once the
	// server had expired the counters (ExpiryWait after the last release).
	UsedBase, UsedHeld, UsedReleased, UsedExpired int64
	// DBSize* are the server's keys at the same moments: the locks, the
	// fence counters and a node record per hash slot used.
	DBSizeBase, DBSizeHeld, DBSizeReleased, DBSizeExpired int64
	ExpiryWait                                            time.Duration
	// LockTime and ReleaseTime are how long taking and releasing every
	// lock took, with keysGoroutines goroutines.
	LockTime, ReleaseTime time.Duration
	// ClientHeapPerLock is the client process's heap in use per held
	// lock (runtime.MemStats HeapInuse after a collection, with the
	// *redlock.Lock values kept, less before).
	ClientHeapPerLock float64
	Load              string // the load average when it ended
}

// PerKey returns bytes per key of memory m above the base.
func (k KeyMem) PerKey(m int64) float64 {
	if k.Keys == 0 || m == 0 {
		return 0
	}
	return float64(m-k.UsedBase) / float64(k.Keys)
}

// WaiterMem is the client's memory for Waiters goroutines blocked in
// Lock on one key that another client holds.
type WaiterMem struct {
	Library string
	N       int // nodes
	Waiters int
	// HeapPerWaiter, StackPerWaiter and SysPerWaiter are the growth of
	// runtime.MemStats HeapInuse, StackInuse and Sys, after a collection,
	// divided by Waiters; GoroutinesPerWaiter the growth of
	// runtime.NumGoroutine divided by Waiters (1 is the waiter alone).
	HeapPerWaiter, StackPerWaiter, SysPerWaiter float64
	GoroutinesPerWaiter                         float64
	// CommandsPerSec is the commands the nodes ran per second, summed,
	// while every waiter waited (INFO stats total_commands_processed over
	// waitersWindow).
	CommandsPerSec float64
	Load           string
}

// waitersWindow is how long WAITERS counts the servers' commands while
// every waiter waits.
const waitersWindow = 2 * time.Second

// firstRedlock returns the first of this module's adapters in libs, or
// "".
func firstRedlock(libs []string) string {
	for _, l := range libs {
		if l == LibRedlockGoRedis || l == LibRedlockRueidis {
			return l
		}
	}
	return ""
}

// runKeys measures KEYS: for each number of keys, the reference SET NX PX
// and this module's client (the first of its adapters in
// cfg.Libraries) with each retention, each on a fresh server.
func runKeys(ctx context.Context, cfg *Config, rep *Report) error {
	lib := firstRedlock(cfg.Libraries)
	for _, n := range cfg.Keys {
		km, err := keysSetNX(ctx, n)
		if err != nil {
			return fmt.Errorf("KEYS %d SET NX PX: %w", n, err)
		}
		rep.Keys = append(rep.Keys, km)
		progress(cfg.Progress, km.progress())
		if lib == "" {
			continue
		}
		for _, r := range cfg.FenceRetentions {
			km, err := keysRedlock(ctx, lib, n, r, cfg.Progress)
			if err != nil {
				return fmt.Errorf("KEYS %d %s retention %v: %w", n, lib, r, err)
			}
			rep.Keys = append(rep.Keys, km)
			progress(cfg.Progress, km.progress())
		}
	}
	return nil
}

func progress(w io.Writer, line string) {
	if w != nil {
		fmt.Fprintln(w, line)
	}
}

func (k KeyMem) progress() string {
	s := fmt.Sprintf("KEYS %-8d %-16s retention %-8s held %6.1f B/key (%d keys in the db)", k.Keys, k.Library, k.retention(), k.PerKey(k.UsedHeld), k.DBSizeHeld)
	if k.UsedReleased != 0 {
		s += fmt.Sprintf("  released %6.1f B/key (%d)", k.PerKey(k.UsedReleased), k.DBSizeReleased)
	}
	if k.UsedExpired != 0 {
		s += fmt.Sprintf("  expired after %v: %6.1f B/key (%d)", k.ExpiryWait.Round(100*time.Millisecond), k.PerKey(k.UsedExpired), k.DBSizeExpired)
	}
	if k.ClientHeapPerLock != 0 {
		s += fmt.Sprintf("  client heap %.0f B/held lock", k.ClientHeapPerLock)
	}
	return s + fmt.Sprintf("  lock %v release %v", k.LockTime.Round(100*time.Millisecond), k.ReleaseTime.Round(100*time.Millisecond))
}

func (k KeyMem) retention() string {
	switch {
	case k.Library == LibSetNX:
		return "-"
	case k.Retention == 0:
		return "default"
	}
	return k.Retention.String()
}

// LibSetNX names KEYS's reference: SET key token NX PX ttl for each key,
// pipelined, a 24-character token as redsync's.
const LibSetNX = "SET NX PX"

// freshServer starts one redis-server for a KEYS measurement and returns
// it with a client for INFO.
func freshServer() (addr string, rc *redis.Client, stop func(), err error) {
	ss, err := StartServers(1)
	if err != nil {
		for _, s := range ss {
			if s != nil {
				s.Close()
			}
		}
		return "", nil, nil, err
	}
	addr = ss[0].Addr()
	rc = redis.NewClient(&redis.Options{Addr: addr})
	return addr, rc, func() { rc.Close(); ss[0].Close() }, nil
}

// usedMemory returns INFO memory used_memory and DBSIZE, once used_memory
// has settled (the same on two reads 300ms apart, or after 5s): a
// dictionary that grew is rehashed incrementally and holds both tables
// meanwhile.
func usedMemory(ctx context.Context, rc *redis.Client) (int64, int64, error) {
	var last int64 = -1
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, err := rc.Info(ctx, "memory").Result()
		if err != nil {
			return 0, 0, err
		}
		v, err := strconv.ParseInt(infoField(info, "used_memory"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("used_memory: %w", err)
		}
		if v == last || time.Now().After(deadline) {
			n, err := rc.DBSize(ctx).Result()
			return v, n, err
		}
		last = v
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// infoField returns the value of field name in an INFO reply, or "".
func infoField(info, name string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// keysSetNX measures the reference on a fresh server.
func keysSetNX(ctx context.Context, n int) (KeyMem, error) {
	km := KeyMem{Library: LibSetNX, Keys: n}
	_, rc, stop, err := freshServer()
	if err != nil {
		return km, err
	}
	defer stop()
	if km.UsedBase, km.DBSizeBase, err = usedMemory(ctx, rc); err != nil {
		return km, err
	}
	var b [18]byte
	rand.Read(b[:])
	token := hex.EncodeToString(b[:])[:24]
	t0 := time.Now()
	for i := 0; i < n; i += 1000 {
		p := rc.Pipeline()
		for j := i; j < min(i+1000, n); j++ {
			p.SetNX(ctx, keysKey(j), token, keysTTL)
		}
		if _, err := p.Exec(ctx); err != nil {
			return km, err
		}
	}
	km.LockTime = time.Since(t0)
	km.UsedHeld, km.DBSizeHeld, err = usedMemory(ctx, rc)
	km.Load = LoadAverage()
	return km, err
}

// keysKey is the i-th key of KEYS.
func keysKey(i int) string { return "lockbench:keys:" + strconv.Itoa(i) }

// keysRedlock measures this module's client on a fresh server: n
// distinct locks taken at once by keysGoroutines goroutines, held, then
// released; with a positive retention, it then waits for the server to
// expire the counters.
func keysRedlock(ctx context.Context, lib string, n int, retention time.Duration, prog io.Writer) (KeyMem, error) {
	km := KeyMem{Library: lib, Keys: n, Retention: retention}
	addr, rc, stop, err := freshServer()
	if err != nil {
		return km, err
	}
	defer stop()
	node, err := DialNode(lib, addr)
	if err != nil {
		return km, err
	}
	defer node.Close()
	// The fresh server would be in restart quarantine for a TTL of ten
	// minutes: quarantine off. The node record is written all the same.
	c, err := redlock.New([]redlock.Node{node}, &redlock.Options{DisableQuarantine: true, FenceRetention: retention})
	if err != nil {
		return km, err
	}
	defer c.Close()
	if l, err := c.Lock(ctx, "lockbench:keys:warm", keysTTL); err != nil {
		return km, fmt.Errorf("warm-up: %w", err)
	} else if err := l.Release(ctx); err != nil {
		return km, fmt.Errorf("warm-up: %w", err)
	}
	if km.UsedBase, km.DBSizeBase, err = usedMemory(ctx, rc); err != nil {
		return km, err
	}
	locks := make([]*redlock.Lock, n)
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	t0 := time.Now()
	err = parallel(ctx, n, func(i int) error {
		l, err := c.Lock(ctx, keysKey(i), keysTTL)
		locks[i] = l
		return err
	})
	km.LockTime = time.Since(t0)
	if err != nil {
		return km, fmt.Errorf("lock: %w", err)
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	km.ClientHeapPerLock = (float64(m1.HeapInuse) - float64(m0.HeapInuse)) / float64(n)
	if km.UsedHeld, km.DBSizeHeld, err = usedMemory(ctx, rc); err != nil {
		return km, err
	}
	t0 = time.Now()
	err = parallel(ctx, n, func(i int) error { return locks[i].Release(ctx) })
	km.ReleaseTime = time.Since(t0)
	released := time.Now()
	if err != nil {
		return km, fmt.Errorf("release: %w", err)
	}
	clear(locks)
	if km.UsedReleased, km.DBSizeReleased, err = usedMemory(ctx, rc); err != nil {
		return km, err
	}
	if retention > 0 {
		// The counters expire retention after the release; the server
		// finds them by sampling, so this waits until no key with an
		// expiry is left.
		if prog != nil {
			fmt.Fprintf(prog, "KEYS %d: waiting for the server to expire the fence counters (retention %v)\n", n, retention)
		}
		deadline := released.Add(retention + expiryTimeout)
		for {
			info, err := rc.Info(ctx, "keyspace").Result()
			if err != nil {
				return km, err
			}
			if !strings.Contains(info, "expires=") || strings.Contains(info, ",expires=0,") {
				break
			}
			if time.Now().After(deadline) {
				return km, fmt.Errorf("counters still not expired %v after the release: %s", retention+expiryTimeout, strings.TrimSpace(info))
			}
			select {
			case <-ctx.Done():
				return km, ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
		km.ExpiryWait = time.Since(released)
		if km.UsedExpired, km.DBSizeExpired, err = usedMemory(ctx, rc); err != nil {
			return km, err
		}
	}
	km.Load = LoadAverage()
	return km, nil
}

// parallel runs f(0) to f(n-1) on keysGoroutines goroutines and returns
// the first error.
func parallel(ctx context.Context, n int, f func(i int) error) error {
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for range min(keysGoroutines, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("key %d: %w", i, err)
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// runWaiters measures WAITERS: for this module's adapters in
// cfg.Libraries and each number of waiters, on the first cfg.Nodes[0]
// servers.
func runWaiters(ctx context.Context, cfg *Config, rep *Report) error {
	n := cfg.Nodes[0]
	for _, lib := range cfg.Libraries {
		if lib != LibRedlockGoRedis && lib != LibRedlockRueidis {
			continue
		}
		for _, k := range cfg.Waiters {
			wm, err := waiters(ctx, lib, cfg.Addrs[:n], k)
			if err != nil {
				return fmt.Errorf("WAITERS %d %s: %w", k, lib, err)
			}
			rep.Waiters = append(rep.Waiters, wm)
			progress(cfg.Progress, fmt.Sprintf("WAITERS N=%d %-6d %-16s heap %7.0f B/waiter  stack %6.0f B  sys %7.0f B  goroutines %.2f  servers %.0f commands/s",
				wm.N, wm.Waiters, wm.Library, wm.HeapPerWaiter, wm.StackPerWaiter, wm.SysPerWaiter, wm.GoroutinesPerWaiter, wm.CommandsPerSec))
		}
	}
	return nil
}

// dialRedlock makes a client of lib over the servers at addrs, and a
// function that closes it and its nodes.
func dialRedlock(lib string, addrs []string, opts *redlock.Options) (*redlock.Client, func(), error) {
	var nodes []redlock.Node
	var closers []DialedNode
	closeNodes := func() {
		for _, n := range closers {
			n.Close()
		}
	}
	for _, a := range addrs {
		n, err := DialNode(lib, a)
		if err != nil {
			closeNodes()
			return nil, nil, err
		}
		nodes, closers = append(nodes, n), append(closers, n)
	}
	c, err := redlock.New(nodes, opts)
	if err != nil {
		closeNodes()
		return nil, nil, err
	}
	return c, func() { c.Close(); closeNodes() }, nil
}

// commandsProcessed returns the servers' INFO stats
// total_commands_processed, summed.
func commandsProcessed(ctx context.Context, rcs []*redis.Client) (int64, error) {
	var sum int64
	for _, rc := range rcs {
		info, err := rc.Info(ctx, "stats").Result()
		if err != nil {
			return 0, err
		}
		v, err := strconv.ParseInt(infoField(info, "total_commands_processed"), 10, 64)
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

// waiters measures k goroutines of one client blocked in Lock on a key
// that a second client holds. Both clients have the restart quarantine
// off: the holder's TTL, two minutes, outlasts the measurement, and with
// the quarantine on no server younger than that would vote. How a client
// waits does not depend on it.
func waiters(ctx context.Context, lib string, addrs []string, k int) (WaiterMem, error) {
	wm := WaiterMem{Library: lib, N: len(addrs), Waiters: k}
	opts := &redlock.Options{DisableQuarantine: true}
	holder, closeHolder, err := dialRedlock(lib, addrs, opts)
	if err != nil {
		return wm, err
	}
	defer closeHolder()
	c, closeC, err := dialRedlock(lib, addrs, opts)
	if err != nil {
		return wm, err
	}
	defer closeC()
	var rcs []*redis.Client
	for _, a := range addrs {
		rc := redis.NewClient(&redis.Options{Addr: a})
		defer rc.Close()
		rcs = append(rcs, rc)
	}
	const ttl = 2 * time.Minute
	var b [8]byte
	rand.Read(b[:])
	key := "lockbench:waiters:" + hex.EncodeToString(b[:])
	// Warm the waiting client up on another key: connections made,
	// scripts cached.
	for range 3 {
		l, err := c.Lock(ctx, key+":warm", ttl)
		if err != nil {
			return wm, fmt.Errorf("warm-up: %w", err)
		}
		if err := l.Release(ctx); err != nil {
			return wm, fmt.Errorf("warm-up: %w", err)
		}
	}
	held, err := holder.Lock(ctx, key, ttl)
	if err != nil {
		return wm, fmt.Errorf("holder: %w", err)
	}
	defer held.Release(context.WithoutCancel(ctx))

	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	g0 := runtime.NumGoroutine()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		failed  error
		started atomic.Int64
	)
	for range k {
		wg.Go(func() {
			started.Add(1)
			l, err := c.Lock(wctx, key, ttl)
			if err == nil {
				l.Release(context.WithoutCancel(ctx))
				err = errors.New("a waiter got the held lock")
			}
			if wctx.Err() == nil || !errors.Is(err, context.Canceled) {
				mu.Lock()
				failed = cmp(failed, err)
				mu.Unlock()
			}
		})
	}
	// Every waiter has started and settled into its wait.
	for started.Load() < int64(k) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(time.Second)
	c0, err := commandsProcessed(ctx, rcs)
	if err != nil {
		return wm, err
	}
	time.Sleep(waitersWindow)
	c1, err := commandsProcessed(ctx, rcs)
	if err != nil {
		return wm, err
	}
	// The window's INFO calls are commands too: 2 per server.
	wm.CommandsPerSec = float64(c1-c0-int64(len(rcs))) / waitersWindow.Seconds()
	runtime.GC()
	runtime.ReadMemStats(&m1)
	g1 := runtime.NumGoroutine()
	fk := float64(k)
	wm.HeapPerWaiter = (float64(m1.HeapInuse) - float64(m0.HeapInuse)) / fk
	wm.StackPerWaiter = (float64(m1.StackInuse) - float64(m0.StackInuse)) / fk
	wm.SysPerWaiter = (float64(m1.Sys) - float64(m0.Sys)) / fk
	wm.GoroutinesPerWaiter = float64(g1-g0) / fk
	cancel()
	wg.Wait()
	wm.Load = LoadAverage()
	if failed != nil {
		return wm, failed
	}
	return wm, nil
}

// cmp returns a if it is not nil, else b.
func cmp(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// scaleMarkdown renders KEYS and WAITERS.
func (r *Report) scaleMarkdown(b *bytes.Buffer) {
	if len(r.Keys) > 0 {
		fmt.Fprintf(b, "\n#### KEYS: server memory per distinct key (one fresh redis-server each, %d goroutines, TTL %v)\n\n", keysGoroutines, keysTTL)
		b.WriteString("INFO memory used_memory above the base (after a warm-up lock), divided by the keys: with every lock held, just after every lock was released " +
			"(the fence counters live on for the retention; default: max(10 TTL, 1 min), here 100 min), and, with a short retention, once the server had expired the counters. " +
			"The keys in the db are the locks, the fence counters and a node record per hash slot used. " +
			"SET NX PX is the reference: a lock that stores its key alone (redsync, bsm/redislock). Client heap per held lock: the *redlock.Lock values kept.\n\n")
		b.WriteString("| keys | library | retention | held B/key | keys in db | released B/key | keys in db | expired B/key | after | keys in db | client heap B/held lock | lock | release | load |\n")
		b.WriteString("|--:|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n")
		for _, k := range r.Keys {
			rel, relN, exp, expN, after, heap, relT := "", "", "", "", "", "", ""
			if k.UsedReleased != 0 {
				rel, relN, relT = fmt.Sprintf("%.1f", k.PerKey(k.UsedReleased)), strconv.FormatInt(k.DBSizeReleased, 10), k.ReleaseTime.Round(100*time.Millisecond).String()
			}
			if k.UsedExpired != 0 {
				exp, expN, after = fmt.Sprintf("%.1f", k.PerKey(k.UsedExpired)), strconv.FormatInt(k.DBSizeExpired, 10), k.ExpiryWait.Round(100*time.Millisecond).String()
			}
			if k.ClientHeapPerLock != 0 {
				heap = fmt.Sprintf("%.0f", k.ClientHeapPerLock)
			}
			fmt.Fprintf(b, "| %d | %s | %s | %.1f | %d | %s | %s | %s | %s | %s | %s | %v | %s | %s |\n",
				k.Keys, k.Library, k.retention(), k.PerKey(k.UsedHeld), k.DBSizeHeld, rel, relN, exp, after, expN, heap,
				k.LockTime.Round(100*time.Millisecond), relT, k.Load)
		}
	}
	if len(r.Waiters) > 0 {
		b.WriteString("\n#### WAITERS: client memory per goroutine waiting in Lock (a second client holds the key)\n\n")
		b.WriteString("runtime.MemStats after a collection, with every waiter blocked, less before, divided by the waiters; goroutines per waiter counts the waiter itself; " +
			"commands/s are the servers' (INFO stats total_commands_processed) while every waiter waited.\n\n")
		b.WriteString("| N | waiters | library | heap B/waiter | stack B/waiter | Sys B/waiter | goroutines per waiter | servers' commands/s | load |\n|--:|--:|---|--:|--:|--:|--:|--:|---|\n")
		for _, w := range r.Waiters {
			fmt.Fprintf(b, "| %d | %d | %s | %.0f | %.0f | %.0f | %.2f | %.0f | %s |\n", w.N, w.Waiters, w.Library,
				w.HeapPerWaiter, w.StackPerWaiter, w.SysPerWaiter, w.GoroutinesPerWaiter, w.CommandsPerSec, w.Load)
		}
	}
}
