package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/admin"
	"github.com/quorumlock/redlock/driver"
	"github.com/quorumlock/redlock/goredisnode"
	"github.com/quorumlock/redlock/observe"
	"github.com/spf13/cobra"
)

// embeddedCount is how many embedded nodes the demo starts.
const embeddedCount = 5

type demoFlags struct {
	workers  int
	phase    time.Duration
	ttl      time.Duration
	timeline string // the file to draw the run in; "" for none
}

func newDemoCmd(nf *nodeFlags) *cobra.Command {
	df := &demoFlags{}
	cmd := &cobra.Command{
		Use:   "demo [flags]",
		Short: "Watch workers contend for a lock while nodes fail",
		Long: `Demo shows the Redlock algorithm at work and checks what it promises.

Without --nodes (and without REDLOCK_NODES) it starts five embedded
Redis-protocol nodes (miniredis) inside this process, so it needs nothing but
this program. Several workers, each a lock client of its own, contend for one
key. Each hold reads a shared counter, pauses, writes it back plus one, and
writes its fencing token to a store that rejects stale tokens.

  phase 1  all nodes up: the workers take turns;
  phase 2  a minority of the nodes is stopped (two of five): the lock still works;
  phase 3  one more is stopped (three of five): every attempt fails with
           ErrNoQuorum, and no lock is ever granted.

Progress is printed every second. At the end the demo checks its history:
no two holders overlapped, fences strictly increased, no update was lost,
and the phases behaved as they should; it prints PASS or FAIL for each check
and exits 0 only if all pass.

With --nodes the demo runs against those servers instead. It does not stop
them: it cuts itself off from them (as a network partition would), and
leaves them running. Its key is "redlock-demo:" and a random suffix; it
expires on its own.`,
		Example: `  redlock demo
  redlock demo --workers 8 --phase 5s
  redlock demo --timeline demo.svg
  redlock demo --nodes redis://127.0.0.1:7001,redis://127.0.0.1:7002,redis://127.0.0.1:7003`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 0 {
				return usagef("demo takes no arguments")
			}
			return nil
		},
		ValidArgsFunction: noArgsCompletion,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDemo(cmd.Context(), cmd.OutOrStdout(), nf, df)
		},
	}
	cmd.Flags().IntVar(&df.workers, "workers", 4, "how many workers contend for the lock")
	cmd.Flags().DurationVar(&df.phase, "phase", 3*time.Second, "how long each phase lasts")
	cmd.Flags().DurationVar(&df.ttl, "ttl", 2*time.Second, "the lock's TTL")
	cmd.Flags().StringVar(&df.timeline, "timeline", "", "at the end, draw the run as an SVG timeline in `FILE`: the workers' holds with their fences, the nodes stopped, the phases")
	return cmd
}

// errCut is the error of a node that the demo has cut itself off from.
var errCut = errors.New("cut off by the demo")

// A demoNode is a lock node that the demo can cut off, as a network
// partition would.
type demoNode struct {
	redlock.Node
	cut *atomic.Bool
}

func (n *demoNode) Eval(ctx context.Context, s *driver.Script, keys, args []string) (any, error) {
	if n.cut.Load() {
		return nil, errCut
	}
	return n.Node.Eval(ctx, s, keys, args)
}

// EvalBatch lets the demo's clients batch their requests as they would
// with the adapter itself.
func (n *demoNode) EvalBatch(ctx context.Context, calls []driver.Call) {
	b, ok := n.Node.(driver.Batcher)
	if !ok || n.cut.Load() {
		for i := range calls {
			c := &calls[i]
			c.Reply, c.Err = n.Eval(ctx, c.Script, c.Keys, c.Args)
		}
		return
	}
	b.EvalBatch(ctx, calls)
}

// A fencedStore is the resource the lock protects: it accepts a write only
// with a fence greater than any it has accepted.
type fencedStore struct {
	mu       sync.Mutex
	last     int64
	rejected int
}

func (s *fencedStore) write(fence int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fence <= s.last {
		s.rejected++
		return
	}
	s.last = fence
}

type demo struct {
	w        io.Writer
	df       *demoFlags
	opts     redlock.Options
	key      string
	names    []string
	embedded *embeddedNodes // nil with --nodes
	cut      []atomic.Bool  // with --nodes: the nodes cut off
	dialed   []*goredisnode.Node
	workers  []*redlock.Client
	monitor  *redlock.Client
	start    time.Time
	phase    atomic.Int32
	phases   []demoPhase // each phase as it began
	stops    []nodeStop  // the nodes stopped or cut off, in order

	hist      history
	counter   atomic.Int64 // the shared counter: read, pause, write
	store     fencedStore
	perWorker []atomic.Int64

	// phase 3
	attempts, granted, noQuorum atomic.Int64
	errMu                       sync.Mutex
	sampleErr, otherErr         error

	results []checkResult
}

type checkResult struct {
	ok   bool
	text string
}

