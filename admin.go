package redlock

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/quorumlock/redlock/wire"
)

// This file is what a Client offers operators, apart from what lock users
// call: States and Probe, which tell what the client knows of each node;
// Inspect, which reads a lock's state on every node; and ForceRelease,
// which removes a lock whose owner is gone; with Semaphore.Inspect and
// Semaphore.ForceRelease for a semaphore's slots. Last comes how the
// client follows its nodes' health and the quarantine, from every round.

// NodeHealth is what a Client last saw of a node.
type NodeHealth int

const (
	// NodeUnknown means the client has not heard from the node yet.
	NodeUnknown NodeHealth = iota
	// NodeHealthy means the node answered and may vote.
	NodeHealthy
	// NodeQuarantined means the node answered but restarted too recently
	// to vote; NodeState.Until says until when.
	NodeQuarantined
	// NodeUnreachable means the last request to the node got no answer:
	// it could not be sent, the connection broke, or the node did not
	// answer in time; NodeState.Err says why.
	NodeUnreachable
	// NodeRefusing means the node answered the last request with an error
	// that it will give again however often the request is sent (the
	// outcome Refused), such as WRONGPASS or READONLY; NodeState.Err says
	// which.
	NodeRefusing
	// NodeBusy means the node answered the last request that it cannot
	// serve it now, with an error that may pass: LOADING, BUSY, TRYAGAIN,
	// MASTERDOWN or CLUSTERDOWN (the outcome Failed). NodeState.Err says
	// which.
	NodeBusy
)

var healthNames = [...]string{"unknown", "healthy", "quarantined", "unreachable", "refusing", "busy"}

func (h NodeHealth) String() string {
	if h >= 0 && int(h) < len(healthNames) {
		return healthNames[h]
	}
	return fmt.Sprintf("NodeHealth(%d)", int(h))
}

// NodeState is what a Client knows of one node.
type NodeState struct {
	Node   string     // the node's Name
	Health NodeHealth // what the last answer, or its absence, showed
	Until  time.Time  // NodeQuarantined: when the node is expected to vote again
	Err    error      // NodeUnreachable, NodeRefusing, NodeBusy: the last error
	Seen   time.Time  // when the state was observed; zero if never

	// Set by Probe only.
	Age         time.Duration // how long the node's redis-server process has run
	MaxTTL      time.Duration // the largest TTL recorded on the node
	ClockOffset time.Duration // the node's clock minus this machine's, to the millisecond
}

// States returns what the client last observed of each node, in the order
// given to New. Every round updates it; Probe refreshes it on demand.
func (c *Client) States() []NodeState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]NodeState(nil), c.states...)
}

// Probe asks every node for its state, without touching any lock: whether
// it answers, how long its process has run, the largest TTL recorded on
// it, its clock, and from these whether it is in quarantine. It waits for
// every node, at most Options.ReleaseTimeout.
//
// A node keeps its records per cluster hash slot (see [wire.MarkerKey]); Probe
// reads those of the slot of the empty key. The process age is the same in
// every slot, but the largest TTL is the one used in that slot, and a slot
// that has not yet seen its node's promotion from replica to master is
// in quarantine only once a lock is tried in it.
func (c *Client) Probe(ctx context.Context) []NodeState {
	r := c.send(ctx, c.opts.ReleaseTimeout, 1, wire.Probe(), nil)
	r.drain()
	r.decide(r.count(OK) == len(c.nodes))
	c.hooks.round(ctx, "probe", "", 1, r)
	c.heard(ctx, r, 0)
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.states {
		st, res := &c.states[i], r.results[i]
		st.Age, st.MaxTTL, st.ClockOffset = 0, 0, 0
		if res.Outcome != OK {
			continue
		}
		d := r.decoded[i]
		st.Age, st.MaxTTL = d.Age, d.MaxTTL
		// The node read its clock about halfway through the request.
		mid := r.start.Add(res.Latency / 2)
		st.ClockOffset = time.UnixMilli(d.Clock).Sub(mid).Round(time.Millisecond)
	}
	return append([]NodeState(nil), c.states...)
}

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
	// KeyShared means readers of a read-write lock (RWLock) hold the key,
	// each on a quorum of nodes (Inspection.Readers), and no writer does.
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
	// (see Lock.ID), Owner its owner's label (see Options.Owner), and
	// Ends when fewer than a quorum of nodes will hold it if it is not
	// extended, estimated from the nodes' remaining TTLs; all set only
	// when State is KeyHeld.
	Holder string
	Owner  string
	Ends   time.Time
	// Readers are the readers of a read-write lock on the key that hold
	// on a quorum of nodes, the one ending first first; set when State is
	// KeyShared. WaitingWriters is the most intents of waiting writers
	// that any node holds (see RWLock).
	Readers        []ReaderHold
	WaitingWriters int
	// Fence is the largest fence counter on any node: the next owner's
	// fence will exceed it.
	Fence int64
	// Quarantine is how long a node's records for the key's cluster slot
	// (KeyView.Age) must have run for the node to vote for the key, as
	// this client judges a round: the longest of Options.Quarantine, the
	// largest TTL the client has seen, and the largest TTL any node
	// records for the slot (KeyView.MaxTTL); 0 with DisableQuarantine.
	Quarantine time.Duration
	// Nodes holds each node's answer, in the order given to New.
	Nodes []KeyView
	// Err says why State is KeyUnknown: an *OpError wrapping ErrRefused
	// when so many nodes refused the read that no quorum could answer, or
	// ErrNoQuorum when too few answered otherwise. It is nil for the
	// other states.
	Err error
}

