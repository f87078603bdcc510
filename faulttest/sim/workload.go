package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/admin"
	"github.com/quorumlock/redlock/faulttest/history"
	"github.com/quorumlock/redlock/internal/wire"
)

// The keys of the workload: {t}a and {t}b share a hash slot (and so a
// marker and a fence counter), x and y have slots of their own.
var (
	lockKeys = []string{"{t}a", "{t}b", "x", "y"}
	ttls     = []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 3 * time.Second}
)

// longTTL is the TTL of the workload's occasional long lock, and
// longGrantTTL that of its rare lock longer than a minute, which the nodes
// record apart (the long grant of wire.LongGrant).
const (
	longTTL      = 8 * time.Second
	longGrantTTL = 90 * time.Second
)

const (
	semKey      = "{t}sem"
	semPermits  = 2
	rwKey       = "{t}rw"
	electionKey = "lead"
)

// A worker is one client of the workload: it makes operations one after
// another, each drawn from its own random stream, and records them.
type worker struct {
	w    *world
	i    int
	name string
	r    *rand.Rand
	c    *redlock.Client
	heir *redlock.Client // another process, to which it hands holds over (Adopt)
	opts redlock.Options
	n    int
}

// newWorker makes worker i and its clients. Run makes every worker
// before any starts, in order: the clients draw the seeds of their random
// sources from crypto/rand, which gives each history one stream.
func (w *world) newWorker(i int) *worker {
	k := &worker{w: w, i: i, name: fmt.Sprint("c", i), r: rand.New(rand.NewPCG(w.seed, uint64(i+1)))}
	k.opts = w.opts
	k.opts.Owner = k.name
	k.opts.RetryDelay = time.Duration(30+k.r.IntN(50)) * time.Millisecond
	k.c = w.client(i, k.opts)
	k.heir = w.client(len(w.gc)+i, k.opts)
	return k
}

// run makes operations until the history has what it needs or ctx ends.
func (k *worker) run(ctx context.Context) {
	w := k.w
	defer func() {
		w.mu.Lock()
		w.exited[k.i] = true // no start afresh is waited for any more
		w.mu.Unlock()
		k.c.Close()
		k.heir.Close()
	}()
	for ctx.Err() == nil && !w.done() {
		w.mu.Lock()
		after := w.after[k.i]
		due := !after.IsZero() && !time.Now().Before(after)
		if due {
			w.after[k.i] = time.Time{}
		}
		w.mu.Unlock()
		switch {
		case due:
			k.afterRestart(ctx)
		case k.r.IntN(4) == 0:
			// The process restarts: a fresh client, which has heard no
			// node and learned no TTL yet.
			k.c.Close()
			k.c = w.client(k.i, k.opts)
			fallthrough
		default:
			k.step(ctx)
		}
		w.mu.Lock()
		w.ops++
		w.mu.Unlock()
		time.Sleep(time.Duration(k.r.Int64N(int64(30 * time.Millisecond))))
	}
}

// begin starts the record of an acquisition.
func (k *worker) begin(kind history.OpKind, key string, ttl time.Duration) *history.Op {
	k.n++
	return &history.Op{ID: (k.i+1)*100000 + k.n, Client: k.name, Kind: kind, Key: key, TTLms: ttl.Milliseconds(), Start: k.w.h.Now()}
}

// got records the end of an acquisition call.
func (k *worker) got(op *history.Op, l *redlock.Lock, err error) {
	h := k.w.h
	op.Return = h.Now()
	if err != nil {
		op.Err = err.Error()
		k.w.h.AddOp(op)
		return
	}
	op.OK = true
	op.Token, op.Holder, op.Fence = wire.HandoverToken(l.Token()), l.ID(), l.Fence()
	op.Until = h.At(l.Until())
}

// hold keeps l for a while, as the workload's holders do (extending it,
// by hand or automatically, or pausing past its validity when a GC pause
// is due), then releases it and records op.
func (k *worker) hold(ctx context.Context, op *history.Op, l *redlock.Lock, ttl time.Duration) {
	h := k.w.h
	auto := k.r.IntN(3) == 0
	if !auto {
		// An automatic extension moves the claim without a record of
		// its own: only holds extended by hand are sampled.
		k.w.sample(op)
	}
	if auto {
		l.AutoExtend(0)
	}
	k.w.mu.Lock()
	gc := k.w.gc[k.i]
	k.w.gc[k.i] = false
	k.w.mu.Unlock()
	if gc {
		// A long GC pause: the holder wakes after its validity and
		// carries on as if it still held.
		time.Sleep(time.Until(l.Until()) + time.Duration(k.r.Int64N(int64(ttl))))
	} else {
		time.Sleep(time.Duration(k.r.Int64N(int64(ttl) * 8 / 10)))
	}
	if !auto && k.r.IntN(3) == 0 {
		e := history.Extend{Start: h.Now(), TTLms: ttl.Milliseconds()}
		err := l.Extend(ctx, ttl)
		e.Return = h.Now()
		if err == nil {
			e.OK, e.Until = true, h.At(l.Until())
			op.Extends = append(op.Extends, e)
			k.w.sample(op) // judged against the claim the extension made
			op.Extends = op.Extends[:len(op.Extends)-1]
		} else {
			e.Err = err.Error()
			e.Lost = errors.Is(err, redlock.ErrLockLost)
		}
		op.Extends = append(op.Extends, e)
		if err == nil {
			time.Sleep(time.Duration(k.r.Int64N(int64(ttl) / 2)))
		}
	}
	if auto {
		op.Until = h.At(l.Until())
	}
	k.release(ctx, op, l)
}

