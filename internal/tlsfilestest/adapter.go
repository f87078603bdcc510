package tlsfilestest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/admin"
	"github.com/quorumlock/redlock/driver"
	"github.com/quorumlock/redlock/driver/tlsfiles"
	"github.com/quorumlock/redlock/internal/wire"
	"github.com/quorumlock/redlock/observe"
)

// A Node is what an adapter's Dial returns: a driver.Node that Close
// closes.
type Node interface {
	driver.Node
	Close() error
}

// A Dialer is an adapter's Dial with the options that o sets: its
// WithTLSConfig, WithTLSFiles and WithServerName, each if o sets it. It
// must not connect.
type Dialer func(url string, o tlsfiles.Options) (Node, error)

// TestDial checks an adapter's Dial with its TLS options against
// redis-server processes that require TLS and client certificates
// (tls-auth-clients yes): locks taken, extended, inspected and released
// over mutual TLS, with files and with a *tls.Config, for one server and
// for a cluster; every set-up that cannot work (no CA, the wrong CA, no
// client certificate, one the server does not trust, an expired one, a
// server name or a server certificate that is wrong) refused at once,
// with ErrRefused after one round however long the context, and with the
// x509 error or the TLS alert that says why; and certificates rotated on
// disk, the client's and the CA's, used by new connections while a held
// lock stays held. Its subtests run in parallel.
func TestDial(t *testing.T, dial Dialer) {
	for _, tc := range []struct {
		name string
		run  func(*testing.T, Dialer)
	}{
		{"MutualTLS", testMutualTLS},
		{"Config", testConfig},
		{"Refusals", testRefusals},
		{"RotateClientCertificate", testRotateClient},
		{"RotateCA", testRotateCA},
		{"Cluster", testCluster},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, dial)
		})
	}
}

