package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
)

func newStatusCmd(nf *nodeFlags) *cobra.Command {
	sf := &reportFlags{}
	cmd := &cobra.Command{
		Use:   "status [flags] KEY",
		Short: "Show who holds a lock, node by node",
		Long: `Status reads the lock KEY on every node and shows, for each one, whether a
holder's key is there, how long it has left to live, the lock's fence counter
and the node's state: healthy, quarantined (restarted too recently to vote),
unreachable, or refusing (it answers with an error that retrying cannot
change, such as a wrong password). Overall, the lock is held when one holder's key is on a
quorum of the nodes, and free when no holder can have a quorum.

A holder is shown as a short fingerprint of its random token, the same on
every node that holds it; the token itself is not shown. The fence counter
is the last fencing token the node handed out for KEY. Status changes no
lock; like every lock client, it may write a node's restart marker.

Exit status: 0 when the lock is held or free, 69 when too few nodes answered
to tell, 64 for usage errors.`,
		Example: `  redlock status nightly-report
  redlock status --nodes redis://a:6379,redis://b:6379,redis://c:6379 deploy
  redlock status --json deploy | jq .state`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("status takes exactly one KEY, got %d arguments", len(args))
			}
			return nil
		},
		ValidArgsFunction: noArgsCompletion,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runStatus(cmd.Context(), cmd.OutOrStdout(), nf, sf, args[0])
		},
	}
	sf.register(cmd)
	return cmd
}

// A nodeStatus is what status found on one node.
type nodeStatus struct {
	Node             string     `json:"node"`
	State            string     `json:"state"` // healthy, quarantined, unreachable, refusing
	QuarantinedUntil *time.Time `json:"quarantined_until,omitempty"`
	Error            string     `json:"error,omitempty"`
	Answered         bool       `json:"answered"`         // the lock's keys could be read
	Held             bool       `json:"held"`             // a holder's key is there
	Holder           string     `json:"holder,omitempty"` // the fingerprint of its token
	TTLMillis        int64      `json:"ttl_ms,omitempty"` // the key's remaining time to live
	Fence            int64      `json:"fence,omitempty"`  // the fence counter
	ReadError        string     `json:"read_error,omitempty"`
}

// A statusReport is the whole output of status.
type statusReport struct {
	Key       string       `json:"key"`
	State     string       `json:"state"` // held, free, unknown
	Quorum    int          `json:"quorum"`
	Holder    string       `json:"holder,omitempty"`
	HeldOn    int          `json:"held_on,omitempty"` // nodes holding the holder's key
	TTLMillis int64        `json:"ttl_ms,omitempty"`  // until fewer than a quorum hold it
	Fence     int64        `json:"fence,omitempty"`   // the largest fence counter
	Nodes     []nodeStatus `json:"nodes"`
}

func checkKey(key string) error {
	switch {
	case key == "":
		return usagef("the lock key is empty")
	case key == "redlock:node" || strings.HasPrefix(key, "redlock:node:") || strings.HasPrefix(key, "redlock:fence:"):
		return usagef("the key %q is reserved for the lock client's own records", key)
	}
	return nil
}

func runStatus(ctx context.Context, w io.Writer, nf *nodeFlags, sf *reportFlags, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	ns, c, err := sf.connect(nf)
	if err != nil {
		return err
	}
	defer ns.close()
	rep := readStatus(ctx, c, ns, key, sf.timeout)
	if err := sf.write(w, rep, func() { printStatus(w, rep) }); err != nil {
		return err
	}
	if rep.State == "unknown" {
		return silentExit(exitUnavailable)
	}
	return nil
}

// readStatus reads the lock's keys on every node, and probes the nodes.
func readStatus(ctx context.Context, c *redlock.Client, ns *nodeSet, key string, timeout time.Duration) *statusReport {
	rep := &statusReport{Key: key, Quorum: c.Quorum(), Nodes: make([]nodeStatus, len(ns.urls))}
	var states []redlock.NodeState
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		states = c.Probe(ctx)
	}()
	for i, rc := range ns.cmds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			readNode(ctx, rc, key, timeout, &rep.Nodes[i])
		}()
	}
	wg.Wait()
	for i, s := range states {
		n := &rep.Nodes[i]
		n.Node = ns.names[i]
		n.State = s.Health.String()
		switch s.Health {
		case redlock.NodeQuarantined:
			until := s.Until
			n.QuarantinedUntil = &until
		case redlock.NodeUnreachable, redlock.NodeRefusing:
			n.Error = describeErr(s.Err)
		}
	}
	summarize(rep)
	return rep
}

