// Inventory sells an item from a database under a distributed lock, and
// shows why the database must check the lock's fencing token itself.
//
// Several workers, each with a lock client of its own, sell orders of the
// item at once; each takes the item's lock, reads the stock and writes
// the sale with the lock's fence in the same statement:
//
//	UPDATE items SET stock = stock - $1, fence = $2
//	WHERE sku = $3 AND fence < $2 AND stock >= $1
//
// Then a lock holder pauses past its lock's TTL while another takes the
// lock and sells; when the first resumes and writes, the database refuses
// its write, because its fence is smaller than the one it has accepted.
//
// Usage:
//
//	inventory [-nodes urls] [-dsn postgres://user:pass@host/db] [-workers 4] [-orders 5] [-qty 3] [-stock 100] [-work 20ms] [-ttl 2s]
//
// Without -dsn the database is SQLite, in memory. The nodes default to
// $REDLOCK_NODES, else redis://127.0.0.1:6379.
package main

import (
	"context"
	"flag"
	"os"
	"time"

	"github.com/quorumlock/redlock/examples/internal/connect"
)

func main() {
	nodes := flag.String("nodes", connect.DefaultNodes(), connect.FlagUsage)
	var cfg config
	flag.StringVar(&cfg.dsn, "dsn", "", "the database: a postgres:// URL for PostgreSQL, an SQLite file name, or empty for SQLite in memory")
	flag.StringVar(&cfg.sku, "sku", "widget", "the item sold")
	flag.IntVar(&cfg.stock, "stock", 100, "the item's stock at the start")
	flag.IntVar(&cfg.workers, "workers", 4, "how many workers sell at once")
	flag.IntVar(&cfg.orders, "orders", 5, "how many orders each worker sells")
	flag.IntVar(&cfg.qty, "qty", 3, "how many of the item one order takes")
	flag.DurationVar(&cfg.work, "work", 20*time.Millisecond, "how long the work of one order takes, under the lock")
	flag.DurationVar(&cfg.ttl, "ttl", 2*time.Second, "the time to live of the item's lock")
	flag.Parse()
	// cfg.opts stays nil: restart quarantine stays on, as it must for
	// nodes that may have restarted without their keys.
	connect.Main("inventory", *nodes, func(ctx context.Context, urls []string) error {
		_, err := run(ctx, urls, os.Stdout, cfg)
		return err
	})
}