func runDemo(ctx context.Context, w io.Writer, nf *nodeFlags, df *demoFlags) error {
	switch {
	case df.workers < 1:
		return usagef("--workers %d: at least one worker is needed", df.workers)
	case df.phase <= 0:
		return usagef("--phase %v must be positive", df.phase)
	case df.ttl <= 0 || df.ttl > maxTTL:
		return checkTTL("--ttl", df.ttl)
	}
	opts, err := nf.options()
	if err != nil {
		return err
	}
	d := &demo{w: w, df: df, opts: *opts, key: "redlock-demo:" + randomHex(4)}
	defer d.close()
	if err := checkTimeline(df.timeline); err != nil {
		return err
	}

	var urls []string
	if nf.given() {
		if urls, err = nf.urls(); err != nil {
			return err
		}
	} else {
		if d.embedded, urls, err = startEmbedded(embeddedCount); err != nil {
			return &exitError{code: exitSoftware, err: err, msg: err.Error()}
		}
		// Nobody has locked anything on these nodes before: there are no
		// lost locks to wait out.
		d.opts.DisableQuarantine, d.opts.Quarantine = true, 0
	}
	ts, err := nf.tls.resolve(urls, nf.stderr)
	if err != nil {
		return err
	}
	if err := d.connect(urls, ts); err != nil {
		return err
	}
	d.header(urls)
	if err := d.checkTTL(); err != nil {
		return err
	}
	d.awaitQuarantine(ctx)
	d.contend(ctx)
	d.withoutQuorum(ctx)
	verdict := d.verdict()
	if err := d.drawTimeline(df.timeline); err != nil {
		return err
	}
	return verdict
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// connect makes a lock client for every worker, each with connections of
// its own as separate processes would have, and one to watch the nodes.
func (d *demo) connect(urls []string, ts *tlsSetup) error {
	d.cut = make([]atomic.Bool, len(urls))
	d.perWorker = make([]atomic.Int64, d.df.workers)
	newClient := func(opts redlock.Options) (*redlock.Client, error) {
		ns, err := openNodes(urls, ts)
		if err != nil {
			return nil, err
		}
		d.dialed = append(d.dialed, ns.nodes...)
		d.names = ns.names
		nodes := make([]redlock.Node, len(ns.nodes))
		for i, n := range ns.nodes {
			nodes[i] = &demoNode{Node: n, cut: &d.cut[i]}
		}
		quietLogs(&opts)
		c, err := redlock.New(nodes, &opts)
		if err != nil {
			return nil, usagef("%s", describeErr(err))
		}
		return c, nil
	}
	for i := 0; i < d.df.workers; i++ {
		c, err := newClient(d.opts)
		if err != nil {
			return err
		}
		d.workers = append(d.workers, c)
	}
	// The monitor probes every second: it must not wait long for a node
	// that is down.
	opts := d.opts
	opts.ReleaseTimeout = 500 * time.Millisecond
	c, err := newClient(opts)
	if err != nil {
		return err
	}
	d.monitor = c
	return nil
}

func (d *demo) close() {
	// The clients first: Close waits for their releases in flight.
	for _, c := range d.workers {
		c.Close()
	}
	if d.monitor != nil {
		d.monitor.Close()
	}
	for _, n := range d.dialed {
		n.Close()
	}
	if d.embedded != nil {
		d.embedded.close()
	}
}

// checkTTL rejects a TTL the lock client would reject, before any phase.
func (d *demo) checkTTL() error {
	l, err := d.monitor.TryLock(context.Background(), d.key, d.df.ttl)
	if errors.Is(err, redlock.ErrInvalid) {
		return usagef("--ttl: %s", describeErr(err))
	}
	if l != nil {
		l.Release(context.Background())
	}
	return nil
}

func (d *demo) say(format string, args ...any) {
	fmt.Fprintf(d.w, format+"\n", args...)
}

func (d *demo) header(urls []string) {
	n := len(d.names)
	d.say("redlock demo: %d workers contend for the lock %q (TTL %v) on %d nodes; a quorum is %d",
		d.df.workers, d.key, d.df.ttl, n, admin.New(d.monitor).Quorum())
	if d.embedded != nil {
		d.say("started %d embedded Redis-protocol nodes (miniredis) in this process:", n)
	} else {
		d.say("nodes:")
	}
	for i := range d.names {
		d.say("  node %d  %s", i+1, shownURL(urls[i]))
	}
	switch {
	case d.embedded != nil:
		d.say("restart quarantine: off, as the embedded nodes start empty and nobody has locked")
		d.say("  anything on them before, so there are no lost locks to wait out")
	case d.opts.DisableQuarantine:
		d.say("restart quarantine: off (--no-quarantine)")
	default:
		d.say("restart quarantine: on; servers that started less than a TTL ago do not vote yet")
	}
	d.say("each hold reads a shared counter, pauses, writes it back plus one, and writes its")
	d.say("fencing token to a store that rejects stale tokens")
}

// awaitQuarantine waits, with real nodes, until freshly started servers
// can vote, so that the first phase shows the lock at work.
func (d *demo) awaitQuarantine(ctx context.Context) {
	if d.embedded != nil || d.opts.DisableQuarantine {
		return
	}
	var latest time.Time
	var which []string
	for i, s := range admin.New(d.monitor).States() {
		if s.Health == observe.NodeQuarantined {
			which = append(which, fmt.Sprintf("node %d", i+1))
			if s.Until.After(latest) {
				latest = s.Until
			}
		}
	}
	if len(which) == 0 {
		return
	}
	wait := time.Until(latest)
	if wait > 30*time.Second {
		d.say("%s in restart quarantine for %v more; not waiting that long (see --no-quarantine)", strings.Join(which, ", "), roundDur(wait))
		return
	}
	d.say("%s in restart quarantine: waiting %v until they can vote", strings.Join(which, ", "), roundDur(wait))
	sleepCtx(ctx, wait)
}

// sleepCtx sleeps for d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