// readNode reads the lock key, its time to live and its fence counter on
// one node.
func readNode(ctx context.Context, rc redis.Cmdable, key string, timeout time.Duration, n *nodeStatus) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var get, fence *redis.StringCmd
	var pttl *redis.DurationCmd
	_, err := rc.Pipelined(ctx, func(p redis.Pipeliner) error {
		get = p.Get(ctx, key)
		pttl = p.PTTL(ctx, key)
		fence = p.Get(ctx, redlock.FenceKey(key))
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		n.ReadError = err.Error()
		return
	}
	n.Answered = true
	if tok, err := get.Result(); err == nil {
		n.Held = true
		n.Holder = fingerprint(tok)
		if d, err := pttl.Result(); err == nil && d > 0 {
			n.TTLMillis = d.Milliseconds()
		}
	}
	if f, err := fence.Int64(); err == nil {
		n.Fence = f
	}
}

// fingerprint returns a short name for a token that does not reveal it.
func fingerprint(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:4])
}

// summarize decides whether the lock is held, free or unknown.
func summarize(rep *statusReport) {
	answered := 0
	holders := map[string][]int64{} // fingerprint: the TTLs of its keys
	for _, n := range rep.Nodes {
		rep.Fence = max(rep.Fence, n.Fence)
		if !n.Answered {
			continue
		}
		answered++
		if n.Held {
			holders[n.Holder] = append(holders[n.Holder], n.TTLMillis)
		}
	}
	best, most := "", 0
	for h, ttls := range holders {
		if len(ttls) > most || len(ttls) == most && h < best {
			best, most = h, len(ttls)
		}
	}
	unanswered := len(rep.Nodes) - answered
	switch {
	case most >= rep.Quorum:
		rep.State, rep.Holder, rep.HeldOn = "held", best, most
		ttls := holders[best]
		slices.Sort(ttls)
		slices.Reverse(ttls)
		rep.TTLMillis = ttls[rep.Quorum-1] // a quorum holds it until then
	case most+unanswered < rep.Quorum:
		rep.State = "free"
	default:
		rep.State = "unknown"
	}
}

func printStatus(w io.Writer, rep *statusReport) {
	answered := 0
	for _, n := range rep.Nodes {
		if n.Answered {
			answered++
		}
	}
	switch rep.State {
	case "held":
		fmt.Fprintf(w, "lock %q: HELD by %s on %d of %d nodes (quorum %d); expires in %v unless extended\n",
			rep.Key, rep.Holder, rep.HeldOn, len(rep.Nodes), rep.Quorum, roundDur(time.Duration(rep.TTLMillis)*time.Millisecond))
	case "free":
		partial := 0
		for _, n := range rep.Nodes {
			if n.Held {
				partial++
			}
		}
		fmt.Fprintf(w, "lock %q: FREE (%d of %d nodes answered, quorum %d)\n", rep.Key, answered, len(rep.Nodes), rep.Quorum)
		if partial > 0 {
			fmt.Fprintf(w, "  %d node(s) hold keys short of a quorum: an acquisition under way, or the rest of a lost lock; they expire on their own\n", partial)
		}
	default:
		fmt.Fprintf(w, "lock %q: UNKNOWN: only %d of %d nodes answered, and %d are needed to tell\n", rep.Key, answered, len(rep.Nodes), rep.Quorum)
	}
	if rep.Fence > 0 {
		fmt.Fprintf(w, "fence counter: %d (the next holder's fence will be greater)\n", rep.Fence)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tHOLDER\tTTL\tFENCE\tSTATE")
	now := time.Now()
	for _, n := range rep.Nodes {
		holder, ttl, fence := "-", "-", "-"
		switch {
		case !n.Answered:
			holder, ttl, fence = "?", "?", "?"
		case n.Held:
			holder = n.Holder
			ttl = roundDur(time.Duration(n.TTLMillis) * time.Millisecond).String()
		default:
			holder = "none"
		}
		if n.Fence > 0 {
			fence = fmt.Sprint(n.Fence)
		}
		state := n.State
		switch {
		case n.QuarantinedUntil != nil:
			state = fmt.Sprintf("quarantined until %s (%v more)", n.QuarantinedUntil.Format("15:04:05"), roundDur(n.QuarantinedUntil.Sub(now)))
		case n.Error != "":
			state += ": " + n.Error
		case n.ReadError != "":
			state += "; reading the lock failed: " + n.ReadError
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", n.Node, holder, ttl, fence, state)
	}
	tw.Flush()
}
