package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/admin"
	"github.com/quorumlock/redlock/internal/wire"
	"github.com/quorumlock/redlock/observe"
	"github.com/spf13/cobra"
)

// releaseFlags are the flags of "redlock release".
type releaseFlags struct {
	reportFlags
	force   bool
	yes     bool
	permits int // --permits: free a slot of the semaphore of this many permits
	slot    int // --slot: the slot to free

	permitsGiven, slotGiven bool
}

func newReleaseCmd(nf *nodeFlags) *cobra.Command {
	rf := &releaseFlags{}
	cmd := &cobra.Command{
		Use:   "release --force [flags] KEY",
		Short: "Remove a stuck lock, whoever holds it",
		Long: `Release --force removes the lock KEY from every node, whichever holder's key
is there. It is for a lock whose holder is gone but whose keys stay: a
process that hangs, or a lock with a long TTL whose holder crashed. A holder
releases its own lock by ending: 'redlock run' releases the lock when its
COMMAND exits. Without --force, release removes nothing.

It shows what it removed from each node (the holder's ID, its owner and how
long the key had left) and the fence floor. Like a normal release, it raises
every node's fence counter to the largest any node had, so that the next
holder's fence is greater than the removed holder's, and resources that
check fences refuse the removed holder's late writes. Waiters are told at
once.

The removed holder is not stopped. If it is still at work, it holds a lock
that no longer excludes anyone until it learns of the loss, at its next
extension ('redlock run' then stops its COMMAND and exits 76); until then
only writes that check the fence are safe from it. Look first with
'redlock inspect KEY'.

With --permits N --slot I, release frees slot I (from 0 to N-1) of the
semaphore KEY of N permits ('redlock run --permits N KEY') instead of the
lock KEY: it removes that slot's permit from every node, whatever holder's
key is there, and wakes the semaphore's waiters at once. Give the N that the
semaphore's users give. All that is said here of the lock applies to the
permit, and its fence rises per slot. 'redlock inspect --permits N KEY'
shows which slots are held, and by whom. A permit's own key
(redlock:permit:...) is not a KEY release takes.

When stdin is a terminal, release shows the lock (with --slot, the slot) and
asks before removing it; otherwise it removes nothing without --yes.

With --json the report is a JSON object for scripts: key, released, quorum,
confirmed, removed, fence_floor, and for each node: node, confirmed,
removed, holder, owner, ttl_ms, fence, and error when it has one; with
--permits, permits and slot too.

Exit status (see also 'redlock help exit-codes'):
  0       removed, or nothing to remove: a quorum of nodes confirmed
  1       the question was not answered yes: nothing was removed
  64      usage error: no --force, no --yes when stdin is not a terminal,
          --slot without --permits or --permits without --slot, a slot or
          number of permits out of range, bad flags, arguments or node URLs
  69      too few nodes confirmed: keys on the nodes that did not answer
          expire with their TTLs
  77      so many nodes refused the credentials or their ACL denies the
          release (NOAUTH, WRONGPASS, NOPERM) that too few confirmed
  78      so many nodes refused otherwise (KEY holding another type of
          value: WRONGTYPE; a replica: READONLY; ...) that too few confirmed`,
		Example: `  # See who holds it, then remove it after a question.
  redlock inspect nightly-report
  redlock release --force nightly-report

  # In a script, where nobody can answer.
  redlock release --force --yes --json deploy | jq .removed

  # A stuck permit of 'redlock run --permits 4 transcode': find its slot, free it.
  redlock inspect --permits 4 transcode
  redlock release --force --permits 4 --slot 2 transcode`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("release takes exactly one KEY, got %d arguments", len(args))
			}
			return nil
		},
		ValidArgsFunction: noArgsCompletion,
		RunE: func(cmd *cobra.Command, args []string) error {
			rf.permitsGiven, rf.slotGiven = cmd.Flags().Changed("permits"), cmd.Flags().Changed("slot")
			return runRelease(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr(), nf, rf, args[0])
		},
	}
	rf.register(cmd)
	f := cmd.Flags()
	f.BoolVar(&rf.force, "force", false, "remove the lock whoever holds it (required)")
	f.BoolVarP(&rf.yes, "yes", "y", false, "do not ask; required when stdin is not a terminal")
	f.IntVar(&rf.permits, "permits", 0, fmt.Sprintf("free a slot (--slot) of the semaphore KEY of this many permits instead of the lock KEY: from 1 to %d, as its users give (default: the lock KEY)", wire.MaxPermits))
	f.IntVar(&rf.slot, "slot", 0, "with --permits N, the slot of the semaphore to free: from 0 to N-1, as 'redlock inspect --permits N KEY' shows them (no default: required with --permits)")
	cmd.RegisterFlagCompletionFunc("permits", noArgsCompletion)
	cmd.RegisterFlagCompletionFunc("slot", noArgsCompletion)
	return cmd
}

