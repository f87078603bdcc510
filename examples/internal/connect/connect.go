// Package connect connects the example programs to their Redis nodes.
//
// Every example takes the same -nodes flag: a comma-separated list of
// redis:// (or rediss://, unix://) URLs, one per independent Redis
// master, whose default comes from the REDLOCK_NODES environment variable
// and otherwise names a single local server.
package connect

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/goredisnode"
	"github.com/redis/go-redis/v9"
)

// EnvNodes is the environment variable that lists the nodes when the
// -nodes flag is not given.
const EnvNodes = "REDLOCK_NODES"

// DefaultURL is the node used when neither -nodes nor REDLOCK_NODES names
// any.
const DefaultURL = "redis://127.0.0.1:6379"

// FlagUsage is the usage text of the -nodes flag.
const FlagUsage = "comma-separated URLs of the independent Redis masters (default $" + EnvNodes + ", else " + DefaultURL + ")"

// DefaultNodes returns the default value of the -nodes flag: the value of
// REDLOCK_NODES if it is set and not blank, and DefaultURL otherwise.
func DefaultNodes() string {
	if v := strings.TrimSpace(os.Getenv(EnvNodes)); v != "" {
		return v
	}
	return DefaultURL
}

// Split splits a comma-separated list of node URLs and trims the spaces
// around each. It rejects a list with no URL in it or with an empty
// element, such as "a,,b".
func Split(list string) ([]string, error) {
	if strings.TrimSpace(list) == "" {
		return nil, errors.New("no node URLs given")
	}
	urls := strings.Split(list, ",")
	for i, u := range urls {
		urls[i] = strings.TrimSpace(u)
		if urls[i] == "" {
			return nil, fmt.Errorf("node list %q has an empty element", list)
		}
	}
	return urls, nil
}

// Dial returns a lock client over one go-redis node per URL, with the
// given options (nil selects the defaults), and a function that closes
// the client and then the nodes. Dial does not connect: a node that is down makes the lock
// operations report it, not Dial.
func Dial(urls []string, opts *redlock.Options) (*redlock.Client, func() error, error) {
	nodes := make([]*goredisnode.Node, 0, len(urls))
	closeAll := func() error {
		var errs []error
		for _, n := range nodes {
			if err := n.Close(); err != nil {
				errs = append(errs, fmt.Errorf("closing node %s: %w", n.Name(), err))
			}
		}
		return errors.Join(errs...)
	}
	rnodes := make([]redlock.Node, 0, len(urls))
	for _, u := range urls {
		n, err := goredisnode.Dial(u)
		if err != nil {
			return nil, nil, errors.Join(err, closeAll())
		}
		nodes = append(nodes, n)
		rnodes = append(rnodes, n)
	}
	c, err := redlock.New(rnodes, opts)
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("creating the lock client: %w", err), closeAll())
	}
	// The client is closed first: Close waits for the releases that
	// Release left running in the background, which closing the nodes
	// would cut short.
	return c, func() error { return errors.Join(c.Close(), closeAll()) }, nil
}

// Main runs the body of the program called name: it splits the -nodes
// list, exiting with status 2 if it is bad, and runs body with the URLs
// and a context that ends on an interrupt or SIGTERM. When body fails, it
// prints the error and exits with status 1.
func Main(name, nodes string, body func(ctx context.Context, urls []string) error) {
	urls, err := Split(nodes)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: -nodes: %v\n", name, err)
		os.Exit(2)
	}
	redis.SetLogger(quietRedis{}) // a program's choice; a library would not
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = body(ctx, urls)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

// Work stands for real work that takes d: it returns nil after d, or the
// cause of ctx as soon as ctx ends.
func Work(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// MaxWait bounds how long the examples wait for a lock: with nodes down or
// unreachable, Lock would otherwise wait until it is interrupted. The
// error then says what the last round found on each node.
const MaxWait = 30 * time.Second

// Lock takes the lock on key for ttl, waiting at most MaxWait.
func Lock(ctx context.Context, locks *redlock.Client, key string, ttl time.Duration) (*redlock.Lock, error) {
	ctx, cancel := context.WithTimeout(ctx, MaxWait)
	defer cancel()
	l, err := locks.Lock(ctx, key, ttl)
	if err != nil && errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("no lock on %q after waiting %v: %w", key, MaxWait, err)
	}
	return l, err
}

// quietRedis drops go-redis's own log lines, such as one per failed dial:
// the examples report errors in their own words.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}
