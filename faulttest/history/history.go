package history

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

// Mono is a reading of a history's clock: the time since the history
// began, measured on the monotonic clock of the test process. Every client
// of a scenario runs in that process, so all of them share the clock. In
// JSON it is a number of milliseconds with microsecond precision.
type Mono time.Duration

// String formats m as a duration since the history began.
func (m Mono) String() string { return "+" + time.Duration(m).String() }

// MarshalJSON writes m as milliseconds.
func (m Mono) MarshalJSON() ([]byte, error) {
	return strconv.AppendFloat(nil, float64(time.Duration(m).Microseconds())/1000, 'f', 3, 64), nil
}

// UnmarshalJSON reads milliseconds.
func (m *Mono) UnmarshalJSON(b []byte) error {
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("history: bad time %s: %w", b, err)
	}
	*m = Mono(time.Duration(f*1000) * time.Microsecond)
	return nil
}

// A History is everything one scenario run did and saw: each acquisition
// with what became of it, the faults injected, the locks an operator
// removed, the writes to a fenced resource and the state of the nodes once
// the run was over. Check judges it.
//
// The methods that record are safe for concurrent use; the exported fields
// are read once recording is over.
type History struct {
	Scenario string    `json:"scenario"`
	Nodes    int       `json:"nodes"`  // the number of nodes
	Quorum   int       `json:"quorum"` // the number of nodes that must agree
	Ops      []*Op     `json:"ops"`
	Faults   []Fault   `json:"faults"`
	Removals []Removal `json:"removals,omitempty"`
	Writes   []Write   `json:"writes,omitempty"`
	Final    []Sample  `json:"final,omitempty"` // every lock key on every node at quiescence
	// RemovalsUnfenced says that the history's removals need not meet
	// assumption A5 (the removal's floor covers the removed holder's
	// fence: see SAFETY.md), so that fences are not judged across them.
	// The simulator sets it: its removals race acquisitions and lose
	// messages, and it does not know their floors.
	RemovalsUnfenced bool `json:"removals_unfenced,omitempty"`

	// Mu guards the history while it is recorded: hold it to change an Op
	// that AddOp has already added.
	Mu      sync.Mutex `json:"-"`
	epoch   time.Time
	ids     int // the last Op.ID handed out
	batches int // the last Sample.Batch handed out
}

// NewHistory starts a history whose clock reads zero now.
func NewHistory(scenario string, nodes int) *History {
	return &History{Scenario: scenario, Nodes: nodes, Quorum: nodes/2 + 1, epoch: time.Now()}
}

// Now reads the history's clock.
func (h *History) Now() Mono { return h.At(time.Now()) }

// At converts t, which must carry a monotonic clock reading (as time.Now
// and redlock's deadlines do), to the history's clock.
func (h *History) At(t time.Time) Mono { return Mono(t.Sub(h.epoch)) }

// Time converts m back to a time.Time.
func (h *History) Time(m Mono) time.Time { return h.epoch.Add(time.Duration(m)) }

// NextID returns a fresh acquisition ID.
func (h *History) NextID() int {
	h.Mu.Lock()
	defer h.Mu.Unlock()
	h.ids++
	return h.ids
}

// NextBatch returns a fresh Sample.Batch.
func (h *History) NextBatch() int {
	h.Mu.Lock()
	defer h.Mu.Unlock()
	h.batches++
	return h.batches
}

// AddOp records a finished acquisition.
func (h *History) AddOp(op *Op) {
	h.Mu.Lock()
	defer h.Mu.Unlock()
	h.Ops = append(h.Ops, op)
}

// AddFault records a fault injected now, or healed; see Fault.
func (h *History) AddFault(kind FaultKind, node int, client, detail string) {
	h.Mu.Lock()
	defer h.Mu.Unlock()
	h.Faults = append(h.Faults, Fault{At: h.Now(), Kind: kind, Node: node, Client: client, Detail: detail})
}

