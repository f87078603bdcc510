package admin

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/clientx"
	"github.com/quorumlock/redlock/internal/wire"
	"github.com/quorumlock/redlock/observe"
)

// A Client is the operators' view of a redlock.Client: it reads what the
// nodes hold and what the client knows of them, and removes locks whose
// owners are gone. It shares the redlock.Client's nodes, options and
// Observer, and is safe for concurrent use.
type Client struct {
	c clientx.Client
}

// New returns the operators' Client of c. It does not talk to any node.
func New(c *redlock.Client) *Client {
	return &Client{c: clientx.Of(c)}
}

// Quorum returns the number of nodes that must agree: N/2+1.
func (a *Client) Quorum() int { return a.c.Quorum() }

// States returns what the client last observed of each node, in the order
// given to redlock.New. It sends nothing: every round of the client updates
// the states, and Probe refreshes them on demand.
func (a *Client) States() []observe.NodeState { return a.c.States() }

// Probe asks every node for its state and returns it, in the order given
// to redlock.New; States shows it afterwards. It touches no lock, and waits
// for every node, at most redlock.Options.ReleaseTimeout.
//
// A node's state says whether it answers, how long its process has run
// (Age), the largest TTL recorded on it (MaxTTL), its clock (ClockOffset),
// and from these whether it is in quarantine.
//
// A node keeps its records per cluster hash slot, in the slot's node
// marker; Probe reads those of the slot of the empty key. The process age is the
// same in every slot, but the largest TTL is the one used in that slot,
// and a slot that has not yet seen its node's promotion from replica to
// master is in quarantine only once a lock is tried in it.
func (a *Client) Probe(ctx context.Context) []observe.NodeState { return a.c.Probe(ctx) }

// KeyState is the quorum's verdict on a key, as Inspect reads it.
type KeyState int

const (
	// KeyUnknown means too few nodes answered to tell.
	KeyUnknown KeyState = iota
	// KeyFree means no node that answered holds the key, and a quorum
	// answered.
	KeyFree
	// KeyHeld means one acquisition holds the key on a quorum of nodes.
	KeyHeld
	// KeySplit means some nodes hold the key, but no acquisition holds it
	// on a quorum: what a failed or expiring acquisition leaves for a
	// moment, or acquisitions that contend. The keys expire with their
	// TTLs.
	KeySplit
	// KeyShared means readers of a read-write lock (redlock.RWLock) hold
	// the key, each on a quorum of nodes (Inspection.Readers), and no
	// writer does.
	KeyShared
)

var keyStateNames = [...]string{"unknown", "free", "held", "split", "shared"}

func (s KeyState) String() string {
	if s >= 0 && int(s) < len(keyStateNames) {
		return keyStateNames[s]
	}
	return fmt.Sprintf("KeyState(%d)", int(s))
}

// An Inspection is what Inspect read of a key on every node.
type Inspection struct {
	Key   string
	State KeyState
	// Holder is the ID of the acquisition that holds the key on a quorum
	// (see redlock.Lock.ID), Owner its owner's label (see
	// redlock.Options.Owner), and Ends when fewer than a quorum of nodes
	// will hold it if it is not extended, estimated from the nodes'
	// remaining TTLs; all set only when State is KeyHeld.
	Holder string
	Owner  string
	Ends   time.Time
	// HeldOn is on how many nodes the holder holds the key; set when
	// State is KeyHeld.
	HeldOn int
	// Readers are the readers of a read-write lock on the key that hold
	// on a quorum of nodes, the one ending first first; set when State is
	// KeyShared. WaitingWriters is the most intents of waiting writers
	// that any node holds (see redlock.RWLock).
	Readers        []ReaderHold
	WaitingWriters int
	// Fence is the largest fence counter on any node: the next owner's
	// fence will exceed it.
	Fence int64
	// Quarantine is how long a node's records for the key's cluster slot
	// (KeyView.Age) must have run for the node to vote for the key, as
	// this client judges a round: the longest of
	// redlock.Options.Quarantine, the largest TTL the client has seen, and
	// the largest TTL any node records for the slot (KeyView.MaxTTL); 0
	// with redlock.Options.DisableQuarantine.
	Quarantine time.Duration
	// Nodes holds each node's answer, in the order given to redlock.New.
	Nodes []KeyView
	// Err says why State is KeyUnknown: a *redlock.OpError wrapping
	// redlock.ErrRefused when so many nodes refused the read that no quorum
	// could answer, or redlock.ErrNoQuorum when too few answered otherwise.
	// It is nil for the other states.
	Err error
}

