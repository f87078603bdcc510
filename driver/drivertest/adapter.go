package drivertest

import (
	"context"
	"crypto/sha1"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock/driver"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/internal/wire"
)

// A Node is what an adapter's Dial returns: a [driver.Node] that Close
// closes.
type Node interface {
	driver.Node
	Close() error
}

// An Adapter describes the adapter under test, whose Dial returns an N, to
// [TestAdapter], [BenchmarkEval] and [FuzzURL]. Every field but BadURLs is
// required.
type Adapter[N Node] struct {
	// Pkg is the adapter's package name, such as "goredisnode": every
	// error of Dial for a URL that does not parse begins with
	// Pkg + ": invalid URL".
	Pkg string

	// Dial is the adapter's Dial: it returns a Node with a client of its
	// own for the server at url, without connecting.
	Dial func(url string) (N, error)

	// EvalLua runs the Lua source src, whose hex SHA-1 digest is sha, on n
	// as n.Eval runs a script: EVALSHA, then EVAL if the server answers
	// NOSCRIPT, and the reply converted as Eval converts it. A
	// *driver.Script holds one of the lock client's own scripts, so this is
	// how TestAdapter sends the adapter scripts of its own: an adapter
	// passes the method expression of the unexported method its Eval
	// calls, such as (*Node).eval, from a test in its own package.
	EvalLua func(n N, ctx context.Context, sha, src string, keys, args []string) (any, error)

	// IsErrorReply reports whether err is, or wraps, the library's own
	// error type for a Redis error reply.
	IsErrorReply func(err error) bool

	// BadURLs are URLs that this adapter's Dial must reject beyond those
	// that every adapter rejects, such as query parameters that only its
	// library knows. Any password in them should be ACLPassword, which no
	// error may repeat.
	BadURLs []string

	// CheckDialled makes the library's own checks of a Node that Dial
	// returned for a valid URL, such as that its client does not retry or
	// that it verifies the TLS server name that the URL asks for. It is
	// called before the Node is closed, for every URL that TestAdapter
	// checks the node name of.
	CheckDialled func(t *testing.T, d Dialled[N])
}

// Dialled is what Adapter.CheckDialled is told about a Node that Dial
// returned.
type Dialled[N Node] struct {
	URL  string
	Node N
	// TLSServerName is the name that TLS must verify the server
	// certificate against, or "" if the URL does not ask for TLS.
	TLSServerName string
}

// CheckTLS fails t unless cfg, the TLS configuration of d.Node's client
// (nil for none), is there exactly when d.URL asks for TLS and verifies
// the server name that it names.
func (d Dialled[N]) CheckTLS(t *testing.T, cfg *tls.Config) {
	t.Helper()
	if want := d.TLSServerName != ""; (cfg != nil) != want {
		t.Errorf("Dial(%q): TLS config %v, want TLS %v", d.URL, cfg, want)
	} else if want && cfg.ServerName != d.TLSServerName {
		t.Errorf("Dial(%q): TLS server name %q, want %q", d.URL, cfg.ServerName, d.TLSServerName)
	}
}

// The credentials of the ACL user that TestAdapter creates on its servers.
// No node name and no error of an adapter may contain either.
const (
	ACLUser     = "locker"
	ACLPassword = "hunter2secret"
)

// TestAdapter checks the adapter that a describes on its own, below the
// lock algorithm, against redis-server processes that it starts: that Eval
// runs every lock script and decodes each kind of reply, is safe for
// concurrent use, falls back from EVALSHA to EVAL, returns error replies as
// errors and gives up when its context ends; that EvalBatch, which the
// adapter must implement ([driver.Batcher]), runs its calls in order with
// a reply or error each; and that Dial accepts every URL form of package
// [nodeurl], TLS and ACL users included, does not connect, does not retry,
// names nodes "ADDR/DB" and never reveals a password, in a name or in an
// error. Its subtests run in parallel with each other.
func TestAdapter[N Node](t *testing.T, a Adapter[N]) {
	if a.Pkg == "" || a.Dial == nil || a.EvalLua == nil || a.IsErrorReply == nil || a.CheckDialled == nil {
		t.Fatal("drivertest: Adapter.Pkg, Dial, EvalLua, IsErrorReply and CheckDialled are required")
	}
	for _, tc := range []struct {
		name string
		run  func(*testing.T, Adapter[N])
	}{
		{"Scripts", testScripts[N]},
		{"Decode", testDecode[N]},
		{"Concurrent", testConcurrent[N]},
		{"NoScriptFallback", testNoScriptFallback[N]},
		{"Batch", testBatch[N]},
		{"ErrorReply", testErrorReply[N]},
		{"Context", testContext[N]},
		{"DialServerDown", testDialServerDown[N]},
		{"DialServerPaused", testDialServerPaused[N]},
		{"DialDoesNotRetry", testDialDoesNotRetry[N]},
		{"Names", testNames[N]},
		{"URLs", testURLs[N]},
		{"WrongPassword", testWrongPassword[N]},
		{"PasswordOnly", testPasswordOnly[N]},
		{"BadURLs", testBadURLs[N]},
		{"TLS", testTLS[N]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, a)
		})
	}
}

