// Package driver defines what a Redis client library must do to serve as a
// node of a redlock.Client. It is for the authors of adapters; users of
// locks need only the root package and an adapter such as goredisnode or
// rueidisnode.
//
// A node runs the lock client's Lua scripts and nothing else. Node is the
// one interface an adapter must implement. Batcher and Notifier are
// optional: a Node that implements Batcher gets the requests of concurrent
// rounds together, to send them in one write; one that implements Notifier
// wakes waiting clients when a lock is released, instead of leaving them to
// poll.
//
// Package [github.com/quorumlock/redlock/driver/nodeurl] lists the URL forms
// an adapter's Dial should accept, and package
// [github.com/quorumlock/redlock/driver/drivertest] checks an adapter
// against real redis-server processes with the tests that this
// repository's adapters pass.
package driver

import (
	"context"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"strings"

	"github.com/quorumlock/redlock/driver/tlsfiles"
)

// A Node is one independent Redis master, as the lock client sees it.
//
// Implementations must be safe for concurrent use by multiple goroutines.
type Node interface {
	// Name identifies the node in errors, logs and metrics, and lets the
	// client reject a node that is given twice. It should name the address
	// and the database (for example "10.0.0.7:6379/0") and must never
	// contain credentials.
	Name() string

	// Eval runs script on the node with the given keys and arguments. It
	// should send EVALSHA with script.SHA1() and, when the node answers
	// NOSCRIPT, send EVAL with script.Source().
	//
	// The reply is returned as an int64 (integer), a string (bulk or simple
	// string), a []any (array) or nil (null); an array of integers only may
	// also be returned as a []int64, which spares the boxing of each
	// element. A Redis error reply, also one to the commands that open a
	// connection (AUTH, HELLO, SELECT), is returned as a *ReplyError, so
	// that the client can tell a node that refused the request from one
	// it could not reach; other failures are returned as they are. Eval
	// must give up when ctx is done.
	//
	// A client library that retries a command after a network error may
	// run a script twice; the acquire script is written so that a retry
	// finds its own grant, but a retried release or extend may report a key
	// as absent that it itself removed a moment before. Adapters therefore
	// should not retry.
	Eval(ctx context.Context, script *Script, keys []string, args []string) (any, error)
}

// A Batcher is a Node that can run several scripts in one round trip.
//
// A client sends the requests of concurrent rounds to a Batcher through a
// few long-lived goroutines per node, each of which takes every request
// waiting for the node and hands them to EvalBatch together. The node then
// sees a few large writes instead of many small ones.
type Batcher interface {
	Node

	// EvalBatch runs every call as Eval would, writing them to the node
	// together, and sets each call's Reply and Err. A call whose script
	// the node does not have cached must still succeed, as with Eval.
	// EvalBatch must give up when ctx is done, setting Err on the calls
	// without an answer.
	EvalBatch(ctx context.Context, calls []Call)
}

// A Call is one script run of a batch; see Batcher.
type Call struct {
	Script *Script
	Keys   []string
	Args   []string

	Reply any   // set by EvalBatch, as Eval returns it
	Err   error // set by EvalBatch, as Eval returns it
}

// A Notifier is a Node that can tell the client when a lock is released,
// so that waiters wake at once instead of polling. The release script
// publishes on a channel per key; Notify subscribes to it.
//
// Nodes that do not implement Notifier still work: their waiters poll.
type Notifier interface {
	// Notify subscribes to channel and, for every message published on
	// it until ctx is done, sends on wake without blocking (a wake that
	// finds wake full is dropped). It returns once the subscription is in
	// place, or with an error if it cannot be made.
	Notify(ctx context.Context, channel string, wake chan<- struct{}) error
}

// A ReplyError is an error reply from a Redis server, such as "WRONGTYPE
// Operation against a key holding the wrong kind of value" or "NOAUTH
// Authentication required.". Nodes return the error replies they get as
// *ReplyError values (see Node.Eval), with the error of the client library
// in Err.
type ReplyError struct {
	Msg string // the server's message, beginning with the error code
	Err error  // the client library's error for the reply; may be nil
}

// Error returns Msg, followed by a hint in parentheses when the code is
// one that says the credentials are missing or wrong (see [Hint]).
func (e *ReplyError) Error() string {
	if h := Hint(e.Code()); h != "" && !strings.Contains(e.Msg, h) {
		return e.Msg + " (" + h + ")"
	}
	return e.Msg
}

// Hint says what to do about an error reply with the given code, for the
// codes with which a server refuses a client's credentials for good:
// NOAUTH and WRONGPASS. It returns "" for any other code.
func Hint(code string) string {
	switch code {
	case "NOAUTH":
		return "the server requires a password: give it in the node's URL, redis://USER:PASSWORD@HOST:PORT, or in its client's options"
	case "WRONGPASS":
		return "the user name or password given for the node is wrong, or the user is disabled"
	}
	return ""
}

// Unwrap returns Err.
func (e *ReplyError) Unwrap() error { return e.Err }

// Code returns the error code: the first word of the message, such as
// "WRONGTYPE" or "ERR", when it is in upper case; otherwise "".
func (e *ReplyError) Code() string {
	code, _, _ := strings.Cut(e.Msg, " ")
	if code == "" || strings.ToUpper(code) != code {
		return ""
	}
	return code
}

// A Script is a Lua script that a client runs on its nodes. Node
// implementations use SHA1 for EVALSHA and Source for the EVAL fallback
// and SCRIPT LOAD. A Script is immutable.
type Script struct {
	name string
	src  string
	sha  string
}

// NewScript returns a script with a short name, for errors and metrics,
// and the Lua source.
func NewScript(name, source string) *Script {
	sum := sha1.Sum([]byte(source))
	return &Script{name: name, src: source, sha: hex.EncodeToString(sum[:])}
}

// Name returns the script's short name, such as "acquire".
func (s *Script) Name() string { return s.name }

// Source returns the Lua source, for EVAL and SCRIPT LOAD.
func (s *Script) Source() string { return s.src }

// SHA1 returns the hex SHA-1 digest of the source, for EVALSHA.
func (s *Script) SHA1() string { return s.sha }

// IsCertificateError reports whether err comes from a TLS connection that
// failed for a reason that trying again cannot change: the server's
// certificate failed verification (an unknown authority, a name that does
// not match, an expired or otherwise invalid certificate), the server
// refused the connection with a TLS alert that says so (it asks for a
// client certificate, or does not accept the one it got: see
// [tlsfiles.Refusal]), or it did not speak TLS at all.
func IsCertificateError(err error) bool {
	var (
		verify   *tls.CertificateVerificationError
		header   tls.RecordHeaderError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	if alert, ok := tlsfiles.Alert(err); ok {
		return tlsfiles.Refusal(alert)
	}
	return errors.As(err, &verify) || errors.As(err, &header) ||
		errors.As(err, &unknown) || errors.As(err, &hostname) || errors.As(err, &invalid)
}
