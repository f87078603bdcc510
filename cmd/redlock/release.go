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
	"github.com/spf13/cobra"
)

// releaseFlags are the flags of "redlock release".
type releaseFlags struct {
	reportFlags
	force bool
	yes   bool
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

When stdin is a terminal, release shows the lock and asks before removing
it; otherwise it removes nothing without --yes.

Exit status:
  0       removed, or nothing to remove: a quorum of nodes confirmed
  1       the question was not answered yes: nothing was removed
  64      usage error: no --force, no --yes when stdin is not a terminal,
          bad flags, arguments or node URLs
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
  redlock release --force --yes --json deploy | jq .removed`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("release takes exactly one KEY, got %d arguments", len(args))
			}
			return nil
		},
		ValidArgsFunction: noArgsCompletion,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRelease(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr(), nf, rf, args[0])
		},
	}
	rf.register(cmd)
	f := cmd.Flags()
	f.BoolVar(&rf.force, "force", false, "remove the lock whoever holds it (required)")
	f.BoolVarP(&rf.yes, "yes", "y", false, "do not ask; required when stdin is not a terminal")
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
	Key       string `json:"key"`
	Released  bool   `json:"released"` // a quorum of nodes confirmed
	Quorum    int    `json:"quorum"`
	Confirmed int    `json:"confirmed"` // nodes that carried out the release
	Removed   int    `json:"removed"`   // nodes that held a key and deleted it
	// FenceFloor is the least fence counter of the nodes that confirmed,
	// read after the release; the next holder's fence is greater.
	FenceFloor int64          `json:"fence_floor,omitempty"`
	Nodes      []releasedNode `json:"nodes"`
}

func runRelease(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer, nf *nodeFlags, rf *releaseFlags, key string) error {
	if !rf.force {
		return usagef("release removes the lock %q whoever holds it, and does so only with --force; "+
			"a holder releases its own lock by ending: 'redlock run' releases it when its command exits", key)
	}
	if err := checkKey(key); err != nil {
		return err
	}
	if !rf.yes && !isTerminal(os.Stdin) {
		return usagef("stdin is not a terminal, so release cannot ask before removing the lock %q: give --yes to remove it without asking", key)
	}
	ns, c, err := rf.connect(nf)
	if err != nil {
		return err
	}
	defer ns.close()
	if !rf.yes {
		if err := confirmRelease(ctx, c, nf, key, stdin, stderr); err != nil {
			return err
		}
	}
	views, relErr := c.ForceRelease(ctx, key)
	if relErr != nil && !errors.Is(relErr, redlock.ErrNoQuorum) && !errors.Is(relErr, redlock.ErrRefused) {
		if errors.Is(relErr, redlock.ErrInvalid) {
			return usagef("%s", describeErr(relErr))
		}
		return &exitError{code: exitSoftware, err: relErr, msg: describeErr(relErr)}
	}
	rep := &releaseReport{Key: key, Released: relErr == nil, Quorum: c.Quorum(), Nodes: make([]releasedNode, len(views))}
	for i, v := range views {
		n := &rep.Nodes[i]
		n.Node = v.Node
		if v.Err != nil {
			n.Error, n.err, n.refused = describeErr(v.Err), v.Err, v.Outcome == redlock.Refused
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
		if ins, err := c.Inspect(ctx, key); err == nil {
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
			msg: fmt.Sprintf("the lock %q was not released: %d of %d nodes refused, and will refuse again (%d needed to agree)",
				key, refused, len(rep.Nodes), rep.Quorum)}
	}
	return &exitError{code: exitUnavailable, err: relErr,
		msg: fmt.Sprintf("the lock %q was not released: only %d of %d nodes confirmed, and %d are needed; keys on the others expire with their TTLs",
			key, rep.Confirmed, len(rep.Nodes), rep.Quorum)}
}

// confirmRelease shows the lock on w and asks whether to remove it. It
// returns nil for yes, and an error that ends the program otherwise.
func confirmRelease(ctx context.Context, c *redlock.Client, nf *nodeFlags, key string, r io.Reader, w io.Writer) error {
	rep, err := readReport(ctx, c, nf, key)
	if err != nil {
		return err
	}
	printReport(w, rep, time.Now())
	fmt.Fprintf(w, "\nRemove the lock %q from every node, whatever holds it? [y/N] ", key)
	line, err := bufio.NewReader(r).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	if err != nil && line == "" {
		fmt.Fprintln(w)
	}
	return exitf(exitFailure, "not answered yes: the lock %q was not removed", key)
}

// printRelease writes the report of a release for people.
func printRelease(w io.Writer, rep *releaseReport) {
	total := len(rep.Nodes)
	switch {
	case !rep.Released:
		fmt.Fprintf(w, "lock %q: NOT RELEASED: only %d of %d nodes confirmed, and %d are needed\n", rep.Key, rep.Confirmed, total, rep.Quorum)
		if rep.Removed > 0 {
			fmt.Fprintf(w, "  %d nodes removed a key; the keys on the others expire with their TTLs\n", rep.Removed)
		}
	case rep.Removed == 0:
		fmt.Fprintf(w, "lock %q: nothing to remove: no node that answered held it (%d of %d nodes confirmed, quorum %d)\n",
			rep.Key, rep.Confirmed, total, rep.Quorum)
	default:
		fmt.Fprintf(w, "lock %q: REMOVED%s from %d of %d nodes (%d confirmed, quorum %d): the lock can be taken again\n",
			rep.Key, removedHolders(rep), rep.Removed, total, rep.Confirmed, rep.Quorum)
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", n.Node, holder, owner, ttl, fence, result)
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
		fmt.Fprintln(w, "extends the lock ('redlock run' then stops its command and exits 76). Until then, only writes")
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
		return " the keys of " + ids[0] + ownerText(owner)
	}
	return fmt.Sprintf(" the keys of %d holders", len(ids))
}