// AddRemoval records an operator's removal of a lock.
func (h *History) AddRemoval(r Removal) {
	h.Mu.Lock()
	defer h.Mu.Unlock()
	h.Removals = append(h.Removals, r)
}

// AddWrite records a write to a fenced resource.
func (h *History) AddWrite(w Write) {
	h.Mu.Lock()
	defer h.Mu.Unlock()
	h.Writes = append(h.Writes, w)
}

// Save writes the history as indented JSON to path.
func (h *History) Save(path string) error {
	h.Mu.Lock()
	b, err := json.MarshalIndent(h, "", "  ")
	h.Mu.Unlock()
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("history: %w", err)
	}
	return nil
}

// LoadHistory reads a history that Save wrote, so that it can be checked
// again.
func LoadHistory(path string) (*History, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	h := &History{}
	if err := json.Unmarshal(b, h); err != nil {
		return nil, fmt.Errorf("history: %s: %w", path, err)
	}
	return h, nil
}

// An OpKind says what an acquisition takes (Op.Kind).
type OpKind string

// The kinds of acquisition.
const (
	// OpLock is a lock on one key: Client.Lock or Client.TryLock.
	OpLock OpKind = ""
	// OpAll is a lock on several keys at once: Client.LockAll or
	// Client.TryLockAll. Op.Key is the keys joined by commas (as
	// redlock.Lock.Key gives them), Op.Keys the keys.
	OpAll OpKind = "all"
	// OpPermit is a permit of the semaphore on Op.Key with Op.Permits
	// permits: Semaphore.Acquire or TryAcquire. Once obtained, Op.Keys
	// holds the lock key of its slot (wire.PermitKey).
	OpPermit OpKind = "permit"
	// OpLeader is a leadership of the election on Op.Key: Election.Campaign.
	// Its term is Op.Fence.
	OpLeader OpKind = "leader"
	// OpRead is a reader's shared hold of the read-write lock on Op.Key:
	// RWLock.RLock or TryRLock. Readers of a key may hold at once; a
	// reader and any other hold of the key may not. On the nodes a reader
	// is a member of the key's readers (wire.ReadersKey), which its probes
	// read (Sample.Key is that set, NodeSample.Value the reader's token
	// while it is a live member, Expires its expiry).
	OpRead OpKind = "read"
	// OpWrite is a writer's exclusive hold of the read-write lock on
	// Op.Key: RWLock.Lock or TryLock. On the nodes a writer is the lock
	// key holding its token, as a lock is.
	OpWrite OpKind = "write"
)

// Shared reports whether op is a reader's hold, which other readers of the
// key may share.
func (op *Op) Shared() bool { return op.Kind == OpRead }

