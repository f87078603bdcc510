package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/admin"
	"github.com/quorumlock/redlock/internal/clientx"
	"github.com/quorumlock/redlock/internal/wire"
	"github.com/quorumlock/redlock/observe"
	"github.com/spf13/cobra"
)

// newInspectCmd returns the command that shows who holds a lock, under
// name: "inspect", or "status", the name it had first. Both are the same
// command with the same report.
func newInspectCmd(nf *nodeFlags, name string) *cobra.Command {
	rf := &reportFlags{}
	permits := 0
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
  SHARED   readers of the read-write lock KEY ('redlock run --read') hold
           it, each on a quorum, and no writer does; a line per reader
           follows, with its ID, owner and when it ends
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

For a read-write lock, a writer ('redlock run --write') is a holder like
any other, and two more columns count each node's live readers and the
writers waiting (a waiting writer keeps new readers out); a line says how
many writers wait when any do.

A lock whose holder is gone but whose keys stay (a hung process, or a long
TTL) can be removed with 'redlock release --force KEY'.

With --permits N, ` + name + ` reads every slot of the semaphore KEY of N
permits ('redlock run --permits N KEY') instead of the lock KEY, all at
once, probing the nodes once. Give the N that the semaphore's users give.
Each slot is a lock of its own, and the first line counts them:
  semaphore "KEY": 2 of 4 permits held (slots 0, 3); 2 free
with any split or unknown slots after the free ones. Each slot that is not
free follows, headed "slot I:", with the report of a lock: its verdict,
holder ID (the REDLOCK_LOCK_ID that 'redlock run --permits' gave its
command), owner and table of nodes; then the free slots, on one line. A
stuck permit can be freed with 'redlock release --force --permits N --slot
I KEY'.

With --json the report is a JSON object for scripts: key, state (held,
free, split, shared or unknown), quorum, answered, holder, owner, held_on,
ttl_ms, ends, fence, readers (each with id, owner, ttl_ms and ends) and
waiting_writers, and for each node: node, state, answered, held, holder,
owner, ttl_ms, fence, readers (id, owner, ttl_ms), waiting_writers, and
error or read_error when it has one. With
--permits it is an object with key, permits, held and free (the numbers of
held and free slots) and slots: for each slot, slot 0 first, its number in
slot and the report of a lock, whose key is the slot's own
(redlock:permit:I:...).

Exit status (with --permits, the largest of the slots' statuses; see also
'redlock help exit-codes'):
  0       the lock is held, shared, free or split (with --permits: every
          slot is held, free or split)
  64      usage error: bad flags, arguments or node URLs, or --permits out
          of range
  69      too few nodes answered to tell
  77      so many nodes refused the credentials or denied the read (NOAUTH,
          WRONGPASS, NOPERM) that too few answered
  78      so many nodes refused otherwise (KEY holding another type of
          value: WRONGTYPE; a TLS certificate that fails verification,
          or a client certificate missing or refused; ...) that too few
          answered`,
		Example: `  redlock ` + name + ` nightly-report
  redlock ` + name + ` --nodes redis://a:6379,redis://b:6379,redis://c:6379 deploy
  redlock ` + name + ` --json deploy | jq -r '.state, .owner'

  # The 4 permits of 'redlock run --permits 4 transcode': who holds which.
  redlock ` + name + ` --permits 4 transcode
  redlock ` + name + ` --permits 4 --json transcode | jq -r '.slots[] | select(.state == "held") | "\(.slot) \(.owner)"'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("%s takes exactly one KEY, got %d arguments", name, len(args))
			}
			return nil
		},
		ValidArgsFunction: noArgsCompletion,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("permits") {
				if err := checkPermits(permits); err != nil {
					return err
				}
				return runInspectSemaphore(cmd.Context(), cmd.OutOrStdout(), nf, rf, args[0], permits)
			}
			return runInspect(cmd.Context(), cmd.OutOrStdout(), nf, rf, args[0])
		},
	}
	rf.register(cmd)
	cmd.Flags().IntVar(&permits, "permits", 0, fmt.Sprintf("inspect every slot of the semaphore KEY of this many permits instead of the lock KEY: from 1 to %d, as its users give (default: the lock KEY)", wire.MaxPermits))
	cmd.RegisterFlagCompletionFunc("permits", noArgsCompletion)
	return cmd
}

