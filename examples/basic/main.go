// Basic takes a distributed lock on three (or any number of) Redis
// masters, shows its fencing token and validity, shows that a second
// attempt is refused while it is held, and releases it. The whole program
// is this file: copy it.
//
// Usage:
//
//	basic [-nodes redis://host1:6379,redis://host2:6379,redis://host3:6379] [-key name] [-ttl 10s] [-wait 30s]
//
// The nodes default to $REDLOCK_NODES, else redis://127.0.0.1:6379. A
// node that started less than one TTL ago does not vote yet (the restart
// quarantine), so on servers started a moment ago the first lock takes
// about one TTL.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/goredisnode"
	"github.com/redis/go-redis/v9"
)

func main() {
	nodes := flag.String("nodes", defaultNodes(), "comma-separated redis:// URLs, one per independent Redis master (default $REDLOCK_NODES, else redis://127.0.0.1:6379)")
	cfg := config{}
	flag.StringVar(&cfg.key, "key", "examples:basic", "the `name` of the lock")
	flag.DurationVar(&cfg.ttl, "ttl", 10*time.Second, "the lock's time to live")
	flag.DurationVar(&cfg.wait, "wait", 30*time.Second, "how long to wait for the lock")
	flag.Parse()

	// go-redis logs every failed dial of its pool; this program reports
	// errors in its own words. A program may choose this; a library would not.
	redis.SetLogger(quietRedis{})

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, strings.Split(*nodes, ","), os.Stdout, cfg)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "basic:", err)
		os.Exit(1)
	}
}

// config is what the program is asked to do.
type config struct {
	key  string        // the lock's key
	ttl  time.Duration // the lock's time to live
	wait time.Duration // how long to wait for the lock

	// opts configures the lock client; nil selects the defaults, with the
	// restart quarantine on. Only tests, whose servers nobody locked
	// anything on before, set DisableQuarantine.
	opts *redlock.Options
}

// run takes the lock on the nodes at urls, reports on it to w, shows that
// nobody else can take it while it is held, does some work and releases
// it. It returns an error if any step does not go as described.
func run(ctx context.Context, urls []string, w io.Writer, cfg config) (err error) {
	// One node per independent Redis master. Dial does not connect: a node
	// that is down shows in the lock operations' errors.
	var nodes []redlock.Node
	for _, u := range urls {
		n, err := goredisnode.Dial(strings.TrimSpace(u))
		if err != nil {
			return err
		}
		defer n.Close()
		nodes = append(nodes, n)
	}
	locks, err := redlock.New(nodes, cfg.opts)
	if err != nil {
		return err
	}
	// Close the client before its nodes: it waits for the releases still
	// in flight.
	defer func() { err = errors.Join(err, locks.Close()) }()

	fmt.Fprintf(w, "locking %q on %d nodes (quorum %d)\n", cfg.key, len(nodes), len(nodes)/2+1)
	// Lock waits while others hold the lock, or the nodes are unreachable,
	// until its context ends: bound it.
	lockCtx, cancel := context.WithTimeout(ctx, cfg.wait)
	l, err := locks.Lock(lockCtx, cfg.key, cfg.ttl)
	cancel()
	if err != nil {
		return fmt.Errorf("taking the lock: %w", err)
	}
	fmt.Fprintf(w, "acquired %q: fence %d, valid for %s\n",
		l.Key(), l.Fence(), time.Until(l.Until()).Round(time.Millisecond))

	// While it is held, nobody else gets it: one attempt, as another
	// process would make, is refused with ErrTaken.
	other, err := locks.TryLock(ctx, cfg.key, cfg.ttl)
	switch {
	case err == nil:
		return errors.Join(
			fmt.Errorf("a second TryLock of %q succeeded while the lock was held (fence %d)", cfg.key, other.Fence()),
			other.Release(ctx), l.Release(ctx))
	case !errors.Is(err, redlock.ErrTaken):
		return errors.Join(fmt.Errorf("a second TryLock of %q failed, but not with ErrTaken: %w", cfg.key, err), l.Release(ctx))
	}
	fmt.Fprintf(w, "TryLock while held: refused, errors.Is(err, redlock.ErrTaken) = true\n  %v\n", err)

	// The work runs under the lock's context, which ends if the lock is
	// lost; a real write would carry l.Fence() for the resource to check.
	if err := work(l.Context(), w); err != nil {
		return errors.Join(err, l.Release(ctx))
	}
	if err := l.Release(ctx); err != nil {
		return fmt.Errorf("releasing fence %d: %w", l.Fence(), err)
	}
	fmt.Fprintf(w, "released %q (fence %d)\n", l.Key(), l.Fence())

	// Once released, the lock is free at once, and its next owner gets a
	// greater fence.
	next, err := locks.TryLock(ctx, cfg.key, cfg.ttl)
	if err != nil {
		return fmt.Errorf("taking the lock again after its release: %w", err)
	}
	fmt.Fprintf(w, "acquired %q again: fence %d (greater than %d: %t)\n",
		next.Key(), next.Fence(), l.Fence(), next.Fence() > l.Fence())
	if err := next.Release(ctx); err != nil {
		return fmt.Errorf("releasing fence %d: %w", next.Fence(), err)
	}
	fmt.Fprintf(w, "released %q (fence %d)\n", next.Key(), next.Fence())
	return nil
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

// defaultNodes returns $REDLOCK_NODES, or one local server.
func defaultNodes() string {
	if v := strings.TrimSpace(os.Getenv("REDLOCK_NODES")); v != "" {
		return v
	}
	return "redis://127.0.0.1:6379"
}

// quietRedis drops go-redis's own log lines.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}