// An Op is one acquisition call (Lock, TryLock, LockAll, TryLockAll, a
// semaphore's Acquire or TryAcquire, an election's Campaign) and what
// became of what it obtained.
type Op struct {
	ID     int    `json:"id"`
	Client string `json:"client"`
	Kind   OpKind `json:"kind,omitempty"`
	Key    string `json:"key"`
	// Keys lists the lock keys the acquisition holds on the nodes when
	// they are not just Key: every key of a LockAll, sorted; a permit's
	// slot key. See LockKeys.
	Keys []string `json:"keys,omitempty"`
	// Adopts, for a call of Client.Adopt, is the ID of the acquisition
	// whose hold it takes over by its token: the adoption is that hold
	// continuing in another client, with the same Token, Kind and Keys.
	// The adopted acquisition's holder stopped at its Handover.
	Adopts int `json:"adopts,omitempty"`
	// Handover, when not 0, is when the holder handed its token to another
	// client (to Adopt) and stopped acting on its handle: its own claim
	// ends there, and an adoption carries the hold on.
	Handover Mono `json:"handover,omitempty"`
	// WaitBoundMs, when not 0, is what the bound on a writer's wait (see
	// Starved) allows for a round, its clean-up and the pause before the
	// next, with the slack a scenario allows for a loaded machine, in
	// milliseconds. Only writers that record it are judged.
	WaitBoundMs int64 `json:"wait_bound_ms,omitempty"`
	// Permits is a semaphore's number of permits, and Slot the slot of
	// the permit obtained (permits only).
	Permits int   `json:"permits,omitempty"`
	Slot    int   `json:"slot,omitempty"`
	TTLms   int64 `json:"ttl_ms"`

	Start  Mono `json:"start"`  // just before the call
	Return Mono `json:"return"` // just after it returned

	// Tokens holds the token of every round the call made, in order: the
	// winner's last when the call succeeded. Rounds that failed must leave
	// nothing behind.
	Tokens []string `json:"tokens,omitempty"`
	// Unsettled lists the acquire requests of the call's rounds that had
	// not ended with an answer when the call returned: they timed out, or
	// the caller's context cut them off, or they were still on their way.
	// Such a grant may reach its node after the round's clean-up.
	Unsettled []RoundNode `json:"unsettled,omitempty"`

	OK       bool     `json:"ok"`
	Err      string   `json:"err,omitempty"`
	Reason   string   `json:"reason,omitempty"`   // failure: the sentinel the error wraps (see reason)
	Outcomes []string `json:"outcomes,omitempty"` // failure: each node's outcome in the last round

	// Success only.
	Token      string `json:"token,omitempty"`
	Holder     string `json:"holder,omitempty"` // the acquisition's ID (Lock.ID), by which Inspect and ForceRelease name it
	Fence      int64  `json:"fence,omitempty"`
	RoundStart Mono   `json:"round_start,omitempty"` // when the winning round sent its first request
	// Until is the end of validity the client claims: Lock.Until, or for a
	// client whose clock runs at another rate, when the client's clock
	// shows Lock.Until (see Client.Rate).
	Until    Mono     `json:"until,omitempty"`
	Extends  []Extend `json:"extends,omitempty"`
	Release  *Release `json:"release,omitempty"`
	Probes   []Sample `json:"probes,omitempty"`   // the lock's keys on every node, from the first just after Return
	Leftover *Sample  `json:"leftover,omitempty"` // the key on every node after the call, when a round failed
	// Leftovers is Leftover for a call on several lock keys (LockAll,
	// or a semaphore, whose rounds may be granted any of its slots):
	// every key, read together on each node.
	Leftovers []Sample `json:"leftovers,omitempty"`
}

// LockKeys returns the lock keys op holds on the nodes: Keys, or Key.
func (op *Op) LockKeys() []string {
	if len(op.Keys) > 0 {
		return op.Keys
	}
	return []string{op.Key}
}

// A RoundNode names the request of one round (by its token) to one node.
type RoundNode struct {
	Token string `json:"token"`
	Node  int    `json:"node"`
}

// An Extend is one call of Lock.Extend: made by the holder, or by
// Lock.AutoExtend in the background (Auto).
type Extend struct {
	Start  Mono   `json:"start"`
	Return Mono   `json:"return"`
	TTLms  int64  `json:"ttl_ms"`
	Auto   bool   `json:"auto,omitempty"`
	OK     bool   `json:"ok"`
	Until  Mono   `json:"until,omitempty"` // success: the new claimed end of validity
	Lost   bool   `json:"lost,omitempty"`  // the error said the lock is gone
	Err    string `json:"err,omitempty"`
}

// A Release is the call of Lock.Release.
type Release struct {
	Call   Mono   `json:"call"`
	Return Mono   `json:"return"`
	Err    string `json:"err,omitempty"`
}

// A Sample is what every node held under one key, read over the test's
// own admin connections, not through the client's links.
type Sample struct {
	Key   string       `json:"key"`
	Nodes []NodeSample `json:"nodes"`
	// Batch, when not 0, is shared by the samples of several keys that
	// each node read in one script, at one instant (Cluster.SampleAll).
	Batch int `json:"batch,omitempty"`
}

