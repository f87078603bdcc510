package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/admin"
	"github.com/quorumlock/redlock/observe"
)

// holderTimeout bounds the read of who holds a lock, for a message.
const holderTimeout = 2 * time.Second

// heldBy names the holder of the lock key, as inspect shows it, to follow
// "held by": "another owner, ID (OWNER)" with the owner's label quoted, or
// "another owner" when no holder has the key on a quorum of the nodes (an
// acquisition under way) or the nodes could not tell in time.
func heldBy(c *redlock.Client, key string) string {
	ctx, cancel := context.WithTimeout(context.Background(), holderTimeout)
	defer cancel()
	ins, err := admin.New(c).Inspect(ctx, key)
	if err != nil || ins.State != admin.KeyHeld {
		return "another owner"
	}
	return fmt.Sprintf("another owner, %s%s", ins.Holder, ownerText(ins.Owner))
}

// missingProbeTimeout bounds the probe of missingText: a node that has
// not answered by then counts as missing. Nodes that are up, refuse, or
// have no server on their port answer well within it.
const missingProbeTimeout = 500 * time.Millisecond

// missingText probes the nodes and returns, when some cannot be reached
// or refuse for good, one line that names them and says how many more
// failures the others tolerate; "" when every node answers. A lock
// obtained without them is as safe, but a quorum is closer to being lost.
// The client's States would not do: a round ends at its quorum, before
// the slowest nodes have told their state.
func missingText(c *redlock.Client) string {
	ctx, cancel := context.WithTimeout(context.Background(), missingProbeTimeout)
	defer cancel()
	states := admin.New(c).Probe(ctx)
	var missing []string
	for _, s := range states {
		if s.Health == observe.NodeUnreachable || s.Health == observe.NodeRefusing {
			missing = append(missing, s.Node+" "+stateText(s, time.Now()))
		}
	}
	if len(missing) == 0 {
		return ""
	}
	ok := len(states) - len(missing)
	return fmt.Sprintf("running with %d of %d nodes, %s: %s", ok, len(states),
		tolerates(ok-admin.New(c).Quorum()), strings.Join(missing, "; "))
}

// tolerates says how many more node failures a quorum survives, given
// spare, the nodes beyond the quorum.
func tolerates(spare int) string {
	return "which tolerates " + failures(spare, "further ")
}

// failures says k node failures, with adj before "node": "no further node
// failure", "one node failure", "2 node failures".
func failures(k int, adj string) string {
	switch {
	case k <= 0:
		return "no " + adj + "node failure"
	case k == 1:
		return "one " + adj + "node failure"
	}
	return fmt.Sprintf("%d %snode failures", k, adj)
}

// toleranceText says, for doctor's verdict, how many node failures a set of
// n nodes with the given quorum tolerates, and, when fewer than n are
// healthy, how many more it tolerates now.
func toleranceText(n, healthy, quorum int) string {
	text := fmt.Sprintf("%d node(s) tolerate %s", n, failures(n-quorum, ""))
	if n < 3 {
		text += " (3 independent masters tolerate one, 5 tolerate two)"
	}
	if healthy < n && healthy >= quorum {
		text += ", " + failures(healthy-quorum, "further ") + " now"
	}
	return text
}
