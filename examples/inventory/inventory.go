package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/quorumlock/redlock"
)

// config is what the program is asked to do.
type config struct {
	dsn     string        // the database; see openStore
	sku     string        // the item sold
	stock   int           // its stock at the start
	workers int           // how many workers sell at once
	orders  int           // how many orders each worker sells
	qty     int           // how many of the item one order takes
	work    time.Duration // how long the work of one order takes, under the lock
	ttl     time.Duration // the time to live of the item's lock

	// opts configures the lock clients; nil selects the defaults, with
	// restart quarantine on. Only tests, whose servers nobody locked
	// anything on before, set DisableQuarantine, so as not to wait one
	// TTL for servers that have just started.
	opts *redlock.Options
}

// A report is what run did, for tests to check against the database.
type report struct {
	initial int         // the stock at the start
	sales   []sale      // the workers' sales, in fence order
	sold    int         // the stock they took in all
	stale   staleResult // the stale holder's write
	final   int         // the stock at the end
}

// run sells the item from the database cfg.dsn, with its lock on the
// nodes at urls, and reports to w as it goes: first cfg.workers workers
// at once, then a stale lock holder whose write the database refuses. It
// checks that the stock adds up at each stage and returns an error if
// anything turns out otherwise than described.
func run(ctx context.Context, urls []string, w io.Writer, cfg config) (rep *report, err error) {
	demand := cfg.workers*cfg.orders*cfg.qty + cfg.qty // the workers', and holder B's
	switch {
	case cfg.workers <= 0 || cfg.orders <= 0 || cfg.qty <= 0 || cfg.ttl <= 0 || cfg.work < 0:
		return nil, fmt.Errorf("workers, orders, qty and ttl must be positive and work not negative: %d, %d, %d, %s, %s",
			cfg.workers, cfg.orders, cfg.qty, cfg.ttl, cfg.work)
	case cfg.stock < demand:
		return nil, fmt.Errorf("a stock of %d is too small: %d workers selling %d orders of %d, and the demonstration of a stale write, need %d",
			cfg.stock, cfg.workers, cfg.orders, cfg.qty, demand)
	}
	st, err := openStore(ctx, cfg.dsn)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := st.close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if err := st.restock(ctx, cfg.sku, cfg.stock); err != nil {
		return nil, err
	}
	rep = &report{initial: cfg.stock}
	fmt.Fprintf(w, "database: %s; %q restocked to %d\n", st.name, cfg.sku, cfg.stock)

	fmt.Fprintf(w, "\n%d workers sell %d orders of %d at once, each order under the lock %q (ttl %s)\n",
		cfg.workers, cfg.orders, cfg.qty, lockKey(cfg.sku), cfg.ttl)
	sales, err := runWorkers(ctx, urls, &lockedWriter{w: w}, st, cfg)
	if err != nil {
		return rep, err
	}
	slices.SortFunc(sales, func(a, b sale) int { return cmp.Compare(a.fence, b.fence) })
	rep.sales = sales
	if err := checkChain(cfg.stock, sales); err != nil {
		return rep, err
	}
	rep.sold = len(sales) * cfg.qty
	stock, _, err := st.item(ctx, cfg.sku)
	if err != nil {
		return rep, err
	}
	if stock != cfg.stock-rep.sold {
		return rep, fmt.Errorf("stock is %d after selling %d of %d, want %d", stock, rep.sold, cfg.stock, cfg.stock-rep.sold)
	}
	fmt.Fprintf(w, "%d sales in fence order form one chain from %d down to %d: no two workers held the lock at once\n",
		len(sales), cfg.stock, stock)
	fmt.Fprintf(w, "stock is %d = %d - %d sold: consistent\n", stock, cfg.stock, rep.sold)

	fmt.Fprintf(w, "\na stale lock holder:\n")
	rep.stale, err = staleWrite(ctx, urls, w, st, cfg)
	if err != nil {
		return rep, err
	}
	rep.final, _, err = st.item(ctx, cfg.sku)
	if err != nil {
		return rep, err
	}
	if want := stock - cfg.qty; rep.final != want {
		return rep, fmt.Errorf("stock is %d at the end, want %d: %d less holder B's %d", rep.final, want, stock, cfg.qty)
	}
	fmt.Fprintf(w, "\nfinal stock %d = %d - %d sold by the workers - %d by holder B; holder A's stale write changed nothing\n",
		rep.final, cfg.stock, rep.sold, cfg.qty)
	return rep, nil
}

// checkChain checks that sales, in fence order, each started from the
// stock the one before left, starting from initial: the workers read and
// wrote one after another, never two at once.
func checkChain(initial int, sales []sale) error {
	want := initial
	for i, s := range sales {
		if s.before != want {
			return fmt.Errorf("sale %d in fence order (worker %d, fence %d) read stock %d, but the sale before left %d: two workers held the lock at once",
				i+1, s.worker, s.fence, s.before, want)
		}
		want = s.after
	}
	return nil
}