// A KeyView is what one node holds for a key.
type KeyView struct {
	Node string // the node's Name
	// Err is why the node gave no view: it did not answer in time
	// (observe.OutcomeFailed or OutcomeNoAnswer) or refused the request
	// (OutcomeRefused). The other fields are zero then.
	Err     error
	Outcome observe.Outcome
	Held    bool          // the node holds the key
	Holder  string        // Held: the ID of the acquisition that holds it
	Owner   string        // Held: its owner's label; "" if it has none
	TTL     time.Duration // Held: how long the node keeps the key
	Fence   int64         // the node's fence counter for the key; 0 if none
	// Age is how long ago the node's records for the key's slot started;
	// -1 if it has none. MaxTTL is the largest TTL those records hold.
	Age    time.Duration
	MaxTTL time.Duration
	// SitsOut is how much longer the node sits out its quarantine for
	// the key's slot, as the client judges it: 0 when it votes.
	SitsOut time.Duration
	// The live readers of a read-write lock on the key, and the number of
	// live intents of waiting writers (see redlock.RWLock).
	Readers []ReaderView
	Intents int
}

// A ReaderView is one live reader of a read-write lock on one node, as
// Inspect shows it: never its token.
type ReaderView struct {
	ID    string        // the reader's redlock.Lock.ID
	Owner string        // its owner's label; "" if it has none
	TTL   time.Duration // how long the node keeps it
}

// A ReaderHold is a reader of a read-write lock that holds on a quorum of
// nodes, as Inspect shows it.
type ReaderHold struct {
	ID    string    // the reader's redlock.Lock.ID
	Owner string    // its owner's label
	Ends  time.Time // when fewer than a quorum will hold it, unless extended
}

// Inspect reads what every node holds for key and returns the quorum's
// verdict, changing nothing. It names a holder by its ID (redlock.Lock.ID),
// never by its token, which would let the reader release the lock.
//
// Inspect makes one round and waits for every node, at most
// redlock.Options.ReleaseTimeout. Each node's KeyView says whether it holds
// the key, for which acquisition and owner, for how much longer, and its
// fence counter. A node that does not answer, or refuses (a key of another
// type gives WRONGTYPE), has Err set in its KeyView; too few answers make
// the State KeyUnknown.
//
// Inspect returns an error only for an invalid key: a *redlock.OpError
// wrapping redlock.ErrInvalid, before anything is sent.
func (a *Client) Inspect(ctx context.Context, key string) (*Inspection, error) {
	if err := clientx.CheckKey(key); err != nil {
		return nil, &redlock.OpError{Op: "inspect", Key: key, Err: err}
	}
	return inspect(a.c.Inspect(ctx, key), key), nil
}

// inspect returns the Inspection of key from the round r that read it,
// as the client's count decided it (r.Verdict).
func inspect(r clientx.Round, key string) *Inspection {
	ins := &Inspection{Key: key, Nodes: views(r), Quarantine: r.Quarantine}
	held := false
	for i := range ins.Nodes {
		v := &ins.Nodes[i]
		if i < len(r.Verdict.SitsOut) {
			v.SitsOut = r.Verdict.SitsOut[i]
		}
		if v.Err != nil {
			continue
		}
		ins.Fence = max(ins.Fence, v.Fence)
		ins.WaitingWriters = max(ins.WaitingWriters, v.Intents)
		held = held || v.Held || len(v.Readers) > 0
	}
	vd := r.Verdict
	switch {
	case r.Err != nil: // fewer than a quorum answered
		ins.State, ins.Err = KeyUnknown, r.Err
	case vd.Holder != "":
		ins.State, ins.Holder, ins.Owner, ins.Ends, ins.HeldOn = KeyHeld, vd.Holder, vd.Owner, vd.Ends, vd.HeldOn
	case len(vd.Readers) > 0:
		ins.State = KeyShared
		for _, rd := range vd.Readers {
			ins.Readers = append(ins.Readers, ReaderHold(rd))
		}
	case held:
		ins.State = KeySplit
	default:
		ins.State = KeyFree
	}
	return ins
}

// views returns each node's KeyView from an inspect or force round.
func views(r clientx.Round) []KeyView {
	out := make([]KeyView, len(r.Results))
	for i, res := range r.Results {
		v := &out[i]
		v.Node, v.Outcome = res.Node, res.Outcome
		if res.Outcome != observe.OutcomeOK {
			v.Err = res.Err // the client's count gives every node that did not answer an error
			continue
		}
		d := r.Replies[i]
		v.Held, v.Holder, v.Owner, v.TTL, v.Fence = d.Holder != "", d.Holder, d.Owner, d.TTL, d.Fence
		v.Age, v.MaxTTL = d.Age, d.MaxTTL
		if d.RW != nil {
			for _, rv := range d.RW.Readers {
				v.Readers = append(v.Readers, ReaderView(rv))
			}
			v.Intents = d.RW.Intents
		}
	}
	return out
}

