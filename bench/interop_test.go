package bench

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/goredisnode"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestRedsyncInterop runs redsync's Mutex and this module's Lock on one key
// of the same three servers at once, each contender with clients of its
// own as separate processes would have, as a fleet does while it migrates
// from one to the other. Under either lock a contender reads a shared
// counter, sleeps, and writes it back plus one: two holders at once would
// show as an overlap and as a lost update. Both must be 0, and both kinds
// of contender must have held the lock, or the test proves nothing.
//
// It holds because both libraries take the user's key unchanged with
// SET key token NX PX and delete it only if it still holds their token.
func TestRedsyncInterop(t *testing.T) {
	const (
		key        = "interop:orders"
		ttl        = 10 * time.Second
		contenders = 4 // of each library
		window     = time.Millisecond
		runFor     = 3 * time.Second
	)
	servers := redistest.StartN(t, 3, redistest.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), runFor)
	defer cancel()

	var (
		holders, counter   atomic.Int64
		overlaps           atomic.Int64
		ours, theirs       atomic.Int64
		wg                 sync.WaitGroup
		errMu              sync.Mutex
		firstErr           error
		checkedOurKeyValue atomic.Bool
	)
	fail := func(err error) {
		errMu.Lock()
		defer errMu.Unlock()
		if firstErr == nil {
			firstErr = err
		}
	}
	// critical is the work under either lock: read, sleep, write.
	critical := func(n *atomic.Int64) {
		if holders.Add(1) != 1 {
			overlaps.Add(1)
		}
		v := counter.Load()
		time.Sleep(window)
		counter.Store(v + 1)
		n.Add(1)
		holders.Add(-1)
	}

	for range contenders {
		// Ours: a client of its own over the three servers.
		var nodes []redlock.Node
		for _, s := range servers {
			n, err := goredisnode.Dial("redis://" + s.Addr())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { n.Close() })
			nodes = append(nodes, n)
		}
		c, err := redlock.New(nodes, &redlock.Options{DisableQuarantine: true, RetryDelay: 2 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		wg.Go(func() {
			for ctx.Err() == nil {
				l, err := c.Lock(ctx, key, ttl)
				if err != nil {
					// Lock may end a little before the deadline that it
					// could not meet.
					if ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
						fail(err)
					}
					return
				}
				if !checkedOurKeyValue.Swap(true) {
					// The key on the nodes is the user's key, holding our
					// token (then a space and the owner's label), as
					// redsync's SET NX and compare-and-delete expect.
					held := 0
					for _, s := range servers {
						rc := redis.NewClient(&redis.Options{Addr: s.Addr()})
						v, _ := rc.Get(context.Background(), key).Result()
						// Token is the node's token, a dot and the fence.
						if tok, _, _ := strings.Cut(v, " "); tok != "" && strings.HasPrefix(l.Token(), tok+".") {
							held++
						}
						rc.Close()
					}
					if held < 2 {
						fail(errors.New("our lock is not the user's key holding our token on a majority of the nodes"))
					}
				}
				critical(&ours)
				if err := l.Release(context.Background()); err != nil {
					fail(err)
				}
			}
		})

		// redsync: one go-redis client per server, as its README has it.
		var pools []redsyncredis.Pool
		for _, s := range servers {
			rc := redis.NewClient(&redis.Options{Addr: s.Addr()})
			t.Cleanup(func() { rc.Close() })
			pools = append(pools, redsyncgoredis.NewPool(rc))
		}
		rs := redsync.New(pools...)
		wg.Go(func() {
			for ctx.Err() == nil {
				m := rs.NewMutex(key, redsync.WithExpiry(ttl), redsync.WithTries(1000), redsync.WithRetryDelay(2*time.Millisecond))
				if err := m.LockContext(ctx); err != nil {
					if ctx.Err() == nil && !errors.Is(err, redsync.ErrFailed) {
						fail(err)
					}
					continue
				}
				critical(&theirs)
				if ok, err := m.UnlockContext(context.Background()); err != nil || !ok {
					fail(errors.Join(errors.New("redsync's unlock failed"), err))
				}
			}
		})
	}
	wg.Wait()

	t.Logf("acquisitions: ours %d, redsync's %d; counter %d", ours.Load(), theirs.Load(), counter.Load())
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	if n := overlaps.Load(); n != 0 {
		t.Errorf("%d overlaps: two holders of %q at once", n, key)
	}
	if lost := ours.Load() + theirs.Load() - counter.Load(); lost != 0 {
		t.Errorf("%d lost updates", lost)
	}
	if ours.Load() == 0 || theirs.Load() == 0 {
		t.Errorf("one library never held the lock (ours %d, redsync's %d): the test proves nothing", ours.Load(), theirs.Load())
	}
}
