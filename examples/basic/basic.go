package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/admin"
	"github.com/quorumlock/redlock/examples/internal/connect"
)

// config is what the program is asked to do.
type config struct {
	key string        // the lock's key
	ttl time.Duration // the lock's time to live

	// opts configures the lock client; nil selects the defaults, with
	// restart quarantine on. Only tests, whose servers nobody locked
	// anything on before, set DisableQuarantine, so as not to wait one
	// TTL for servers that have just started.
	opts *redlock.Options
}

// run takes the lock on the nodes at urls, reports on it to w, shows that
// nobody else can take it while it is held, does some work and releases
// it. It returns an error if any step does not go as described.
func run(ctx context.Context, urls []string, w io.Writer, cfg config) (err error) {
	locks, closeNodes, err := connect.Dial(urls, cfg.opts)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := closeNodes(); cerr != nil && err == nil {
			err = cerr
		}
	}()

	fmt.Fprintf(w, "locking %q on %d nodes (quorum %d)\n", cfg.key, len(urls), admin.New(locks).Quorum())
	// Lock waits for as long as the lock is held by others, or until ctx
	// ends; connect.Lock gives up after connect.MaxWait. A node that started less than one TTL ago does not vote yet
	// (restart quarantine), so on freshly started servers the first lock
	// takes about one TTL.
	l, err := connect.Lock(ctx, locks, cfg.key, cfg.ttl)
	if err != nil {
		return fmt.Errorf("taking the lock: %w", err)
	}
	fmt.Fprintf(w, "acquired %q: fence %d, valid for %s\n",
		l.Key(), l.Fence(), time.Until(l.Until()).Round(time.Millisecond))

	if err := tryWhileHeld(ctx, w, locks, cfg); err != nil {
		return errors.Join(err, release(ctx, w, l))
	}
	if err := work(l.Context(), w); err != nil {
		return errors.Join(err, release(ctx, w, l))
	}
	if err := release(ctx, w, l); err != nil {
		return err
	}

	// Once released, the lock is free at once, and its next owner gets a
	// greater fence.
	next, err := locks.TryLock(ctx, cfg.key, cfg.ttl)
	if err != nil {
		return fmt.Errorf("taking the lock again after its release: %w", err)
	}
	fmt.Fprintf(w, "acquired %q again: fence %d (greater than %d: %t)\n",
		next.Key(), next.Fence(), l.Fence(), next.Fence() > l.Fence())
	return release(ctx, w, next)
}

// tryWhileHeld makes one attempt at the lock that is held, as another
// process would, and checks that it is refused with ErrTaken.
func tryWhileHeld(ctx context.Context, w io.Writer, locks *redlock.Client, cfg config) error {
	other, err := locks.TryLock(ctx, cfg.key, cfg.ttl)
	switch {
	case err == nil:
		// Never expected: two owners at once.
		return errors.Join(
			fmt.Errorf("a second TryLock of %q succeeded while the lock was held (fence %d)", cfg.key, other.Fence()),
			other.Release(ctx))
	case errors.Is(err, redlock.ErrTaken):
		fmt.Fprintf(w, "TryLock while held: refused, errors.Is(err, redlock.ErrTaken) = true\n")
		fmt.Fprintf(w, "  %v\n", err)
		return nil
	default:
		return fmt.Errorf("a second TryLock of %q failed, but not with ErrTaken: %w", cfg.key, err)
	}
}

// work stands for the work the lock protects. It stops early if ctx, the
// lock's context, ends: the lock was lost and the work must not go on.
func work(ctx context.Context, w io.Writer) error {
	fmt.Fprintln(w, "working under the lock...")
	t := time.NewTimer(100 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("work stopped: %w", context.Cause(ctx))
	case <-t.C:
		return nil
	}
}

// release releases l and reports it to w.
func release(ctx context.Context, w io.Writer, l *redlock.Lock) error {
	if err := l.Release(ctx); err != nil {
		return fmt.Errorf("releasing fence %d: %w", l.Fence(), err)
	}
	fmt.Fprintf(w, "released %q (fence %d)\n", l.Key(), l.Fence())
	return nil
}
