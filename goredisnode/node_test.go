package goredisnode_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/driver/drivertest"
	"github.com/quorumlock/redlock/goredisnode"
	"github.com/quorumlock/redlock/redistest"
	"github.com/redis/go-redis/v9"
)

// The tests that every adapter shares are in package drivertest, run by
// TestAdapter (adapter_internal_test.go) and TestConformance
// (conformance_test.go); this file has TestMain and the tests of New, which
// wraps go-redis's own clients, retrying ones included.

// exampleURLs are the URLs of the servers that TestMain starts for the
// examples.
var exampleURLs []string

// TestMain starts the servers of the examples, runs the tests, closes the
// servers and fails the tests if they left goroutines running.
func TestMain(m *testing.M) {
	servers, closeAll := redistest.ForMain(3, redistest.Config{})
	exampleURLs = redistest.URLs(servers)
	redistest.Main(m, closeAll)
}

func TestNew(t *testing.T) {
	t.Parallel()
	const secret = drivertest.ACLPassword
	srv := redistest.Start(t, redistest.Config{Unix: true})
	c := redis.NewClient(&redis.Options{
		Network: "unix", Addr: srv.Addr(), DB: 2,
		Username: "default", Password: "",
		MaxRetries: -1, ContextTimeoutEnabled: true,
	})
	defer c.Close()

	n := goredisnode.New(c, "")
	drivertest.CheckName(t, n.Name(), srv.Addr()+"/2")
	drivertest.ExerciseScripts(t, n, "lock:new")
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	// The caller's client is still open.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("client closed by Node.Close: %v", err)
	}
	if n := goredisnode.New(c, "primary"); n.Name() != "primary" {
		t.Errorf("Name() = %q, want primary", n.Name())
	}

	var u redis.UniversalClient = redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:1"}, DB: 1})
	defer u.Close()
	if n := goredisnode.New(u, ""); n.Name() != "127.0.0.1:1/1" {
		t.Errorf("Name() of a universal client = %q", n.Name())
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"10.0.0.2:7000", "10.0.0.1:7000"}, Password: secret})
	defer cc.Close()
	drivertest.CheckName(t, goredisnode.New(cc, "").Name(), "10.0.0.1:7000,10.0.0.2:7000")
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"b": "10.0.0.2:6379", "a": "10.0.0.1:6379"}, Password: secret})
	defer ring.Close()
	drivertest.CheckName(t, goredisnode.New(ring, "").Name(), "10.0.0.1:6379,10.0.0.2:6379")

	other := &otherScripter{Scripter: c, secret: secret}
	name := goredisnode.New(other, "").Name()
	if !strings.HasPrefix(name, "*goredisnode_test.otherScripter@0x") || strings.Contains(name, secret) {
		t.Errorf("Name() of another Scripter = %q", name)
	}
	if again := goredisnode.New(other, "").Name(); again != name {
		t.Errorf("Name() of the same client changed from %q to %q", name, again)
	}
}

type otherScripter struct {
	redis.Scripter
	secret string
}

// TestAcquireRetried checks that the acquire script is idempotent under
// client-level retries: when the reply to an applied acquire is lost, a
// client that retries the command gets the grant it had already taken.
// (The shared table checks that a dialled Node does not retry at all.)
func TestAcquireRetried(t *testing.T) {
	t.Parallel()
	acquire := drivertest.Script(t, "acquire")
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
				return strings.EqualFold(args[0], tt.name) && drivertest.Runs(args, acquire)
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
			got, err := drivertest.Acquire(ctx, n, "lock:retry", "tok", 60000)
			if status, _ := drivertest.Status(got); err != nil || status != 1 {
				t.Fatalf("acquire = %#v, %v; want a grant", got, err)
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