// checkPermits returns a usage error for a number of permits that no
// semaphore has.
func checkPermits(n int) error {
	if n < 1 || n > wire.MaxPermits {
		return usagef("--permits %d: a semaphore has from 1 to %d permits", n, wire.MaxPermits)
	}
	return nil
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
	// The live readers of a read-write lock on the key, and the intents
	// of waiting writers (see admin.KeyView).
	Readers   []readerStatus `json:"readers,omitempty"`
	Intents   int            `json:"waiting_writers,omitempty"`
	ReadError string         `json:"read_error,omitempty"`

	readErr error // the read's error, for refusal hints and exit statuses
	refused bool  // the node refused the read
}

// A readerStatus is one reader of a read-write lock: in a report, one
// that holds on a quorum, with Ends; on a node, one live there. Never its
// token.
type readerStatus struct {
	ID        string     `json:"id"`              // its REDLOCK_LOCK_ID
	Owner     string     `json:"owner,omitempty"` // its owner label
	TTLMillis int64      `json:"ttl_ms"`          // how long it holds: on a quorum, or on the node
	Ends      *time.Time `json:"ends,omitempty"`  // in a report: when fewer than a quorum will hold it
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
	TTLMillis int64      `json:"ttl_ms,omitempty"`
	Ends      *time.Time `json:"ends,omitempty"`
	Fence     int64      `json:"fence,omitempty"` // the largest fence counter
	// Readers are the readers of a read-write lock that hold on a
	// quorum (shared), the one ending first first; WaitingWriters the
	// most intents of waiting writers on a node (admin.Inspection).
	Readers        []readerStatus `json:"readers,omitempty"`
	WaitingWriters int            `json:"waiting_writers,omitempty"`
	Nodes          []nodeStatus   `json:"nodes"`

	err error // why the state is unknown (admin.Inspection.Err)
}

// checkKey returns a usage error, in the library's words, for a key that
// the lock client refuses (see clientx.CheckKey), so that a command can
// refuse it before it asks anything of a user or a node.
func checkKey(key string) error {
	if err := clientx.CheckKey(key); err != nil {
		return usagef("%s", describeErr(err))
	}
	return nil
}

// checkLockKey is checkKey for the lock KEY of inspect and release. A
// name that is not empty is refused as the name of one of the client's
// records, and those include the slots of semaphores: the refusal points
// to --permits, which names a slot by its semaphore's KEY.
func checkLockKey(key string) error {
	err := clientx.CheckKey(key)
	switch {
	case err == nil:
		return nil
	case key == "":
		return usagef("%s", describeErr(err))
	}
	return usagef("%s; to read or free a slot of a semaphore, give the semaphore's KEY with --permits N "+
		"('redlock inspect --permits N KEY' shows its slots, 'redlock release --force --permits N --slot I KEY' frees one)", describeErr(err))
}

