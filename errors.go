package redlock

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/quorumlock/redlock/driver"
	"github.com/quorumlock/redlock/internal/errtext"
	"github.com/quorumlock/redlock/observe"
)

// Errors returned by the client. Use errors.Is to test for them: the errors
// the client returns wrap them, usually inside an *OpError that says what
// each node did.
var (
	// ErrTaken means the lock is held by another owner: enough nodes
	// answered, but too many of them hold someone else's token for a
	// quorum to be possible.
	ErrTaken = errors.New("redlock: lock is held by another owner")

	// ErrNoQuorum means too few nodes could take part for the operation to
	// reach a quorum, whatever the others held: nodes did not answer in
	// time, answered that they are busy or loading their data, or sat out
	// their quarantine after a restart or a promotion. Each of these may
	// pass, so Lock tries again. The per-node causes are in the *OpError.
	ErrNoQuorum = errors.New("redlock: too few nodes available for a quorum")

	// ErrRefused means that so many nodes refused the request, in a way
	// that trying again cannot change, that a quorum is out of reach: a
	// wrong or missing password, an ACL that denies a command or key, a
	// lock key that holds another type of value, a replica or cluster node
	// instead of an independent master, a node that is out of memory or
	// cannot persist, a TLS handshake that cannot succeed (the server's
	// certificate fails verification, or the server asks for a client
	// certificate or rejects the one it gets). Lock does not try again
	// after it. The *OpError names each node that refused and the
	// server's reason.
	ErrRefused = errors.New("redlock: refused")

	// ErrExpired means the lock's validity ended: an acquisition whose round
	// took longer than the validity it could give, or an Extend or Release
	// that came after the lock's deadline. Whatever the lock protected may
	// have been used by another owner since the deadline.
	ErrExpired = errors.New("redlock: lock validity has ended")

	// ErrLockLost means the client saw, within the lock's validity, that a
	// quorum of nodes no longer holds its token: the keys were deleted,
	// evicted, lost in a restart, or taken over. The lock is gone.
	ErrLockLost = errors.New("redlock: lock lost")

	// ErrReleased means the Lock was already released through this handle.
	ErrReleased = errors.New("redlock: lock already released")

	// ErrInvalid means an argument or an option is invalid. The error text
	// says which and why.
	ErrInvalid = errors.New("redlock: invalid argument")
)

// errNoAnswer is the error of a node that did not answer within a round.
var errNoAnswer = errors.New("no answer within the node timeout")

// errUnidentified is the error of a node whose grant did not count because
// the client does not know yet which server it is (see identify).
// errUnheard is why a grant of a node that restarted within the hour did
// not count: the client has not heard every node in the key's hash slot
// since, and one it has not heard may keep a lock, with its TTL, that the
// young node lost (see SAFETY.md, "Restarts, per hash slot").
var errUnheard = errors.New("restarted within the hour, and not every node has been heard in this hash slot since: it votes once they have, or after Options.Quarantine if set")

var errUnidentified = errors.New("answered, but not counted: not yet known to be a server apart from the other nodes")

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// An OpError describes an operation on a lock that did not succeed and what
// each node did in its last round.
//
// Err is the reason, one of ErrTaken, ErrNoQuorum, ErrRefused, ErrExpired
// or ErrLockLost, or an error wrapping ErrInvalid when two of the client's
// nodes turn out to be one server (see New). When the caller's context ended the wait, the error also
// wraps the context's error, so that errors.Is(err, context.Canceled) and
// errors.Is(err, context.DeadlineExceeded) work; Err then holds the reason
// of the last round that completed, or is nil if none did.
type OpError struct {
	Op     string               // "acquire", "extend", "release", "adopt", "leader", "inspect" or "force-release"
	Key    string               // the lock's key; for LockAll, its keys joined by commas, for messages
	Keys   []string             // LockAll's keys, sorted, without repeats; nil for one key
	Quorum int                  // the number of nodes that had to agree
	Rounds int                  // the number of rounds made (acquire only; otherwise 1)
	Nodes  []observe.NodeResult // what each node did in the last round, in the order given to New
	Err    error                // the reason

	ctxErr error // the caller's context error, if it ended the wait
}

// Unwrap returns the reason and, if the caller's context ended the wait,
// the context's error.
func (e *OpError) Unwrap() []error {
	errs := make([]error, 0, 2)
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	if e.ctxErr != nil {
		errs = append(errs, e.ctxErr)
	}
	return errs
}

