package main

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/goredisnode"
	"github.com/redis/go-redis/v9"
)

// This file opens the nodes that the flags name, and the lock client over
// them.

// connect opens the nodes the flags name and a lock client over them,
// with the flags' options and a ReleaseTimeout of timeout when it is not 0.
// The caller closes the nodeSet.
func (f *nodeFlags) connect(timeout time.Duration) (*nodeSet, *redlock.Client, error) {
	return f.connectWith(func(o *redlock.Options) { o.ReleaseTimeout = timeout })
}

// connectWith is connect with the options that set gives on top of the
// flags' own.
func (f *nodeFlags) connectWith(set func(*redlock.Options)) (*nodeSet, *redlock.Client, error) {
	opts, err := f.options()
	if err != nil {
		return nil, nil, err
	}
	set(opts)
	urls, err := f.urls()
	if err != nil {
		return nil, nil, err
	}
	ts, err := f.tls.resolve(urls, f.stderr)
	if err != nil {
		return nil, nil, err
	}
	ns, err := openNodes(urls, ts)
	if err != nil {
		return nil, nil, err
	}
	c, err := ns.client(opts)
	if err != nil {
		ns.close()
		return nil, nil, err
	}
	return ns, c, nil
}

// connect checks the flags and connects as nf.connect does, waiting up to
// the timeout for each node.
func (f *reportFlags) connect(nf *nodeFlags) (*nodeSet, *redlock.Client, error) {
	if f.timeout <= 0 {
		return nil, nil, usagef("--timeout %v must be positive", f.timeout)
	}
	return nf.connect(f.timeout)
}

// A nodeSet is the nodes of one invocation: a lock node for each URL, and
// its go-redis client for the commands that status and doctor send beside
// the lock scripts.
type nodeSet struct {
	tls   *tlsSetup
	urls  []string // as given; they may hold passwords: never print them
	names []string // the lock nodes' names, "ADDR/DB": safe to print
	nodes []*goredisnode.Node
	cmds  []redis.Cmdable   // nodes[i].Client(): no retries, context deadlines honoured
	locks []*redlock.Client // made by client; closed before the nodes
}

// openNodes makes a lock node for each URL, with the TLS set-up ts for
// rediss:// URLs. Nothing is connected yet. A URL that does not parse is
// a usage error whose text contains no user information.
func openNodes(urls []string, ts *tlsSetup) (*nodeSet, error) {
	s := &nodeSet{tls: ts}
	for _, u := range urls {
		n, err := dialNode(u, ts.dialOptions(u)...)
		if err != nil {
			s.close()
			return nil, err
		}
		cmds, ok := n.Client().(redis.Cmdable)
		if !ok {
			n.Close()
			s.close()
			return nil, exitf(exitSoftware, "the client of node %s cannot send plain commands", n.Name())
		}
		s.urls = append(s.urls, u)
		s.names = append(s.names, n.Name())
		s.nodes = append(s.nodes, n)
		s.cmds = append(s.cmds, cmds)
	}
	return s, nil
}

// dialNode returns a lock node for the URL raw, made by goredisnode.Dial.
// A URL that does not parse is a usage error whose text contains no user
// information.
func dialNode(raw string, opts ...goredisnode.DialOption) (*goredisnode.Node, error) {
	n, err := goredisnode.Dial(raw, opts...)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "goredisnode: ")
		return nil, usagef("%v", strings.TrimPrefix(msg, "tlsfiles: "))
	}
	return n, nil
}

// lockNodes returns the nodes as redlock.Nodes.
func (s *nodeSet) lockNodes() []redlock.Node {
	out := make([]redlock.Node, len(s.nodes))
	for i, n := range s.nodes {
		out[i] = n
	}
	return out
}

// client returns a lock client for the nodes. Invalid options and nodes
// given twice are usage errors.
func (s *nodeSet) client(opts *redlock.Options) (*redlock.Client, error) {
	quietLogs(opts)
	c, err := redlock.New(s.lockNodes(), opts)
	if err != nil {
		return nil, usagef("%v", strings.TrimPrefix(err.Error(), "redlock: "))
	}
	s.locks = append(s.locks, c)
	return c, nil
}

// close closes the lock clients, which waits for their releases still in
// flight, and then the nodes.
func (s *nodeSet) close() {
	for _, c := range s.locks {
		c.Close()
	}
	for _, n := range s.nodes {
		n.Close()
	}
}

// quietRedis keeps go-redis from logging on its own: the commands report
// what matters in their own words.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

func init() { redis.SetLogger(quietRedis{}) }

// quietLogs keeps the lock client from logging on its own, for the same
// reason, unless opts has a Logger: its default, slog.Default(), would
// write to stderr past the scrubber of passwords.
func quietLogs(opts *redlock.Options) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
}