// A releasedNode is what release did on one node.
type releasedNode struct {
	Node      string `json:"node"`
	Confirmed bool   `json:"confirmed"`        // the node carried out the release
	Removed   bool   `json:"removed"`          // it held a key and deleted it
	Holder    string `json:"holder,omitempty"` // the removed key's holder ID
	Owner     string `json:"owner,omitempty"`  // the removed holder's owner label
	TTLMillis int64  `json:"ttl_ms,omitempty"` // how long the removed key had left
	Fence     int64  `json:"fence,omitempty"`  // the fence counter afterwards
	Error     string `json:"error,omitempty"`

	err     error
	refused bool
}

// A releaseReport is the whole output of release.
type releaseReport struct {
	Key string `json:"key"`
	// Permits and Slot name the slot freed of the semaphore Key, with
	// --permits; Slot is nil for a lock.
	Permits   int  `json:"permits,omitempty"`
	Slot      *int `json:"slot,omitempty"`
	Released  bool `json:"released"` // a quorum of nodes confirmed
	Quorum    int  `json:"quorum"`
	Confirmed int  `json:"confirmed"` // nodes that carried out the release
	Removed   int  `json:"removed"`   // nodes that held a key and deleted it
	// FenceFloor is the least fence counter of the nodes that confirmed,
	// read after the release; the next holder's fence is greater.
	FenceFloor int64          `json:"fence_floor,omitempty"`
	Nodes      []releasedNode `json:"nodes"`
}

// A releaseTarget is what release removes: the lock key, or a slot of
// the semaphore key.
type releaseTarget struct {
	key     string
	permits int // 0 for the lock
	slot    int
}

// String names the target for people: `the lock "KEY"`, or `the permit in
// slot I of the semaphore "KEY"`.
func (t releaseTarget) String() string {
	if t.permits == 0 {
		return fmt.Sprintf("the lock %q", t.key)
	}
	return fmt.Sprintf("the permit in slot %d of the semaphore %q", t.slot, t.key)
}

// target checks the flags that name what to release, and returns it.
func (rf *releaseFlags) target(key string) (releaseTarget, error) {
	t := releaseTarget{key: key}
	switch {
	case rf.slotGiven && !rf.permitsGiven:
		return t, usagef("--slot %d needs --permits N, the number of permits of the semaphore %q, as its users give it", rf.slot, key)
	case !rf.permitsGiven:
		return t, checkLockKey(key)
	}
	if err := checkPermits(rf.permits); err != nil {
		return t, err
	}
	switch {
	case !rf.slotGiven:
		return t, usagef("--permits %d needs --slot I, the slot of the semaphore %q to free, from 0 to %d; 'redlock inspect --permits %d %s' shows who holds which",
			rf.permits, key, rf.permits-1, rf.permits, key)
	case rf.slot < 0 || rf.slot >= rf.permits:
		return t, usagef("--slot %d: the semaphore %q of %d permits has slots 0 to %d", rf.slot, key, rf.permits, rf.permits-1)
	}
	t.permits, t.slot = rf.permits, rf.slot
	return t, checkKey(key)
}

// forceRelease removes the target from every node; see
// Client.ForceRelease and Semaphore.ForceRelease.
func (t releaseTarget) forceRelease(ctx context.Context, c *redlock.Client) ([]admin.KeyView, error) {
	if t.permits == 0 {
		return admin.New(c).ForceRelease(ctx, t.key)
	}
	return admin.New(c).ForceReleasePermit(ctx, c.Semaphore(t.key, t.permits), t.slot)
}

