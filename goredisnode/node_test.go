package goredisnode_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/driver"
	"github.com/quorumlock/redlock/driver/drivertest"
	"github.com/quorumlock/redlock/goredisnode"
	"github.com/quorumlock/redlock/internal/redistest"
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

	n := mustNew(t, c, "")
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
	if n := mustNew(t, c, "primary"); n.Name() != "primary" {
		t.Errorf("Name() = %q, want primary", n.Name())
	}

	var u redis.UniversalClient = redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:1"}, DB: 1, ContextTimeoutEnabled: true})
	defer u.Close()
	if n := mustNew(t, u, ""); n.Name() != "127.0.0.1:1/1" {
		t.Errorf("Name() of a universal client = %q", n.Name())
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"10.0.0.2:7000", "10.0.0.1:7000"}, Password: secret, ContextTimeoutEnabled: true})
	defer cc.Close()
	drivertest.CheckName(t, mustNew(t, cc, "").Name(), "10.0.0.1:7000,10.0.0.2:7000")
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"b": "10.0.0.2:6379", "a": "10.0.0.1:6379"}, Password: secret})
	defer ring.Close()
	drivertest.CheckName(t, mustNew(t, ring, "").Name(), "10.0.0.1:6379,10.0.0.2:6379")

	other := &otherScripter{Scripter: c, secret: secret}
	name := mustNew(t, other, "").Name()
	if !strings.HasPrefix(name, "*goredisnode_test.otherScripter@0x") || strings.Contains(name, secret) {
		t.Errorf("Name() of another Scripter = %q", name)
	}
	if again := mustNew(t, other, "").Name(); again != name {
		t.Errorf("Name() of the same client changed from %q to %q", name, again)
	}
}

// mustNew returns goredisnode.New(c, name), failing t on an error.
func mustNew(t *testing.T, c redis.Scripter, name string) *goredisnode.Node {
	t.Helper()
	n, err := goredisnode.New(c, name)
	if err != nil {
		t.Fatal(err)
	}
	return n
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
			n := mustNew(t, c, "")

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

// TestNewCluster checks Nodes over cluster clients that the caller made: a
// *redis.ClusterClient, and a universal client given the addresses of
// several masters, which is one.
func TestNewCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3, redistest.Config{})
	addrs := cl.Addrs()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, MaxRetries: -1, ContextTimeoutEnabled: true})
	defer cc.Close()
	n := mustNew(t, cc, "")
	defer n.Close()
	drivertest.CheckName(t, n.Name(), strings.Join(slices.Sorted(slices.Values(addrs)), ","))
	drivertest.ExerciseCluster(t, n, cl, ":cluster")

	u := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: addrs, MaxRetries: -1, ContextTimeoutEnabled: true})
	defer u.Close()
	if _, ok := u.(*redis.ClusterClient); !ok {
		t.Fatalf("a universal client of several addresses is a %T", u)
	}
	un := mustNew(t, u, "cluster")
	defer un.Close()
	drivertest.ExerciseCluster(t, un, cl, ":universal")
}

