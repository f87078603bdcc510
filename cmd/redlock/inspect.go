package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/spf13/cobra"
)

// newInspectCmd returns the command that shows who holds a lock, under
// name: "inspect", or "status", the name it had first. Both are the same
// command with the same report.
func newInspectCmd(nf *nodeFlags, name string) *cobra.Command {
	rf := &reportFlags{}
	short, title := "Show who holds a lock, node by node", "Inspect"
	if name == "status" {
		short, title = "Show who holds a lock: another name for inspect", "Status"
	}
	cmd := &cobra.Command{
		Use:   name + " [flags] KEY",
		Short: short,
		Long: title + ` reads the lock KEY on every node, changing nothing, and shows who
holds it: for each node, the holder's ID and owner, how long the node keeps
the key, the lock's fence counter, and the node's state: healthy,
quarantined (restarted too recently to vote), unreachable, or refusing (it
answers with an error that retrying cannot change, such as a wrong
password). 'redlock inspect' and 'redlock status' are the same command.

The first line is the verdict:
  HELD     one holder's key is on a quorum of the nodes; the line says when
           the lock ends unless its holder extends it
  FREE     no node that answered holds the key, and a quorum answered
  SPLIT    some nodes hold keys, but no holder has a quorum: an acquisition
           under way, acquisitions that contend, or what a failed, lost or
           released one left behind; such keys expire with their TTLs
  UNKNOWN  too few nodes answered to tell

A holder is shown by its ID, the first 12 hex digits of the SHA-1 of its
random token: the same on every node that holds it, and the one that
'redlock run' gives its command as REDLOCK_LOCK_ID. The token itself, which
would let its reader release the lock, is never shown. The owner is the
label the holder gave ('redlock run --owner'; by default its host name and
process ID). The fence counter is the last fencing token the node handed
out for KEY: the next holder's fence is greater. Inspecting changes no lock;
like every lock client, it may write a node's restart marker.

A lock whose holder is gone but whose keys stay (a hung process, or a long
TTL) can be removed with 'redlock release --force KEY'.

With --json the report is a JSON object for scripts: key, state (held,
free, split or unknown), quorum, answered, holder, owner, held_on, ttl_ms,
ends and fence, and for each node: node, state, answered, held, holder,
owner, ttl_ms, fence, and error or read_error when it has one.

Exit status:
  0       the lock is held, free or split
  64      usage error: bad flags, arguments or node URLs
  69      too few nodes answered to tell
  77      so many nodes refused the credentials or denied the read (NOAUTH,
          WRONGPASS, NOPERM) that too few answered
  78      so many nodes refused otherwise (KEY holding another type of
          value: WRONGTYPE; a TLS certificate that fails verification,
          or a client certificate missing or refused; ...) that too few
          answered`,
		Example: `  redlock ` + name + ` nightly-report
  redlock ` + name + ` --nodes redis://a:6379,redis://b:6379,redis://c:6379 deploy
  redlock ` + name + ` --json deploy | jq -r '.state, .owner'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("%s takes exactly one KEY, got %d arguments", name, len(args))
			}
			return nil
		},
		ValidArgsFunction: noArgsCompletion,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runInspect(cmd.Context(), cmd.OutOrStdout(), nf, rf, args[0])
		},
	}
	rf.register(cmd)
	return cmd
}

// A nodeStatus is what inspect found on one node.
type nodeStatus struct {
	Node             string     `json:"node"`
	State            string     `json:"state"` // healthy, quarantined, unreachable, refusing
	QuarantinedUntil *time.Time `json:"quarantined_until,omitempty"`
	Error            string     `json:"error,omitempty"`  // why the node is unreachable or refusing
	Answered         bool       `json:"answered"`         // the lock's keys could be read
	Held             bool       `json:"held"`             // a holder's key is there
	Holder           string     `json:"holder,omitempty"` // the holder's ID
	Owner            string     `json:"owner,omitempty"`  // the holder's owner label
	TTLMillis        int64      `json:"ttl_ms,omitempty"` // the key's remaining time to live
	Fence            int64      `json:"fence,omitempty"`  // the fence counter
	ReadError        string     `json:"read_error,omitempty"`

	readErr error // the read's error, for refusal hints and exit statuses
	refused bool  // the node refused the read
}

// A statusReport is the whole output of inspect (and status).
type statusReport struct {
	Key      string `json:"key"`
	State    string `json:"state"` // held, free, split, unknown
	Quorum   int    `json:"quorum"`
	Answered int    `json:"answered"`          // nodes whose keys could be read
	Holder   string `json:"holder,omitempty"`  // held: the holder's ID
	Owner    string `json:"owner,omitempty"`   // held: the holder's owner label
	HeldOn   int    `json:"held_on,omitempty"` // held: nodes holding the holder's key
	// TTLMillis is how long a quorum of nodes keeps the holder's key,
	// as they answered; Ends the same as a time.
	TTLMillis int64        `json:"ttl_ms,omitempty"`
	Ends      *time.Time   `json:"ends,omitempty"`
	Fence     int64        `json:"fence,omitempty"` // the largest fence counter
	Nodes     []nodeStatus `json:"nodes"`
}

// checkKey returns a usage error for a key the lock client would refuse.
func checkKey(key string) error {
	switch {
	case key == "":
		return usagef("the lock key is empty")
	case key == "redlock:node" || strings.HasPrefix(key, "redlock:node:") || strings.HasPrefix(key, "redlock:fence:"):
		return usagef("the key %q is reserved for the lock client's own records", key)
	}
	return nil
}

func runInspect(ctx context.Context, w io.Writer, nf *nodeFlags, rf *reportFlags, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	ns, c, err := rf.connect(nf)
	if err != nil {
		return err
	}
	defer ns.close()
	rep, err := readReport(ctx, c, nf, key)
	if err != nil {
		return err
	}
	if err := rf.write(w, rep, func() { printReport(w, rep, time.Now()) }); err != nil {
		return err
	}
	return reportStatus(rep)
}

// readReport inspects the lock and probes the nodes, at the same time.
func readReport(ctx context.Context, c *redlock.Client, nf *nodeFlags, key string) (*statusReport, error) {
	var states []redlock.NodeState
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		states = c.Probe(ctx)
	}()
	ins, err := c.Inspect(ctx, key)
	wg.Wait()
	if err != nil {
		return nil, usagef("%s", describeErr(err))
	}
	return newReport(ins, c.Quorum(), states, keyQuarantine(ins, nf), time.Now()), nil
}

// keyQuarantine returns how long a node must have run to vote for the
// inspected key, as a client that has heard from every node that answered
// asks it: the largest TTL any of them records for the key's cluster hash
// slot, or --quarantine if that is longer; 0 with --no-quarantine.
func keyQuarantine(ins *redlock.Inspection, nf *nodeFlags) time.Duration {
	if nf.noQuarantine {
		return 0
	}
	q := nf.quarantine
	for _, v := range ins.Nodes {
		if v.Err == nil {
			q = max(q, v.MaxTTL)
		}
	}
	return q
}

// newReport makes the report of an inspection at now, with the nodes'
// states from a probe. A node that answered, and that the probe did not
// find unreachable or refusing, is quarantined for the key while its
// records for the key's slot are younger than quarantine: the probe reads
// the records of another slot.
func newReport(ins *redlock.Inspection, quorum int, states []redlock.NodeState, quarantine time.Duration, now time.Time) *statusReport {
	rep := &statusReport{Key: ins.Key, State: ins.State.String(), Quorum: quorum, Fence: ins.Fence,
		Nodes: make([]nodeStatus, len(ins.Nodes))}
	for i, v := range ins.Nodes {
		n := &rep.Nodes[i]
		n.Node = v.Node
		if i < len(states) {
			s := states[i]
			n.State = s.Health.String()
			switch s.Health {
			case redlock.NodeQuarantined:
				until := s.Until
				n.QuarantinedUntil = &until
			case redlock.NodeUnreachable, redlock.NodeRefusing, redlock.NodeBusy:
				n.Error = describeErr(s.Err)
			}
		}
		if v.Err != nil {
			n.ReadError, n.readErr, n.refused = describeErr(v.Err), v.Err, v.Outcome == redlock.Refused
			continue
		}
		if v.Age >= 0 && v.Age < quarantine && (n.State == "" || n.State == redlock.NodeHealthy.String() || n.State == redlock.NodeQuarantined.String()) {
			until := now.Add(quarantine - v.Age)
			if n.QuarantinedUntil == nil || n.QuarantinedUntil.Before(until) {
				n.State, n.QuarantinedUntil = redlock.NodeQuarantined.String(), &until
			}
		}
		rep.Answered++
		n.Answered, n.Held, n.Fence = true, v.Held, v.Fence
		if v.Held {
			n.Holder, n.Owner, n.TTLMillis = v.Holder, v.Owner, v.TTL.Milliseconds()
		}
	}
	if ins.State == redlock.KeyHeld {
		rep.Holder, rep.Owner = ins.Holder, ins.Owner
		ends := ins.Ends
		rep.Ends = &ends
		var ttls []int64
		for _, n := range rep.Nodes {
			if n.Held && n.Holder == ins.Holder {
				ttls = append(ttls, n.TTLMillis)
			}
		}
		rep.HeldOn = len(ttls)
		// A quorum holds the key until the quorum-th longest TTL runs out.
		slices.Sort(ttls)
		slices.Reverse(ttls)
		if len(ttls) >= quorum {
			rep.TTLMillis = ttls[quorum-1]
		}
	}
	return rep
}

// refusal returns, for a report in which so many nodes refused the read
// that no quorum answered, an OpError that describes the refusals; nil
// otherwise.
func (rep *statusReport) refusal() *redlock.OpError {
	refused := 0
	results := make([]redlock.NodeResult, len(rep.Nodes))
	for i, n := range rep.Nodes {
		results[i] = redlock.NodeResult{Node: n.Node, Outcome: redlock.OK, Err: n.readErr}
		switch {
		case n.refused:
			refused++
			results[i].Outcome = redlock.Refused
		case !n.Answered:
			results[i].Outcome = redlock.Failed
		}
	}
	if refused <= len(rep.Nodes)-rep.Quorum {
		return nil
	}
	return &redlock.OpError{Op: "inspect", Key: rep.Key, Quorum: rep.Quorum, Rounds: 1, Nodes: results, Err: redlock.ErrRefused}
}

// reportStatus returns the exit status of a report, as an error: nil when
// the lock is held, free or split; 77 or 78 when refusals left too few
// answers; 69 when too few nodes answered otherwise. The report has said
// why.
func reportStatus(rep *statusReport) error {
	if rep.State != redlock.KeyUnknown.String() {
		return nil
	}
	if oe := rep.refusal(); oe != nil {
		return &exitError{code: refusalStatus(oe), err: oe}
	}
	return silentExit(exitUnavailable)
}

// printReport writes the report for people: the verdict, the fence
// counter and a table of the nodes.
func printReport(w io.Writer, rep *statusReport, now time.Time) {
	total := len(rep.Nodes)
	holding, longest := 0, int64(0)
	for _, n := range rep.Nodes {
		if n.Held {
			holding++
			longest = max(longest, n.TTLMillis)
		}
	}
	switch rep.State {
	case "held":
		fmt.Fprintf(w, "lock %q: HELD by %s%s on %d of %d nodes (quorum %d); expires in %v unless extended\n",
			rep.Key, rep.Holder, ownerText(rep.Owner), rep.HeldOn, total, rep.Quorum, millisDur(rep.TTLMillis))
	case "free":
		fmt.Fprintf(w, "lock %q: FREE (%d of %d nodes answered, quorum %d)\n", rep.Key, rep.Answered, total, rep.Quorum)
	case "split":
		fmt.Fprintf(w, "lock %q: SPLIT: %d of %d nodes hold keys, and no holder has a quorum (%d); %d nodes answered\n",
			rep.Key, holding, total, rep.Quorum, rep.Answered)
		fmt.Fprintf(w, "  keys short of a quorum are an acquisition under way, or what a failed, lost or released one left behind; they expire on their own, within %v\n",
			millisDur(longest))
		if unanswered := total - rep.Answered; unanswered > 0 {
			fmt.Fprintf(w, "  %d nodes did not answer: a holder may have a quorum through them\n", unanswered)
		}
	default:
		fmt.Fprintf(w, "lock %q: UNKNOWN: only %d of %d nodes answered, and %d are needed to tell\n", rep.Key, rep.Answered, total, rep.Quorum)
	}
	if rep.Fence > 0 {
		fmt.Fprintf(w, "fence counter: %d (the next holder's fence will be greater)\n", rep.Fence)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tHOLDER\tOWNER\tTTL\tFENCE\tSTATE")
	var hints []string
	for _, n := range rep.Nodes {
		holder, owner, ttl, fence := "-", "-", "-", "-"
		switch {
		case !n.Answered:
			holder, owner, ttl, fence = "?", "?", "?", "?"
		case n.Held:
			holder, ttl = n.Holder, millisDur(n.TTLMillis).String()
			if n.Owner != "" {
				owner = n.Owner
			}
		default:
			holder = "none"
		}
		if n.Fence > 0 {
			fence = fmt.Sprint(n.Fence)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", n.Node, holder, owner, ttl, fence, nodeText(n, now))
		if h := refusalHint(n.readErr); n.refused && h != "" && !slices.Contains(hints, h) {
			hints = append(hints, h)
		}
	}
	tw.Flush()
	for _, h := range hints {
		fmt.Fprintf(w, "  (%s)\n", h)
	}
}

// nodeText describes a node's state and, if reading the lock failed on
// it, why.
func nodeText(n nodeStatus, now time.Time) string {
	state := n.State
	switch {
	case n.QuarantinedUntil != nil:
		state = fmt.Sprintf("quarantined until %s (%v more)", n.QuarantinedUntil.Format("15:04:05"), roundDur(n.QuarantinedUntil.Sub(now)))
	case n.Error != "":
		state += ": " + n.Error
	}
	switch {
	case n.ReadError == "" || n.Error != "":
		// Nothing to add: a node that cannot be reached cannot be read.
	case n.refused:
		state += "; refused to read the lock: " + n.ReadError
	default:
		state += "; reading the lock failed: " + n.ReadError
	}
	return state
}

// ownerText returns an owner label to follow a holder's ID: quoted, in
// parentheses; "" for a holder without one.
func ownerText(owner string) string {
	if owner == "" {
		return ""
	}
	return fmt.Sprintf(" (%q)", owner)
}

// millisDur returns a number of milliseconds as a duration rounded for
// people.
func millisDur(ms int64) time.Duration {
	return roundDur(time.Duration(ms) * time.Millisecond)
}
