// Longjob runs a job that takes longer than its lock's time to live: the
// lock is taken with a short TTL and extended in the background while the
// job runs, and the job stops as soon as the lock is lost.
//
// Usage:
//
//	longjob [-nodes urls] [-ttl 2s] [-steps 8] [-step 500ms] [-budget 1m] [-lose]
//
// With -lose, the program deletes the lock's key on a majority of the
// nodes halfway through the job, as a failover or a FLUSHALL would, and
// the job stops at once: longjob then exits with status 1, as a real job
// that lost its lock should, so that whatever runs it tries again.
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
	cfg := config{key: "examples:longjob"}
	flag.StringVar(&cfg.key, "key", cfg.key, "the `name` of the lock")
	flag.DurationVar(&cfg.ttl, "ttl", 2*time.Second, "the lock's time to live; the job takes longer")
	flag.IntVar(&cfg.steps, "steps", 8, "the number of steps of the job")
	flag.DurationVar(&cfg.step, "step", 500*time.Millisecond, "how long each step takes")
	flag.DurationVar(&cfg.budget, "budget", time.Minute, "how long the lock may be extended for; 0 for ever")
	lose := flag.Bool("lose", false, "delete the lock's key on a majority of the nodes halfway through the job")
	flag.Parse()
	// cfg.opts stays nil: restart quarantine stays on, as it must for
	// nodes that may have restarted without their keys.
	connect.Main("longjob", *nodes, func(ctx context.Context, urls []string) error {
		if *lose {
			cfg.loseAfter = max(cfg.steps/2, 1)
			cfg.lose = deleteOnMajority(urls)
			cfg.loseHow = "deleting the lock's key on a majority of the nodes"
		}
		return run(ctx, urls, os.Stdout, cfg)
	})
}
