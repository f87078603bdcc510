package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/admin"
	"github.com/quorumlock/redlock/internal/clientx"
	"github.com/quorumlock/redlock/internal/wire"
	"github.com/quorumlock/redlock/observe"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// runFlags are the flags of "redlock run".
type runFlags struct {
	ttl       time.Duration
	wait      time.Duration
	waitGiven bool
	grace     time.Duration
	quiet     bool
	owner     string // the owner label; elect's --value
	ownerFlag string // "owner", or "value" for elect
	permits   int    // --permits: a permit of a semaphore instead of the lock; 0 for the lock
	read      bool   // --read: a reader's shared hold of the read-write lock KEY
	write     bool   // --write: the writer's hold of the read-write lock KEY
}

// register adds the flags that run and elect share; noun names what they
// hold, for the help text.
func (rf *runFlags) register(f *pflag.FlagSet, noun string) {
	// Flags end at KEY: what follows belongs to COMMAND, "--" or not.
	f.SetInterspersed(false)
	f.DurationVar(&rf.ttl, "ttl", 10*time.Second, "validity of each grant and extension; the "+noun+" is extended automatically while COMMAND runs")
	f.DurationVar(&rf.wait, "wait", 0, "how long to wait for the "+noun+" (default: until it is obtained or redlock is interrupted; 0s: one attempt)")
	f.DurationVar(&rf.grace, "kill-grace", 5*time.Second, "after the "+noun+" is lost, how long COMMAND has to exit after SIGTERM before SIGKILL")
	f.BoolVarP(&rf.quiet, "quiet", "q", false, "print no progress messages while waiting, only errors")
}

// commandArgs splits the arguments of run and elect into KEY and
// COMMAND, for the command line use. dash is cmd.ArgsLenAtDash(): 0 when
// "--" came before any argument, which leaves no KEY.
func commandArgs(args []string, dash int, use string) (key string, argv []string, err error) {
	if dash == 0 {
		return "", nil, usagef("missing KEY before \"--\": %s", use)
	}
	key, argv = args[0], args[1:]
	if len(argv) > 0 && argv[0] == "--" {
		argv = argv[1:]
	}
	if len(argv) == 0 {
		return "", nil, usagef("missing COMMAND: %s", use)
	}
	return key, argv, nil
}

// commandCompletion completes KEY with nothing and COMMAND and its
// arguments as the shell would.
func commandCompletion(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) == 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp // the key
	}
	return nil, cobra.ShellCompDirectiveDefault // the command and its arguments
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
redlock itself dies, nobody extends the lock and it expires within one TTL.

On Linux, COMMAND runs under a keeper: a second redlock process (ps shows
"redlock __keeper ..."), the child subreaper of everything COMMAND starts,
which holds a pipe from redlock. When redlock dies, by any signal,
SIGKILL included, the pipe closes and the keeper kills COMMAND and every
process it started, in any process group, with SIGKILL, well before the
lock can expire; if the keeper dies, the kernel kills COMMAND. On other
systems nothing tells COMMAND that redlock died: after a SIGKILL of
redlock, COMMAND and what it started run on, while the lock expires within
one TTL and another owner can take it.

Without --wait, run waits until the lock is free or it is interrupted;
--wait bounds the wait, and --wait 0s makes one attempt. While it waits, it
says on stderr why (another owner, or too few nodes that can vote). It does
not wait when so many nodes refuse the lock in a way that waiting cannot
change (a wrong password, a replica, a key of another type: status 77 or
78) that no quorum is possible: it says why at once. On freshly started
servers the first lock waits one TTL: see 'redlock help quarantine'.

With --permits N, run holds one of N permits of the semaphore KEY instead
of the lock KEY, so that up to N commands run at once: each permit is a
lock on one of N slots, obtained, extended, released and lost as the lock
is, and everything below applies to it. Every user of the semaphore must
give the same N. The semaphore's keys are not the lock's: 'run KEY' and
'run --permits 1 KEY' do not exclude each other.

With --read, run holds a reader's share of the read-write lock KEY: any
number of --read commands run side by side, and none while a --write
command runs. --write holds the lock alone, as the plain form does, and
shuts out --read commands too; a --write that waits keeps new readers out
until its turn. Use --write, not the plain form, beside --read commands:
the plain form does not wait for readers already holding. A reader's
REDLOCK_FENCE is at least the last writer's, a writer's above every
earlier reader's and writer's.

