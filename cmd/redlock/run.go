package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/quorumlock/redlock"
	"github.com/spf13/cobra"
)

// runFlags are the flags of "redlock run".
type runFlags struct {
	ttl       time.Duration
	wait      time.Duration
	waitGiven bool
	grace     time.Duration
	quiet     bool
	owner     string
}

func newRunCmd(nf *nodeFlags) *cobra.Command {
	rf := &runFlags{}
	cmd := &cobra.Command{
		Use:   "run [flags] KEY -- COMMAND [ARGS...]",
		Short: "Run a command while holding a lock",
		Long: `Run obtains the lock KEY, runs COMMAND while holding it, and releases it
when COMMAND exits, whatever its status.

The lock is obtained for --ttl and extended automatically every third of
the TTL while COMMAND runs, so COMMAND may run for as long as it needs. If
redlock itself dies, nobody extends the lock and it expires within one TTL;
on Linux, COMMAND is then sent SIGTERM.

Without --wait, run waits until the lock is free or it is interrupted;
--wait bounds the wait, and --wait 0s makes one attempt. While it waits, it
says on stderr why (another owner, or too few nodes that can vote). It does
not wait when so many nodes refuse the lock in a way that waiting cannot
change (a wrong password, a replica, a key of another type: status 77 or
78) that no quorum is possible: it says why at once. On
freshly started servers the first lock waits one TTL: see restart
quarantine in 'redlock --help'.

COMMAND gets three variables in its environment: REDLOCK_KEY, the key;
REDLOCK_FENCE, the lock's fencing token: a number greater than that of every
earlier holder of KEY, so a resource that rejects writes with a smaller
fence than it has seen is safe even from a holder that lost the lock
unawares; and REDLOCK_LOCK_ID, the holder's ID, which 'redlock inspect' and
'redlock release --force' show, beside the --owner label. stdin,
stdout and stderr are COMMAND's own; SIGINT, SIGTERM and SIGHUP sent to
redlock are passed on to it (a Ctrl-C at a terminal reaches it directly).

If the lock is lost while COMMAND runs (its keys deleted or evicted on a
majority of the nodes, or too few nodes answered in time to extend it),
redlock sends COMMAND SIGTERM, then SIGKILL after --kill-grace, says so on
stderr and exits with status 76. Unless stdin is a terminal, COMMAND runs
in a process group of its own, and the signals go to the whole group.

Exit status:
  COMMAND's own   when it ran (128+N if it was killed by signal N)
  64              usage error: bad flags, arguments or node URLs
  69              too few nodes available for a quorum: unreachable, busy,
                  or in quarantine
  75              the lock is held by others, and --wait ran out
  76              the lock was lost while COMMAND ran
  77              nodes refused the credentials or their ACL denies a command
                  (NOAUTH, WRONGPASS, NOPERM): fix the node URLs or the ACL
  78              nodes refused the lock for good otherwise: a replica
                  (READONLY), a cluster node (MOVED, ASK, CROSSSLOT), KEY
                  holding another type of value (WRONGTYPE), a full node
                  (OOM), a node that cannot save (MISCONF), TLS that cannot
                  work (a certificate that fails verification, a client
                  certificate missing or refused: see TLS in 'redlock --help')
  126, 127        COMMAND could not be run, or was not found
  128+N           interrupted by signal N while waiting for the lock`,
		Example: `  # Run a job on one machine at a time; wait as long as it takes.
  redlock run nightly-report -- ./make-report.sh --full

  # Give up after 30 seconds if someone else holds the lock (exit status 75).
  redlock run --wait 30s deploy -- ./deploy.sh

  # Skip this run if another is in progress.
  redlock run --wait 0s cron:cleanup -- sh -c 'find /tmp/cache -mtime +1 -delete'

  # Say who holds it, for 'redlock inspect'.
  redlock run --owner "backup on $(hostname)" backup -- ./backup.sh

  # Pass the fencing token on to the resource.
  redlock run --nodes redis://a:6379,redis://b:6379,redis://c:6379 ledger \
      -- sh -c 'psql -c "select apply_batch($REDLOCK_FENCE)"'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("missing KEY and COMMAND: redlock run [flags] KEY -- COMMAND [ARGS...]")
			}
			return nil
		},
		ValidArgsFunction: func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) == 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp // the key
			}
			return nil, cobra.ShellCompDirectiveDefault // the command and its arguments
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			rf.waitGiven = cmd.Flags().Changed("wait")
			key, argv := args[0], args[1:]
			if len(argv) > 0 && argv[0] == "--" {
				argv = argv[1:]
			}
			if len(argv) == 0 {
				return usagef("missing COMMAND: redlock run [flags] KEY -- COMMAND [ARGS...]")
			}
			r := &runner{flags: rf, nf: nf, stderr: cmd.ErrOrStderr(), key: key, argv: argv}
			return r.run()
		},
	}
	f := cmd.Flags()
	// Flags end at KEY: what follows belongs to COMMAND, "--" or not.
	f.SetInterspersed(false)
	f.DurationVar(&rf.ttl, "ttl", 10*time.Second, "validity of each grant and extension; the lock is extended automatically while COMMAND runs")
	f.DurationVar(&rf.wait, "wait", 0, "how long to wait for the lock (default: until it is obtained or redlock is interrupted; 0s: one attempt)")
	f.DurationVar(&rf.grace, "kill-grace", 5*time.Second, "after the lock is lost, how long COMMAND has to exit after SIGTERM before SIGKILL")
	f.BoolVarP(&rf.quiet, "quiet", "q", false, "print no progress messages while waiting, only errors")
	f.StringVar(&rf.owner, "owner", "", fmt.Sprintf("a label saying who holds the lock, which 'redlock inspect' shows: at most %d bytes, no control characters (default: host:pid)", redlock.MaxOwnerLen))
	cmd.RegisterFlagCompletionFunc("owner", noArgsCompletion)
	return cmd
}

// A runner runs one command under a lock.
type runner struct {
	flags  *runFlags
	nf     *nodeFlags
	stderr io.Writer
	key    string
	argv   []string
}

// say prints a message on stderr unless --quiet was given.
func (r *runner) say(format string, args ...any) {
	if !r.flags.quiet {
		fmt.Fprintf(r.stderr, "redlock: "+format+"\n", args...)
	}
}

// warn prints a message on stderr, --quiet or not.
func (r *runner) warn(format string, args ...any) {
	fmt.Fprintf(r.stderr, "redlock: "+format+"\n", args...)
}

func (r *runner) run() error {
	switch {
	case r.flags.ttl <= 0:
		return usagef("--ttl %v must be positive", r.flags.ttl)
	case r.flags.wait < 0:
		return usagef("--wait %v is negative", r.flags.wait)
	case r.flags.grace < 0:
		return usagef("--kill-grace %v is negative", r.flags.grace)
	case len(r.flags.owner) > redlock.MaxOwnerLen:
		return usagef("--owner is %d bytes long; the most is %d", len(r.flags.owner), redlock.MaxOwnerLen)
	case !utf8.ValidString(r.flags.owner) || strings.IndexFunc(r.flags.owner, unicode.IsControl) >= 0:
		return usagef("--owner %q is not UTF-8 text without control characters", r.flags.owner)
	}
	ns, c, err := r.nf.connectWith(func(o *redlock.Options) { o.Owner = r.flags.owner })
	if err != nil {
		return err
	}
	defer ns.close()

	// Signals are caught from now on: while waiting they end the wait,
	// while COMMAND runs they are passed on to it.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)

	l, err := r.acquire(c, sigs)
	if err != nil {
		return err
	}
	l.AutoExtend(0)
	lctx := l.Context()

	ch, err := startChild(r.argv, r.childEnv(l))
	if err != nil {
		l.Release(context.Background())
		return err
	}
	lost := r.supervise(ch, lctx, sigs)
	relErr := l.Release(context.Background())
	if lost != nil {
		return exitf(exitLockLost, "the command was stopped because the lock %q was lost (exit status %d)", r.key, exitLockLost)
	}
	switch {
	case errors.Is(relErr, redlock.ErrExpired), errors.Is(relErr, redlock.ErrLockLost):
		return exitf(exitLockLost, "the lock %q was lost before the command finished: %s", r.key, describeErr(relErr))
	case relErr != nil:
		r.warn("the release of %q was not confirmed by a quorum; its keys expire within %v: %s", r.key, r.flags.ttl, describeErr(relErr))
	}
	if code := ch.exitStatus(); code != 0 {
		return silentExit(code)
	}
	return nil
}

// childEnv returns the environment for COMMAND.
func (r *runner) childEnv(l *redlock.Lock) []string {
	env := make([]string, 0, len(os.Environ())+3)
	for _, e := range os.Environ() {
		name, _, _ := strings.Cut(e, "=")
		if name != "REDLOCK_KEY" && name != "REDLOCK_FENCE" && name != "REDLOCK_LOCK_ID" {
			env = append(env, e)
		}
	}
	return append(env, "REDLOCK_KEY="+r.key, "REDLOCK_FENCE="+strconv.FormatInt(l.Fence(), 10), "REDLOCK_LOCK_ID="+l.ID())
}

// acquire obtains the lock as --wait says. A signal ends the wait.
func (r *runner) acquire(c *redlock.Client, sigs <-chan os.Signal) (*redlock.Lock, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	once := r.flags.waitGiven && r.flags.wait == 0
	if r.flags.waitGiven && r.flags.wait > 0 {
		ctx, cancel = context.WithTimeout(ctx, r.flags.wait)
		defer cancel()
	}
	type result struct {
		l   *redlock.Lock
		err error
	}
	done := make(chan result, 1)
	go func() {
		var res result
		if once {
			res.l, res.err = c.TryLock(ctx, r.key, r.flags.ttl)
		} else {
			res.l, res.err = c.Lock(ctx, r.key, r.flags.ttl)
		}
		done <- res
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var lastReport string
	for {
		select {
		case res := <-done:
			if res.err != nil {
				return nil, r.acquireError(c, res.err)
			}
			return res.l, nil
		case sig := <-sigs:
			cancel()
			if res := <-done; res.l != nil {
				res.l.Release(context.Background())
			}
			return nil, exitf(exitSignalBase+signalNumber(sig), "interrupted by %v while waiting for the lock %q", sig, r.key)
		case <-tick.C:
			if key, text := waitingReport(c); key != lastReport {
				lastReport = key
				r.say("waiting for the lock %q: %s", r.key, text)
			}
		}
	}
}

// waitingReport says why a wait for a lock goes on, from the nodes'
// states. Its key changes only when a node's health changes, so that the
// report is printed once per change.
func waitingReport(c *redlock.Client) (key, text string) {
	states := c.States()
	healthy := countHealthy(states)
	if healthy >= c.Quorum() {
		return "taken", "it is held by another owner"
	}
	var b, k strings.Builder
	fmt.Fprintf(&b, "only %d of %d nodes can vote, %d needed:", healthy, len(states), c.Quorum())
	quarantined := false
	for _, s := range states {
		fmt.Fprintf(&k, "%s=%v;", s.Node, s.Health)
		switch s.Health {
		case redlock.NodeQuarantined:
			quarantined = true
			fmt.Fprintf(&b, "\n  %s quarantined for %v more", s.Node, roundDur(time.Until(s.Until)))
		case redlock.NodeUnreachable:
			fmt.Fprintf(&b, "\n  %s unreachable: %s", s.Node, describeErr(s.Err))
		case redlock.NodeBusy:
			fmt.Fprintf(&b, "\n  %s busy: %s", s.Node, describeErr(s.Err))
		case redlock.NodeRefusing:
			fmt.Fprintf(&b, "\n  %s refused: %s", s.Node, describeErr(s.Err))
		}
	}
	if quarantined {
		b.WriteString("\n" + quarantineHint)
	}
	return k.String(), b.String()
}

// quarantineHint explains quarantined nodes.
const quarantineHint = "  (a node whose server started recently does not vote for one TTL; see --no-quarantine in 'redlock --help')"

// acquireError turns an error from Lock or TryLock into the exit status
// and message of run.
func (r *runner) acquireError(c *redlock.Client, err error) error {
	within := fmt.Sprintf("within --wait %v", r.flags.wait)
	switch {
	case !r.flags.waitGiven:
		within = "" // only a context ends an unbounded wait; not reached
	case r.flags.wait == 0:
		within = "in one attempt (--wait 0s)"
	}
	var oe *redlock.OpError
	errors.As(err, &oe)
	switch {
	case errors.Is(err, redlock.ErrInvalid):
		return usagef("%s", describeErr(err))
	case errors.Is(err, redlock.ErrRefused):
		return &exitError{code: refusalStatus(err), err: err,
			msg: fmt.Sprintf("the lock %q cannot be acquired: %s", r.key, refusedText(oe))}
	case errors.Is(err, redlock.ErrTaken):
		return &exitError{code: exitTaken, err: err,
			msg: fmt.Sprintf("the lock %q is held by another owner; not acquired %s", r.key, within)}
	case errors.Is(err, redlock.ErrNoQuorum), errors.Is(err, redlock.ErrExpired):
		return &exitError{code: exitUnavailable, err: err,
			msg: fmt.Sprintf("the lock %q could not be acquired %s: %s", r.key, within, noQuorumText(c, oe))}
	case errors.Is(err, context.DeadlineExceeded):
		// No round completed within the wait: judge by what the nodes
		// showed last.
		if countHealthy(c.States()) < c.Quorum() {
			return &exitError{code: exitUnavailable, err: err,
				msg: fmt.Sprintf("the lock %q could not be acquired %s: %s", r.key, within, noQuorumText(c, nil))}
		}
		return &exitError{code: exitTaken, err: err,
			msg: fmt.Sprintf("the lock %q was not acquired %s", r.key, within)}
	}
	return &exitError{code: exitSoftware, err: err, msg: fmt.Sprintf("the lock %q could not be acquired: %s", r.key, describeErr(err))}
}

// noQuorumText explains, node by node, why too few nodes voted: from the
// last round of op when there is one, else from the client's states.
func noQuorumText(c *redlock.Client, op *redlock.OpError) string {
	var b strings.Builder
	if op != nil && len(op.Nodes) > 0 {
		ok := 0
		for _, n := range op.Nodes {
			if n.Outcome == redlock.OK || n.Outcome == redlock.Taken {
				ok++
			}
		}
		reason := "too few nodes available for a quorum"
		if errors.Is(op, redlock.ErrExpired) {
			reason = "the nodes answered too slowly to leave any validity"
		}
		fmt.Fprintf(&b, "%s (%d of %d nodes voted, %d needed):", reason, ok, len(op.Nodes), op.Quorum)
		quarantined := false
		for _, n := range op.Nodes {
			fmt.Fprintf(&b, "\n  %s %s", n.Node, resultText(n))
			quarantined = quarantined || n.Outcome == redlock.Quarantined
		}
		if quarantined {
			b.WriteString("\n" + quarantineHint)
		}
		return b.String()
	}
	states := c.States()
	fmt.Fprintf(&b, "too few nodes available for a quorum (%d of %d nodes healthy, %d needed):", countHealthy(states), len(states), c.Quorum())
	for _, s := range states {
		fmt.Fprintf(&b, "\n  %s %s", s.Node, stateText(s, time.Now()))
	}
	return b.String()
}

// resultText describes what one node did in a round.
func resultText(n redlock.NodeResult) string {
	switch n.Outcome {
	case redlock.OK:
		return "granted"
	case redlock.Taken:
		return "held by another owner"
	case redlock.Quarantined:
		return fmt.Sprintf("quarantined for %v more", roundDur(n.TTL))
	case redlock.Failed:
		return "failed: " + describeErr(n.Err)
	case redlock.Refused:
		return "refused: " + describeErr(n.Err)
	case redlock.NoAnswer:
		if n.Err != nil {
			return "no answer: " + describeErr(n.Err)
		}
		return "no answer"
	}
	return n.Outcome.String()
}

// supervise waits for COMMAND to exit, passing signals on to it and
// stopping it if the lock is lost. It returns why the lock was lost, or
// nil if it was not.
func (r *runner) supervise(ch *child, lctx context.Context, sigs <-chan os.Signal) (lost error) {
	exited := make(chan struct{})
	go func() {
		ch.wait()
		close(exited)
	}()
	lockDone := lctx.Done()
	var kill <-chan time.Time
	for {
		select {
		case <-exited:
			if lost != nil {
				// Nothing started under the lost lock may go on.
				ch.killGroup()
			}
			return lost
		case sig := <-sigs:
			ch.forward(sig)
		case <-lockDone:
			lockDone = nil
			cause := context.Cause(lctx)
			if errors.Is(cause, redlock.ErrReleased) {
				continue // not before COMMAND exits
			}
			lost = cause
			r.warn("LOST the lock %q while the command ran: %s", r.key, describeErr(cause))
			r.warn("sending SIGTERM to the command; SIGKILL follows in %v if it has not exited", r.flags.grace)
			ch.signal(syscall.SIGTERM)
			t := time.NewTimer(r.flags.grace)
			defer t.Stop()
			kill = t.C
		case <-kill:
			kill = nil
			r.warn("the command did not exit within %v of SIGTERM: sending SIGKILL", r.flags.grace)
			ch.signal(syscall.SIGKILL)
		}
	}
}
