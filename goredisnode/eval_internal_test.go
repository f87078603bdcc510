package goredisnode

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// fakeScripter answers EvalSha and Eval with canned results, to exercise
// the paths a real server cannot easily produce. (The replies of a real
// server are decoded by the shared table, adapter_internal_test.go.)
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
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeScripter{evalSha: tt.evalSha, eval: tt.eval}
			n, err := New(f, "fake")
			if err != nil {
				t.Fatal(err)
			}
			got, err := n.eval(ctx, "sha", "src", []string{"k"}, []string{"a"})
			if !errors.Is(err, tt.wantErr) || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("eval = %#v, %v; want %#v, %v", got, err, tt.want, tt.wantErr)
			}
			if calls := strings.Join(f.calls, " "); calls != tt.wantCalls {
				t.Errorf("calls %q, want %q", calls, tt.wantCalls)
			}
		})
	}
	if n, err := New(&fakeScripter{}, "fake"); err != nil || n.Close() != nil {
		t.Errorf("Close of a wrapped client: %v", err)
	}
}

type redisError string

func (e redisError) Error() string { return string(e) }
func (redisError) RedisError()     {}
