package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/examples/internal/connect"
)

// A sale is one order sold by a worker, as the worker saw it while it
// held the lock.
type sale struct {
	worker int
	fence  int64 // the lock's fencing token, written with the sale
	before int   // the stock the worker read under the lock
	after  int   // the stock it left: before less the order
}

// maxAttempts bounds how many locks a worker takes for one order whose
// writes the database keeps refusing.
const maxAttempts = 5

// runWorkers runs cfg.workers workers at once, each selling cfg.orders
// orders of cfg.qty, and returns all their sales.
func runWorkers(ctx context.Context, urls []string, w io.Writer, st *store, cfg config) ([]sale, error) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		sales []sale
		errs  []error
	)
	for id := 1; id <= cfg.workers; id++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := worker(ctx, id, urls, w, st, cfg)
			mu.Lock()
			defer mu.Unlock()
			sales = append(sales, s...)
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	return sales, errors.Join(errs...)
}

// worker sells cfg.orders orders of cfg.qty, taking the item's lock for
// each, and returns its sales. It has a lock client of its own, as a
// separate instance of the service would. w must be safe for concurrent
// use.
func worker(ctx context.Context, id int, urls []string, w io.Writer, st *store, cfg config) (sales []sale, err error) {
	locks, closeNodes, err := connect.Dial(urls, cfg.opts)
	if err != nil {
		return nil, fmt.Errorf("worker %d: %w", id, err)
	}
	defer func() {
		if cerr := closeNodes(); cerr != nil && err == nil {
			err = fmt.Errorf("worker %d: %w", id, cerr)
		}
	}()
	for order := 1; order <= cfg.orders; order++ {
		s, err := sellOrder(ctx, id, locks, w, st, cfg)
		if err != nil {
			return sales, fmt.Errorf("worker %d, order %d: %w", id, order, err)
		}
		sales = append(sales, *s)
	}
	return sales, nil
}

// sellOrder sells one order of cfg.qty under the item's lock. If the lock
// is lost before the write, or the database refuses the write, which
// happens only when the lock was lost between the read and the write, it
// tries again under a new lock.
func sellOrder(ctx context.Context, id int, locks *redlock.Client, w io.Writer, st *store, cfg config) (*sale, error) {
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		l, err := connect.Lock(ctx, locks, lockKey(cfg.sku), cfg.ttl)
		if err != nil {
			return nil, fmt.Errorf("taking the lock: %w", err)
		}
		s, refused, err := sellUnder(ctx, id, l, w, st, cfg)
		// The fence has made the write safe whatever Release finds, so
		// a failed release is reported, not treated as a failed sale.
		if relErr := l.Release(ctx); relErr != nil {
			fmt.Fprintf(w, "worker %d: fence %d: release: %v\n", id, l.Fence(), relErr)
		}
		if err != nil || !refused {
			return s, err
		}
	}
	return nil, fmt.Errorf("the database refused %d writes in a row", maxAttempts)
}

// sellUnder reads the stock, does the order's work and sells it, while
// holding l. It reports with refused that the lock was lost during the
// work or that the database refused the write.
func sellUnder(ctx context.Context, id int, l *redlock.Lock, w io.Writer, st *store, cfg config) (s *sale, refused bool, err error) {
	stock, _, err := st.item(ctx, cfg.sku)
	if err != nil {
		return nil, false, err
	}
	if stock < cfg.qty {
		return nil, false, fmt.Errorf("sold out: only %d in stock for an order of %d", stock, cfg.qty)
	}
	// The order's own work, such as taking the payment, runs under the
	// lock's context, which ends if the lock is lost.
	if err := connect.Work(l.Context(), cfg.work); err != nil {
		fmt.Fprintf(w, "worker %d: fence %d: the order's work stopped, %v; trying again under a new lock\n", id, l.Fence(), err)
		return nil, true, nil
	}
	// The worker need not check that it still holds the lock before it
	// writes: the database checks the fence in the write itself.
	applied, err := st.sell(ctx, cfg.sku, cfg.qty, l.Fence())
	if err != nil {
		return nil, false, err
	}
	if !applied {
		fmt.Fprintf(w, "worker %d: fence %d: write refused, %s; trying again under a new lock\n",
			id, l.Fence(), st.why(ctx, cfg.sku, cfg.qty, l.Fence()))
		return nil, true, nil
	}
	fmt.Fprintf(w, "worker %d: fence %d: stock %d -> %d\n", id, l.Fence(), stock, stock-cfg.qty)
	return &sale{worker: id, fence: l.Fence(), before: stock, after: stock - cfg.qty}, false, nil
}

// lockKey returns the key of the lock that guards the stock of sku.
func lockKey(sku string) string { return "inventory:" + sku }

// A lockedWriter makes an io.Writer safe for concurrent use: each Write
// goes through whole before the next starts.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (lw *lockedWriter) Write(p []byte) (int, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	return lw.w.Write(p)
}
