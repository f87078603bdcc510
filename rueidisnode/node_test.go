package rueidisnode_test

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/quorumlock/redlock/driver/drivertest"
	"github.com/quorumlock/redlock/redistest"
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
	redistest.Main(m, closeAll)
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
