package bench

import (
	"context"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock"
)

// RW is the read-mostly mix, which no peer library offers over N
// masters: G goroutines (Config.Contenders) share one client of this
// module and each, in turn, holds one key as a reader (RWLock.RLock) or,
// one time in rwWriteEvery, as its writer (RWLock.Lock), and releases it
// at once; with Cell.Mutex every operation is a plain Lock of the key
// instead, the cell it is compared with.
const RW = "RW"

// rwWriteEvery makes one operation in this many a write: 5%.
const rwWriteEvery = 20

// rwKind is what an RW cell locks with: "rwlock" or "lock".
func (c Cell) rwKind() string {
	if c.Mutex {
		return "lock"
	}
	return "rwlock"
}

// rwObtain takes rw's key as a writer or a reader; with mutex, as a plain
// Lock either way.
func rwObtain(ctx context.Context, rc *redlockClient, rw *redlock.RWLock, key string, mutex, write bool) (*redlock.Lock, error) {
	switch {
	case mutex:
		return rc.c.Lock(ctx, key, rc.ttl)
	case write:
		return rw.Lock(ctx, rc.ttl)
	}
	return rw.RLock(ctx, rc.ttl)
}

// rwWarm takes key three times as a reader and once as a writer, so that
// connections are made and scripts cached.
func rwWarm(ctx context.Context, rc *redlockClient, key string) error {
	for i := range 4 {
		l, err := rwObtain(ctx, rc, rc.c.RWLock(key), key, false, i == 3)
		if err != nil {
			return err
		}
		if err := l.Release(ctx); err != nil {
			return err
		}
	}
	return nil
}

// rwShared is the harness's own count of an RW slice's holders, against
// which exclusion and fences are checked.
type rwShared struct {
	holders    atomic.Int32 // readers and writers holding now, as they see it
	writers    atomic.Int32 // writers holding now
	maxFence   atomic.Int64 // the largest fence seen
	lastWriter atomic.Int64 // the fence of the last writer
	violations atomic.Uint64
}

// rwRule says what an RW row's violations count.
const rwRule = "a writer beside another holder, a reader beside a writer, a writer's fence not above every earlier one, a reader's below the last writer's"

// check counts the violations of a hold that begins, of the kind given,
// with fence f (see rwRule), and records f.
func (sh *rwShared) check(exclusive bool, f int64) {
	h := sh.holders.Add(1)
	if exclusive {
		if sh.writers.Add(1) > 1 || h > 1 || f <= sh.maxFence.Load() {
			sh.violations.Add(1)
		}
		sh.lastWriter.Store(f)
	} else if sh.writers.Load() > 0 || f < sh.lastWriter.Load() {
		sh.violations.Add(1)
	}
	for m := sh.maxFence.Load(); f > m && !sh.maxFence.CompareAndSwap(m, f); m = sh.maxFence.Load() {
	}
}

// done undoes check, before the release is sent.
func (sh *rwShared) done(exclusive bool) {
	if exclusive {
		sh.writers.Add(-1)
	}
	sh.holders.Add(-1)
}

// loopRW locks and releases the slice's key in turn until stop, one time
// in rwWriteEvery as a writer, starting at an offset of its own (id) so
// that the goroutines' writes are spread out. Each acquisition is timed
// from the call to its return, the wait behind the other kind included;
// a wait that the end of the slice cuts off is counted and not timed.
func loopRW(ctx context.Context, rc *redlockClient, mutex bool, g *gstate, id int, stop *atomic.Bool, sh *shared) {
	bg := context.Background()
	rw := rc.c.RWLock(sh.key)
	for i := id; !stop.Load(); i++ {
		write := i%rwWriteEvery == 0
		t0 := time.Now()
		l, err := rwObtain(ctx, rc, rw, sh.key, mutex, write)
		t1 := time.Now()
		if err != nil {
			if ctx.Err() != nil {
				g.cutOff++
				break
			}
			g.fail(err)
			continue
		}
		g.acq.record(t1.Sub(t0))
		kind, n := &g.reads, &g.nreads
		if write {
			kind, n = &g.writes, &g.nwrites
		}
		kind.record(t1.Sub(t0))
		exclusive := write || mutex
		sh.rw.check(exclusive, l.Fence())
		runtime.Gosched() // as W2 does: another holder would be seen
		sh.rw.done(exclusive)
		err = l.Release(bg) // released even when the run has stopped
		g.rel.record(time.Since(t1))
		if err != nil {
			g.fail(err)
			continue
		}
		g.ops++
		*n++
	}
}