COMMAND gets three variables in its environment: REDLOCK_KEY, the key;
REDLOCK_FENCE, the lock's fencing token: a number greater than that of every
earlier holder of KEY, so a resource that rejects writes with a smaller
fence than it has seen is safe even from a holder that lost the lock
unawares; and REDLOCK_LOCK_ID, the holder's ID, which 'redlock inspect' and
'redlock release --force' show, beside the --owner label. With --permits,
COMMAND also gets REDLOCK_SLOT, its permit's slot, from 0 to N-1, and
REDLOCK_PERMITS, N; REDLOCK_FENCE then rises per slot, so a resource that
admits N writers keeps the largest fence it has seen for each slot. stdin,
stdout and stderr are COMMAND's own; SIGINT, SIGTERM and SIGHUP sent to
redlock are passed on to it (a Ctrl-C at a terminal reaches it directly).

If the lock is lost while COMMAND runs (its keys deleted or evicted on a
majority of the nodes, or too few nodes answered in time to extend it),
redlock sends COMMAND SIGTERM, then SIGKILL after --kill-grace, says so on
stderr and exits with status 76. Unless stdin is a terminal, COMMAND runs
in a process group of its own, and the signals go to the whole group; on
Linux, the SIGKILL goes through the keeper to every process COMMAND
started.

