package redlock

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quorumlock/redlock/driver"
	"github.com/quorumlock/redlock/observe"
)

func errReply(msg string) error { return &driver.ReplyError{Msg: msg} }

func TestRefused(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{errReply("WRONGPASS invalid username-password pair or user is disabled."), true},
		{errReply("NOAUTH Authentication required."), true},
		{errReply("NOPERM User locker has no permissions to run the 'evalsha' command"), true},
		{errReply("WRONGTYPE Operation against a key holding the wrong kind of value script: x, on @user_script:1."), true},
		{errReply("READONLY You can't write against a read only replica. script: x, on @user_script:1."), true},
		{errReply("MOVED 3999 127.0.0.1:6381"), true},
		{errReply("ASK 3999 127.0.0.1:6381"), true},
		{errReply("CROSSSLOT Keys in request don't hash to the same slot"), true},
		{errReply("OOM command not allowed when used memory > 'maxmemory'."), true},
		{errReply("MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk."), true},
		{errReply("NOSCRIPT No matching script."), true},
		{errReply("ERR unknown command 'EVALSHA', with args beginning with: "), true},
		{errReply("ERR user_script:1: Script attempted to access nonexistent global variable 'x'"), true},
		{errReply("ERR DB index is out of range"), true},
		{errReply("invalid password"), true}, // no code at all
		{errReply("LOADING Redis is loading the dataset in memory"), false},
		{errReply("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."), false},
		{errReply("TRYAGAIN Multiple keys request during rehashing of slot"), false},
		{errReply("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'."), false},
		{errReply("CLUSTERDOWN Hash slot not served"), false},
		{errReply("ERR max number of clients reached"), false},
		{fmt.Errorf("node a: %w", errReply("WRONGTYPE x")), true},
		{&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, false},
		{syscall.ECONNRESET, false},
		{io.EOF, false},
		{context.DeadlineExceeded, false},
		{errNoAnswer, false},
		{errors.New("WRONGPASS but not a reply"), false},
		{&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, true},
		{fmt.Errorf("dial: %w", x509.HostnameError{Host: "h"}), true},
		{tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, true},
		{x509.CertificateInvalidError{Reason: x509.Expired}, true},
		// Alerts from a server that checks client certificates, as
		// crypto/tls returns them: the certificate is missing (TLS 1.3,
		// TLS 1.2), of an unknown authority, rejected or expired.
		{remoteAlert(116), true},
		{fmt.Errorf("dial: %w", remoteAlert(40)), true},
		{remoteAlert(48), true},
		{remoteAlert(42), true},
		{remoteAlert(45), true},
		{tls.AlertError(116), true},
		// Alerts that may pass: an internal error, a close.
		{remoteAlert(80), false},
		{remoteAlert(0), false},
		{&net.OpError{Op: "read", Err: errors.New("tls: certificate required")}, false},
	} {
		if got := refused(tt.err); got != tt.want {
			t.Errorf("refused(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// remoteAlert returns the error with which crypto/tls reports the TLS
// alert a that the peer sent: a *net.OpError whose Err has the alert's
// text (its type is crypto/tls's own).
func remoteAlert(a uint8) error {
	return &net.OpError{Op: "remote error", Err: errors.New(tls.AlertError(a).Error())}
}

func TestReplyErrorCode(t *testing.T) {
	for msg, want := range map[string]string{
		"WRONGTYPE Operation against a key": "WRONGTYPE",
		"ERR unknown command":               "ERR",
		"OOM":                               "OOM",
		"invalid password":                  "",
		"":                                  "",
	} {
		if got := (&driver.ReplyError{Msg: msg}).Code(); got != want {
			t.Errorf("Code of %q = %q, want %q", msg, got, want)
		}
	}
}

func TestOpErrorRefused(t *testing.T) {
	wrongpass := errReply("WRONGPASS invalid username-password pair or user is disabled.")
	e := &OpError{Op: "acquire", Key: "k", Quorum: 2, Rounds: 1, Err: ErrRefused, Nodes: []observe.NodeResult{
		{Node: "n1", Outcome: observe.OutcomeRefused, Err: wrongpass, Latency: time.Millisecond},
		{Node: "n2", Outcome: observe.OutcomeRefused, Err: wrongpass, Latency: time.Millisecond},
		{Node: "n3", Outcome: observe.OutcomeRefused, Err: errReply("NOAUTH Authentication required."), Latency: time.Millisecond},
	}}
	var err error = e
	if !errors.Is(err, ErrRefused) || errors.Is(err, ErrNoQuorum) || errors.Is(err, ErrTaken) {
		t.Fatal("errors.Is on a refused OpError")
	}
	want := `redlock: acquire "k": refused by n1, n2: WRONGPASS invalid username-password pair or user is disabled. (` + driver.Hint("WRONGPASS") +
		`); by n3: NOAUTH Authentication required. (` + driver.Hint("NOAUTH") + `) ` +
		`(0 of 3 nodes granted, quorum 2: n1 refused in 1ms; n2 refused in 1ms; n3 refused in 1ms)`
	if err.Error() != want {
		t.Fatalf("Error():\n got %s\nwant %s", err, want)
	}
	if strings.Contains(err.Error(), "reachable") {
		t.Fatalf("a refusal called unreachable: %s", err)
	}
	if observe.OutcomeRefused.String() != "refused" || observe.NodeRefusing.String() != "refusing" {
		t.Fatal("String")
	}
}

// refusingNode answers every request with an error reply.
type refusingNode struct {
	name string
	err  error
}

func (n refusingNode) Name() string { return n.name }
func (n refusingNode) Eval(context.Context, *driver.Script, []string, []string) (any, error) {
	return nil, n.err
}

func TestLockReturnsAtOnceWhenRefused(t *testing.T) {
	// Three nodes that refuse every request (as a node with a wrong
	// password does, whatever the script): Lock with a context that never
	// ends must return after its first round, and say so.
	ns := []Node{
		refusingNode{"a", errReply("WRONGPASS invalid username-password pair or user is disabled.")},
		refusingNode{"b", errReply("WRONGPASS invalid username-password pair or user is disabled.")},
		refusingNode{"c", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}},
	}
	c, err := New(ns, &Options{DisableQuarantine: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Lock(context.Background(), "k", time.Second)
	var oe *OpError
	if !errors.Is(err, ErrRefused) || !errors.As(err, &oe) || oe.Rounds != 1 {
		t.Fatalf("Lock = %v, want ErrRefused after one round", err)
	}
	if got := [3]observe.Outcome{oe.Nodes[0].Outcome, oe.Nodes[1].Outcome, oe.Nodes[2].Outcome}; got != [3]observe.Outcome{observe.OutcomeRefused, observe.OutcomeRefused, observe.OutcomeFailed} {
		t.Fatalf("outcomes %v", got)
	}
	st := bridge{c}.States()
	if st[0].Health != observe.NodeRefusing || st[2].Health != observe.NodeUnreachable {
		t.Fatalf("states %+v", st)
	}

	// One refusal of three leaves a quorum possible: the failure is
	// ErrNoQuorum, and Lock goes on trying.
	c2, _ := New([]Node{ns[0], ns[2], refusingNode{"d", io.EOF}}, &Options{DisableQuarantine: true, Tries: 2, RetryDelay: time.Millisecond})
	defer c2.Close()
	_, err = c2.Lock(context.Background(), "k", time.Second)
	if !errors.Is(err, ErrNoQuorum) || !errors.As(err, &oe) || oe.Rounds != 2 {
		t.Fatalf("Lock = %v, want ErrNoQuorum after two rounds", err)
	}
}

func TestBusyIsNotUnreachable(t *testing.T) {
	// A node that answers LOADING or BUSY has answered: it is busy, and
	// is tried again; only a node not heard from is unreachable.
	ns := []Node{
		refusingNode{"a", errReply("LOADING Redis is loading the dataset in memory")},
		refusingNode{"b", errReply("BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.")},
		refusingNode{"c", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}},
	}
	c, err := New(ns, &Options{DisableQuarantine: true, Tries: 2, RetryDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Lock(context.Background(), "k", time.Second)
	var oe *OpError
	if !errors.Is(err, ErrNoQuorum) || !errors.As(err, &oe) || oe.Rounds != 2 {
		t.Fatalf("Lock = %v, want ErrNoQuorum after two rounds", err)
	}
	st := bridge{c}.States()
	if st[0].Health != observe.NodeBusy || st[1].Health != observe.NodeBusy || st[2].Health != observe.NodeUnreachable {
		t.Fatalf("states %v, %v, %v; want busy, busy, unreachable", st[0].Health, st[1].Health, st[2].Health)
	}
	if !strings.Contains(st[0].Err.Error(), "LOADING") || observe.NodeBusy.String() != "busy" {
		t.Fatalf("busy node's error %v, String %q", st[0].Err, observe.NodeBusy)
	}
	if strings.Contains(err.Error(), "reachable") {
		t.Fatalf("%v: a busy node is not unreachable", err)
	}
}

// lateContext is a context whose deadline has passed but whose timer has
// not fired yet, as on a loaded machine: Err is nil and Done never closes.
type lateContext struct {
	context.Context
	deadline time.Time
}

func (c lateContext) Deadline() (time.Time, bool) { return c.deadline, true }

func TestLockStopsAtAPassedDeadline(t *testing.T) {
	// Nodes that fail every request, as they do when a request's deadline
	// has passed before it was sent. Lock past its context's deadline
	// must end with the context's error, not run rounds whose failures
	// would stand as the reason, and not wait for a timer that has not
	// fired.
	ns := []Node{refusingNode{"a", io.EOF}, refusingNode{"b", io.EOF}, refusingNode{"c", io.EOF}}
	c, err := New(ns, &Options{DisableQuarantine: true, RetryDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := lateContext{Context: context.Background(), deadline: time.Now().Add(-time.Millisecond)}
	done := make(chan error, 1)
	go func() {
		_, err := c.Lock(ctx, "k", time.Second)
		done <- err
	}()
	select {
	case err := <-done:
		var oe *OpError
		if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &oe) || oe.Rounds != 0 || errors.Is(err, ErrNoQuorum) {
			t.Fatalf("Lock past its deadline = %v, want context.DeadlineExceeded after no round", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Lock past its deadline did not return: it waits for its context's timer")
	}
}

// TestReadsSayWhenRefused checks that the reads which change nothing,
// Inspect and Election.Leader, tell refusals that leave no quorum
// (ErrRefused) from nodes that did not answer (ErrNoQuorum), as the
// operations that write do.
func TestReadsSayWhenRefused(t *testing.T) {
	wrongType := refusingNode{"a", errReply("WRONGTYPE Operation against a key holding the wrong kind of value")}
	down := refusingNode{"c", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	for _, tc := range []struct {
		nodes []Node
		want  error
	}{
		{[]Node{wrongType, refusingNode{"b", wrongType.err}, down}, ErrRefused},
		{[]Node{wrongType, down, refusingNode{"d", io.EOF}}, ErrNoQuorum},
	} {
		c, err := New(tc.nodes, &Options{ReleaseTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ins := bridge{c}.Inspect(context.Background(), "k")
		var oe *OpError
		if !errors.Is(ins.Err, tc.want) || !errors.As(ins.Err, &oe) || len(oe.Nodes) != 3 {
			t.Errorf("Inspect: %+v; want Err wrapping %v", ins, tc.want)
		}
		if _, err := c.Election("k", time.Second).Leader(context.Background()); !errors.Is(err, tc.want) {
			t.Errorf("Leader: %v, want %v", err, tc.want)
		}
		c.Close()
	}
	// A client with quarantine judges a key's slot by the largest of its
	// own bar and the TTLs the nodes record; without, not at all.
	for _, tc := range []struct {
		opts *Options
		want time.Duration
	}{{&Options{Quarantine: time.Minute}, time.Minute}, {&Options{DisableQuarantine: true}, 0}} {
		c, _ := New(nodes("a"), tc.opts)
		if ins := (bridge{c}).Inspect(context.Background(), "k"); ins.Quarantine != tc.want {
			t.Errorf("Options %+v: Inspection.Quarantine %v, want %v", tc.opts, ins.Quarantine, tc.want)
		}
		c.Close()
	}
}
