package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/examples/internal/connect"
)

// A staleResult is what happened to the write of a stale lock holder.
type staleResult struct {
	staleFence int64 // the stale holder's fence
	newerFence int64 // the fence of the holder that came after it
	applied    bool  // whether the database applied the stale write
	before     int   // the stock just before the stale write
	after      int   // the stock just after it
}

// staleWrite shows why the database checks the fence. Holder A takes the
// lock, reads the stock and pauses past the lock's TTL, as a long garbage
// collection or a stopped virtual machine would make it. Meanwhile holder
// B takes the lock, with a greater fence, and sells. A then resumes,
// unaware that its lock has gone, and writes: the database refuses the
// write, because A's fence is not greater than B's.
//
// A and B have lock clients of their own, as two instances of the service
// would. staleWrite returns an error if anything turns out otherwise.
func staleWrite(ctx context.Context, urls []string, w io.Writer, st *store, cfg config) (res staleResult, err error) {
	clientA, closeA, err := connect.Dial(urls, cfg.opts)
	if err != nil {
		return res, err
	}
	clientB, closeB, err := connect.Dial(urls, cfg.opts)
	if err != nil {
		return res, errors.Join(err, closeA())
	}
	defer func() {
		if cerr := errors.Join(closeA(), closeB()); cerr != nil && err == nil {
			err = cerr
		}
	}()
	key := lockKey(cfg.sku)

	a, err := connect.Lock(ctx, clientA, key, cfg.ttl)
	if err != nil {
		return res, fmt.Errorf("holder A: taking the lock: %w", err)
	}
	res.staleFence = a.Fence()
	stock, _, err := st.item(ctx, cfg.sku)
	if err != nil {
		return res, fmt.Errorf("holder A: %w", errors.Join(err, a.Release(ctx)))
	}
	fmt.Fprintf(w, "holder A: fence %d: read stock %d, then pauses for longer than its ttl (%s)\n", a.Fence(), stock, cfg.ttl)

	// A paused process watches nothing; the program waits for the end of
	// A's lock so that B comes after A's deadline.
	select {
	case <-a.Context().Done():
		fmt.Fprintf(w, "holder A: (paused) its lock has ended: %v\n", context.Cause(a.Context()))
	case <-ctx.Done():
		return res, errors.Join(context.Cause(ctx), a.Release(ctx))
	}

	res.newerFence, err = newerHolder(ctx, clientB, w, st, cfg)
	if err != nil {
		return res, fmt.Errorf("holder B: %w", err)
	}
	if res.newerFence <= res.staleFence {
		return res, fmt.Errorf("holder B's fence %d is not greater than holder A's %d", res.newerFence, res.staleFence)
	}

	// A resumes where it stopped, and writes with its old fence.
	res.before, _, err = st.item(ctx, cfg.sku)
	if err != nil {
		return res, err
	}
	res.applied, err = st.sell(ctx, cfg.sku, cfg.qty, a.Fence())
	if err != nil {
		return res, fmt.Errorf("holder A: %w", err)
	}
	res.after, _, err = st.item(ctx, cfg.sku)
	if err != nil {
		return res, err
	}
	if res.applied {
		return res, fmt.Errorf("holder A: the database ACCEPTED the write of fence %d after fence %d: stock %d -> %d",
			a.Fence(), res.newerFence, res.before, res.after)
	}
	fmt.Fprintf(w, "holder A: resumes and sells %d with fence %d: REJECTED by the database, 0 rows affected: %s\n",
		cfg.qty, a.Fence(), st.why(ctx, cfg.sku, cfg.qty, a.Fence()))
	if res.after != res.before {
		return res, fmt.Errorf("the stock changed from %d to %d although the stale write was refused", res.before, res.after)
	}
	fmt.Fprintf(w, "holder A: the stock is still %d: the refused write changed nothing\n", res.after)

	// Release tells A what it missed.
	if err := a.Release(ctx); errors.Is(err, redlock.ErrExpired) || errors.Is(err, redlock.ErrLockLost) {
		fmt.Fprintf(w, "holder A: release: %v\n", err)
	} else {
		return res, fmt.Errorf("holder A: release after the lock had ended: %v; want ErrExpired or ErrLockLost", err)
	}
	return res, nil
}

// newerHolder takes the lock after the stale holder's has ended, sells
// one order under it with its greater fence, and returns the fence.
func newerHolder(ctx context.Context, locks *redlock.Client, w io.Writer, st *store, cfg config) (int64, error) {
	b, err := connect.Lock(ctx, locks, lockKey(cfg.sku), cfg.ttl)
	if err != nil {
		return 0, fmt.Errorf("taking the lock: %w", err)
	}
	stock, _, err := st.item(ctx, cfg.sku)
	if err != nil {
		return 0, errors.Join(err, b.Release(ctx))
	}
	applied, err := st.sell(ctx, cfg.sku, cfg.qty, b.Fence())
	if err == nil && !applied {
		err = fmt.Errorf("the database refused its write: %s", st.why(ctx, cfg.sku, cfg.qty, b.Fence()))
	}
	if err != nil {
		return 0, errors.Join(err, b.Release(ctx))
	}
	if err := b.Release(ctx); err != nil {
		return 0, fmt.Errorf("releasing: %w", err)
	}
	fmt.Fprintf(w, "holder B: fence %d: took the lock once A's had expired; stock %d -> %d; released\n",
		b.Fence(), stock, stock-cfg.qty)
	return b.Fence(), nil
}
