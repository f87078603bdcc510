package goredisnode

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

func digest(src string) string {
	sum := sha1.Sum([]byte(src))
	return hex.EncodeToString(sum[:])
}

// decodeTests are Lua scripts and the values Eval must return for them.
// The same table is in the rueidisnode tests.
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
	{name: "error reply", src: "return redis.error_reply('MYERR boom')", wantErr: "MYERR boom"},
	{name: "nested error", src: "return {1, redis.error_reply('MYERR nested')}", wantErr: "MYERR nested"},
	{name: "runtime error", src: "return redis.call('INCR', KEYS[1])", keys: []string{"decode:str"}, wantErr: "not an integer"},
	{name: "syntax error", src: "return (", wantErr: "ERR Error compiling script"},
}

func TestEvalDecodes(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Config{})
	srv.MustDo(t, "SET", "decode:str", "abc")
	n, err := Dial(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	for _, tt := range decodeTests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			// The first call loads the script with EVAL, the second runs
			// it with EVALSHA; both must decode alike.
			for range 2 {
				got, err := n.eval(ctx, digest(tt.src), tt.src, tt.keys, tt.args)
				if tt.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
						t.Fatalf("eval(%q) = %#v, %v; want error containing %q", tt.src, got, err, tt.wantErr)
					}
					continue
				}
				if err != nil || !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("eval(%q) = %#v, %v; want %#v", tt.src, got, err, tt.want)
				}
			}
		})
	}
}

// fakeScripter answers EvalSha and Eval with canned results, to exercise
// the paths a real server cannot easily produce.
type fakeScripter struct {
	redis.Scripter
	evalSha, eval *redis.Cmd
	calls         []string
}

func (f *fakeScripter) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	f.calls = append(f.calls, "evalsha")
	return f.evalSha
}

func (f *fakeScripter) Eval(ctx context.Context, src string, keys []string, args ...any) *redis.Cmd {
	f.calls = append(f.calls, "eval")
	return f.eval
}

func TestEvalFake(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	boom := errors.New("boom")
	for _, tt := range []struct {
		name      string
		evalSha   *redis.Cmd
		eval      *redis.Cmd
		want      any
		wantErr   error
		wantCalls string
	}{
		{
			name:      "nil reply",
			evalSha:   redis.NewCmdResult(nil, redis.Nil),
			want:      nil,
			wantCalls: "evalsha",
		},
		{
			name:      "noscript normalised",
			evalSha:   redis.NewCmdResult(nil, redis.ErrNoScript),
			eval:      redis.NewCmdResult(int64(7), nil),
			want:      int64(7),
			wantCalls: "evalsha eval",
		},
		{
			name:      "noscript raw",
			evalSha:   redis.NewCmdResult(nil, redisError("NOSCRIPT No matching script.")),
			eval:      redis.NewCmdResult(nil, redis.Nil),
			want:      nil,
			wantCalls: "evalsha eval",
		},
		{
			name:      "other error",
			evalSha:   redis.NewCmdResult(nil, boom),
			wantErr:   boom,
			wantCalls: "evalsha",
		},
		{
			name:      "resp3 types",
			evalSha:   redis.NewCmdResult([]any{true, false, 1.5, nil}, nil),
			want:      []any{int64(1), nil, "1.5", nil},
			wantCalls: "evalsha",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeScripter{evalSha: tt.evalSha, eval: tt.eval}
			n := New(f, "fake")
			got, err := n.eval(ctx, "sha", "src", []string{"k"}, []string{"a"})
			if !errors.Is(err, tt.wantErr) || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("eval = %#v, %v; want %#v, %v", got, err, tt.want, tt.wantErr)
			}
			if calls := strings.Join(f.calls, " "); calls != tt.wantCalls {
				t.Errorf("calls %q, want %q", calls, tt.wantCalls)
			}
		})
	}
	if err := New(&fakeScripter{}, "fake").Close(); err != nil {
		t.Errorf("Close of a wrapped client: %v", err)
	}
}

type redisError string

func (e redisError) Error() string { return string(e) }
func (redisError) RedisError()     {}

func TestDialOptions(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		url        string
		name       string
		tls        bool
		serverName string
	}{
		{url: "redis://127.0.0.1:6379", name: "127.0.0.1:6379/0"},
		{url: "redis://h", name: "h:6379/0"},
		{url: "redis://user:pw@h:7000/5", name: "h:7000/5"},
		{url: "redis://[::1]:7000/5", name: "[::1]:7000/5"},
		{url: "rediss://user:pw@redis.example:6380/2", name: "redis.example:6380/2", tls: true, serverName: "redis.example"},
		{url: "unix:///tmp/x/redis.sock", name: "/tmp/x/redis.sock/0"},
		{url: "unix://user:pw@/tmp/x/redis.sock?db=3", name: "/tmp/x/redis.sock/3"},
		{url: "redis://h?max_retries=5", name: "h:6379/0"},
	} {
		n, err := Dial(tt.url)
		if err != nil {
			t.Errorf("Dial(%q): %v", tt.url, err)
			continue
		}
		o := n.owned.Options()
		if n.Name() != tt.name {
			t.Errorf("Dial(%q).Name() = %q, want %q", tt.url, n.Name(), tt.name)
		}
		if o.MaxRetries > 0 || !o.ContextTimeoutEnabled || o.DialerRetries != 1 {
			t.Errorf("Dial(%q): MaxRetries %d, ContextTimeoutEnabled %v, DialerRetries %d",
				tt.url, o.MaxRetries, o.ContextTimeoutEnabled, o.DialerRetries)
		}
		if (o.TLSConfig != nil) != tt.tls {
			t.Errorf("Dial(%q): TLSConfig %v, want TLS %v", tt.url, o.TLSConfig, tt.tls)
		} else if tt.tls && o.TLSConfig.ServerName != tt.serverName {
			t.Errorf("Dial(%q): TLS server name %q, want %q", tt.url, o.TLSConfig.ServerName, tt.serverName)
		}
		if err := n.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := n.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	}
}
