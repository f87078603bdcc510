package goredisnode_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/goredisnode"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// runs reports whether args runs s, by EVALSHA or EVAL.
func runs(args []string, s *redlock.Script) bool {
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

// TestAcquireRetried checks that the acquire script is idempotent under
// client-level retries: when the reply to an applied acquire is lost, a
// client that retries the command gets the grant it had already taken.
func TestAcquireRetried(t *testing.T) {
	t.Parallel()
	acquire := script(t, "acquire")
	for _, tt := range []struct {
		name   string
		loaded bool // whether the script is in the server's cache
	}{
		{"evalsha", true},
		{"eval", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t, redistest.Config{})
			if tt.loaded {
				srv.MustDo(t, "SCRIPT", "LOAD", acquire.Source())
			}
			proxy := redistest.StartProxy(t, srv)
			proxy.DropReplies(1, func(args []string) bool {
				return strings.EqualFold(args[0], tt.name) && runs(args, acquire)
			})
			c := redis.NewClient(&redis.Options{
				Addr:                  proxy.Addr(),
				MaxRetries:            3,
				ContextTimeoutEnabled: true,
			})
			t.Cleanup(func() { c.Close() })
			n := goredisnode.New(c, "")

			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			got, err := n.Eval(ctx, acquire, []string{"lock:retry"}, []string{"tok", "60000"})
			if err != nil || !reflect.DeepEqual(got, granted) {
				t.Fatalf("acquire = %#v, %v; want %v", got, err, granted)
			}
			if d := proxy.Dropped(); d != 1 {
				t.Fatalf("proxy dropped %d replies, want 1", d)
			}
			if v := srv.MustDo(t, "GET", "lock:retry"); v != "tok" {
				t.Fatalf("GET lock:retry = %#v, want tok", v)
			}
		})
	}
}

// TestDialDoesNotRetry checks that a dialled client reports a lost reply
// instead of sending the command again.
func TestDialDoesNotRetry(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Config{})
	proxy := redistest.StartProxy(t, srv)
	release := script(t, "release")
	srv.MustDo(t, "SCRIPT", "LOAD", release.Source()) // so that EVALSHA applies it
	n := dial(t, proxy.URL())
	run(t, n, []step{{"acquire", "lock:noretry", []string{"tok", "60000"}, granted}})

	proxy.DropReplies(1, func(args []string) bool { return runs(args, release) })
	ctx := ctxTimeout(t, 5*time.Second)
	if got, err := n.Eval(ctx, release, []string{"lock:noretry"}, []string{"tok"}); err == nil {
		t.Fatalf("release with its reply lost = %#v, want an error", got)
	}
	if d := proxy.Dropped(); d != 1 {
		t.Fatalf("proxy dropped %d replies, want 1", d)
	}
	// The release was applied once; the node works again afterwards.
	run(t, n, []step{{"release", "lock:noretry", []string{"tok"}, zero}})
}