// A KeyView is what one node holds for a key.
type KeyView struct {
	Node string // the node's Name
	// Err is why the node gave no view: it did not answer in time
	// (Outcome Failed or NoAnswer) or refused the request (Refused). The
	// other fields are zero then.
	Err     error
	Outcome Outcome
	Held    bool          // the node holds the key
	Holder  string        // Held: the ID of the acquisition that holds it
	Owner   string        // Held: its owner's label; "" if it has none
	TTL     time.Duration // Held: how long the node keeps the key
	Fence   int64         // the node's fence counter for the key; 0 if none
	Age     time.Duration // how long ago the node's records for the key's slot started; -1 if it has none
	MaxTTL  time.Duration // the largest TTL those records hold
	// The live readers of a read-write lock on the key, and the number of
	// live intents of waiting writers (see RWLock).
	Readers []ReaderView
	Intents int
}

// Inspect reads what every node holds for key, in one round that changes
// nothing: whether the key is held, by which acquisition and owner, for
// how much longer, and its fence counter; and from that the quorum's
// verdict. It waits for every node, at most Options.ReleaseTimeout. It
// never returns a holder's token, which would let its reader release the
// lock: it shows the token's ID (see Lock.ID) instead.
//
// A node that does not answer, or refuses (a key of another type gives
// WRONGTYPE), has Err set in its KeyView; Inspect returns an error only
// for an invalid key.
func (c *Client) Inspect(ctx context.Context, key string) (*Inspection, error) {
	if err := CheckKey(key); err != nil {
		return nil, &OpError{Op: "inspect", Key: key, Err: err}
	}
	ctx, ev := c.hooks.begin(ctx, "inspect", key)
	ins := c.inspect(ctx, key)
	c.hooks.end(ctx, ev, nil)
	return ins, nil
}

func (c *Client) inspect(ctx context.Context, key string) *Inspection {
	r := c.send(ctx, c.opts.ReleaseTimeout, 2, wire.InspectRW(key), nil)
	r.drain()
	r.decide(r.count(OK) == len(c.nodes))
	c.hooks.round(ctx, "inspect", key, 1, r)
	ins := &Inspection{Key: key, Nodes: c.views(r)}
	answered, holding := 0, map[string][]time.Duration{}
	for _, v := range ins.Nodes {
		if v.Err != nil {
			continue
		}
		answered++
		ins.Fence = max(ins.Fence, v.Fence)
		if v.Held {
			holding[v.Holder] = append(holding[v.Holder], v.TTL)
		}
	}
	if !c.opts.DisableQuarantine {
		ins.Quarantine = max(c.quarantineFor(0), r.maxTTL)
	}
	switch {
	case answered < c.quorum:
		e := &OpError{Op: "inspect", Key: key, Quorum: c.quorum, Rounds: 1, Nodes: r.results, Err: ErrNoQuorum}
		if r.refusedQuorum() {
			e.Err = ErrRefused
		}
		ins.State, ins.Err = KeyUnknown, e
	case len(holding) == 0:
		ins.State = KeyFree
	default:
		ins.State = KeySplit
		for id, ttls := range holding {
			if len(ttls) < c.quorum {
				continue
			}
			ins.State, ins.Holder = KeyHeld, id
			// The lock stands while a quorum holds it: until the
			// quorum-th longest of its nodes' TTLs runs out.
			slices.Sort(ttls)
			ins.Ends = r.start.Add(ttls[len(ttls)-c.quorum])
			for _, v := range ins.Nodes {
				if v.Holder == id {
					ins.Owner = v.Owner
					break
				}
			}
		}
	}
	c.inspectReaders(ins, r.start)
	return ins
}

