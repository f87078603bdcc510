package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/clientx"
	"github.com/quorumlock/redlock/observe"
	"github.com/spf13/cobra"
)

func newElectCmd(nf *nodeFlags) *cobra.Command {
	rf := &runFlags{ownerFlag: "value"}
	const use = "redlock elect [flags] KEY -- COMMAND [ARGS...]"
	cmd := &cobra.Command{
		Use:   "elect [flags] KEY -- COMMAND [ARGS...]",
		Short: "Run a command while leading an election",
		Long: `Elect campaigns in the election KEY, runs COMMAND while it leads, and
resigns when COMMAND exits, whatever its status, so that another candidate
can lead at once. Of the candidates that campaign on KEY, at most one leads
at any moment; each new leader has a term greater than every earlier
leader's.

Leadership is a lock on KEY, held for --ttl and renewed every third of the
TTL while COMMAND runs; the leader records its term beside it. If redlock
itself dies, nobody renews the leadership and it ends within one TTL, and
another candidate takes over. On Linux, COMMAND runs under a keeper, as
with 'redlock run': when redlock dies, by any signal, SIGKILL included, the
keeper kills COMMAND and every process it started, well before the
leadership can end. On other systems, after a SIGKILL of redlock, COMMAND
and what it started run on beside the next leader. Every candidate should
use the same --ttl. --value is what 'redlock leader KEY'
shows of the leader, and the owner that 'redlock inspect KEY' shows.

Without --wait, elect campaigns until it leads or it is interrupted; --wait
bounds the campaign, and --wait 0s makes one attempt. While it waits, it
says on stderr why (who leads, or too few nodes that can vote). It does not
wait on refusals that waiting cannot change (status 77 or 78).

COMMAND gets five variables in its environment: REDLOCK_KEY, the election's
key; REDLOCK_TERM, the term: a number greater than that of every earlier
leader of KEY, so a resource that rejects writes with a term lower than the
highest it has seen is safe even from a leader that lost its leadership
unawares; REDLOCK_FENCE, the same number, as 'redlock run' names it; and
REDLOCK_VALUE, the --value; and REDLOCK_LOCK_ID, the leadership's ID, which
'redlock leader' shows. Standard streams and signals are as for
'redlock run'.

If the leadership is lost while COMMAND runs (its keys deleted or evicted on
a majority of the nodes, or too few nodes answered in time to renew it),
redlock sends COMMAND SIGTERM, then SIGKILL after --kill-grace, says so on
stderr and exits with status 76.

Exit status (see also 'redlock help exit-codes'):
  COMMAND's own   when it ran (128+N if it was killed by signal N)
  64              usage error: bad flags, arguments or node URLs
  69              too few nodes available for a quorum: unreachable, busy,
                  or in quarantine
  75              another candidate led, and --wait ran out
  76              the leadership was lost while COMMAND ran
  77              nodes refused the credentials or their ACL denies a command
                  (NOAUTH, WRONGPASS, NOPERM)
  78              nodes refused for good otherwise (READONLY, WRONGTYPE, ...)
  126, 127        COMMAND could not be run, or was not found
  128+N           interrupted by signal N while campaigning`,
		Example: `  # Run the scheduler on one host at a time; a standby takes over when it dies.
  redlock elect scheduler -- ./scheduler --term "$REDLOCK_TERM"

  # Name this candidate for 'redlock leader'.
  redlock elect --value "$(hostname):8080" api-primary -- ./serve-primary.sh

  # Lead only if nobody else does now (exit status 75 otherwise).
  redlock elect --wait 0s compactor -- ./compact.sh

  # Who leads?
  redlock leader scheduler`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("missing KEY and COMMAND: %s", use)
			}
			return nil
		},
		ValidArgsFunction: commandCompletion,
		RunE: func(cmd *cobra.Command, args []string) error {
			rf.waitGiven = cmd.Flags().Changed("wait")
			key, argv, err := commandArgs(args, cmd.ArgsLenAtDash(), use)
			if err != nil {
				return err
			}
			r := &runner{flags: rf, nf: nf, stderr: cmd.ErrOrStderr(), key: key, argv: argv, target: electionTarget}
			return r.run()
		},
	}
	f := cmd.Flags()
	rf.register(f, "leadership")
	f.StringVar(&rf.owner, "value", "", fmt.Sprintf("what 'redlock leader' shows of this candidate when it leads, such as its address: at most %d bytes, no control characters (default: host:pid)", clientx.Limits.OwnerLen))
	cmd.RegisterFlagCompletionFunc("value", noArgsCompletion)
	return cmd
}

// electionTarget is the leadership of the election KEY, for elect.
func electionTarget(r *runner, c *redlock.Client) *target {
	key, value := r.key, r.flags.owner
	e := c.Election(key, r.flags.ttl)
	return &target{
		what: fmt.Sprintf("the leadership of %q", key),
		verb: "won",
		busy: fmt.Sprintf("another candidate leads the election %q", key),
		taken: func() string {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			if info, err := e.Leader(ctx); err == nil && info.Term != 0 {
				return fmt.Sprintf("%q leads, in term %d", info.Value, info.Term)
			}
			return "another candidate leads"
		},
		obtain: func(ctx context.Context, _ bool) (*redlock.Lock, []string, error) {
			// One attempt is Options.Tries 1 (see runner.run). Without
			// --value, value and the client's Options.Owner are empty: the
			// library's default owner label stands for both.
			l, err := e.Campaign(ctx, value)
			if err != nil {
				return nil, nil, err
			}
			// The value the leader shows is the label the nodes keep
			// beside its token (Lock.Token no longer carries it): the
			// value, or the library's default owner label.
			shown := value
			if info, err := e.Leader(ctx); err == nil && info.ID == l.ID() {
				shown = info.Value
			}
			term := strconv.FormatInt(l.Fence(), 10)
			return l, []string{"REDLOCK_KEY=" + key, "REDLOCK_TERM=" + term, "REDLOCK_FENCE=" + term,
				"REDLOCK_VALUE=" + shown, "REDLOCK_LOCK_ID=" + l.ID()}, nil
		},
	}
}

