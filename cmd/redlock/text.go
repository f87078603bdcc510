package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/quorumlock/redlock/observe"
)

// This file holds what several commands say of the nodes and their
// errors, for people.

// describeErr returns an error's text without the noise of the layers it
// went through, for tables.
func describeErr(err error) string {
	if err == nil {
		return ""
	}
	return strings.TrimPrefix(err.Error(), "redlock: ")
}

// countHealthy returns how many states are healthy.
func countHealthy(states []observe.NodeState) int {
	n := 0
	for _, s := range states {
		if s.Health == observe.NodeHealthy {
			n++
		}
	}
	return n
}

// stateText describes a node's state in a few words.
func stateText(s observe.NodeState, now time.Time) string {
	switch s.Health {
	case observe.NodeQuarantined:
		return fmt.Sprintf("quarantined until %s (%s more)", s.Until.Format("15:04:05"), roundDur(s.Until.Sub(now)))
	case observe.NodeUnreachable:
		return "unreachable: " + describeErr(s.Err)
	case observe.NodeBusy:
		return "busy: " + describeErr(s.Err)
	case observe.NodeRefusing:
		return "refused: " + describeErr(s.Err)
	}
	return s.Health.String()
}

// roundDur rounds a duration for people: to 0.1s above a second, to the
// millisecond below.
func roundDur(d time.Duration) time.Duration {
	if d < 0 {
		d = 0
	}
	if d >= time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}
