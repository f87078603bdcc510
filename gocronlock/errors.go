package gocronlock

import (
	"errors"

	"github.com/quorumlock/redlock"
)

var (
	// ErrNotLeader is returned by Elector.IsLeader when the Elector does
	// not lead: another instance leads, or none does yet, or Run is not
	// running.
	ErrNotLeader = errors.New("gocronlock: not the leader")

	// ErrResigned is the cause, from context.Cause, of the context of a
	// Term that ended because the Elector's Run returned and gave up the
	// leadership.
	ErrResigned = errors.New("gocronlock: leadership given up")

	// ErrRunning is returned by Elector.Run when another call of Run on
	// the same Elector has not returned yet.
	ErrRunning = errors.New("gocronlock: Elector.Run is already running")
)

// An OptionError reports an invalid argument or option given to NewLocker
// or NewElector. It wraps redlock.ErrInvalid, so that
// errors.Is(err, redlock.ErrInvalid) holds for it; errors.As finds it.
type OptionError struct {
	Name   string // the argument or option, such as "LockerOptions.TTL"
	Reason string // what is wrong with it
}

func (e *OptionError) Error() string {
	return "gocronlock: " + e.Name + ": " + e.Reason
}

// Unwrap returns redlock.ErrInvalid.
func (e *OptionError) Unwrap() error { return redlock.ErrInvalid }