func runInspect(ctx context.Context, w io.Writer, nf *nodeFlags, rf *reportFlags, key string) error {
	if err := checkLockKey(key); err != nil {
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
	var ins *admin.Inspection
	states, err := probeWhile(ctx, c, func() (err error) {
		ins, err = admin.New(c).Inspect(ctx, key)
		return err
	})
	if err != nil {
		return nil, usagef("%s", describeErr(err))
	}
	return newReport(ins, admin.New(c).Quorum(), states, time.Now()), nil
}

// readSlotReports inspects every slot of the semaphore key of n permits
// and probes the nodes, at the same time: one report per slot, slot 0
// first, each of the slot's own key.
func readSlotReports(ctx context.Context, c *redlock.Client, nf *nodeFlags, key string, n int) ([]*statusReport, error) {
	var inss []*admin.Inspection
	states, err := probeWhile(ctx, c, func() (err error) {
		inss, err = admin.New(c).InspectSemaphore(ctx, c.Semaphore(key, n))
		return err
	})
	if err != nil {
		return nil, usagef("%s", describeErr(err))
	}
	now := time.Now()
	reps := make([]*statusReport, len(inss))
	for i, ins := range inss {
		reps[i] = newReport(ins, admin.New(c).Quorum(), states, now)
	}
	return reps, nil
}

// probeWhile probes the nodes while read runs, and returns the nodes'
// states and read's error.
func probeWhile(ctx context.Context, c *redlock.Client, read func() error) ([]observe.NodeState, error) {
	var states []observe.NodeState
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		states = admin.New(c).Probe(ctx)
	}()
	err := read()
	wg.Wait()
	return states, err
}

// A semaphoreReport is the output of inspect --permits: a statusReport
// for each slot.
type semaphoreReport struct {
	Key     string       `json:"key"`
	Permits int          `json:"permits"`
	Held    int          `json:"held"` // slots held by one holder on a quorum
	Free    int          `json:"free"` // slots free on a quorum
	Slots   []slotReport `json:"slots"`
}

// A slotReport is the report of one slot of a semaphore: that of a lock,
// on the slot's key, with the slot's number.
type slotReport struct {
	Slot int `json:"slot"`
	statusReport
}

func runInspectSemaphore(ctx context.Context, w io.Writer, nf *nodeFlags, rf *reportFlags, key string, n int) error {
	if err := checkKey(key); err != nil {
		return err
	}
	ns, c, err := rf.connect(nf)
	if err != nil {
		return err
	}
	defer ns.close()
	reps, err := readSlotReports(ctx, c, nf, key, n)
	if err != nil {
		return err
	}
	rep := newSemaphoreReport(key, reps)
	if err := rf.write(w, rep, func() { printSemaphore(w, rep, time.Now()) }); err != nil {
		return err
	}
	return semaphoreStatus(rep)
}

// newSemaphoreReport makes the report of a semaphore from its slots'.
func newSemaphoreReport(key string, reps []*statusReport) *semaphoreReport {
	rep := &semaphoreReport{Key: key, Permits: len(reps), Slots: make([]slotReport, len(reps))}
	for i, r := range reps {
		rep.Slots[i] = slotReport{Slot: i, statusReport: *r}
		switch r.State {
		case admin.KeyHeld.String():
			rep.Held++
		case admin.KeyFree.String():
			rep.Free++
		}
	}
	return rep
}

// semaphoreStatus returns the exit status of a semaphore's report, as an
// error: the largest of its slots' (see reportStatus), nil when every
// slot is held, free or split.
func semaphoreStatus(rep *semaphoreReport) error {
	var worst *exitError
	for i := range rep.Slots {
		var e *exitError
		if errors.As(reportStatus(&rep.Slots[i].statusReport), &e) && (worst == nil || e.code > worst.code) {
			worst = e
		}
	}
	if worst == nil {
		return nil
	}
	return worst
}

// printSemaphore writes a semaphore's report for people: the verdict,
// the report of each slot that is not free, and the free slots.
func printSemaphore(w io.Writer, rep *semaphoreReport, now time.Time) {
	bystate := map[string][]int{}
	for _, s := range rep.Slots {
		bystate[s.State] = append(bystate[s.State], s.Slot)
	}
	held, free := bystate[admin.KeyHeld.String()], bystate[admin.KeyFree.String()]
	fmt.Fprintf(w, "semaphore %q: %d of %d permits held%s; %d free", rep.Key, len(held), rep.Permits, slotList(" (", held, ")"), len(free))
	for _, st := range []admin.KeyState{admin.KeySplit, admin.KeyUnknown} {
		if slots := bystate[st.String()]; len(slots) > 0 {
			fmt.Fprintf(w, "; %d %s%s", len(slots), st, slotList(" (", slots, ")"))
		}
	}
	fmt.Fprintln(w)
	for _, s := range rep.Slots {
		if s.State != admin.KeyFree.String() {
			fmt.Fprintln(w)
			printReportOf(w, fmt.Sprintf("slot %d", s.Slot), &s.statusReport, now)
		}
	}
	if len(free) > 0 {
		fmt.Fprintf(w, "\n%s: FREE\n", slotList("", free, ""))
	}
}