// views returns each node's KeyView from an inspect or force round.
func (c *Client) views(r *round) []KeyView {
	out := make([]KeyView, len(c.nodes))
	for i, res := range r.results {
		v := &out[i]
		v.Node, v.Outcome = res.Node, res.Outcome
		if res.Outcome != OK {
			v.Err = res.Err
			if v.Err == nil {
				v.Err = errNoAnswer
			}
			continue
		}
		d := r.decoded[i]
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
// holds it, and reports what each node held before. It is an operator's
// tool for a lock whose owner is gone (a process that hangs, or a lock
// with a long TTL whose holder crashed); a lock's owner calls
// Lock.Release instead.
//
// It first reads every node's fence counter, as Inspect does, and then
// raises every counter to the largest, as Release does, so that the next
// owner's fence exceeds the removed owner's: resources that check fences
// refuse the removed owner's late writes. Waiters are told at once.
//
// The risk is the removed owner's: if it is still at work, it is not
// stopped, and it holds a lock that no longer excludes anyone. It learns
// of the loss at its next Extend (or AutoExtend, which then ends its
// Context), or when its validity ends; its writes are safe only where they
// check the fence.
//
// On the key of a read-write lock (RWLock), it removes the writer, every
// reader and every waiting writer's intent alike.
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
// ForceRelease returns nil once a quorum of nodes has confirmed, so that
// the lock can be obtained again; the views of the nodes that did not
// answer carry their errors, and their keys expire with their TTLs. With
// fewer than a quorum it returns an *OpError wrapping ErrRefused or
// ErrNoQuorum, with the views as far as they go. It ignores the
// cancellation of ctx once the deletion is sent, like Release, and waits
// for every node, at most Options.ReleaseTimeout.
func (c *Client) ForceRelease(ctx context.Context, key string) ([]KeyView, error) {
	if err := CheckKey(key); err != nil {
		return nil, &OpError{Op: "force-release", Key: key, Err: err}
	}
	return c.forceRelease(ctx, key, key)
}

// forceRelease is ForceRelease of the lock key key, whose releases wake
// the waiters of waitKey: the key itself, or a semaphore's.
func (c *Client) forceRelease(ctx context.Context, key, waitKey string) ([]KeyView, error) {
	ctx, ev := c.hooks.begin(ctx, "force-release", key)
	// The fence floor: the removed owner's fence is no more than the
	// counter of a node that granted it, or, where that counter has been
	// lost since, than that node's clock (see wire/lua/acquire.lua). The
	// counters it raises live as long as the largest TTL any node records
	// would make them.
	floor, maxTTL := c.fenceFloor(ctx, key)
	call := wire.Force(key, floor, c.fenceTTL(maxTTL), waitKey)
	if key == waitKey { // not a semaphore's slot: an RWLock's readers go too
		call = wire.ForceRW(key, floor, c.fenceTTL(maxTTL), waitKey)
	}
	r := c.send(context.WithoutCancel(ctx), c.opts.ReleaseTimeout, 2, call, nil)
	r.drain()
	ok := r.count(OK) >= c.quorum
	r.decide(ok)
	c.hooks.round(ctx, "force-release", key, 1, r)
	c.heard(ctx, r, 0)
	views := c.views(r)
	var err error
	if !ok {
		e := &OpError{Op: "force-release", Key: key, Quorum: c.quorum, Rounds: 1, Nodes: r.results, Err: ErrNoQuorum}
		if r.count(Refused) > len(c.nodes)-c.quorum {
			e.Err = ErrRefused
		}
		err = e
	}
	c.hooks.end(ctx, ev, err)
	return views, err
}

// fenceFloor reads every node's fence counter and clock for key, and
// returns the largest of them, and the largest TTL the nodes record.
func (c *Client) fenceFloor(ctx context.Context, key string) (floor int64, maxTTL time.Duration) {
	r := c.send(ctx, c.opts.ReleaseTimeout, 2, wire.Inspect(key), nil)
	r.drain()
	for i, res := range r.results {
		if res.Outcome == OK {
			d := r.decoded[i]
			floor = max(floor, d.Fence, d.Clock)
			maxTTL = max(maxTTL, d.MaxTTL, d.TTL)
		}
	}
	return floor, maxTTL
}

// Inspect reads every slot of the semaphore as Client.Inspect reads a
// lock, all slots at once, and changes nothing. It returns one Inspection
// per slot, slot 0 first, each with Key set to the slot's key (wire.PermitKey):
// a slot held on a quorum is a permit in use, whose Holder is the permit's
// ID (Permit.ID) and Owner its owner's label. It returns an error only for
// an invalid key or n; a node that does not answer has Err set in its
// KeyView, slot by slot.
func (s *Semaphore) Inspect(ctx context.Context) ([]*Inspection, error) {
	if err := checkSemaphore(s.key, s.n); err != nil {
		return nil, &OpError{Op: "inspect", Key: s.key, Err: err}
	}
	out := make([]*Inspection, s.n)
	var wg sync.WaitGroup
	wg.Add(s.n)
	for i := range s.n {
		go func() {
			defer wg.Done()
			key := wire.PermitKey(s.key, i)
			ctx, ev := s.c.hooks.begin(ctx, "inspect", key)
			out[i] = s.c.inspect(ctx, key)
			s.c.hooks.end(ctx, ev, nil)
		}()
	}
	wg.Wait()
	return out, nil
}

// ForceRelease deletes the permit in slot (from 0 to n-1) from every
// node, whatever token holds it, and wakes the semaphore's waiters: it is
// Client.ForceRelease for a permit whose holder is gone, with the same
// fence floor, risk and results. Inspect shows the slots and who holds
// them.
func (s *Semaphore) ForceRelease(ctx context.Context, slot int) ([]KeyView, error) {
	err := checkSemaphore(s.key, s.n)
	if err == nil {
		err = checkSlot(slot, s.n)
	}
	if err != nil {
		return nil, &OpError{Op: "force-release", Key: s.key, Err: err}
	}
	return s.c.forceRelease(ctx, wire.PermitKey(s.key, slot), s.key)
}