// inspect reads the target's key on every node.
func (t releaseTarget) inspect(ctx context.Context, c *redlock.Client) (*admin.Inspection, error) {
	if t.permits == 0 {
		return admin.New(c).Inspect(ctx, t.key)
	}
	// A permit's key is reserved: only its semaphore reads it.
	inss, err := admin.New(c).InspectSemaphore(ctx, c.Semaphore(t.key, t.permits))
	if err != nil {
		return nil, err
	}
	return inss[t.slot], nil
}

func runRelease(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer, nf *nodeFlags, rf *releaseFlags, key string) error {
	t, err := rf.target(key)
	if err != nil {
		return err
	}
	if !rf.force {
		return usagef("release removes %s whoever holds it, and does so only with --force; "+
			"a holder releases its own lock by ending: 'redlock run' releases it when its command exits", t)
	}
	if !rf.yes && !isTerminal(os.Stdin) {
		return usagef("stdin is not a terminal, so release cannot ask before removing %s: give --yes to remove it without asking", t)
	}
	ns, c, err := rf.connect(nf)
	if err != nil {
		return err
	}
	defer ns.close()
	if !rf.yes {
		if err := confirmRelease(ctx, c, nf, t, stdin, stderr); err != nil {
			return err
		}
	}
	views, relErr := t.forceRelease(ctx, c)
	if relErr != nil && !errors.Is(relErr, redlock.ErrNoQuorum) && !errors.Is(relErr, redlock.ErrRefused) {
		if errors.Is(relErr, redlock.ErrInvalid) {
			return usagef("%s", describeErr(relErr))
		}
		return &exitError{code: exitSoftware, err: relErr, msg: describeErr(relErr)}
	}
	rep := &releaseReport{Key: key, Released: relErr == nil, Quorum: admin.New(c).Quorum(), Nodes: make([]releasedNode, len(views))}
	if t.permits > 0 {
		slot := t.slot
		rep.Permits, rep.Slot = t.permits, &slot
	}
	for i, v := range views {
		n := &rep.Nodes[i]
		n.Node = v.Node
		if v.Err != nil {
			n.Error, n.err, n.refused = describeErr(v.Err), v.Err, v.Outcome == observe.OutcomeRefused
			continue
		}
		rep.Confirmed++
		n.Confirmed = true
		if v.Held {
			rep.Removed++
			n.Removed, n.Holder, n.Owner, n.TTLMillis = true, v.Holder, v.Owner, v.TTL.Milliseconds()
		}
	}
	if rep.Released {
		// The fence counters as they are now: each one that confirmed
		// is at least the floor the release wrote.
		if ins, err := t.inspect(ctx, c); err == nil {
			for i, v := range ins.Nodes {
				n := &rep.Nodes[i]
				if v.Err != nil || !n.Confirmed {
					continue
				}
				n.Fence = v.Fence
				if rep.FenceFloor == 0 || v.Fence < rep.FenceFloor {
					rep.FenceFloor = v.Fence
				}
			}
		}
	}
	if err := rf.write(stdout, rep, func() { printRelease(stdout, rep) }); err != nil {
		return err
	}
	switch {
	case relErr == nil:
		return nil
	case errors.Is(relErr, redlock.ErrRefused):
		refused := 0
		for _, n := range rep.Nodes {
			if n.refused {
				refused++
			}
		}
		return &exitError{code: refusalStatus(relErr), err: relErr,
			msg: fmt.Sprintf("%s was not released: %d of %d nodes refused, and will refuse again (%d needed to agree)",
				t, refused, len(rep.Nodes), rep.Quorum)}
	}
	return &exitError{code: exitUnavailable, err: relErr,
		msg: fmt.Sprintf("%s was not released: only %d of %d nodes confirmed, and %d are needed; keys on the others expire with their TTLs",
			t, rep.Confirmed, len(rep.Nodes), rep.Quorum)}
}