// dialer turns dial into a test helper that dials url, fails t if dial
// fails, and closes the Node when t ends.
func dialer[N Node](dial func(url string) (N, error)) func(t testing.TB, url string) N {
	return func(t testing.TB, url string) N {
		t.Helper()
		n, err := dial(url)
		if err != nil {
			t.Fatalf("Dial: %v", err)
		}
		t.Cleanup(func() { n.Close() })
		return n
	}
}

// BenchmarkEval measures one Eval of the lock client's extend script
// through a Node that a.Dial returns, against a redis-server process that
// it starts.
func BenchmarkEval[N Node](b *testing.B, a Adapter[N]) {
	srv := redistest.Start(b, redistest.Config{})
	n, err := a.Dial(srv.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	st := extendStep("lock:bench", "tok", "60000", nil)
	extend := Script(b, st.script)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := n.Eval(ctx, extend, st.keys, st.args); err != nil {
			b.Fatal(err)
		}
	}
}

// Script returns the lock client's script with the given name ("acquire",
// "release", "extend" or "probe"; see [wire.Scripts]), and fails t if
// there is none.
func Script(t testing.TB, name string) *driver.Script {
	t.Helper()
	s, err := script(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func script(name string) (*driver.Script, error) {
	for _, s := range wire.Scripts() {
		if s.Name() == name {
			return s, nil
		}
	}
	return nil, fmt.Errorf("no script %q", name)
}

// Runs reports whether the command args, as a [redistest.Proxy] passes it
// to the match function of DropReplies, runs s by EVALSHA or EVAL.
func Runs(args []string, s *driver.Script) bool {
	if len(args) < 2 {
		return false
	}
	switch strings.ToUpper(args[0]) {
	case "EVALSHA":
		return args[1] == s.SHA1()
	case "EVAL":
		return args[1] == s.Source()
	}
	return false
}

// ExerciseScripts runs every script of [wire.Scripts] on key through n,
// as the lock client passes them, in a sequence that leaves key held by
// the token "tok2", and fails t on the first unexpected reply. key must
// not exist.
func ExerciseScripts(t *testing.T, n driver.Node, key string) {
	t.Helper()
	run(t, n, scriptSteps(key))
}

// CheckName fails t if name is not want or contains ACLUser or
// ACLPassword.
func CheckName(t *testing.T, name, want string) {
	t.Helper()
	if name != want {
		t.Errorf("Name() = %q, want %q", name, want)
	}
	if strings.Contains(name, ACLPassword) || strings.Contains(name, ACLUser) {
		t.Errorf("Name() = %q contains a credential", name)
	}
}

// dial dials url with a and closes the Node when t ends.
func dial[N Node](t *testing.T, a Adapter[N], url string) N {
	t.Helper()
	return dialer(a.Dial)(t, url)
}

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func digest(src string) string {
	sum := sha1.Sum([]byte(src))
	return hex.EncodeToString(sum[:])
}

// step is one script call and the status its reply must have (see
// Status); a want of nil means only that the call succeeds.
type step struct {
	script     string
	keys, args []string
	want       any
}

// run runs steps on n and fails t on the first unexpected reply.
func run(t *testing.T, n driver.Node, steps []step) {
	t.Helper()
	ctx := ctxTimeout(t, 5*time.Second)
	for i, st := range steps {
		got, err := eval(ctx, n, st)
		if err != nil {
			t.Fatalf("step %d: %s %q %q: %v", i, st.script, st.keys, st.args, err)
		}
		if st.want == nil {
			continue
		}
		if status, ok := Status(got); !ok || status != st.want {
			t.Fatalf("step %d: %s %q %q = %#v, want status %d", i, st.script, st.keys, st.args, got, st.want)
		}
	}
}

// The statuses of the scripts' replies.
const (
	granted = int64(1)  // acquire took the key, or found it its own
	refused = int64(0)  // acquire found the key held by another token
	done    = int64(1)  // release or extend found the key held by the token
	absent  = int64(0)  // release or extend found no key
	foreign = int64(-1) // release or extend found the key held by another token
)

// scriptSteps exercises every script in wire.Scripts on key.
func scriptSteps(key string) []step {
	forceFloor := nextForceFloor()
	return []step{
		acquireStep(key, "tok1", "60000", granted),
		acquireStep(key, "tok1", "60000", granted), // a retried acquire finds its grant
		extendStep(key, "tok1", "120000", done),
		extendStep(key, "tok2", "120000", foreign),
		releaseStep(key, "tok2", foreign),
		releaseStep(key, "tok1", done),
		releaseStep(key, "tok1", absent),
		extendStep(key, "tok1", "1000", absent),
		acquireStep(key, "tok2", "60000", granted),
		{script: "probe", keys: []string{wire.MarkerKey(key)}},
		inspectStep(key, granted), // tok2 holds the key
		// A lock of its own for the operator's scripts, so that key is
		// left held by tok2.
		acquireStep(key+":forced", "tok1", "60000", granted),
		// A grant whose fence exceeds the floor is newer than the
		// operator's read of the counters: it is left alone.
		forceStep(key+":forced", "0", absent),
		inspectStep(key+":forced", granted),
		forceStep(key+":forced", forceFloor, done),
		inspectStep(key+":forced", absent),
		// The removal sent again after a new grant: the grant's fence
		// exceeds the floor the first removal wrote, and it stays.
		acquireStep(key+":forced", "tok3", "60000", granted),
		forceStep(key+":forced", forceFloor, absent),
		inspectStep(key+":forced", granted),
		// A lock on two keys, whose slots share a hash tag so that a
		// cluster node takes them in one call.
		allStep("acquire", key, "tok1", granted),
		allStep("extend", key, "tok1", done),
		allStep("release", key, "tok1", done),
		// A permit of a semaphore of two, and an election's leader.
		permitStep("acquire_permit", key, "tok1", granted),
		permitStep("acquire_permit", key, "tok1", granted), // a retried acquire finds its grant
		permitStep("release_permit", key, "tok1", done),
		acquireStep(key+":elect", "tok1", "60000", granted),
		{script: "elect", keys: []string{key + ":elect", wire.TermKey(key + ":elect")}, args: []string{"tok1", "7", fenceTTL}, want: done},
		{script: "leader", keys: []string{key + ":elect", wire.TermKey(key + ":elect")}, want: granted},
		// A read-write lock: a reader, a writer refused beside it that
		// records its intent and takes it back, the reader's extension
		// and release; and Adopt's read of a held lock.
		rwStep("rw_read", key, "tok1", granted),
		rwStep("rw_read", key, "tok1", granted), // a retried acquire finds its grant
		rwStep("rw_write", key, "tok2", refused),
		rwStep("rw_drop", key, "tok2", done),
		rwStep("rw_extend", key, "tok1", done),
		rwStep("rw_release", key, "tok1", done),
		rwStep("rw_write", key, "tok2 owner", granted),
		{script: "adopt", keys: wire.Adopt(key+":rw", "tok2", 1).Keys, args: wire.Adopt(key+":rw", "tok2", 1).Args, want: granted},
		releaseStep(key+":rw", "tok2 owner", done),
	}
}

// rwStep is a step of the scripts of a read-write lock on key + ":rw",
// with token, which is also the writer's intent ID; the keys and
// arguments are spelt out as the lock client passes them.
func rwStep(script, key, token string, want any) step {
	key += ":rw"
	all := []string{key, wire.ReadersKey(key), wire.IntentKey(key), wire.MarkerKey(key)}
	switch script {
	case "rw_read":
		return step{script, all, []string{token, "60000", "0"}, want}
	case "rw_write":
		return step{script, all, []string{token, "60000", "0", token, "60000"}, want}
	case "rw_drop":
		return step{script, []string{wire.IntentKey(key)}, []string{token, key}, want}
	case "rw_extend":
		return step{script, []string{wire.ReadersKey(key), wire.MarkerKey(key), key}, []string{token, "120000"}, want}
	}
	return step{script, []string{wire.ReadersKey(key), key, wire.MarkerKey(key)}, []string{token, "0"}, want}
}

// permitStep is a step of the scripts of a semaphore of two permits on
// key, with token; the keys and arguments are spelt out as the lock client
// passes them, for slot 0.
func permitStep(script, key, token string, want any) step {
	s0, s1 := wire.PermitKey(key, 0), wire.PermitKey(key, 1)
	keys := []string{s0, s1}
	if script == "acquire_permit" {
		return step{script, append(keys, wire.MarkerKey(key), wire.SizeKey(key)), []string{token, "60000", "0", "2", "0"}, want}
	}
	return step{script, append(keys, wire.SizeKey(key), wire.MarkerKey(key)), []string{token, "0", "2", "0", key}, want}
}

// allStep is a step of the scripts of a lock on two keys that share the
// hash tag "{lockall}", with token; the keys and arguments are spelt out
// as the lock client passes them, as for the steps above.
func allStep(script, key, token string, want any) step {
	k1, k2 := "{lockall}:"+key+":1", "{lockall}:"+key+":2"
	marker := wire.MarkerKey(k1)
	switch script {
	case "acquire":
		return step{script, []string{k1, k2, marker}, []string{token, "60000", "0", "2"}, want}
	case "extend":
		return step{script, []string{k1, k2, marker}, []string{token, "60000", "2"}, want}
	}
	return step{script, []string{k1, k2, marker}, []string{token, "0", "", "2"}, want}
}

func inspectStep(key string, want any) step {
	return step{"inspect", []string{key, wire.MarkerKey(key)}, nil, want}
}

// The arguments of the scripts (wire/lua/*.lua) are spelt out here only, as the
// lock client passes them, with no quarantine.
const fenceTTL = "600000" // ms

func acquireStep(key, token, ttl string, want any) step {
	return step{"acquire", []string{key, wire.MarkerKey(key)}, []string{token, ttl, "0"}, want}
}

// forceFloors counts the floors that nextForceFloor handed out.
var forceFloors atomic.Int64

// nextForceFloor returns a fence floor above every fence a node hands out
// from its clock before the year 2255, and above every floor it returned
// before by a billion: the fence counter is the hash slot's, so steps on a
// key in a slot whose counter earlier steps raised to their floor (a
// cluster exercised twice, with keys that share a hash tag) need a floor
// above it.
func nextForceFloor() string {
	return strconv.FormatInt(9_000_000_000_000_000+forceFloors.Add(1)*1_000_000_000, 10)
}

func forceStep(key, floor string, want any) step {
	return step{"force", []string{key, wire.MarkerKey(key)}, []string{floor}, want}
}

func releaseStep(key, token string, want any) step {
	return step{"release", []string{key, wire.MarkerKey(key)}, []string{token, "0"}, want}
}

func extendStep(key, token, ttl string, want any) step {
	return step{"extend", []string{key, wire.MarkerKey(key)}, []string{token, ttl}, want}
}

// eval runs st on n and returns the reply.
func eval(ctx context.Context, n driver.Node, st step) (any, error) {
	s, err := script(st.script)
	if err != nil {
		return nil, err
	}
	v, err := n.Eval(ctx, s, st.keys, st.args)
	return canonical(v), err
}

// canonical returns a reply with every array as a []any: an adapter may
// return an array of integers as a []int64 instead (see driver.Node).
func canonical(v any) any {
	switch v := v.(type) {
	case []int64:
		a := make([]any, len(v))
		for i, e := range v {
			a[i] = e
		}
		return a
	case []any:
		a := make([]any, len(v))
		for i, e := range v {
			a[i] = canonical(e)
		}
		return a
	}
	return v
}

// Acquire runs the acquire script on n as the lock client does, without
// restart quarantine, to take key for token for ttl milliseconds, and
// returns the reply, whose [Status] is 1 for a grant and 0 for a refusal.
func Acquire(ctx context.Context, n driver.Node, key, token string, ttl int) (any, error) {
	return eval(ctx, n, acquireStep(key, token, strconv.Itoa(ttl), nil))
}

// Status returns the status of a lock script's reply: the reply itself
// when it is an integer, or else its first element, which must be one. ok
// is false for any other reply.
func Status(reply any) (status int64, ok bool) {
	switch r := reply.(type) {
	case int64:
		return r, true
	case []int64:
		if len(r) > 0 {
			return r[0], true
		}
	case []any:
		if len(r) > 0 {
			status, ok = r[0].(int64)
		}
	}
	return status, ok
}

// addUser creates the ACL user ACLUser on srv, who may run the scripts:
// any command on any key, and the channels that release publishes on.
// (Redis 7 gives a new user no channels.)
func addUser(t *testing.T, srv *redistest.Server) {
	t.Helper()
	srv.MustDo(t, "ACL", "SETUSER", ACLUser, "on", ">"+ACLPassword, "~*", "&redlock:released:*", "+@all")
}

// inDB reports whether key exists in database db of srv.
func inDB(t *testing.T, srv *redistest.Server, db int, key string) bool {
	t.Helper()
	n, err := srv.DoIn(db, "EXISTS", key)
	if err != nil {
		t.Fatalf("EXISTS %s in database %d: %v", key, db, err)
	}
	return n == int64(1)
}