// release releases l and records op.
func (k *worker) release(ctx context.Context, op *history.Op, l *redlock.Lock) {
	h := k.w.h
	if op.Until < h.At(l.Until()) && len(op.Extends) == 0 {
		op.Until = h.At(l.Until()) // renewed automatically
	}
	rel := &history.Release{Call: h.Now()}
	if err := l.Release(ctx); err != nil {
		rel.Err = err.Error()
	}
	rel.Return = h.Now()
	op.Release = rel
	h.AddOp(op)
}

// step makes one operation.
func (k *worker) step(ctx context.Context) {
	ttl := ttls[k.r.IntN(len(ttls))]
	if k.r.IntN(8) == 0 {
		// A long lock among short ones: a restart of its servers leaves
		// it held on the others for long after, and the nodes report its
		// TTL, not its time left, so that a client asking a shorter TTL
		// learns the right quarantine.
		ttl = longTTL
		if k.r.IntN(6) == 0 {
			ttl = longGrantTTL
		}
	}
	wait, cancel := context.WithTimeout(ctx, k.w.maxTTL/2)
	defer cancel()
	switch x := k.r.IntN(20); {
	case x < 6: // Lock or TryLock
		k.lock(ctx, wait, lockKeys[k.r.IntN(len(lockKeys))], ttl, k.r.IntN(2) == 0)
	case x < 8: // LockAll
		a, b := k.r.IntN(len(lockKeys)), k.r.IntN(len(lockKeys)-1)
		if b >= a {
			b++
		}
		keys := []string{lockKeys[a], lockKeys[b]}
		op := k.begin(history.OpAll, "", ttl)
		op.Keys = slices.Sorted(slices.Values(keys))
		var l *redlock.Lock
		var err error
		if k.r.IntN(2) == 0 {
			l, err = k.c.LockAll(wait, keys, ttl)
		} else {
			l, err = k.c.TryLockAll(ctx, keys, ttl)
		}
		if l != nil {
			op.Key = l.Key()
		}
		k.got(op, l, err)
		if err == nil {
			k.hold(ctx, op, l, ttl)
		}
	case x < 10: // a hold handed over to another process
		k.adopt(ctx, wait, ttl)
	case x < 11: // an operator's removal
		k.force(ctx)
	case x < 13: // a permit
		op := k.begin(history.OpPermit, semKey, ttl)
		op.Permits = semPermits
		s := k.c.Semaphore(semKey, semPermits)
		var p *redlock.Permit
		var err error
		if k.r.IntN(2) == 0 {
			p, err = s.Acquire(wait, ttl)
		} else {
			p, err = s.TryAcquire(ctx, ttl)
		}
		if err != nil {
			k.got(op, nil, err)
			return
		}
		op.Slot = p.Slot
		op.Keys = []string{wire.PermitKey(semKey, p.Slot)}
		k.got(op, p.Lock, nil)
		k.hold(ctx, op, p.Lock, ttl)
	case x < 17: // a reader or the writer
		rw := k.c.RWLock(rwKey)
		kind := history.OpRead
		if k.r.IntN(2) == 0 {
			kind = history.OpWrite
		}
		op := k.begin(kind, rwKey, ttl)
		var l *redlock.Lock
		var err error
		switch try := k.r.IntN(2) == 0; {
		case kind == history.OpRead && try:
			l, err = rw.TryRLock(ctx, ttl)
		case kind == history.OpRead:
			l, err = rw.RLock(wait, ttl)
		case try:
			l, err = rw.TryLock(ctx, ttl)
		default:
			l, err = rw.Lock(wait, ttl)
		}
		k.got(op, l, err)
		if err == nil {
			k.hold(ctx, op, l, ttl)
		}
	default: // an election
		e := k.c.Election(electionKey, ttl)
		if k.r.IntN(3) == 0 {
			_, _ = e.Leader(ctx)
			return
		}
		op := k.begin(history.OpLeader, electionKey, ttl)
		l, err := e.Campaign(wait, k.name)
		k.got(op, l, err)
		if err == nil {
			time.Sleep(time.Duration(k.r.Int64N(int64(ttl))))
			k.release(ctx, op, l)
		}
	}
}