// mustDial dials url with o, fails t if that fails, and closes the node
// when t ends.
func mustDial(t *testing.T, dial Dialer, url string, o tlsfiles.Options) Node {
	t.Helper()
	n, err := dial(url, o)
	if err != nil {
		t.Fatalf("Dial(%q, %+v): %v", url, o, err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// newClient returns a lock client over nodes, without restart quarantine
// (the servers are new), closed when t ends.
func newClient(t *testing.T, nodes ...Node) *redlock.Client {
	t.Helper()
	return newClientOpts(t, &redlock.Options{DisableQuarantine: true}, nodes...)
}

// newClientOpts is newClient with opts.
func newClientOpts(t *testing.T, opts *redlock.Options, nodes ...Node) *redlock.Client {
	t.Helper()
	ns := make([]redlock.Node, len(nodes))
	for i, n := range nodes {
		ns[i] = n
	}
	c, err := redlock.New(ns, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// clientFiles returns the files of a client that trusts ca and presents
// a certificate that signer issues, written to a directory of the test.
func clientFiles(t *testing.T, ca, signer *CA, leaf Leaf) tlsfiles.Files {
	t.Helper()
	dir := t.TempDir()
	leaf.Client = true
	if leaf.CommonName == "" {
		leaf.CommonName = "locker"
	}
	cert, key := signer.Issue(t, leaf).Write(t, dir)
	return tlsfiles.Files{CACert: ca.Write(t, dir), Cert: cert, Key: key}
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// lockCycle takes, extends, inspects and releases a lock through c.
func lockCycle(t *testing.T, c *redlock.Client, key string) {
	t.Helper()
	ctx := ctxTimeout(t, time.Minute)
	l, err := c.Lock(ctx, key, 10*time.Second)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if err := l.Extend(ctx, 20*time.Second); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	ins, err := admin.New(c).Inspect(ctx, key)
	if err != nil || ins.State != admin.KeyHeld || ins.Holder != l.ID() {
		t.Fatalf("Inspect = %+v, %v; want held by %s", ins, err, l.ID())
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

func testMutualTLS(t *testing.T, dial Dialer) {
	ca := NewCA(t, "ca")
	files := clientFiles(t, ca, ca, Leaf{})
	var nodes []Node
	for range 3 {
		srv := StartRedis(t, RedisConfig{CA: ca})
		nodes = append(nodes, mustDial(t, dial, srv.URL(), tlsfiles.Options{Files: files}))
	}
	lockCycle(t, newClient(t, nodes...), "tls:mutual")
}

// testConfig dials with a *tls.Config of the caller's own, alone and
// with files on top of it, and with a server name of its own.
func testConfig(t *testing.T, dial Dialer) {
	ca, other := NewCA(t, "ca"), NewCA(t, "other")
	srv := StartRedis(t, RedisConfig{CA: ca, Cert: ca.Issue(t, Leaf{CommonName: "server", Server: true, Client: true,
		DNSNames: []string{"redis.internal"}})})
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	cfg := &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{ca.Issue(t, Leaf{CommonName: "locker", Client: true}).TLS(t)}}

	// The certificate is for redis.internal, not for the URL's host.
	n := mustDial(t, dial, srv.URL(), tlsfiles.Options{Config: cfg, ServerName: "redis.internal"})
	lockCycle(t, newClient(t, n), "tls:config")
	if len(cfg.Certificates) != 1 || cfg.ServerName != "" {
		t.Error("Dial modified the *tls.Config it was given")
	}

	// A config whose client certificate the server does not trust, with
	// files on top: the files' certificate is presented.
	bad := &tls.Config{RootCAs: pool, ServerName: "redis.internal",
		Certificates: []tls.Certificate{other.Issue(t, Leaf{CommonName: "stranger", Client: true}).TLS(t)}}
	files := clientFiles(t, ca, ca, Leaf{})
	files.CACert = ""
	n = mustDial(t, dial, srv.URL(), tlsfiles.Options{Config: bad, Files: files})
	lockCycle(t, newClient(t, n), "tls:config-files")

	// Verification off, as skip_verify=true in the URL or an
	// InsecureSkipVerify config asks.
	n = mustDial(t, dial, srv.URL()+"?skip_verify=true", tlsfiles.Options{Files: clientFiles(t, other, ca, Leaf{})})
	lockCycle(t, newClient(t, n), "tls:skip-verify")
	n = mustDial(t, dial, srv.URL(), tlsfiles.Options{Config: &tls.Config{InsecureSkipVerify: true}, Files: clientFiles(t, other, ca, Leaf{})})
	lockCycle(t, newClient(t, n), "tls:insecure")

	// TLS options with a URL that does not ask for TLS.
	plain := "redis://" + srv.Addr()
	for _, o := range []tlsfiles.Options{{Config: cfg}, {Files: files}, {ServerName: "redis.internal"}} {
		if n, err := dial(plain, o); err == nil {
			n.Close()
			t.Errorf("Dial(%q, %+v) succeeded: it would connect in the clear", plain, o)
		} else if !strings.Contains(err.Error(), "rediss://") {
			t.Errorf("Dial(%q, %+v): %v, want an error that says to use rediss://", plain, o, err)
		}
	}
	// Files that cannot be read.
	missing := files
	missing.Key = files.Key + ".missing"
	if n, err := dial(srv.URL(), tlsfiles.Options{Files: missing}); err == nil {
		n.Close()
		t.Error("Dial with a missing key file succeeded")
	}
}

// A refusal is one wrong set-up and how the error says what is wrong.
type refusal struct {
	name  string
	url   string
	opts  tlsfiles.Options
	check func(err error) bool
	want  string // what the check looks for
}

func alertIs(want tls.AlertError) func(error) bool {
	return func(err error) bool {
		a, ok := tlsfiles.Alert(err)
		return ok && a == want
	}
}

func testRefusals(t *testing.T, dial Dialer) {
	ca, other := NewCA(t, "ca"), NewCA(t, "other")
	srv := StartRedis(t, RedisConfig{CA: ca})
	old := StartRedis(t, RedisConfig{CA: ca, Cert: ca.Issue(t, Leaf{CommonName: "server", Server: true, Client: true,
		NotBefore: time.Now().Add(-72 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})})
	good := clientFiles(t, ca, ca, Leaf{})
	noCA := good
	noCA.CACert = ""
	noCert := tlsfiles.Files{CACert: good.CACert}
	// Each check has its own target for errors.As: the subtests run in
	// parallel.
	unknownAuthority := func(err error) bool {
		var unknown x509.UnknownAuthorityError
		return errors.As(err, &unknown)
	}
	for _, r := range []refusal{
		{"NoCA", srv.URL(), tlsfiles.Options{Files: noCA}, unknownAuthority, "an x509.UnknownAuthorityError"},
		{"WrongCA", srv.URL(), tlsfiles.Options{Files: clientFiles(t, other, ca, Leaf{})}, unknownAuthority, "an x509.UnknownAuthorityError"},
		{"NoClientCertificate", srv.URL(), tlsfiles.Options{Files: noCert},
			alertIs(tlsfiles.AlertCertificateRequired), "the alert certificate required"},
		{"UntrustedClientCertificate", srv.URL(), tlsfiles.Options{Files: clientFiles(t, ca, other, Leaf{})},
			func(err error) bool { a, ok := tlsfiles.Alert(err); return ok && tlsfiles.Refusal(a) }, "a TLS alert that refuses"},
		{"ExpiredClientCertificate", srv.URL(), tlsfiles.Options{Files: clientFiles(t, ca, ca, Leaf{
			NotBefore: time.Now().Add(-72 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})},
			alertIs(tlsfiles.AlertCertificateExpired), "the alert certificate expired"},
		{"WrongServerName", srv.URL(), tlsfiles.Options{Files: good, ServerName: "redis.example"},
			func(err error) bool { var hostname x509.HostnameError; return errors.As(err, &hostname) }, "an x509.HostnameError"},
		{"ExpiredServerCertificate", old.URL(), tlsfiles.Options{Files: good},
			func(err error) bool {
				var invalid x509.CertificateInvalidError
				return errors.As(err, &invalid) && invalid.Reason == x509.Expired
			}, "an x509.CertificateInvalidError for Expired"},
	} {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			n := mustDial(t, dial, r.url, r.opts)
			// The refusal must come back within the round: seven TLS
			// handshakes at once on a loaded machine can take longer
			// than the default node timeout (250ms), and a node that
			// has not answered is no refusal.
			c := newClientOpts(t, &redlock.Options{DisableQuarantine: true, NodeTimeout: 5 * time.Second}, n)
			// A context of minutes: only a refusal ends Lock after one
			// round.
			_, err := c.Lock(ctxTimeout(t, 5*time.Minute), "tls:refused", 10*time.Second)
			var oe *redlock.OpError
			if !errors.Is(err, redlock.ErrRefused) || !errors.As(err, &oe) || oe.Rounds != 1 {
				t.Fatalf("Lock = %v; want ErrRefused after one round", err)
			}
			res := oe.Nodes[0]
			if res.Outcome != observe.OutcomeRefused || !driver.IsCertificateError(res.Err) || !r.check(res.Err) {
				t.Fatalf("node %s %v: %v (%T); want a refusal with %s", res.Node, res.Outcome, res.Err, res.Err, r.want)
			}
			if st := admin.New(c).States()[0]; st.Health != observe.NodeRefusing {
				t.Fatalf("node state %v, want refusing", st.Health)
			}
			t.Logf("%s: %v", r.name, res.Err)
		})
	}
}

// testRotateClient replaces the client certificate with one of another
// authority while a lock is held, makes the servers trust only that
// authority and closes every connection: the lock is extended and
// released through new connections, which present the new certificate.
// A node given the old certificate in a *tls.Config, which cannot change,
// is refused from then on: the canary that shows that the servers do
// refuse the old certificate.
func testRotateClient(t *testing.T, dial Dialer) {
	ca, next := NewCA(t, "ca"), NewCA(t, "next")
	var servers []*Redis
	var nodes []Node
	files := clientFiles(t, ca, ca, Leaf{CommonName: "v1"})
	for range 3 {
		srv := StartRedis(t, RedisConfig{CA: ca})
		servers = append(servers, srv)
		nodes = append(nodes, mustDial(t, dial, srv.URL(), tlsfiles.Options{Files: files}))
	}
	c := newClient(t, nodes...)
	ctx := ctxTimeout(t, time.Minute)
	l, err := c.Lock(ctx, "tls:rotate", 30*time.Second)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	// Every node has a connection once each has answered.
	if ins, err := admin.New(c).Inspect(ctx, "tls:rotate"); err != nil || ins.State != admin.KeyHeld {
		t.Fatalf("Inspect = %+v, %v", ins, err)
	}

	// The agent writes the new pair, and the servers stop trusting the
	// old authority; the connections open until now are closed.
	next.Issue(t, Leaf{CommonName: "v2", Client: true}).WriteTo(t, files.Cert, files.Key)
	for _, s := range servers {
		s.TrustClientsOf(t, next)
		if s.KillClients(t) == 0 {
			t.Fatal("no client connection to close")
		}
	}
	// The adapter does not retry: a command sent on a connection that the
	// server closed fails, and the next is sent on a new connection.
	extendAgain(t, ctx, l)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	static := mustDial(t, dial, servers[0].URL(), tlsfiles.Options{Config: &tls.Config{RootCAs: pool,
		Certificates: []tls.Certificate{ca.Issue(t, Leaf{CommonName: "static", Client: true}).TLS(t)}}})
	if _, err := newClient(t, static).Lock(ctx, "tls:canary", time.Second); !errors.Is(err, redlock.ErrRefused) {
		t.Fatalf("Lock with a certificate of the old authority: %v; want ErrRefused", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release after the rotation: %v", err)
	}
}

// extendAgain extends l until an extension succeeds, as AutoExtend does:
// after connections were closed under it, the first attempts may fail
// with ErrNoQuorum; any other error fails t, and so does a lock that ends.
func extendAgain(t *testing.T, ctx context.Context, l *redlock.Lock) {
	t.Helper()
	for {
		err := l.Extend(ctx, 30*time.Second)
		if err == nil {
			return
		}
		if !errors.Is(err, redlock.ErrNoQuorum) || !time.Now().Before(l.Until()) {
			t.Fatalf("Extend after the rotation: %v", err)
		}
		t.Logf("Extend after the connections were closed: %v", err)
	}
}

// testRotateCA gives the server a certificate of a new authority: the
// client refuses it until its CA file trusts that authority too, which it
// reads again without being dialled anew.
func testRotateCA(t *testing.T, dial Dialer) {
	ca, next := NewCA(t, "ca"), NewCA(t, "next")
	srv := StartRedis(t, RedisConfig{CA: ca})
	files := clientFiles(t, ca, ca, Leaf{})
	n := mustDial(t, dial, srv.URL(), tlsfiles.Options{Files: files})
	c := newClient(t, n)
	lockCycle(t, c, "tls:ca")

	cert, key := next.Issue(t, Leaf{CommonName: "server v2", Server: true, Client: true}).Write(t, srv.Dir)
	srv.MustDo(t, "CONFIG", "SET", "tls-cert-file", cert, "tls-key-file", key)
	srv.KillClients(t)
	_, err := c.Lock(ctxTimeout(t, 5*time.Minute), "tls:ca", 10*time.Second)
	var unknown x509.UnknownAuthorityError
	if !errors.Is(err, redlock.ErrRefused) {
		t.Fatalf("Lock with the server's new certificate: %v; want ErrRefused", err)
	}
	var oe *redlock.OpError
	if errors.As(err, &oe); !errors.As(oe.Nodes[0].Err, &unknown) {
		t.Fatalf("Lock with the server's new certificate: %v; want an unknown authority", err)
	}
	WriteFile(t, files.CACert, append(ca.PEM(), next.PEM()...))
	lockCycle(t, c, "tls:ca")
}

// testCluster runs the lock through a cluster URL over mutual TLS.
func testCluster(t *testing.T, dial Dialer) {
	ca := NewCA(t, "ca")
	srv := StartRedis(t, RedisConfig{CA: ca, Cluster: true})
	srv.Cluster(t)
	n := mustDial(t, dial, srv.URL()+"?cluster=true", tlsfiles.Options{Files: clientFiles(t, ca, ca, Leaf{})})
	lockCycle(t, newClient(t, n), "tls:cluster")
	if v, err := srv.Do("EXISTS", wire.MarkerKey("tls:cluster")); err != nil || v != int64(1) {
		t.Fatalf("the fence counter is not on the cluster node: %v, %v", v, err)
	}
}
