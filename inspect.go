package redlock

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// This file is what a Client offers operators: Inspect, which reads a
// lock's state on every node, and ForceRelease, which removes a lock whose
// owner is gone.

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
)

var keyStateNames = [...]string{"unknown", "free", "held", "split"}

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
	// Fence is the largest fence counter on any node: the next owner's
	// fence will exceed it.
	Fence int64
	// Nodes holds each node's answer, in the order given to New.
	Nodes []KeyView
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
	if err := checkKey(key); err != nil {
		return nil, &OpError{Op: "inspect", Key: key, Err: err}
	}
	ctx, ev := c.begin(ctx, "inspect", key)
	ins := c.inspect(ctx, key)
	c.end(ctx, ev, nil)
	return ins, nil
}

func (c *Client) inspect(ctx context.Context, key string) *Inspection {
	r := c.send(ctx, c.opts.ReleaseTimeout, 2, inspectScript, decodeInspect,
		[]string{key, FenceKey(key), MarkerKey(key)}, nil, nil)
	r.drain()
	r.decide(r.count(OK) == len(c.nodes))
	c.report(ctx, "inspect", key, 1, r)
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
	switch {
	case answered < c.quorum:
		ins.State = KeyUnknown
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
		v.Held, v.Holder, v.Owner, v.TTL, v.Fence = d.holder != "", d.holder, d.owner, d.ttl, d.fence
		v.Age, v.MaxTTL = d.age, d.maxTTL
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
	if err := checkKey(key); err != nil {
		return nil, &OpError{Op: "force-release", Key: key, Err: err}
	}
	return c.forceRelease(ctx, key, key)
}

// forceRelease is ForceRelease of the lock key key, whose releases wake
// the waiters of waitKey: the key itself, or a semaphore's.
func (c *Client) forceRelease(ctx context.Context, key, waitKey string) ([]KeyView, error) {
	ctx, ev := c.begin(ctx, "force-release", key)
	// The fence floor: the removed owner's fence is no more than the
	// counter of a node that granted it, or, where that counter has been
	// lost since, than that node's clock (see lua/acquire.lua). The
	// counters it raises live as long as the largest TTL any node records
	// would make them.
	floor, maxTTL := c.fenceFloor(ctx, key)
	r := c.send(context.WithoutCancel(ctx), c.opts.ReleaseTimeout, 2, forceScript, decodeForce,
		[]string{key, FenceKey(key)}, []string{strconv.FormatInt(floor, 10), msString(c.fenceTTL(maxTTL)), waitKey}, nil)
	r.drain()
	ok := r.count(OK) >= c.quorum
	r.decide(ok)
	c.report(ctx, "force-release", key, 1, r)
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
	c.end(ctx, ev, err)
	return views, err
}

// fenceFloor reads every node's fence counter and clock for key, and
// returns the largest of them, and the largest TTL the nodes record.
func (c *Client) fenceFloor(ctx context.Context, key string) (floor int64, maxTTL time.Duration) {
	r := c.send(ctx, c.opts.ReleaseTimeout, 2, inspectScript, decodeInspect,
		[]string{key, FenceKey(key), MarkerKey(key)}, nil, nil)
	r.drain()
	for i, res := range r.results {
		if res.Outcome == OK {
			d := r.decoded[i]
			floor = max(floor, d.fence, d.clock)
			maxTTL = max(maxTTL, d.maxTTL, d.ttl)
		}
	}
	return floor, maxTTL
}

// ID returns a short name of the acquisition, the first 12 hex digits of
// the SHA-1 of its token: what Inspect and ForceRelease show as the holder.
// It identifies the acquisition in logs and tools without giving away the
// token, which lets its bearer release the lock.
func (l *Lock) ID() string { return tokenID(l.token) }

// tokenID is holder in lua/holder.lua: the ID of the token in a lock key's
// value, which is the token, a space and the owner's label.
func tokenID(value string) string {
	token, _, _ := strings.Cut(value, " ")
	sum := sha1.Sum([]byte(token))
	return hex.EncodeToString(sum[:6])
}