// TestDialCluster checks the Node that Dial makes for a cluster URL: it
// has a cluster client, Dial does not connect, Eval fails while the
// cluster is down and works once it is back; and a URL that names plain
// servers as a cluster makes Eval fail with the servers' error reply.
func TestDialCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3, redistest.Config{})
	for _, m := range cl.Masters() {
		if err := m.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	n, err := goredisnode.Dial(cl.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("Dial took %v", d)
	}
	cc, ok := n.Client().(*redis.ClusterClient)
	if !ok {
		t.Fatalf("Dial of a cluster URL made a %T", n.Client())
	}
	// Redirections are followed further than go-redis's default, unless
	// the URL says otherwise.
	if o := cc.Options(); o.MaxRedirects != 16 || o.MaxRetries != -1 || !o.ContextTimeoutEnabled {
		t.Errorf("cluster client: MaxRedirects %d, MaxRetries %d, ContextTimeoutEnabled %v", o.MaxRedirects, o.MaxRetries, o.ContextTimeoutEnabled)
	}
	n2, err := goredisnode.Dial(cl.URL() + "&max_redirects=2")
	if err != nil {
		t.Fatal(err)
	}
	defer n2.Close()
	if got := n2.Client().(*redis.ClusterClient).Options().MaxRedirects; got != 2 {
		t.Errorf("MaxRedirects %d with max_redirects=2 in the URL", got)
	}
	drivertest.CheckName(t, n.Name(), strings.Join(slices.Sorted(slices.Values(cl.Addrs())), ","))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if got, err := drivertest.Acquire(ctx, n, "lock:down", "tok", 60000); err == nil {
		t.Fatalf("acquire on a cluster that is down = %#v, want an error", got)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Eval with a 300ms deadline took %v", d)
	}
	for _, m := range cl.Masters() {
		if err := m.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.WaitOK(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		got, err := drivertest.Acquire(ctx, n, "lock:down", "tok", 60000)
		cancel()
		if err == nil {
			if status, _ := drivertest.Status(got); status != 1 {
				t.Fatalf("acquire = %#v, want a grant", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("acquire once the cluster is back: %v", err)
		}
	}

	plain := redistest.StartN(t, 2, redistest.Config{})
	n, err = goredisnode.Dial(plain[0].URL() + "?addr=" + plain[1].Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = drivertest.Acquire(ctx, n, "lock:plain", "tok", 60000)
	if reply := (*driver.ReplyError)(nil); !errors.As(err, &reply) || reply.Code() != "ERR" {
		t.Fatalf("acquire through a cluster client on plain servers: %v (%T), want a *driver.ReplyError with the code ERR", err, err)
	}
	t.Logf("plain servers as a cluster: %v", err)
}

// TestNewFailover checks a Node over a go-redis failover client, which
// asks a Sentinel for the master, across a failover that the Sentinel
// makes: the replica it promotes missed a grant, and the acquire script
// there reports the node quarantined (as after a restart) when asked for
// a quarantine, and grants the lock again when not.
func TestNewFailover(t *testing.T) {
	t.Parallel()
	master := redistest.Start(t, redistest.Config{})
	link := redistest.StartProxy(t, master)
	replica := redistest.StartReplica(t, master, link, redistest.Config{})
	sentinel := redistest.StartSentinel(t, "locks", master, redistest.Config{})
	fc := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:            "locks",
		SentinelAddrs:         []string{sentinel.Addr()},
		MaxRetries:            -1,
		ContextTimeoutEnabled: true,
	})
	defer fc.Close()
	n := mustNew(t, fc, "locks")
	defer n.Close()
	drivertest.ExerciseFailover(t, n, master, replica, link, sentinel)
}

// New refuses at once a go-redis client that ignores context deadlines
// (go-redis's default), saying what to set, rather than letting a node
// that does not answer hold a release or Close for seconds. A client made
// as advised works with one of three nodes paused. How long the release
// and Close take is logged; the benchmarks time such things.
func TestNewNeedsDeadlines(t *testing.T) {
	t.Parallel()
	srv := redistest.StartN(t, 3, redistest.Config{})
	def := redis.NewClient(&redis.Options{Addr: srv[0].Addr()})
	defer def.Close()
	fc := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "locks", SentinelAddrs: []string{srv[1].Addr()}})
	defer fc.Close()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv[2].Addr()}, MaxRetries: -1})
	defer cc.Close()
	for _, c := range []redis.Scripter{def, fc, cc} {
		n, err := goredisnode.New(c, "")
		if n != nil || !errors.Is(err, redlock.ErrInvalid) || !strings.Contains(err.Error(), "ContextTimeoutEnabled: true") {
			t.Fatalf("New(%T with default options) = %v, %v; want an error naming ContextTimeoutEnabled", c, n, err)
		}
	}

	var nodes []redlock.Node
	for _, s := range srv {
		// MaxRetries left at go-redis's default, 3: allowed.
		c := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true})
		defer c.Close()
		nodes = append(nodes, mustNew(t, c, ""))
	}
	locks, err := redlock.New(nodes, &redlock.Options{DisableQuarantine: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := locks.Lock(ctx, "k", 10*time.Second)
	if err != nil {
		locks.Close()
		t.Fatal(err)
	}
	if err := srv[2].Pause(); err != nil {
		t.Fatal(err)
	}
	defer srv[2].Resume()
	t0 := time.Now()
	relErr := l.Release(ctx)
	locks.Close()
	t.Logf("with one of three nodes paused, Release and Close took %v", time.Since(t0))
	if relErr != nil {
		t.Fatalf("Release with 2 of 3 nodes: %v", relErr)
	}
}