// At returns when the last node answered.
func (s *Sample) At() Mono {
	var at Mono
	for _, n := range s.Nodes {
		at = max(at, n.At)
	}
	return at
}

// A NodeSample is what one node held under a key.
type NodeSample struct {
	Node    int    `json:"node"`
	Reached bool   `json:"reached"`         // the node answered
	Err     string `json:"err,omitempty"`   // why not
	At      Mono   `json:"at"`              // when its answer arrived
	Value   string `json:"value,omitempty"` // the key's value; "" when absent
	// Expires is when the key expires, on the history's clock: At plus the
	// time left by the node's own clock (PEXPIRETIME minus TIME, read in
	// one script). Taking At, the latest moment the node can have read its
	// clock, errs on the late side, so a key is never judged to expire
	// earlier than it does. Zero when the key has no expiry.
	Expires Mono `json:"expires,omitempty"`
}

// A FaultKind names a fault or its end.
type FaultKind string

// The faults a scenario injects. Node faults have an empty Fault.Client;
// link faults hit one client's link to one node.
const (
	FaultKill      FaultKind = "kill"       // SIGKILL of the node's process
	FaultRestart   FaultKind = "restart"    // the process started again (with or without its data)
	FaultPause     FaultKind = "pause"      // SIGSTOP
	FaultResume    FaultKind = "resume"     // SIGCONT
	FaultClock     FaultKind = "clock"      // the node's wall clock was set to an offset
	FaultLatency   FaultKind = "latency"    // the link's latency changed
	FaultBlackhole FaultKind = "blackhole"  // the link's blackhole went on or off
	FaultReset     FaultKind = "reset"      // the link reset its connections, or started or stopped refusing them
	FaultDropReply FaultKind = "drop-reply" // the link's next replies to some command are to be lost

	// The faults of nodes that are not single processes (see
	// Config.Replicated and Config.ClusterMasters).
	FaultReplication FaultKind = "replication" // the node's replication link was cut or restored
	FaultPromote     FaultKind = "promote"     // the node's replica was promoted to master and serves the node from now on
	FaultMove        FaultKind = "move"        // a move of a hash slot to another master of the node's cluster began or ended
)

// A Fault is a fault injected or healed at a moment.
type Fault struct {
	At     Mono      `json:"at"`
	Kind   FaultKind `json:"kind"`
	Node   int       `json:"node"`             // -1 when it is no one node's
	Client string    `json:"client,omitempty"` // a link fault's client
	Detail string    `json:"detail,omitempty"`
}

// How an operator removed a lock (Removal.How).
const (
	ByForceRelease = "force-release" // Client.ForceRelease
	ByDel          = "del"           // a DEL of the lock key on every node, by hand (Cluster.DeleteByHand)
)

// A Removal is an operator's removal of a lock on every node, whatever
// token holds it. Check takes the removed acquisitions to hold their lock
// no longer from the call on (see Overlap and Stale).
type Removal struct {
	Key    string `json:"key"`
	By     string `json:"by"`  // the operator
	How    string `json:"how"` // ByForceRelease or ByDel
	Call   Mono   `json:"call"`
	Return Mono   `json:"return"`
	// OK: a quorum of nodes confirmed the deletion. A removal that was
	// not confirmed may have left the lock on a quorum, and removes no one.
	OK  bool   `json:"ok"`
	Err string `json:"err,omitempty"`
	// Holders lists the IDs (Lock.ID, Op.Holder) of the acquisitions whose
	// key the removal deleted on some node.
	Holders []string `json:"holders,omitempty"`
}

// A Write is one write to a fenced resource (see Resource).
type Write struct {
	At       Mono  `json:"at"`
	Op       int   `json:"op"`
	Fence    int64 `json:"fence"`
	Accepted bool  `json:"accepted"`
}