Exit status (see also 'redlock help exit-codes'):
  COMMAND's own   when it ran (128+N if it was killed by signal N)
  64              usage error: bad flags, arguments or node URLs
  69              too few nodes available for a quorum: unreachable, busy,
                  or in quarantine
  75              the lock (with --permits, every permit) is held by others,
                  and --wait ran out
  76              the lock or permit was lost while COMMAND ran
  77              nodes refused the credentials or their ACL denies a command
                  (NOAUTH, WRONGPASS, NOPERM): fix the node URLs or the ACL
  78              nodes refused the lock for good otherwise (READONLY,
                  WRONGTYPE, OOM, a TLS certificate, ...)
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
      -- sh -c 'psql -c "select apply_batch($REDLOCK_FENCE)"'

  # At most 4 transcodes at once across the hosts; the slot names a scratch dir.
  redlock run --permits 4 transcode -- sh -c './transcode.sh --tmp /scratch/$REDLOCK_SLOT'

  # Exports side by side; a rebuild alone, once the running exports end.
  redlock run --read catalog -- ./export-catalog.sh
  redlock run --write catalog -- ./rebuild-catalog.sh`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("missing KEY and COMMAND: redlock run [flags] KEY -- COMMAND [ARGS...]")
			}
			return nil
		},
		ValidArgsFunction: commandCompletion,
		RunE: func(cmd *cobra.Command, args []string) error {
			rf.waitGiven = cmd.Flags().Changed("wait")
			key, argv, err := commandArgs(args, cmd.ArgsLenAtDash(), "redlock run [flags] KEY -- COMMAND [ARGS...]")
			if err != nil {
				return err
			}
			if err := checkRunMode(rf, cmd.Flags().Changed("permits")); err != nil {
				return err
			}
			r := &runner{flags: rf, nf: nf, stderr: cmd.ErrOrStderr(), key: key, argv: argv, target: lockTarget}
			switch {
			case rf.permits > 0:
				r.target = semaphoreTarget
			case rf.read:
				r.target = readTarget
			case rf.write:
				r.target = writeTarget
			}
			return r.run()
		},
	}
	rf.ownerFlag = "owner"
	f := cmd.Flags()
	rf.register(f, "lock")
	f.StringVar(&rf.owner, "owner", "", fmt.Sprintf("a label saying who holds the lock, which 'redlock inspect' shows: at most %d bytes, no control characters (default: host:pid)", clientx.Limits.OwnerLen))
	f.IntVar(&rf.permits, "permits", 0, fmt.Sprintf("hold one of this many permits of the semaphore KEY instead of the lock KEY: from 1 to %d", wire.MaxPermits))
	f.BoolVar(&rf.read, "read", false, "hold a reader's share of the read-write lock KEY: --read commands run side by side, never beside a --write one")
	f.BoolVar(&rf.write, "write", false, "hold the read-write lock KEY as its writer: alone, with no --read or other --write command beside it")
	cmd.RegisterFlagCompletionFunc("owner", noArgsCompletion)
	cmd.RegisterFlagCompletionFunc("permits", noArgsCompletion)
	return cmd
}

// checkRunMode returns a usage error for flags of run that choose what to
// hold and do not go together: --read with --write, or either with
// --permits; and for a number of permits out of range, when --permits
// was given.
func checkRunMode(rf *runFlags, permitsGiven bool) error {
	switch {
	case rf.read && rf.write:
		return usagef("--read and --write exclude each other: --read shares the read-write lock KEY with other readers, --write holds it alone")
	case permitsGiven && (rf.read || rf.write):
		mode := "--read"
		if rf.write {
			mode = "--write"
		}
		return usagef("--permits and %s do not go together: --permits holds a permit of the semaphore KEY, %s a hold of the read-write lock KEY", mode, mode)
	case permitsGiven:
		return checkPermits(rf.permits)
	}
	return nil
}

// A runner runs one command while holding a target: a lock, a permit of a
// semaphore, or the leadership of an election.
type runner struct {
	flags  *runFlags
	nf     *nodeFlags
	stderr io.Writer
	key    string
	argv   []string
	// target returns what the runner holds, on c: lockTarget,
	// semaphoreTarget or electionTarget.
	target func(r *runner, c *redlock.Client) *target
}

// A target is what a runner obtains and holds while COMMAND runs. Its
// texts complete the runner's messages.
type target struct {
	what string // what is held: `the lock "KEY"`
	verb string // what obtaining it is called: "acquired"
	busy string // why others keep it from being obtained: `the lock "KEY" is held by another owner`
	// owner, if not nil, says busy with the holder named; it asks the
	// nodes.
	owner func() string
	// taken says, while the runner waits, why the target is not free
	// although enough nodes can vote; it may ask the nodes.
	taken func() string
	// obtain obtains the target in one attempt when once, else waiting
	// until it is obtained or ctx is done. It returns the lock that holds
	// it (a permit's, or the leadership's), and the variables that tell
	// COMMAND about it, as NAME=value.
	obtain func(ctx context.Context, once bool) (*redlock.Lock, []string, error)
}

// childVars are the variables that runners set in COMMAND's environment.
// None of them is inherited from redlock's own environment, so that a
// runner inside another sees only its own.
var childVars = []string{"REDLOCK_KEY", "REDLOCK_FENCE", "REDLOCK_LOCK_ID", "REDLOCK_SLOT", "REDLOCK_PERMITS",
	"REDLOCK_TERM", "REDLOCK_VALUE"}

// lockTarget is the lock KEY, for run.
func lockTarget(r *runner, c *redlock.Client) *target {
	key, ttl := r.key, r.flags.ttl
	return &target{
		what:  fmt.Sprintf("the lock %q", key),
		verb:  "acquired",
		busy:  fmt.Sprintf("the lock %q is held by another owner", key),
		owner: func() string { return fmt.Sprintf("the lock %q is held by %s", key, heldBy(c, key)) },
		taken: func() string { return "it is held by " + heldBy(c, key) },
		obtain: func(ctx context.Context, once bool) (*redlock.Lock, []string, error) {
			var l *redlock.Lock
			var err error
			if once {
				l, err = c.TryLock(ctx, key, ttl)
			} else {
				l, err = c.Lock(ctx, key, ttl)
			}
			if err != nil {
				return nil, nil, err
			}
			return l, []string{"REDLOCK_KEY=" + key, "REDLOCK_FENCE=" + strconv.FormatInt(l.Fence(), 10), "REDLOCK_LOCK_ID=" + l.ID()}, nil
		},
	}
}

// semaphoreTarget is a permit of the semaphore KEY, for run --permits.
func semaphoreTarget(r *runner, c *redlock.Client) *target {
	key, ttl, n := r.key, r.flags.ttl, r.flags.permits
	s := c.Semaphore(key, n)
	return &target{
		what:  fmt.Sprintf("a permit of the semaphore %q", key),
		verb:  "acquired",
		busy:  fmt.Sprintf("all %d permits of the semaphore %q are held by others", n, key),
		taken: func() string { return fmt.Sprintf("all %d permits are held by others", n) },
		obtain: func(ctx context.Context, once bool) (*redlock.Lock, []string, error) {
			var p *redlock.Permit
			var err error
			if once {
				p, err = s.TryAcquire(ctx, ttl)
			} else {
				p, err = s.Acquire(ctx, ttl)
			}
			if err != nil {
				return nil, nil, err
			}
			return p.Lock, []string{"REDLOCK_KEY=" + key, "REDLOCK_FENCE=" + strconv.FormatInt(p.Fence(), 10), "REDLOCK_LOCK_ID=" + p.ID(),
				"REDLOCK_SLOT=" + strconv.Itoa(p.Slot), "REDLOCK_PERMITS=" + strconv.Itoa(n)}, nil
		},
	}
}

// readTarget is a reader's share of the read-write lock KEY, for run
// --read.
func readTarget(r *runner, c *redlock.Client) *target {
	return rwTarget(r, c, false)
}

// writeTarget is the writer's hold of the read-write lock KEY, for run
// --write.
func writeTarget(r *runner, c *redlock.Client) *target {
	return rwTarget(r, c, true)
}

// rwTarget is a hold of the read-write lock KEY: the writer's, or a
// reader's. Its variables are those of the lock.
func rwTarget(r *runner, c *redlock.Client, write bool) *target {
	key, ttl := r.key, r.flags.ttl
	rw := c.RWLock(key)
	tg := &target{
		what:  fmt.Sprintf("the lock %q for reading", key),
		verb:  "acquired",
		busy:  fmt.Sprintf("the lock %q is held by a writer, or a writer waits for it", key),
		taken: func() string { return "a writer holds it or waits for it" },
	}
	if write {
		tg.what = fmt.Sprintf("the lock %q for writing", key)
		tg.busy = fmt.Sprintf("the lock %q is held by readers or another writer", key)
		tg.taken = func() string { return "it is held by readers or another writer" }
	}
	tg.obtain = func(ctx context.Context, once bool) (*redlock.Lock, []string, error) {
		var l *redlock.Lock
		var err error
		switch {
		case write && once:
			l, err = rw.TryLock(ctx, ttl)
		case write:
			l, err = rw.Lock(ctx, ttl)
		case once:
			l, err = rw.TryRLock(ctx, ttl)
		default:
			l, err = rw.RLock(ctx, ttl)
		}
		if err != nil {
			return nil, nil, err
		}
		return l, []string{"REDLOCK_KEY=" + key, "REDLOCK_FENCE=" + strconv.FormatInt(l.Fence(), 10), "REDLOCK_LOCK_ID=" + l.ID()}, nil
	}
	return tg
}

// say prints a message on stderr unless --quiet was given.
func (r *runner) say(format string, args ...any) {
	if !r.flags.quiet {
		fmt.Fprintf(r.stderr, "redlock: %s\n", printableLines(fmt.Sprintf(format, args...)))
	}
}

// warn prints a message on stderr, --quiet or not.
func (r *runner) warn(format string, args ...any) {
	fmt.Fprintf(r.stderr, "redlock: %s\n", printableLines(fmt.Sprintf(format, args...)))
}

// once reports whether the flags ask for one attempt: --wait 0s.
func (r *runner) once() bool { return r.flags.waitGiven && r.flags.wait == 0 }

func (r *runner) run() error {
	if err := checkTTL("--ttl", r.flags.ttl); err != nil {
		return err
	}
	switch {
	case r.flags.wait < 0:
		return usagef("--wait %v is negative", r.flags.wait)
	case r.flags.grace < 0:
		return usagef("--kill-grace %v is negative", r.flags.grace)
	case len(r.flags.owner) > clientx.Limits.OwnerLen:
		return usagef("--%s is %d bytes long; the most is %d", r.flags.ownerFlag, len(r.flags.owner), clientx.Limits.OwnerLen)
	case !utf8.ValidString(r.flags.owner) || strings.IndexFunc(r.flags.owner, unicode.IsControl) >= 0:
		return usagef("--%s %q is not UTF-8 text without control characters", r.flags.ownerFlag, r.flags.owner)
	}
	ns, c, err := r.nf.connectWith(func(o *redlock.Options) {
		o.Owner = r.flags.owner
		if r.once() {
			// For Campaign, which has no form that makes one attempt;
			// TryLock and TryAcquire make one anyway.
			o.Tries = 1
		}
	})
	if err != nil {
		return err
	}
	defer ns.close()
	tg := r.target(r, c)

	// Signals are caught from now on: while waiting they end the wait,
	// while COMMAND runs they are passed on to it.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)

	l, vars, err := r.acquire(c, tg, sigs)
	if err != nil {
		return err
	}
	if text := missingText(c); text != "" {
		r.warn("%s", text)
	}
	l.AutoExtend(0) // a leadership's lock extends itself already: no effect
	lctx := l.Context()

	ch, err := startChild(r.argv, childEnv(vars))
	if err != nil {
		l.Release(context.Background())
		return err
	}
	if ch.keeperErr != nil {
		r.warn("the command runs without a keeper (%v): if redlock is killed, what the command started runs on", ch.keeperErr)
	}
	lost := r.supervise(ch, tg, lctx, sigs)
	relErr := l.Release(context.Background())
	if lost != nil {
		return exitf(exitLockLost, "the command was stopped because %s was lost (exit status %d)", tg.what, exitLockLost)
	}
	switch {
	case errors.Is(relErr, redlock.ErrExpired), errors.Is(relErr, redlock.ErrLockLost):
		return exitf(exitLockLost, "%s was lost before the command finished: %s", tg.what, describeErr(relErr))
	case relErr != nil:
		r.warn("the release of %q was not confirmed by a quorum; its keys expire within %v: %s", r.key, r.flags.ttl, describeErr(relErr))
	}
	if code := ch.exitStatus(); code != 0 {
		return silentExit(code)
	}
	return nil
}

// childEnv returns the environment for COMMAND: redlock's own without
// childVars and secretVars, and vars.
func childEnv(vars []string) []string {
	env := make([]string, 0, len(os.Environ())+len(vars))
	for _, e := range os.Environ() {
		name, _, _ := strings.Cut(e, "=")
		if !slices.Contains(childVars, name) && !slices.Contains(secretVars, name) {
			env = append(env, e)
		}
	}
	return append(env, vars...)
}

// acquire obtains the target as --wait says. A signal ends the wait.
func (r *runner) acquire(c *redlock.Client, tg *target, sigs <-chan os.Signal) (*redlock.Lock, []string, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if r.flags.waitGiven && r.flags.wait > 0 {
		ctx, cancel = context.WithTimeout(ctx, r.flags.wait)
		defer cancel()
	}
	type result struct {
		l    *redlock.Lock
		vars []string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		var res result
		res.l, res.vars, res.err = tg.obtain(ctx, r.once())
		done <- res
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var lastReport string
	for {
		select {
		case res := <-done:
			if res.err != nil {
				return nil, nil, r.acquireError(c, tg, res.err)
			}
			return res.l, res.vars, nil
		case sig := <-sigs:
			cancel()
			if res := <-done; res.l != nil {
				res.l.Release(context.Background())
			}
			return nil, nil, exitf(exitSignalBase+signalNumber(sig), "interrupted by %v while waiting for %s", sig, tg.what)
		case <-tick.C:
			if key, text := waitingReport(c, tg.taken); key != lastReport {
				lastReport = key
				r.say("waiting for %s: %s", tg.what, text)
			}
		}
	}
}

// waitingReport says why a wait goes on, from the nodes' states, or, when
// enough nodes can vote, from taken. Its key changes only when a node's
// health or taken's answer changes, so that the report is printed once per
// change.
func waitingReport(c *redlock.Client, taken func() string) (key, text string) {
	states := admin.New(c).States()
	healthy := countHealthy(states)
	if healthy >= admin.New(c).Quorum() {
		text := taken()
		return "taken:" + text, text
	}
	var b, k strings.Builder
	fmt.Fprintf(&b, "only %d of %d nodes can vote, %d needed:", healthy, len(states), admin.New(c).Quorum())
	quarantined := false
	for _, s := range states {
		fmt.Fprintf(&k, "%s=%v;", s.Node, s.Health)
		switch s.Health {
		case observe.NodeQuarantined:
			quarantined = true
			fmt.Fprintf(&b, "\n  %s quarantined for %v more", s.Node, roundDur(time.Until(s.Until)))
		case observe.NodeUnreachable:
			fmt.Fprintf(&b, "\n  %s unreachable: %s", s.Node, describeErr(s.Err))
		case observe.NodeBusy:
			fmt.Fprintf(&b, "\n  %s busy: %s", s.Node, describeErr(s.Err))
		case observe.NodeRefusing:
			fmt.Fprintf(&b, "\n  %s refused: %s", s.Node, describeErr(s.Err))
		}
	}
	if quarantined {
		b.WriteString("\n" + quarantineHint)
	}
	return k.String(), b.String()
}

// quarantineHint explains quarantined nodes.
const quarantineHint = "  (a node whose server started recently does not vote for one TTL; see --no-quarantine in 'redlock help quarantine')"

// acquireError turns an error from the target's obtain (Lock, TryLock,
// Acquire, TryAcquire, Campaign) into the runner's exit status and message.
func (r *runner) acquireError(c *redlock.Client, tg *target, err error) error {
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
			msg: fmt.Sprintf("%s cannot be %s: %s", tg.what, tg.verb, refusedText(oe))}
	case errors.Is(err, redlock.ErrTaken):
		busy := tg.busy
		if tg.owner != nil {
			busy = tg.owner()
		}
		return &exitError{code: exitTaken, err: err,
			msg: fmt.Sprintf("%s; not %s %s", busy, tg.verb, within)}
	case errors.Is(err, redlock.ErrNoQuorum), errors.Is(err, redlock.ErrExpired):
		return &exitError{code: exitUnavailable, err: err,
			msg: fmt.Sprintf("%s could not be %s %s: %s", tg.what, tg.verb, within, noQuorumText(c, oe))}
	case errors.Is(err, context.DeadlineExceeded):
		// No round completed within the wait: judge by what the nodes
		// showed last.
		if countHealthy(admin.New(c).States()) < admin.New(c).Quorum() {
			return &exitError{code: exitUnavailable, err: err,
				msg: fmt.Sprintf("%s could not be %s %s: %s", tg.what, tg.verb, within, noQuorumText(c, nil))}
		}
		return &exitError{code: exitTaken, err: err,
			msg: fmt.Sprintf("%s was not %s %s", tg.what, tg.verb, within)}
	}
	return &exitError{code: exitSoftware, err: err, msg: fmt.Sprintf("%s could not be %s: %s", tg.what, tg.verb, describeErr(err))}
}

// noQuorumText explains, node by node, why too few nodes voted: from the
// last round of op when there is one, else from the client's states.
func noQuorumText(c *redlock.Client, op *redlock.OpError) string {
	var b strings.Builder
	if op != nil && len(op.Nodes) > 0 {
		ok := 0
		for _, n := range op.Nodes {
			if n.Outcome == observe.OutcomeOK || n.Outcome == observe.OutcomeTaken {
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
			quarantined = quarantined || n.Outcome == observe.OutcomeQuarantined
		}
		if quarantined {
			b.WriteString("\n" + quarantineHint)
		}
		return b.String()
	}
	states := admin.New(c).States()
	fmt.Fprintf(&b, "too few nodes available for a quorum (%d of %d nodes healthy, %d needed):", countHealthy(states), len(states), admin.New(c).Quorum())
	for _, s := range states {
		fmt.Fprintf(&b, "\n  %s %s", s.Node, stateText(s, time.Now()))
	}
	return b.String()
}

// resultText describes what one node did in a round, after the node's
// name, in the lists of nodes under the command's messages. It is not
// NodeResult.String, which is for logs: that one names the node itself,
// uses the Outcome's names ("ok", "taken"), adds each answer's latency and
// gives durations unrounded.
func resultText(n observe.NodeResult) string {
	switch n.Outcome {
	case observe.OutcomeOK:
		return "granted"
	case observe.OutcomeTaken:
		return "held by another owner"
	case observe.OutcomeQuarantined:
		return fmt.Sprintf("quarantined for %v more", roundDur(n.TTL))
	case observe.OutcomeFailed:
		return "failed: " + describeErr(n.Err)
	case observe.OutcomeRefused:
		return "refused: " + describeErr(n.Err)
	case observe.OutcomeNoAnswer:
		if n.Err != nil {
			return "no answer: " + describeErr(n.Err)
		}
		return "no answer"
	}
	return n.Outcome.String()
}

// supervise waits for COMMAND to exit, passing signals on to it and
// stopping it if the target, whose context is lctx, is lost. It returns
// why the target was lost, or nil if it was not.
func (r *runner) supervise(ch *child, tg *target, lctx context.Context, sigs <-chan os.Signal) (lost error) {
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
			r.warn("LOST %s while the command ran: %s", tg.what, describeErr(cause))
			r.warn("sending SIGTERM to the command; SIGKILL follows in %v if it has not exited", r.flags.grace)
			ch.signal(syscall.SIGTERM)
			t := time.NewTimer(r.flags.grace)
			defer t.Stop()
			kill = t.C
		case <-kill:
			kill = nil
			r.warn("the command did not exit within %v of SIGTERM: sending SIGKILL", r.flags.grace)
			ch.kill()
		}
	}
}