func newLeaderCmd(nf *nodeFlags) *cobra.Command {
	rf := &reportFlags{}
	cmd := &cobra.Command{
		Use:   "leader [flags] KEY",
		Short: "Show who leads an election",
		Long: `Leader reads who leads the election KEY ('redlock elect KEY'), in one round
that changes nothing, and prints the leader's value (elect's --value), its
term, the ID of its leadership and when the leadership ends unless the
leader renews it.

A candidate leads once its lock on KEY is held by a quorum of the nodes and
its term is recorded there. A candidate that holds the lock but has not yet
recorded its term does not lead yet: leader then says that nobody leads.

With --json the report is a JSON object for scripts: key, leader (true or
false), and when there is a leader, value, term, id, ends and ttl_ms.

Exit status (see also 'redlock help exit-codes'):
  0       a candidate leads
  1       nobody leads
  64      usage error: bad flags, arguments or node URLs
  69      too few nodes answered to tell
  77      so many nodes refused the credentials or denied the read (NOAUTH,
          WRONGPASS, NOPERM) that too few answered
  78      so many nodes refused otherwise that too few answered`,
		Example: `  redlock leader scheduler
  redlock leader --json scheduler | jq -r .value
  redlock leader -q scheduler || echo "nobody leads"`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("leader takes exactly one KEY, got %d arguments", len(args))
			}
			return nil
		},
		ValidArgsFunction: noArgsCompletion,
	}
	quiet := cmd.Flags().BoolP("quiet", "q", false, "print nothing: only the exit status says whether a candidate leads")
	rf.register(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		w := cmd.OutOrStdout()
		if *quiet {
			w = io.Discard
		}
		return runLeader(cmd.Context(), w, nf, rf, args[0])
	}
	return cmd
}

// A leaderReport is the output of leader.
type leaderReport struct {
	Key       string     `json:"key"`
	Leader    bool       `json:"leader"`
	Value     string     `json:"value,omitempty"`
	Term      int64      `json:"term,omitempty"`
	ID        string     `json:"id,omitempty"`
	Ends      *time.Time `json:"ends,omitempty"`
	TTLMillis int64      `json:"ttl_ms,omitempty"`
}

func runLeader(ctx context.Context, w io.Writer, nf *nodeFlags, rf *reportFlags, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	ns, c, err := rf.connect(nf)
	if err != nil {
		return err
	}
	defer ns.close()
	info, err := c.Election(key, time.Second).Leader(ctx)
	var oe *redlock.OpError
	errors.As(err, &oe)
	switch {
	case err == nil:
	case errors.Is(err, redlock.ErrInvalid):
		return usagef("%s", describeErr(err))
	case oe != nil && errors.Is(err, redlock.ErrRefused):
		return &exitError{code: refusalStatus(oe), err: err,
			msg: fmt.Sprintf("cannot tell who leads %q: %s", key, refusedText(oe))}
	case errors.Is(err, redlock.ErrNoQuorum):
		return &exitError{code: exitUnavailable, err: err,
			msg: fmt.Sprintf("cannot tell who leads %q: %s", key, readQuorumText(oe))}
	default:
		return &exitError{code: exitSoftware, err: err, msg: fmt.Sprintf("cannot tell who leads %q: %s", key, describeErr(err))}
	}
	rep := &leaderReport{Key: key}
	now := time.Now()
	if err == nil && info.Term != 0 { // Term 0: nobody leads
		ends := info.Ends
		rep.Leader, rep.Value, rep.Term, rep.ID, rep.Ends = true, info.Value, info.Term, info.ID, &ends
		rep.TTLMillis = max(info.Ends.Sub(now), 0).Milliseconds()
	}
	if err := rf.write(w, rep, func() {
		if rep.Leader {
			fmt.Fprintf(w, "election %q: LEADER %q in term %d (leadership %s); ends in %v unless renewed\n",
				key, rep.Value, rep.Term, rep.ID, millisDur(rep.TTLMillis))
		} else {
			fmt.Fprintf(w, "election %q: NO LEADER\n", key)
		}
	}); err != nil {
		return err
	}
	if !rep.Leader {
		return silentExit(exitFailure)
	}
	return nil
}

// readQuorumText explains, node by node, why too few nodes answered a
// read.
func readQuorumText(oe *redlock.OpError) string {
	if oe == nil || len(oe.Nodes) == 0 {
		return "too few nodes answered"
	}
	var b strings.Builder
	ok := 0
	for _, n := range oe.Nodes {
		if n.Outcome == observe.OutcomeOK {
			ok++
		}
	}
	fmt.Fprintf(&b, "too few nodes answered (%d of %d, %d needed):", ok, len(oe.Nodes), oe.Quorum)
	for _, n := range oe.Nodes {
		text := "answered"
		if n.Outcome != observe.OutcomeOK {
			text = resultText(n)
		}
		fmt.Fprintf(&b, "\n  %s %s", n.Node, text)
	}
	return b.String()
}
