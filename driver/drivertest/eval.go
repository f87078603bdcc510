package drivertest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock/driver"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/internal/wire"
)

func testScripts[N Node](t *testing.T, a Adapter[N]) {
	srv := redistest.Start(t, redistest.Config{})
	n := dial(t, a, srv.URL())
	run(t, n, scriptSteps("lock:a"))

	// Another token is refused with the remaining time to live.
	ctx := ctxTimeout(t, 5*time.Second)
	got, err := eval(ctx, n, acquireStep("lock:a", "tok3", "1000", nil))
	if err != nil {
		t.Fatal(err)
	}
	reply, ok := got.([]any)
	if !ok || len(reply) < 2 || reply[0] != refused {
		t.Fatalf("acquire of a held key = %#v, want [0 pttl ...]", got)
	}
	if pttl, ok := reply[1].(int64); !ok || pttl <= 0 || pttl > 60000 {
		t.Fatalf("acquire of a held key: pttl %#v, want in (0, 60000]", reply[1])
	}
	if v := srv.MustDo(t, "GET", "lock:a"); v != "tok2" {
		t.Fatalf("GET lock:a = %#v, want tok2", v)
	}
}

// decodeTests are Lua scripts and the values Eval must return for them.
var decodeTests = []struct {
	name    string
	src     string
	keys    []string
	args    []string
	want    any
	wantErr string // a substring of the error, if one is expected
}{
	{name: "integer", src: "return 42", want: int64(42)},
	{name: "negative", src: "return -2", want: int64(-2)},
	{name: "lua number", src: "return 3.7", want: int64(3)},
	{name: "bulk string", src: "return 'hello'", want: "hello"},
	{name: "status", src: "return redis.status_reply('OK')", want: "OK"},
	{name: "binary", src: "return ARGV[1]", args: []string{"\x00\xff\r\n"}, want: "\x00\xff\r\n"},
	{name: "nil", src: "return nil", want: nil},
	{name: "false", src: "return false", want: nil},
	{name: "true", src: "return true", want: int64(1)},
	{name: "missing key", src: "return redis.call('GET', KEYS[1])", keys: []string{"decode:missing"}, want: nil},
	{name: "double", src: "return {double=1.5}", want: "1.5"},
	{name: "empty array", src: "return {}", want: []any{}},
	{name: "array", src: "return {1, 0}", want: []any{int64(1), int64(0)}},
	{
		name: "nested",
		src:  "return {1, 'a', {2, 'b', {}}, false, 3}",
		want: []any{int64(1), "a", []any{int64(2), "b", []any{}}, nil, int64(3)},
	},
	{
		name: "keys and args",
		src:  "return {#KEYS, #ARGV, KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3]}",
		keys: []string{"decode:k1", "decode:k2"},
		args: []string{"a", "", "c"},
		want: []any{int64(2), int64(3), "decode:k1", "decode:k2", "a", "", "c"},
	},
	{name: "no keys or args", src: "return #KEYS + #ARGV", want: int64(0)},
	// Under RESP3, which both libraries speak, a script that asks for it
	// gets RESP3 types: they decode as their RESP2 forms do.
	{name: "resp3 true", src: "redis.setresp(3) return true", want: int64(1)},
	{name: "resp3 false", src: "redis.setresp(3) return false", want: nil},
	{name: "resp3 nil", src: "redis.setresp(3) return nil", want: nil},
	{name: "resp3 double", src: "redis.setresp(3) return {double=1.5}", want: "1.5"},
	{name: "resp3 big number", src: "redis.setresp(3) return {big_number='123456789012345678901234567890'}", want: "123456789012345678901234567890"},
	{name: "resp3 nested", src: "redis.setresp(3) return {1, true, false, {double=2.5}, {big_number='7'}, 'x'}", want: []any{int64(1), int64(1), nil, "2.5", "7", "x"}},
	{name: "error reply", src: "return redis.error_reply('MYERR boom')", wantErr: "MYERR boom"},
	{name: "nested error", src: "return {1, redis.error_reply('MYERR nested')}", wantErr: "MYERR nested"},
	{name: "runtime error", src: "return redis.call('INCR', KEYS[1])", keys: []string{"decode:str"}, wantErr: "not an integer"},
	{name: "syntax error", src: "return (", wantErr: "ERR Error compiling script"},
}

func testDecode[N Node](t *testing.T, a Adapter[N]) {
	srv := redistest.Start(t, redistest.Config{})
	srv.MustDo(t, "SET", "decode:str", "abc")
	n := dial(t, a, srv.URL())
	for _, tt := range decodeTests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := ctxTimeout(t, 5*time.Second)
			// The first call loads the script with EVAL, the second runs
			// it with EVALSHA; both must decode alike.
			for range 2 {
				got, err := a.EvalLua(n, ctx, digest(tt.src), tt.src, tt.keys, tt.args)
				if tt.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
						t.Fatalf("eval(%q) = %#v, %v; want error containing %q", tt.src, got, err, tt.wantErr)
					}
					if reply := (*driver.ReplyError)(nil); !errors.As(err, &reply) {
						t.Fatalf("eval(%q): error %v (%T) is not a *driver.ReplyError", tt.src, err, err)
					}
					continue
				}
				if err != nil || !reflect.DeepEqual(canonical(got), tt.want) {
					t.Fatalf("eval(%q) = %#v, %v; want %#v", tt.src, got, err, tt.want)
				}
			}
		})
	}
}

