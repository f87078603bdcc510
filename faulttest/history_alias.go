package faulttest

import "github.com/quorumlock/redlock/faulttest/history"

// The history a scenario records and the checker that judges it live in
// package history, which the deterministic simulator (package sim) shares;
// these names keep the scenarios' vocabulary.
type (
	History    = history.History
	Mono       = history.Mono
	Op         = history.Op
	OpKind     = history.OpKind
	RoundNode  = history.RoundNode
	Extend     = history.Extend
	Release    = history.Release
	Sample     = history.Sample
	NodeSample = history.NodeSample
	FaultKind  = history.FaultKind
	Fault      = history.Fault
	Removal    = history.Removal
	Write      = history.Write
	Kind       = history.Kind
	Violation  = history.Violation
)

// The kinds of acquisition, fault and violation; see package history.
const (
	OpLock   = history.OpLock
	OpAll    = history.OpAll
	OpPermit = history.OpPermit
	OpLeader = history.OpLeader
	OpRead   = history.OpRead
	OpWrite  = history.OpWrite

	FaultKill        = history.FaultKill
	FaultRestart     = history.FaultRestart
	FaultPause       = history.FaultPause
	FaultResume      = history.FaultResume
	FaultClock       = history.FaultClock
	FaultLatency     = history.FaultLatency
	FaultBlackhole   = history.FaultBlackhole
	FaultReset       = history.FaultReset
	FaultDropReply   = history.FaultDropReply
	FaultReplication = history.FaultReplication
	FaultPromote     = history.FaultPromote
	FaultMove        = history.FaultMove

	ByForceRelease = history.ByForceRelease
	ByDel          = history.ByDel

	Overlap    = history.Overlap
	Quorum     = history.Quorum
	Fence      = history.Fence
	Stale      = history.Stale
	Leftover   = history.Leftover
	Quiescence = history.Quiescence
	Permits    = history.Permits
	Leaders    = history.Leaders
	Term       = history.Term
	Partial    = history.Partial
	Starved    = history.Starved
)

// Kinds lists every kind of violation, in the order reports use.
var Kinds = history.Kinds

// NewHistory starts a history whose clock reads zero now.
func NewHistory(scenario string, nodes int) *History { return history.NewHistory(scenario, nodes) }

// LoadHistory reads a history that History.Save wrote.
func LoadHistory(path string) (*History, error) { return history.LoadHistory(path) }

// Check judges a finished history; see history.Check.
func Check(h *History) []Violation { return history.Check(h) }

// Count returns how many violations of each kind vs holds.
func Count(vs []Violation) map[Kind]int { return history.Count(vs) }

// ReaderOverlaps counts the pairs of readers of one key, with different
// tokens, that held at one instant.
func ReaderOverlaps(h *History) int { return history.ReaderOverlaps(h) }

// RemovedWrites counts the writes to the fenced resource that removed
// holders made, and how many of them the resource rejected.
func RemovedWrites(h *History) (made, rejected int) { return history.RemovedWrites(h) }

// LateGrants counts the keys that failed rounds left behind because their
// grant reached a node after the clean-up.
func LateGrants(h *History) int { return history.LateGrants(h) }

// Timeline returns the picture of a history and its violations.
var Timeline = history.Timeline
