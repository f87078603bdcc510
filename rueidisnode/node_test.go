package rueidisnode_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/driver"
	"github.com/quorumlock/redlock/driver/drivertest"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/rueidisnode"
	"github.com/redis/rueidis"
)

// The tests that every adapter shares are in package drivertest, run by
// TestAdapter (adapter_internal_test.go) and TestConformance
// (conformance_test.go); this file has TestMain and the tests of New, which
// wraps a rueidis client.

// exampleURLs are the URLs of the servers that TestMain starts for the
// examples.
var exampleURLs []string

// TestMain starts the servers of the examples, runs the tests, closes the
// servers and fails the tests if they left goroutines running.
func TestMain(m *testing.M) {
	servers, closeAll := redistest.ForMain(3, redistest.Config{})
	exampleURLs = redistest.URLs(servers)
	redistest.Main(m, closeAll, redistest.IgnoreGoroutine(
		"github.com/redis/rueidis.(*clusterClient).redirectOrNew.func1",
		"a rueidis cluster client that a MOVED reply sends back to the node it asked closes its old connection "+
			"to that node 5s later, in a goroutine that Close does not stop; the cases that move slots start some"))
}

// newClient returns a rueidis client of the test's own for database db of
// srv.
func newClient(t *testing.T, srv *redistest.Server, db int) rueidis.Client {
	t.Helper()
	opt := rueidis.ClientOption{
		InitAddress:       []string{srv.Addr()},
		SelectDB:          db,
		DisableCache:      true,
		DisableRetry:      true,
		ForceSingleClient: true,
	}
	if srv.Network() == "unix" {
		opt.DialCtxFn = func(ctx context.Context, addr string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
			return d.DialContext(ctx, "unix", addr)
		}
	}
	c, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNew(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Config{Unix: true})
	c := newClient(t, srv, 2)
	defer c.Close()

	// rueidis does not report the database, so the name has no "/DB".
	n := rueidisnode.New(c, "")
	drivertest.CheckName(t, n.Name(), srv.Addr())
	drivertest.ExerciseScripts(t, n, "lock:new")
	if v, err := srv.DoIn(2, "GET", "lock:new"); v != "tok2" || err != nil {
		t.Errorf("GET lock:new in database 2 = %#v, %v; want tok2", v, err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	// The caller's client is still open.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Do(ctx, c.B().Ping().Build()).Error(); err != nil {
		t.Fatalf("client closed by Node.Close: %v", err)
	}
	if n := rueidisnode.New(c, "primary"); n.Name() != "primary" {
		t.Errorf("Name() = %q, want primary", n.Name())
	}
}

// TestNewCluster checks a Node over a rueidis cluster client that the
// caller made.
func TestNewCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3, redistest.Config{})
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: cl.Addrs()[:1], DisableCache: true, DisableRetry: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n := rueidisnode.New(c, "")
	defer n.Close()
	// rueidis names the nodes it learned from the cluster.
	drivertest.CheckName(t, n.Name(), strings.Join(slices.Sorted(slices.Values(cl.Addrs())), ","))
	drivertest.ExerciseCluster(t, n, cl, ":cluster")
}

// TestDialCluster checks the Node that Dial makes for a cluster URL: Dial
// does not connect, Eval fails while the cluster is down and works once
// it is back; a URL that names plain servers as a cluster makes Eval fail
// with the servers' error reply; and one plain server named as a cluster
// by cluster=true is used as a single server.
func TestDialCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3, redistest.Config{})
	for _, m := range cl.Masters() {
		if err := m.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	n, err := rueidisnode.Dial(cl.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("Dial took %v", d)
	}
	drivertest.CheckName(t, n.Name(), strings.Join(slices.Sorted(slices.Values(cl.Addrs())), ","))
	for range 2 { // the first try fails, and so does the next
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		start := time.Now()
		if got, err := drivertest.Acquire(ctx, n, "lock:down", "tok", 60000); err == nil {
			t.Fatalf("acquire on a cluster that is down = %#v, want an error", got)
		}
		cancel()
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("Eval with a 300ms deadline took %v", d)
		}
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
	n, err = rueidisnode.Dial(plain[0].URL() + "?addr=" + plain[1].Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = drivertest.Acquire(ctx, n, "lock:plain", "tok", 60000)
	if reply := (*driver.ReplyError)(nil); !errors.As(err, &reply) || reply.Code() != "ERR" {
		t.Fatalf("acquire through a cluster client on plain servers: %v (%T), want a *driver.ReplyError with the code ERR", err, err)
	}
	t.Logf("plain servers as a cluster: %v", err)

	n, err = rueidisnode.Dial(plain[0].URL() + "?cluster=true")
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	drivertest.ExerciseScripts(t, n, "lock:one")
	if v := plain[0].MustDo(t, "GET", "lock:one"); v != "tok2" {
		t.Fatalf("GET lock:one = %#v, want tok2", v)
	}
}

// TestNewFailover checks a Node over a rueidis Sentinel client across a
// failover that the Sentinel makes (see drivertest.ExerciseFailover).
func TestNewFailover(t *testing.T) {
	t.Parallel()
	master := redistest.Start(t, redistest.Config{})
	link := redistest.StartProxy(t, master)
	replica := redistest.StartReplica(t, master, link, redistest.Config{})
	sentinel := redistest.StartSentinel(t, "locks", master, redistest.Config{})
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:  []string{sentinel.Addr()},
		Sentinel:     rueidis.SentinelOption{MasterSet: "locks"},
		DisableCache: true,
		DisableRetry: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n := rueidisnode.New(c, "locks")
	defer n.Close()
	drivertest.ExerciseFailover(t, n, master, replica, link, sentinel)
}