// lock takes key for ttl (Lock, waiting up to wait, or TryLock), holds
// and releases it, and records it.
func (k *worker) lock(ctx, wait context.Context, key string, ttl time.Duration, waits bool) {
	op := k.begin(history.OpLock, key, ttl)
	var l *redlock.Lock
	var err error
	if waits {
		l, err = k.c.Lock(wait, key, ttl)
	} else {
		l, err = k.c.TryLock(ctx, key, ttl)
	}
	k.got(op, l, err)
	if err == nil {
		k.hold(ctx, op, l, ttl)
	}
}

// afterRestart is what a process started after a majority of the
// servers restarted does first, the schedule of issue 39's first hole:
// with a fresh client, it locks a key of one slot, releases it, then
// tries a key of another slot with a short TTL, which a lock taken before
// the restart may still hold: half the time the key of the longest lock
// held at the crash.
func (k *worker) afterRestart(ctx context.Context) {
	k.c.Close()
	k.c = k.w.client(k.i, k.opts)
	wait, cancel := context.WithTimeout(ctx, k.w.maxTTL/2)
	defer cancel()
	short := ttls[k.r.IntN(2)]
	k.w.mu.Lock()
	long := k.w.longKey
	k.w.mu.Unlock()
	other, target := []string{"x", "y"}[k.r.IntN(2)], []string{"{t}a", "{t}b"}[k.r.IntN(2)]
	if long != "" && k.r.IntN(2) == 0 {
		// The key of the long lock held at the crash, and a key of
		// another slot first.
		target, other = long, "y"
		if long == "y" {
			other = "x"
		}
	}
	k.lock(ctx, wait, other, short, false)
	k.lock(ctx, wait, target, short, false)
}

// adopt takes a hold (a lock, a reader's or writer's, or a permit) and
// hands it over to the heir, another process, which adopts it by its token,
// holds and releases it.
func (k *worker) adopt(ctx, wait context.Context, ttl time.Duration) {
	var op *history.Op
	var l *redlock.Lock
	var err error
	switch k.r.IntN(3) {
	case 0:
		key := lockKeys[k.r.IntN(len(lockKeys))]
		op = k.begin(history.OpLock, key, ttl)
		l, err = k.c.Lock(wait, key, ttl)
	case 1:
		op = k.begin(history.OpRead, rwKey, ttl)
		l, err = k.c.RWLock(rwKey).RLock(wait, ttl)
	default:
		op = k.begin(history.OpPermit, semKey, ttl)
		op.Permits = semPermits
		var p *redlock.Permit
		p, err = k.c.Semaphore(semKey, semPermits).Acquire(wait, ttl)
		if err == nil {
			l = p.Lock
			op.Slot = p.Slot
			op.Keys = []string{wire.PermitKey(semKey, p.Slot)}
		}
	}
	k.got(op, l, err)
	if err != nil {
		return
	}
	time.Sleep(time.Duration(k.r.Int64N(int64(ttl) / 2)))
	h := k.w.h
	op.Handover = h.Now()
	h.AddOp(op)
	ad := k.begin(op.Kind, op.Key, ttl)
	ad.Adopts, ad.Keys, ad.Permits, ad.Slot = op.ID, op.Keys, op.Permits, op.Slot
	al, err := k.heir.Adopt(ctx, op.Key, l.Token())
	k.got(ad, al, err)
	if err == nil {
		k.hold(ctx, ad, al, ttl)
	}
}

// force removes a lock as an operator would (admin.ForceRelease), and
// records the removal.
func (k *worker) force(ctx context.Context) {
	h := k.w.h
	key := lockKeys[k.r.IntN(len(lockKeys))]
	rm := history.Removal{Key: key, By: k.name, How: history.ByForceRelease, Call: h.Now()}
	k.w.forcing(k.i, key)
	views, err := admin.New(k.c).ForceRelease(ctx, key)
	rm.Return = h.Now()
	// A removal whose verdict failed may still have deleted the key on a
	// majority of the servers (say, on nodes that answered but that the
	// client did not count, not yet knowing them to be servers apart):
	// its holder has lost the lock then, and the history says so.
	// Its holders are those whose key it deleted on some server, as the
	// servers' replies say, whatever the verdict.
	on, holders := k.w.forcedOn(k.i, key)
	rm.OK = err == nil || on > len(k.w.servers)/2
	if err != nil {
		rm.Err = err.Error()
	}
	rm.Holders = holders
	for _, v := range views {
		if v.Held && !slices.Contains(rm.Holders, v.Holder) {
			rm.Holders = append(rm.Holders, v.Holder)
		}
	}
	h.AddRemoval(rm)
}