// confirmRelease shows the target on w and asks whether to remove it. It
// returns nil for yes, and an error that ends the program otherwise.
func confirmRelease(ctx context.Context, c *redlock.Client, nf *nodeFlags, t releaseTarget, r io.Reader, w io.Writer) error {
	if t.permits == 0 {
		rep, err := readReport(ctx, c, nf, t.key)
		if err != nil {
			return err
		}
		printReport(w, rep, time.Now())
	} else {
		reps, err := readSlotReports(ctx, c, nf, t.key, t.permits)
		if err != nil {
			return err
		}
		printReportOf(w, fmt.Sprintf("slot %d of the semaphore %q", t.slot, t.key), reps[t.slot], time.Now())
	}
	fmt.Fprintf(w, "\nRemove %s from every node, whatever holds it? [y/N] ", t)
	line, err := bufio.NewReader(r).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	if err != nil && line == "" {
		fmt.Fprintln(w)
	}
	return exitf(exitFailure, "not answered yes: %s was not removed", t)
}

// printRelease writes the report of a release for people.
func printRelease(w io.Writer, rep *releaseReport) {
	total := len(rep.Nodes)
	subject, noun := fmt.Sprintf("lock %q", rep.Key), "lock"
	if rep.Slot != nil {
		subject, noun = fmt.Sprintf("slot %d of the semaphore %q", *rep.Slot, rep.Key), "permit"
	}
	switch {
	case !rep.Released:
		fmt.Fprintf(w, "%s: NOT RELEASED: only %d of %d nodes confirmed, and %d are needed\n", subject, rep.Confirmed, total, rep.Quorum)
		if rep.Removed > 0 {
			fmt.Fprintf(w, "  %d nodes removed a key; the keys on the others expire with their TTLs\n", rep.Removed)
		}
	case rep.Removed == 0:
		fmt.Fprintf(w, "%s: nothing to remove: no node that answered held it (%d of %d nodes confirmed, quorum %d)\n",
			subject, rep.Confirmed, total, rep.Quorum)
	default:
		fmt.Fprintf(w, "%s: REMOVED%s from %d of %d nodes (%d confirmed, quorum %d): the %s can be taken again\n",
			subject, removedHolders(rep), rep.Removed, total, rep.Confirmed, rep.Quorum, noun)
	}
	if rep.FenceFloor > 0 {
		fmt.Fprintf(w, "fence floor: %d (every node that confirmed has a fence counter of at least this: the next holder's fence is greater than the removed holder's)\n", rep.FenceFloor)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tREMOVED\tOWNER\tTTL LEFT\tFENCE\tRESULT")
	var hints []string
	for _, n := range rep.Nodes {
		holder, owner, ttl, fence, result := "-", "-", "-", "-", "nothing held"
		switch {
		case !n.Confirmed:
			holder, owner, ttl, fence = "?", "?", "?", "?"
			result = "failed: " + n.Error
			if n.refused {
				result = "refused: " + n.Error
			}
		case n.Removed:
			holder, ttl, result = n.Holder, millisDur(n.TTLMillis).String(), "removed"
			if n.Owner != "" {
				owner = n.Owner
			}
		default:
			holder = "none"
		}
		if n.Fence > 0 {
			fence = fmt.Sprint(n.Fence)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", printable(n.Node), printable(holder), printable(owner), ttl, fence, printable(result))
		if h := refusalHint(n.err); n.refused && h != "" && !slices.Contains(hints, h) {
			hints = append(hints, h)
		}
	}
	tw.Flush()
	for _, h := range hints {
		fmt.Fprintf(w, "  (%s)\n", h)
	}
	if rep.Removed > 0 {
		fmt.Fprintln(w, "\nIf the removed holder is still at work, it is not stopped: it learns of the loss when it next")
		fmt.Fprintf(w, "extends the %s ('redlock run' then stops its command and exits 76). Until then, only writes\n", noun)
		fmt.Fprintln(w, "that check the fence are safe from it.")
	}
}

// removedHolders names the holders whose keys a release removed: " the
// keys of ID (OWNER)" for one holder, " the keys of N holders" for more.
func removedHolders(rep *releaseReport) string {
	var ids []string
	owner := ""
	for _, n := range rep.Nodes {
		if n.Removed && !slices.Contains(ids, n.Holder) {
			ids = append(ids, n.Holder)
			owner = n.Owner
		}
	}
	switch len(ids) {
	case 0:
		return ""
	case 1:
		return " the keys of " + printable(ids[0]) + ownerText(owner)
	}
	return fmt.Sprintf(" the keys of %d holders", len(ids))
}