func (e *OpError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "redlock: %s %s", e.Op, quoteKey(e.Key))
	switch {
	case e.ctxErr != nil && e.Err != nil:
		fmt.Fprintf(&b, ": %v after %d rounds; last: %s", e.ctxErr, e.Rounds, reasonText(e.Err))
	case e.ctxErr != nil:
		fmt.Fprintf(&b, ": %v", e.ctxErr)
	default:
		b.WriteString(": " + reasonText(e.Err))
		if e.Err == ErrRefused {
			b.WriteString(refusals(e.Nodes))
		}
		if e.Rounds > 1 {
			fmt.Fprintf(&b, " after %d rounds", e.Rounds)
		}
	}
	if len(e.Nodes) > 0 {
		ok := 0
		for _, n := range e.Nodes {
			if n.Outcome == observe.OutcomeOK {
				ok++
			}
		}
		did, does := okText(e.Op)
		fmt.Fprintf(&b, " (%d of %d nodes %s, quorum %d:", ok, len(e.Nodes), did, e.Quorum)
		for i, n := range e.Nodes {
			if i > 0 {
				b.WriteByte(';')
			}
			s := n.String()
			switch {
			case n.Outcome == observe.OutcomeOK:
				// Not "ok" beside a failure: what the node did.
				s = n.Node + " " + does + strings.TrimPrefix(s, n.Node+" "+observe.OutcomeOK.String())
			case n.Outcome == observe.OutcomeRefused && e.Err == ErrRefused && e.ctxErr == nil:
				// The reason is given once, with the refusals above.
				s = n.Node + " " + observe.OutcomeRefused.String() + " in " + n.Latency.Round(time.Microsecond).String()
			}
			b.WriteString(" " + s)
		}
		b.WriteByte(')')
	}
	return b.String()
}

// okText says what the nodes that answered OK to op did, for a count of
// them and for one of them.
func okText(op string) (did, does string) {
	switch op {
	case "acquire":
		return "granted", "granted"
	case "extend":
		return "extended", "extended"
	case "release", "force-release":
		return "deleted the key", "deleted it"
	case "adopt":
		return "hold the token", "holds it"
	}
	return "answered", "answered"
}

// refusals says which nodes refused and why, grouping the nodes that gave
// the same reason: " by a, b: WRONGPASS ...; by c: NOPERM ...".
func refusals(nodes []observe.NodeResult) string {
	var msgs []string
	by := map[string][]string{}
	for _, n := range nodes {
		if n.Outcome != observe.OutcomeRefused {
			continue
		}
		m := errtext.Of(n.Err)
		if by[m] == nil {
			msgs = append(msgs, m)
		}
		by[m] = append(by[m], n.Node)
	}
	var b strings.Builder
	for i, m := range msgs {
		if i > 0 {
			b.WriteByte(';')
		}
		fmt.Fprintf(&b, " by %s: %s", strings.Join(by[m], ", "), m)
	}
	return b.String()
}

// quoteKey quotes key for an error text: whole up to 64 bytes; a longer
// key by its first 64 bytes (cut at a rune boundary) and its length, so
// that an error about a long key stays short.
func quoteKey(key string) string {
	const head = 64
	if len(key) <= head {
		return strconv.Quote(key)
	}
	cut := head
	for cut > 0 && !utf8.RuneStart(key[cut]) {
		cut--
	}
	return fmt.Sprintf("%q…(%d bytes)", key[:cut], len(key))
}

func reasonText(err error) string {
	if err == nil {
		return "no round completed"
	}
	return strings.TrimPrefix(err.Error(), "redlock: ")
}

// Error replies that may pass if the request is sent again: the node is
// loading its data, running a long script, failing over, or has too many
// clients. Every other error reply is a refusal (see refused).
var transientCodes = map[string]bool{
	"LOADING":     true, // loading the dataset into memory
	"BUSY":        true, // running a script or function past its time limit
	"TRYAGAIN":    true, // a multi-key request during resharding
	"MASTERDOWN":  true, // a replica that lost its master
	"CLUSTERDOWN": true, // a cluster without coverage of every slot
	"NOREPLICAS":  true, // min-replicas-to-write not met
	"UNBLOCKED":   true, // a blocked client unblocked by another
}

// refused reports whether err, the failure of a request to a node, will
// happen again however often the request is sent: an error reply other
// than those in transientCodes (WRONGPASS, NOAUTH, NOPERM, WRONGTYPE,
// READONLY, MOVED, ASK, CROSSSLOT, OOM, MISCONF, NOSCRIPT, ERR from an
// unknown command or a failing script, ...), or a TLS handshake that
// cannot succeed: the server's certificate failed verification, or the
// server refused the client's certificate, or the lack of one, with a
// TLS alert (see driver.IsCertificateError). Failures to connect, broken
// connections and timeouts are not refusals.
func refused(err error) bool {
	var reply *driver.ReplyError
	if errors.As(err, &reply) {
		code := reply.Code()
		if code == "ERR" && strings.Contains(reply.Msg, "max number of clients") {
			return false
		}
		return !transientCodes[code]
	}
	return driver.IsCertificateError(err)
}