func testConcurrent[N Node](t *testing.T, a Adapter[N]) {
	srv := redistest.Start(t, redistest.Config{})
	n := dial(t, a, srv.URL())
	ctx := ctxTimeout(t, 10*time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := "lock:" + strconv.Itoa(g%8)
			tok := "tok" + strconv.Itoa(g)
			for range 20 {
				got, err := eval(ctx, n, acquireStep(key, tok, "60000", nil))
				if err != nil {
					errs <- err
					return
				}
				status, _ := Status(got)
				r, isArray := got.([]any)
				switch {
				case status == granted:
					got, err := eval(ctx, n, releaseStep(key, tok, nil))
					if status, _ := Status(got); err != nil || status != done {
						errs <- fmt.Errorf("release of a granted lock = %#v, %v", got, err)
						return
					}
				case status != refused || !isArray || len(r) < 2:
					errs <- fmt.Errorf("acquire = %#v", got)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// commandCalls returns how many times srv has run cmd since its statistics
// were last reset.
func commandCalls(t *testing.T, srv *redistest.Server, cmd string) int {
	t.Helper()
	info, _ := srv.MustDo(t, "INFO", "commandstats").(string)
	for _, line := range strings.Split(info, "\r\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
			n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			return n
		}
	}
	return 0
}

func testNoScriptFallback[N Node](t *testing.T, a Adapter[N]) {
	srv := redistest.Start(t, redistest.Config{})
	n := dial(t, a, srv.URL())
	scripts := make(map[string]bool)
	for _, st := range scriptSteps("") {
		scripts[st.script] = true
	}
	if len(scripts) != len(wire.Scripts()) {
		t.Fatalf("the steps run %d scripts, want all %d", len(scripts), len(wire.Scripts()))
	}
	for round := range 3 {
		srv.MustDo(t, "SCRIPT", "FLUSH")
		srv.MustDo(t, "CONFIG", "RESETSTAT")
		run(t, n, scriptSteps(fmt.Sprintf("lock:%d", round)))
		// Every call starts with EVALSHA; each script is sent with EVAL once,
		// when EVALSHA does not find it.
		if got, want := commandCalls(t, srv, "eval"), len(scripts); got != want {
			t.Errorf("round %d: %d EVAL calls, want %d", round, got, want)
		}
		if got, want := commandCalls(t, srv, "evalsha"), len(scriptSteps("")); got != want {
			t.Errorf("round %d: %d EVALSHA calls, want %d", round, got, want)
		}
	}
}

func testErrorReply[N Node](t *testing.T, a Adapter[N]) {
	srv := redistest.Start(t, redistest.Config{})
	n := dial(t, a, srv.URL())
	srv.MustDo(t, "HSET", "lock:hash", "f", "v")
	ctx := ctxTimeout(t, 5*time.Second)

	got, err := eval(ctx, n, acquireStep("lock:hash", "tok", "1000", nil))
	if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("acquire on a hash = %#v, %v; want a WRONGTYPE error", got, err)
	}
	// 1.5 is a number to Lua, and not an integer to SET PX.
	got, err = eval(ctx, n, acquireStep("lock:b", "tok", "1.5", nil))
	if err == nil || !strings.HasPrefix(err.Error(), "ERR ") || !strings.Contains(err.Error(), "not an integer") {
		t.Errorf("acquire with a bad ttl = %#v, %v; want an \"ERR ... not an integer\" error", got, err)
	}
	if !a.IsErrorReply(err) {
		t.Errorf("error %v (%T) is not the library's error reply", err, err)
	}
	var reply *driver.ReplyError
	if !errors.As(err, &reply) || reply.Code() != "ERR" || reply.Msg != err.Error() {
		t.Errorf("error %v (%T) is not a *driver.ReplyError with the code ERR and the server's message", err, err)
	}
}

func testContext[N Node](t *testing.T, a Adapter[N]) {
	srv := redistest.Start(t, redistest.Config{})
	n := dial(t, a, srv.URL())
	run(t, n, []step{acquireStep("lock:ctx", "tok", "60000", granted)})

	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	defer srv.Resume()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	got, err := eval(ctx, n, releaseStep("lock:ctx", "tok", nil))
	if err == nil {
		t.Fatalf("Eval on a paused server = %#v, want an error", got)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Eval on a paused server took %v with a 200ms deadline", d)
	}

	// A context that is already done fails at once.
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := eval(ctx, n, releaseStep("lock:ctx", "tok", nil)); err == nil {
		t.Error("Eval with a cancelled context succeeded")
	}
}
