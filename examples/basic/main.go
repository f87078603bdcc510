// Basic takes a distributed lock on three (or any number of) Redis
// masters, shows its fencing token and validity, shows that a second
// attempt is refused while it is held, and releases it.
//
// Usage:
//
//	basic [-nodes redis://host1:6379,redis://host2:6379,redis://host3:6379] [-key name] [-ttl 10s]
//
// The nodes default to $REDLOCK_NODES, else redis://127.0.0.1:6379.
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
	key := flag.String("key", "examples:basic", "the `name` of the lock")
	ttl := flag.Duration("ttl", 10*time.Second, "the lock's time to live")
	flag.Parse()
	// The options are nil: restart quarantine stays on, as it must for
	// nodes that may have restarted without their keys.
	connect.Main("basic", *nodes, func(ctx context.Context, urls []string) error {
		return run(ctx, urls, os.Stdout, config{key: *key, ttl: *ttl})
	})
}
