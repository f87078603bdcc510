package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

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

// printable returns s fit to show on a terminal: every rune that
// strconv.IsPrint rejects (the C0 and C1 control characters, ESC, newline,
// carriage return and tab among them, DEL, and the format and separator
// characters other than the space, such as the bidirectional overrides) is
// written as Go writes it between quotes (\n, \x1b, \u202e), and every
// byte that is not UTF-8 as \xNN. Everything else is left as it is,
// backslashes and quotes included, so that an ordinary label or key prints
// unchanged.
//
// Owner labels, keys, node names and error texts are written by others
// (anyone who can write the nodes): every output meant for people passes
// what it shows of them through printable, so that they cannot move the
// cursor, recolour the screen or forge rows of a table. JSON output needs
// no such care: encoding/json escapes control characters itself.
func printable(s string) string {
	i := 0
	for i < len(s) && s[i] >= 0x20 && s[i] < 0x7f {
		i++
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case strconv.IsPrint(r):
			b.WriteString(s[i : i+size])
		default:
			q := strconv.QuoteRune(r) // '\x1b', '\n', '\u202e'
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}

// printableLines is printable for a message of several lines: each line
// is made printable on its own, and the line breaks kept.
func printableLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = printable(l)
	}
	return strings.Join(lines, "\n")
}
