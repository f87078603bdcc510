// Package clientx is the bridge through which package redlock hands the
// internals of a Client to the other packages of this repository:
// package admin (the operators' API), the redlock command and the tests.
// Users never see it: Go's internal rule lets only packages under
// github.com/quorumlock/redlock import it.
//
// Package redlock fills in its variables when it is initialised.
package clientx

import (
	"context"
	"time"

	"github.com/quorumlock/redlock/internal/wire"
	"github.com/quorumlock/redlock/observe"
)

// A Round is what one round of an operator's request read of every node.
type Round struct {
	Start   time.Time            // just before the first request was sent
	Quorum  int                  // how many nodes must agree: N/2+1
	Results []observe.NodeResult // each node's answer, in the Client's order
	Replies []wire.Reply         // each node's decoded reply, where Results says OutcomeOK

	// Quarantine is how long a node's records for the key's slot must
	// have run for the node to vote, as the Client judges a round; 0 with
	// Options.DisableQuarantine. Set by Inspect.
	Quarantine time.Duration

	// The verdict of an Inspect round, as the Client's count decides it
	// (the nodes that count, the quorum, the quarantine); read it rather
	// than derive it again.
	Verdict Verdict

	// Err is a *redlock.OpError wrapping ErrRefused or ErrNoQuorum when
	// too few nodes did what was asked for a quorum, and nil otherwise.
	Err error
}

// A Verdict is what a quorum of the nodes that count hold for a key.
type Verdict struct {
	// Holder is the ID of the acquisition that a quorum holds the key
	// for, Owner its owner's label, HeldOn on how many nodes, and Ends
	// when fewer than a quorum will hold it (the quorum-th longest of
	// their TTLs, from the round's start); "" and zero when none does.
	Holder string
	Owner  string
	HeldOn int
	Ends   time.Time
	// Readers are the readers of a read-write lock that hold on a
	// quorum, the one ending first first.
	Readers []Reader
	// SitsOut is, for each node, how much longer it sits out its
	// quarantine for the key's slot: 0 when it votes, or when it gave no
	// records.
	SitsOut []time.Duration
}

// A Reader is a reader that holds on a quorum of nodes.
type Reader struct {
	ID    string
	Owner string
	Ends  time.Time
}

// Client is what a *redlock.Client offers this repository beyond its
// exported methods.
type Client interface {
	// Quorum returns the number of nodes that must agree: N/2+1.
	Quorum() int
	// Nodes returns the names of the nodes, in the order given to New.
	Nodes() []string
	// IntentTTL returns how long a waiting writer's intent to take a
	// lock for ttl lives on a node after the writer's latest round.
	IntentTTL(ttl time.Duration) time.Duration
	// States returns what the client last observed of each node.
	States() []observe.NodeState
	// Probe asks every node for its state and returns the refreshed
	// states.
	Probe(ctx context.Context) []observe.NodeState
	// Inspect reads what every node holds for key in one round that
	// changes nothing, reporting the operation "inspect" to the
	// Observer. Round.Err is set when fewer than a quorum answered.
	Inspect(ctx context.Context, key string) Round
	// ForceRelease deletes the lock key from every node, whatever token
	// holds it, raising the fence counters, and wakes the waiters of
	// waitKey (key itself, or a semaphore's key). It reports the
	// operation "force-release" to the Observer.
	ForceRelease(ctx context.Context, key, waitKey string) Round
}

// The bridge, set by package redlock.
var (
	// Of returns the Client behind c, a *redlock.Client.
	Of func(c any) Client
	// Semaphore returns the Client, key and number of permits of s, a
	// *redlock.Semaphore.
	Semaphore func(s any) (c Client, key string, n int)
	// CheckKey returns an error wrapping redlock.ErrInvalid if key may
	// not be locked.
	CheckKey func(key string) error
	// CheckSemaphore returns an error wrapping redlock.ErrInvalid for a
	// bad key or number of permits of a semaphore.
	CheckSemaphore func(key string, n int) error
	// CheckSlot returns an error wrapping redlock.ErrInvalid for a slot
	// outside 0..n-1.
	CheckSlot func(slot, n int) error
)

// Limits are the limits package redlock enforces (set by it).
var Limits struct {
	Keys     int // the most keys of one LockAll
	OwnerLen int // the longest owner label or election value, in bytes
	TokenLen int // the longest token Adopt takes
	Permits  int // the most permits of a Semaphore
}