// ForceRelease deletes the lock on key from every node, whatever token
// holds it, and raises the key's fence counters so that the next owner's
// fence exceeds the removed owner's. It returns what each node held
// before, and nil once a quorum of nodes has confirmed. It is for a lock
// whose owner is gone (a process that hangs, or a crashed holder of a long
// TTL); an owner calls redlock.Lock.Release instead.
//
// The removed owner is not stopped: if it is still at work, it holds a
// lock that no longer excludes anyone. It learns of the loss at its next
// Extend (or AutoExtend, which then ends its Context), or when its
// validity ends; its writes are safe only where they check the fence.
//
// ForceRelease first reads every node's fence counter, as Inspect does,
// and then raises every counter to the largest (the floor), as Release
// does: resources that check fences refuse the removed owner's late
// writes. Waiters are
// told at once. On the key of a read-write lock (redlock.RWLock), it
// removes the writer, every reader and every waiting writer's intent
// alike.
//
// What is removed on a node is whatever holds the key when the deletion
// reaches it, unless the key's grant there came with a fence above the
// floor: an owner that obtained the lock after the deletion passed the
// node is never removed, even if the deletion is sent again (a client
// library retries a request whose answer it lost). An owner that obtained
// the lock between the read and the deletion is removed where its fence
// did not exceed the floor: on nodes whose clocks are behind the clock or
// counter that set the floor.
//
// The views of the nodes that did not answer carry their errors, and
// their keys expire with their TTLs. With fewer than a quorum ForceRelease
// returns a *redlock.OpError wrapping redlock.ErrRefused or
// redlock.ErrNoQuorum, with the views as far as they go; for an invalid
// key, one wrapping redlock.ErrInvalid, before anything is sent. It ignores
// the cancellation of ctx once the deletion is sent, like Release, and
// waits for every node, at most redlock.Options.ReleaseTimeout.
func (a *Client) ForceRelease(ctx context.Context, key string) ([]KeyView, error) {
	if err := clientx.CheckKey(key); err != nil {
		return nil, &redlock.OpError{Op: "force-release", Key: key, Err: err}
	}
	r := a.c.ForceRelease(ctx, key, key)
	return views(r), r.Err
}

// InspectSemaphore reads every slot of the semaphore s, as Inspect reads a
// lock, and returns one Inspection per slot, slot 0 first. It changes
// nothing.
//
// Each Inspection's Key is the slot's own key. A slot held on
// a quorum is a permit in use: its Holder is the permit's ID
// (redlock.Permit.ID) and its Owner the permit's owner's label. The slots
// are read at once, through the redlock.Client that made s, even if it is
// not a's. A node that does not answer has Err set in its KeyView, slot by
// slot; InspectSemaphore returns an error (wrapping redlock.ErrInvalid)
// only for an invalid key or number of permits.
func (a *Client) InspectSemaphore(ctx context.Context, s *redlock.Semaphore) ([]*Inspection, error) {
	c, key, n := clientx.Semaphore(s)
	if err := clientx.CheckSemaphore(key, n); err != nil {
		return nil, &redlock.OpError{Op: "inspect", Key: key, Err: err}
	}
	out := make([]*Inspection, n)
	var wg sync.WaitGroup
	wg.Add(n)
	for i := range n {
		go func() {
			defer wg.Done()
			slot := wire.PermitKey(key, i)
			out[i] = inspect(c.Inspect(ctx, slot), slot)
		}()
	}
	wg.Wait()
	return out, nil
}

// ForceReleasePermit deletes the permit in slot (from 0 to n-1) of the
// semaphore s from every node, whatever token holds it, and wakes the
// semaphore's waiters. It is ForceRelease for a permit whose holder is
// gone, with the same fence floor, risk and results; InspectSemaphore
// shows the slots and who holds them.
//
// A slot out of range, or an invalid semaphore, gives a *redlock.OpError
// wrapping redlock.ErrInvalid before anything is sent.
func (a *Client) ForceReleasePermit(ctx context.Context, s *redlock.Semaphore, slot int) ([]KeyView, error) {
	c, key, n := clientx.Semaphore(s)
	err := clientx.CheckSemaphore(key, n)
	if err == nil {
		err = clientx.CheckSlot(slot, n)
	}
	if err != nil {
		return nil, &redlock.OpError{Op: "force-release", Key: key, Err: err}
	}
	r := c.ForceRelease(ctx, wire.PermitKey(key, slot), key)
	return views(r), r.Err
}