// slotList names slots, between before and after: "slot 3" or "slots 0,
// 3"; "" for none.
func slotList(before string, slots []int, after string) string {
	if len(slots) == 0 {
		return ""
	}
	nums := make([]string, len(slots))
	for i, s := range slots {
		nums[i] = fmt.Sprint(s)
	}
	word := "slots "
	if len(slots) == 1 {
		word = "slot "
	}
	return before + word + strings.Join(nums, ", ") + after
}

// newReport makes the report of an inspection at now, with the nodes'
// states from a probe. A node that answered, and that the probe did not
// find unreachable or refusing, is quarantined for the key while its
// records for the key's slot are younger than quarantine: the probe reads
// the records of another slot.
func newReport(ins *admin.Inspection, quorum int, states []observe.NodeState, now time.Time) *statusReport {
	quarantine := ins.Quarantine
	rep := &statusReport{Key: ins.Key, State: ins.State.String(), Quorum: quorum, Fence: ins.Fence,
		Nodes: make([]nodeStatus, len(ins.Nodes)), err: ins.Err}
	for i, v := range ins.Nodes {
		n := &rep.Nodes[i]
		n.Node = v.Node
		if i < len(states) {
			s := states[i]
			n.State = s.Health.String()
			switch s.Health {
			case observe.NodeQuarantined:
				until := s.Until
				n.QuarantinedUntil = &until
			case observe.NodeUnreachable, observe.NodeRefusing, observe.NodeBusy:
				n.Error = describeErr(s.Err)
			}
		}
		if v.Err != nil {
			n.ReadError, n.readErr, n.refused = describeErr(v.Err), v.Err, v.Outcome == observe.OutcomeRefused
			continue
		}
		if v.Age >= 0 && v.Age < quarantine && (n.State == "" || n.State == observe.NodeHealthy.String() || n.State == observe.NodeQuarantined.String()) {
			until := now.Add(quarantine - v.Age)
			if n.QuarantinedUntil == nil || n.QuarantinedUntil.Before(until) {
				n.State, n.QuarantinedUntil = observe.NodeQuarantined.String(), &until
			}
		}
		rep.Answered++
		n.Answered, n.Held, n.Fence = true, v.Held, v.Fence
		if v.Held {
			n.Holder, n.Owner, n.TTLMillis = v.Holder, v.Owner, v.TTL.Milliseconds()
		}
		for _, rv := range v.Readers {
			n.Readers = append(n.Readers, readerStatus{ID: rv.ID, Owner: rv.Owner, TTLMillis: rv.TTL.Milliseconds()})
		}
		n.Intents = v.Intents
	}
	rep.WaitingWriters = ins.WaitingWriters
	for _, rh := range ins.Readers {
		ends := rh.Ends
		rep.Readers = append(rep.Readers, readerStatus{ID: rh.ID, Owner: rh.Owner, TTLMillis: max(ends.Sub(now), 0).Milliseconds(), Ends: &ends})
	}
	if ins.State == admin.KeyHeld {
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
// that no quorum answered, the library's OpError that describes the
// refusals; nil otherwise.
func (rep *statusReport) refusal() *redlock.OpError {
	var oe *redlock.OpError
	if errors.As(rep.err, &oe) && errors.Is(oe, redlock.ErrRefused) {
		return oe
	}
	return nil
}

// reportStatus returns the exit status of a report, as an error: nil when
// the lock is held, shared, free or split; 77 or 78 when refusals left too few
// answers; 69 when too few nodes answered otherwise. The report has said
// why.
func reportStatus(rep *statusReport) error {
	if rep.State != admin.KeyUnknown.String() {
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
	printReportOf(w, fmt.Sprintf("lock %q", rep.Key), rep, now)
}

// printReportOf is printReport with the verdict's subject, such as
// `lock "KEY"` or "slot 3".
func printReportOf(w io.Writer, subject string, rep *statusReport, now time.Time) {
	total := len(rep.Nodes)
	holding, longest := 0, int64(0)
	rw := rep.WaitingWriters > 0 // a read-write lock's readers or intents are on some node
	for _, n := range rep.Nodes {
		if n.Held || len(n.Readers) > 0 {
			holding++
		}
		if n.Held {
			longest = max(longest, n.TTLMillis)
		}
		for _, r := range n.Readers {
			longest = max(longest, r.TTLMillis)
		}
		rw = rw || len(n.Readers) > 0 || n.Intents > 0
	}
	switch rep.State {
	case "held":
		fmt.Fprintf(w, "%s: HELD by %s%s on %d of %d nodes (quorum %d); expires in %v unless extended\n",
			subject, printable(rep.Holder), ownerText(rep.Owner), rep.HeldOn, total, rep.Quorum, millisDur(rep.TTLMillis))
	case "shared":
		fmt.Fprintf(w, "%s: SHARED by %d readers, each on a quorum of the %d nodes (quorum %d); the first ends in %v unless extended\n",
			subject, len(rep.Readers), total, rep.Quorum, millisDur(rep.Readers[0].TTLMillis))
		for _, r := range rep.Readers {
			fmt.Fprintf(w, "  reader %s%s: ends in %v\n", printable(r.ID), ownerText(r.Owner), millisDur(r.TTLMillis))
		}
	case "free":
		fmt.Fprintf(w, "%s: FREE (%d of %d nodes answered, quorum %d)\n", subject, rep.Answered, total, rep.Quorum)
	case "split":
		fmt.Fprintf(w, "%s: SPLIT: %d of %d nodes hold keys, and no holder has a quorum (%d); %d nodes answered\n",
			subject, holding, total, rep.Quorum, rep.Answered)
		fmt.Fprintf(w, "  keys short of a quorum are an acquisition under way, or what a failed, lost or released one left behind; they expire on their own, within %v\n",
			millisDur(longest))
		if unanswered := total - rep.Answered; unanswered > 0 {
			fmt.Fprintf(w, "  %d nodes did not answer: a holder may have a quorum through them\n", unanswered)
		}
	default:
		fmt.Fprintf(w, "%s: UNKNOWN: only %d of %d nodes answered, and %d are needed to tell\n", subject, rep.Answered, total, rep.Quorum)
	}
	if rep.WaitingWriters > 0 {
		fmt.Fprintf(w, "writers waiting: %d (new readers wait until they have had their turn)\n", rep.WaitingWriters)
	}
	if rep.Fence > 0 {
		fmt.Fprintf(w, "fence counter: %d (the next holder's fence will be greater)\n", rep.Fence)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	rwHead := ""
	if rw {
		rwHead = "\tREADERS\tWAITING"
	}
	fmt.Fprintln(tw, "NODE\tHOLDER\tOWNER\tTTL"+rwHead+"\tFENCE\tSTATE")
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
		rwCols := ""
		switch {
		case !rw:
		case !n.Answered:
			rwCols = "\t?\t?"
		default:
			rwCols = fmt.Sprintf("\t%d\t%d", len(n.Readers), n.Intents)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s%s\t%s\t%s\n", printable(n.Node), printable(holder), printable(owner), ttl, rwCols, fence, printable(nodeText(n, now)))
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

// ownerText returns an owner label to follow a holder's ID: quoted as Go
// quotes strings, which escapes what printable escapes, in parentheses; ""
// for a holder without one.
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
