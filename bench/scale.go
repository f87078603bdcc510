package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
	// held and released, then locked again with a short TTL and left to
	// expire.
	KeysWorkload = "KEYS"
	// WaitersWorkload measures the client's memory per goroutine blocked
	// in Lock on a key another client holds: Config.Waiters goroutines.
	WaitersWorkload = "WAITERS"
)

const (
	// keysTTL is the TTL of the locks KEYS holds: long enough that the
	// first of a million is still held when the last is taken.
	keysTTL = 10 * time.Minute
	// keysGoroutines is how many goroutines take and release KEYS's locks.
	keysGoroutines = 256
	// keysExpiryTTL is the TTL of the locks KEYS leaves to expire.
	keysExpiryTTL = 2 * time.Second
	// expiryTimeout bounds KEYS's wait for the server to expire them.
	expiryTimeout = 5 * time.Minute
	// waitersWindow is how long WAITERS counts the servers' commands while
	// every waiter waits.
	waitersWindow = 2 * time.Second
)

// KeyMem is the server's memory for Keys distinct locks, held, released
// and expired, from one library: this module's client, or a plain SET NX
// PX of each key (the reference: what a lock that keeps nothing but its
// key stores). Reports saved before the fence counter moved into the
// slot marker also have a Retention, which reading them ignores.
type KeyMem struct {
	Library string
	Keys    int
	// UsedBase, UsedHeld and UsedReleased are INFO memory used_memory
	// before the first lock, with every lock held, and just after every
	// lock was released; UsedExpired once the same keys, locked again
	// with keysExpiryTTL and not released, had expired (ExpiryWait after
	// the last was locked).
	UsedBase, UsedHeld, UsedReleased, UsedExpired int64
	// DBSize* are the server's keys at the same moments: the locks and a
	// marker per hash slot used.
	DBSizeBase, DBSizeHeld, DBSizeReleased, DBSizeExpired int64
	ExpiryWait                                            time.Duration
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

// ours reports whether lib is this module's client.
func ours(lib string) bool { return lib == LibRedlockGoRedis || lib == LibRedlockRueidis }

// runKeys measures KEYS: for each number of keys, the reference SET NX PX
// and this module's client (the first of its adapters in cfg.Libraries),
// each on a fresh server.
func runKeys(ctx context.Context, cfg *Config, rep *Report) error {
	libs := []string{LibSetNX}
	if i := slices.IndexFunc(cfg.Libraries, ours); i >= 0 {
		libs = append(libs, cfg.Libraries[i])
	}
	for _, n := range cfg.Keys {
		for _, lib := range libs {
			km := KeyMem{Library: lib, Keys: n}
			if err := km.measure(ctx, cfg); err != nil {
				return fmt.Errorf("KEYS %d %s: %w", n, lib, err)
			}
			rep.Keys = append(rep.Keys, km)
			cfg.progress("KEYS %-8d %-16s held %6.1f B/key (%d keys in the db)  released %6.1f B/key (%d)  expired %6.1f B/key (%d)  client heap %.0f B/held lock",
				km.Keys, km.Library, km.PerKey(km.UsedHeld), km.DBSizeHeld, km.PerKey(km.UsedReleased), km.DBSizeReleased,
				km.PerKey(km.UsedExpired), km.DBSizeExpired, km.ClientHeapPerLock)
		}
	}
	return nil
}

// cells formats the bytes per key and the keys in the db at one moment,
// or two empty cells if it was not measured.
func (k KeyMem) cells(used, dbsize int64) string {
	if used == 0 {
		return "|"
	}
	return fmt.Sprintf("%.1f|%d", k.PerKey(used), dbsize)
}

// LibSetNX names KEYS's reference: SET key token NX PX ttl for each key,
// pipelined, a 24-character token as redsync's.
const LibSetNX = "SET NX PX"

// usedMemory returns INFO memory used_memory and DBSIZE, once used_memory
// has settled (the same on two reads 300ms apart, or after 5s): a
// dictionary that grew is rehashed incrementally and holds both tables
// meanwhile.
func usedMemory(ctx context.Context, rc *redis.Client) (used, dbsize int64, err error) {
	used = -1
	for deadline := time.Now().Add(5 * time.Second); ; {
		info, err := rc.Info(ctx, "memory").Result()
		if err != nil {
			return 0, 0, err
		}
		v, err := strconv.ParseInt(infoField(info, "used_memory"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("used_memory: %w", err)
		}
		if v == used || time.Now().After(deadline) {
			n, err := rc.DBSize(ctx).Result()
			return v, n, err
		}
		used = v
		if err := sleep(ctx, 300*time.Millisecond); err != nil {
			return 0, 0, err
		}
	}
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// keysKey is the i-th key of KEYS.
func keysKey(i int) string { return "lockbench:keys:" + strconv.Itoa(i) }

// measure measures k.Library on a fresh server: k.Keys distinct locks
// taken at once by keysGoroutines goroutines and held, and, but for the
// reference, released, then taken again with keysExpiryTTL and left to
// expire.
func (k *KeyMem) measure(ctx context.Context, cfg *Config) error {
	ss, err := StartServers(1)
	if ss[0] != nil {
		defer ss[0].Close()
	}
	if err != nil {
		return err
	}
	rc := redis.NewClient(&redis.Options{Addr: ss[0].Addr()})
	defer rc.Close()
	if k.Library == LibSetNX {
		if k.UsedBase, k.DBSizeBase, err = usedMemory(ctx, rc); err != nil {
			return err
		}
		for i := 0; i < k.Keys; i += 1000 {
			p := rc.Pipeline()
			for j := i; j < min(i+1000, k.Keys); j++ {
				p.SetNX(ctx, keysKey(j), "AAAAAAAAAAAAAAAAAAAAAAAA", keysTTL)
			}
			if _, err := p.Exec(ctx); err != nil {
				return err
			}
		}
		k.UsedHeld, k.DBSizeHeld, err = usedMemory(ctx, rc)
		k.Load = LoadAverage()
		return err
	}
	// The fresh server would be in restart quarantine for a TTL of ten
	// minutes: quarantine off. The node record is written all the same.
	c, closeC, err := dialRedlock(k.Library, []string{ss[0].Addr()}, &redlock.Options{DisableQuarantine: true})
	if err != nil {
		return err
	}
	defer closeC()
	if err := pairs(ctx, (&redlockClient{c: c, ttl: keysTTL}).worker([]string{"lockbench:keys:warm"}), 1, 1); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if k.UsedBase, k.DBSizeBase, err = usedMemory(ctx, rc); err != nil {
		return err
	}
	locks := make([]*redlock.Lock, k.Keys)
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	err = parallel(ctx, k.Keys, keysGoroutines, func(i int) (err error) {
		locks[i], err = c.Lock(ctx, keysKey(i), keysTTL)
		return err
	})
	if err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	k.ClientHeapPerLock = (float64(m1.HeapInuse) - float64(m0.HeapInuse)) / float64(k.Keys)
	if k.UsedHeld, k.DBSizeHeld, err = usedMemory(ctx, rc); err != nil {
		return err
	}
	if err := parallel(ctx, k.Keys, keysGoroutines, func(i int) error { return locks[i].Release(ctx) }); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	clear(locks)
	if k.UsedReleased, k.DBSizeReleased, err = usedMemory(ctx, rc); err != nil {
		return err
	}
	// The same keys again, left to expire: the server finds expired keys
	// by sampling, so this waits until no key with an expiry is left.
	err = parallel(ctx, k.Keys, keysGoroutines, func(i int) error {
		_, err := c.Lock(ctx, keysKey(i), keysExpiryTTL)
		return err
	})
	if err != nil {
		return fmt.Errorf("lock to expire: %w", err)
	}
	taken := time.Now()
	cfg.progress("KEYS %d: waiting for the server to expire the locks (TTL %v)", k.Keys, keysExpiryTTL)
	for {
		info, err := rc.Info(ctx, "keyspace").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "expires=") || strings.Contains(info, ",expires=0,") {
			break
		}
		if time.Since(taken) > keysExpiryTTL+expiryTimeout {
			return fmt.Errorf("locks still not expired %v after they were taken: %s", keysExpiryTTL+expiryTimeout, strings.TrimSpace(info))
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	k.ExpiryWait = time.Since(taken)
	if k.UsedExpired, k.DBSizeExpired, err = usedMemory(ctx, rc); err != nil {
		return err
	}
	k.Load = LoadAverage()
	return nil
}

// parallel runs f(0) to f(n-1) on g goroutines and returns the first
// error.
func parallel(ctx context.Context, n, g int, f func(i int) error) error {
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		errs = make([]error, g)
	)
	for j := range min(g, n) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n && errs[j] == nil; i = int(next.Add(1) - 1) {
				if errs[j] = ctx.Err(); errs[j] == nil {
					errs[j] = f(i)
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// runWaiters measures WAITERS: for this module's adapters in
// cfg.Libraries and each number of waiters, on the first cfg.Nodes[0]
// servers.
func runWaiters(ctx context.Context, cfg *Config, rep *Report) error {
	for _, lib := range cfg.Libraries {
		for _, k := range cfg.Waiters {
			if !ours(lib) {
				break
			}
			wm := WaiterMem{Library: lib, N: cfg.Nodes[0], Waiters: k}
			if err := wm.measure(ctx, cfg.Addrs[:wm.N], cfg.servers()[:wm.N]); err != nil {
				return fmt.Errorf("WAITERS %d %s: %w", k, lib, err)
			}
			rep.Waiters = append(rep.Waiters, wm)
			cfg.progress("WAITERS N=%d %-6d %-16s heap %7.0f B/waiter  stack %6.0f B  sys %7.0f B  goroutines %.2f  servers %.0f commands/s",
				wm.N, wm.Waiters, wm.Library, wm.HeapPerWaiter, wm.StackPerWaiter, wm.SysPerWaiter, wm.GoroutinesPerWaiter, wm.CommandsPerSec)
		}
	}
	return nil
}

// measure measures w.Waiters goroutines of one client blocked in Lock on
// a key that a second client holds. Both clients have the restart
// quarantine off: the holder's TTL, two minutes, outlasts the
// measurement, and with the quarantine on no server younger than that
// would vote. How a client waits does not depend on it.
func (w *WaiterMem) measure(ctx context.Context, addrs, servers []string) error {
	opts := &redlock.Options{DisableQuarantine: true}
	holder, closeHolder, err := dialRedlock(w.Library, addrs, opts)
	if err != nil {
		return err
	}
	defer closeHolder()
	c, closeC, err := dialRedlock(w.Library, addrs, opts)
	if err != nil {
		return err
	}
	defer closeC()
	st := newServerStats(servers)
	defer st.close()
	const ttl = 2 * time.Minute
	key := fmt.Sprintf("lockbench:waiters:%d", time.Now().UnixNano())
	// Warm the waiting client up on another key: connections made,
	// scripts cached.
	if err := pairs(ctx, (&redlockClient{c: c, ttl: ttl}).worker([]string{key + ":warm"}), 3, 1); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	held, err := holder.Lock(ctx, key, ttl)
	if err != nil {
		return fmt.Errorf("holder: %w", err)
	}
	defer held.Release(context.WithoutCancel(ctx))

	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	g0 := runtime.NumGoroutine()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var started atomic.Int64
	errs := make([]error, w.Waiters)
	var wg sync.WaitGroup
	for i := range w.Waiters {
		wg.Go(func() {
			started.Add(1)
			l, err := c.Lock(wctx, key, ttl)
			if err == nil {
				l.Release(context.WithoutCancel(ctx))
				err = errors.New("a waiter got the held lock")
			}
			if wctx.Err() == nil || !errors.Is(err, context.Canceled) {
				errs[i] = err
			}
		})
	}
	// Every waiter has started and settled into its wait.
	for started.Load() < int64(w.Waiters) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(time.Second)
	s0, err := st.read(ctx, "stats")
	if err != nil {
		return err
	}
	time.Sleep(waitersWindow)
	s1, err := st.read(ctx, "stats")
	if err != nil {
		return err
	}
	// The window's INFO calls are commands too: 1 per server.
	w.CommandsPerSec = float64(s1.commands-s0.commands-int64(len(servers))) / waitersWindow.Seconds()
	runtime.GC()
	runtime.ReadMemStats(&m1)
	n := float64(w.Waiters)
	w.HeapPerWaiter = (float64(m1.HeapInuse) - float64(m0.HeapInuse)) / n
	w.StackPerWaiter = (float64(m1.StackInuse) - float64(m0.StackInuse)) / n
	w.SysPerWaiter = (float64(m1.Sys) - float64(m0.Sys)) / n
	w.GoroutinesPerWaiter = float64(runtime.NumGoroutine()-g0) / n
	cancel()
	wg.Wait()
	w.Load = LoadAverage()
	return errors.Join(errs...)
}

// scaleMarkdown renders KEYS and WAITERS.
func (r *Report) scaleMarkdown(b *bytes.Buffer) {
	var keys, waiters []string
	for _, k := range r.Keys {
		after := ""
		if k.ExpiryWait > 0 {
			after = k.ExpiryWait.Round(100 * time.Millisecond).String()
		}
		keys = append(keys, fmt.Sprintf("%d|%s|%s|%s|%s|%s|%.0f|%s", k.Keys, k.Library,
			k.cells(k.UsedHeld, k.DBSizeHeld), k.cells(k.UsedReleased, k.DBSizeReleased), after, k.cells(k.UsedExpired, k.DBSizeExpired), k.ClientHeapPerLock, k.Load))
	}
	table(b, fmt.Sprintf("KEYS: server memory per distinct key (one fresh redis-server each, %d goroutines, TTL %v)", keysGoroutines, keysTTL),
		"INFO memory used_memory above the base (after a warm-up lock), divided by the keys: with every lock held, just after every lock was released, "+
			fmt.Sprintf("and once the same keys, locked again with a TTL of %v and not released, had expired. ", keysExpiryTTL)+
			"The keys in the db are the locks and a marker per hash slot used (which holds the slot's fence counter). "+
			"SET NX PX is the reference: a lock that stores its key alone (redsync, bsm/redislock). Client heap per held lock: the *redlock.Lock values kept.",
		"keys|library|held B/key|keys in db|released B/key|keys in db|expired after|B/key|keys in db|client heap B/held lock|load", keys)
	for _, w := range r.Waiters {
		waiters = append(waiters, fmt.Sprintf("%d|%d|%s|%.0f|%.0f|%.0f|%.2f|%.0f|%s", w.N, w.Waiters, w.Library,
			w.HeapPerWaiter, w.StackPerWaiter, w.SysPerWaiter, w.GoroutinesPerWaiter, w.CommandsPerSec, w.Load))
	}
	table(b, "WAITERS: client memory per goroutine waiting in Lock (a second client holds the key)",
		"runtime.MemStats after a collection, with every waiter blocked, less before, divided by the waiters; goroutines per waiter counts the waiter itself; "+
			"commands/s are the servers' (INFO stats total_commands_processed) while every waiter waited.",
		"N|waiters|library|heap B/waiter|stack B/waiter|Sys B/waiter|goroutines per waiter|servers' commands/s|load", waiters)
}
