package tlsfiles_test

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock/driver/tlsfiles"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/internal/tlsfilestest"
)

// TestMain fails the tests if they leave goroutines running.
func TestMain(m *testing.M) { redistest.Main(m) }

// A server is a TLS server on a loopback port that answers each
// connection with the common name of the client's certificate ("-" for
// none) and then echoes lines.
type server struct {
	addr string
	mu   sync.Mutex
	cfg  *tls.Config
}

func startServer(t *testing.T, cfg *tls.Config) *server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{addr: l.Addr().String(), cfg: cfg}
	var wg sync.WaitGroup
	conns := make(chan net.Conn, 64)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns <- c
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		for {
			select {
			case c := <-conns:
				c.Close()
				continue
			default:
			}
			break
		}
		wg.Wait()
	})
	return s
}

// set replaces the server's configuration for the connections it accepts
// from now on.
func (s *server) set(cfg *tls.Config) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg = cfg
}

func (s *server) serve(c net.Conn) {
	defer c.Close()
	s.mu.Lock()
	cfg := s.cfg
	s.mu.Unlock()
	tc := tls.Server(c, cfg)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := tc.Handshake(); err != nil {
		return
	}
	name := "-"
	if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 {
		name = certs[0].Subject.CommonName
	}
	if _, err := io.WriteString(tc, name+"\n"); err != nil {
		return
	}
	io.Copy(tc, tc)
}

// A conn is a client connection and what the server said first.
type conn struct {
	*tls.Conn
	r *bufio.Reader
}

// dial connects to s with cfg and reads the server's first line: the
// common name of the certificate the client presented. The error is that
// of the handshake or of that read.
func dial(s *server, cfg *tls.Config) (*conn, string, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", s.addr, cfg)
	if err != nil {
		return nil, "", err
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		c.Close()
		return nil, "", err
	}
	return &conn{c, r}, strings.TrimSuffix(line, "\n"), nil
}

// echo checks that c still carries data both ways.
func (c *conn) echo(t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(c, "ping\n"); err != nil {
		t.Fatalf("write on an open connection: %v", err)
	}
	if line, err := c.r.ReadString('\n'); err != nil || line != "ping\n" {
		t.Fatalf("echo on an open connection = %q, %v", line, err)
	}
}

// serverConfig returns a server configuration with the certificate p,
// that requires client certificates of the given authorities (none:
// does not ask for one).
func serverConfig(t *testing.T, p *tlsfilestest.Pair, clientCAs ...*tlsfilestest.CA) *tls.Config {
	cfg := &tls.Config{Certificates: []tls.Certificate{p.TLS(t)}}
	if len(clientCAs) > 0 {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		cfg.ClientCAs = x509.NewCertPool()
		for _, ca := range clientCAs {
			cfg.ClientCAs.AddCert(ca.Cert)
		}
	}
	return cfg
}

func load(t *testing.T, f tlsfiles.Files) *tlsfiles.Source {
	t.Helper()
	s, err := tlsfiles.Load(f)
	if err != nil {
		t.Fatalf("Load(%+v): %v", f, err)
	}
	return s
}

func TestMutualTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlsfilestest.NewCA(t, "ca")
	srv := startServer(t, serverConfig(t, ca.Issue(t, tlsfilestest.Leaf{CommonName: "server", Server: true}), ca))
	certFile, keyFile := ca.Issue(t, tlsfilestest.Leaf{CommonName: "client one", Client: true}).Write(t, dir)
	src := load(t, tlsfiles.Files{CACert: ca.Write(t, dir), Cert: certFile, Key: keyFile})

	cfg := src.Config(nil, "127.0.0.1")
	c, name, err := dial(srv, cfg)
	if err != nil {
		t.Fatalf("mutual TLS: %v", err)
	}
	defer c.Close()
	if name != "client one" {
		t.Fatalf("the server saw the client certificate %q, want client one", name)
	}
	if cfg.MinVersion != tls.VersionTLS12 || cfg.ServerName != "127.0.0.1" {
		t.Errorf("Config(nil): MinVersion %x, ServerName %q", cfg.MinVersion, cfg.ServerName)
	}
	leaf, err := src.ClientCertificate()
	if err != nil || leaf.Subject.CommonName != "client one" {
		t.Errorf("ClientCertificate() = %v, %v", leaf, err)
	}

	// "localhost" is in the server's certificate too; another name is not.
	if c, _, err := dial(srv, src.Config(nil, "localhost")); err != nil {
		t.Errorf("with the server name localhost: %v", err)
	} else {
		c.Close()
	}
	_, _, err = dial(srv, src.Config(nil, "redis.example"))
	var hostname x509.HostnameError
	var verr *tls.CertificateVerificationError
	if !errors.As(err, &hostname) || !errors.As(err, &verr) {
		t.Errorf("with a name the certificate does not hold: %v (%T), want an x509.HostnameError in a *tls.CertificateVerificationError", err, err)
	}
}

// A client certificate replaced on disk is presented at the next
// handshake, and connections already open are untouched. Files caught
// half replaced leave the last good pair in use.
func TestRotateClientCertificate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlsfilestest.NewCA(t, "ca")
	srv := startServer(t, serverConfig(t, ca.Issue(t, tlsfilestest.Leaf{CommonName: "server", Server: true}), ca))
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca.Issue(t, tlsfilestest.Leaf{CommonName: "v1", Client: true}).WriteTo(t, certFile, keyFile)
	cfg := load(t, tlsfiles.Files{CACert: ca.Write(t, dir), Cert: certFile, Key: keyFile}).Config(nil, "127.0.0.1")

	old, name, err := dial(srv, cfg)
	if err != nil || name != "v1" {
		t.Fatalf("first connection: %q, %v", name, err)
	}
	defer old.Close()

	// The certificate is replaced first; its key is not yet.
	v2 := ca.Issue(t, tlsfilestest.Leaf{CommonName: "v2", Client: true})
	tlsfilestest.WriteFile(t, certFile, v2.CertPEM)
	c, name, err := dial(srv, cfg)
	if err != nil || name != "v1" {
		t.Fatalf("with the new certificate and the old key: %q, %v; want the old pair presented", name, err)
	}
	c.Close()
	tlsfilestest.WriteFile(t, keyFile, v2.KeyPEM)
	c, name, err = dial(srv, cfg)
	if err != nil || name != "v2" {
		t.Fatalf("after the rotation: %q, %v; want v2 presented", name, err)
	}
	c.Close()
	old.echo(t)

	// Files that vanish, or hold garbage, leave v2 in use.
	if err := os.Remove(keyFile); err != nil {
		t.Fatal(err)
	}
	if c, name, err = dial(srv, cfg); err != nil || name != "v2" {
		t.Fatalf("with the key file gone: %q, %v", name, err)
	}
	c.Close()
	tlsfilestest.WriteFile(t, keyFile, []byte("not a key"))
	if c, name, err = dial(srv, cfg); err != nil || name != "v2" {
		t.Fatalf("with a broken key file: %q, %v", name, err)
	}
	c.Close()

	// A rotation that writes the files in place, at once, is seen too.
	v3 := ca.Issue(t, tlsfilestest.Leaf{CommonName: "v3", Client: true})
	if err := os.WriteFile(certFile, v3.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, v3.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if c, name, err = dial(srv, cfg); err != nil || name != "v3" {
		t.Fatalf("after a rotation in place: %q, %v; want v3", name, err)
	}
	c.Close()
	old.echo(t)
}

// The CA file is read again when it changes: a server whose certificate a
// new authority signs is refused until the file trusts that authority.
func TestRotateCA(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca1, ca2 := tlsfilestest.NewCA(t, "ca one"), tlsfilestest.NewCA(t, "ca two")
	srv := startServer(t, serverConfig(t, ca1.Issue(t, tlsfilestest.Leaf{CommonName: "server", Server: true})))
	caFile := filepath.Join(dir, "ca.crt")
	tlsfilestest.WriteFile(t, caFile, ca1.PEM())
	cfg := load(t, tlsfiles.Files{CACert: caFile}).Config(nil, "127.0.0.1")
	c, name, err := dial(srv, cfg)
	if err != nil || name != "-" {
		t.Fatalf("before the rotation: %q, %v", name, err)
	}
	defer c.Close()

	srv.set(serverConfig(t, ca2.Issue(t, tlsfilestest.Leaf{CommonName: "server", Server: true})))
	_, _, err = dial(srv, cfg)
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Fatalf("a server certificate of an authority not in the CA file: %v, want an x509.UnknownAuthorityError", err)
	}
	// A bundle of both, as a CA rotation goes.
	tlsfilestest.WriteFile(t, caFile, append(ca1.PEM(), ca2.PEM()...))
	c2, _, err := dial(srv, cfg)
	if err != nil {
		t.Fatalf("after the CA file trusts the new authority: %v", err)
	}
	c2.Close()
	c.echo(t)
}

// A directory of CA files, with other files in it, is read as redis-cli
// reads --cacertdir, and together with a CA file.
func TestCADirectory(t *testing.T) {
	t.Parallel()
	dir, cadir := t.TempDir(), t.TempDir()
	ca1, ca2 := tlsfilestest.NewCA(t, "ca one"), tlsfilestest.NewCA(t, "ca two")
	ca1.Write(t, cadir)
	tlsfilestest.WriteFile(t, filepath.Join(cadir, "README"), []byte("not a certificate\n"))
	if err := os.Mkdir(filepath.Join(cadir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("ca-one.crt", filepath.Join(cadir, "0badf00d.0")); err != nil {
		t.Fatal(err)
	}
	srv1 := startServer(t, serverConfig(t, ca1.Issue(t, tlsfilestest.Leaf{CommonName: "server", Server: true})))
	srv2 := startServer(t, serverConfig(t, ca2.Issue(t, tlsfilestest.Leaf{CommonName: "server", Server: true})))

	cfg := load(t, tlsfiles.Files{CACertDir: cadir}).Config(nil, "localhost")
	if c, _, err := dial(srv1, cfg); err != nil {
		t.Fatalf("CA from the directory: %v", err)
	} else {
		c.Close()
	}
	if _, _, err := dial(srv2, cfg); err == nil {
		t.Fatal("a server of an authority not in the directory was accepted")
	}
	// A new file in the directory is seen at the next handshake.
	ca2.Write(t, cadir)
	if c, _, err := dial(srv2, cfg); err != nil {
		t.Fatalf("after a CA was added to the directory: %v", err)
	} else {
		c.Close()
	}

	both := load(t, tlsfiles.Files{CACert: ca2.Write(t, dir), CACertDir: cadir}).Config(nil, "localhost")
	for _, s := range []*server{srv1, srv2} {
		if c, _, err := dial(s, both); err != nil {
			t.Fatalf("CA file and directory: %v", err)
		} else {
			c.Close()
		}
	}
}

// The checks that crypto/tls makes are all made: an expired certificate,
// one for a client only, and one of an unknown authority are refused, and
// so is a configuration without a server name.
func TestVerification(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlsfilestest.NewCA(t, "ca")
	src := load(t, tlsfiles.Files{CACert: ca.Write(t, dir)})
	expired := startServer(t, serverConfig(t, ca.Issue(t, tlsfilestest.Leaf{CommonName: "server", Server: true,
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)})))
	_, _, err := dial(expired, src.Config(nil, "127.0.0.1"))
	var invalid x509.CertificateInvalidError
	if !errors.As(err, &invalid) || invalid.Reason != x509.Expired {
		t.Errorf("an expired server certificate: %v, want an x509.CertificateInvalidError for Expired", err)
	}

	clientOnly := startServer(t, serverConfig(t, ca.Issue(t, tlsfilestest.Leaf{CommonName: "server", Client: true,
		IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})))
	if _, _, err := dial(clientOnly, src.Config(nil, "127.0.0.1")); err == nil {
		t.Error("a certificate that is not for TLS servers was accepted")
	}

	other := tlsfilestest.NewCA(t, "other")
	good := startServer(t, serverConfig(t, other.Issue(t, tlsfilestest.Leaf{CommonName: "server", Server: true})))
	var unknown x509.UnknownAuthorityError
	if _, _, err := dial(good, src.Config(nil, "127.0.0.1")); !errors.As(err, &unknown) {
		t.Errorf("an unknown authority: %v", err)
	}
	if _, _, err := dial(good, src.Config(nil, "")); err == nil || !strings.Contains(err.Error(), "no server name") {
		t.Errorf("without a server name: %v", err)
	}

	// A base that skips verification keeps doing so; one of the caller's
	// own checks runs after those of the files.
	insecure := src.Config(&tls.Config{InsecureSkipVerify: true}, "127.0.0.1")
	if c, _, err := dial(good, insecure); err != nil {
		t.Errorf("InsecureSkipVerify: %v", err)
	} else {
		c.Close()
	}
	mine := errors.New("refused by the caller's check")
	base := &tls.Config{VerifyConnection: func(tls.ConnectionState) error { return mine }, ServerName: "127.0.0.1"}
	srv := startServer(t, serverConfig(t, ca.Issue(t, tlsfilestest.Leaf{CommonName: "server", Server: true})))
	if _, _, err := dial(srv, src.Config(base, "")); !errors.Is(err, mine) {
		t.Errorf("the base's VerifyConnection: %v", err)
	}
	if base.InsecureSkipVerify || base.RootCAs != nil {
		t.Error("Config modified its base")
	}
}

// A server's refusal of the client certificate reaches the client as an
// alert, which Alert names and Refusal calls permanent.
func TestAlerts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, other := tlsfilestest.NewCA(t, "ca"), tlsfilestest.NewCA(t, "other")
	srv := startServer(t, serverConfig(t, ca.Issue(t, tlsfilestest.Leaf{CommonName: "server", Server: true}), ca))
	caFile := ca.Write(t, dir)

	_, _, err := dial(srv, load(t, tlsfiles.Files{CACert: caFile}).Config(nil, "127.0.0.1"))
	if a, ok := tlsfiles.Alert(err); !ok || a != tlsfiles.AlertCertificateRequired || !tlsfiles.Refusal(a) {
		t.Errorf("no client certificate: %v: Alert = %v, %v", err, a, ok)
	}
	if !strings.Contains(err.Error(), "certificate required") {
		t.Errorf("no client certificate: %v", err)
	}

	certFile, keyFile := other.Issue(t, tlsfilestest.Leaf{CommonName: "stranger", Client: true}).Write(t, dir)
	_, _, err = dial(srv, load(t, tlsfiles.Files{CACert: caFile, Cert: certFile, Key: keyFile}).Config(nil, "127.0.0.1"))
	if a, ok := tlsfiles.Alert(err); !ok || a != tlsfiles.AlertUnknownCA || !tlsfiles.Refusal(a) {
		t.Errorf("a client certificate of another authority: %v: Alert = %v, %v", err, a, ok)
	}

	for _, err := range []error{nil, io.EOF, errors.New("tls: certificate required"),
		&net.OpError{Op: "read", Err: errors.New("tls: certificate required")}} {
		if a, ok := tlsfiles.Alert(err); ok {
			t.Errorf("Alert(%v) = %v", err, a)
		}
	}
	if a, ok := tlsfiles.Alert(&net.OpError{Op: "remote error", Err: tls.AlertError(45)}); !ok || a != tlsfiles.AlertCertificateExpired {
		t.Errorf("Alert of certificate expired = %v, %v", a, ok)
	}
	if tlsfiles.Refusal(0) || tlsfiles.Refusal(80) { // close notify, internal error
		t.Error("Refusal of a transient alert")
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlsfilestest.NewCA(t, "ca")
	caFile := ca.Write(t, dir)
	certFile, keyFile := ca.Issue(t, tlsfilestest.Leaf{CommonName: "a", Client: true}).Write(t, dir)
	_, otherKey := ca.Issue(t, tlsfilestest.Leaf{CommonName: "b", Client: true}).Write(t, dir)
	junk := filepath.Join(dir, "junk")
	tlsfilestest.WriteFile(t, junk, []byte("junk"))
	missing := filepath.Join(dir, "missing.pem")
	emptyDir := t.TempDir()

	for _, tt := range []struct {
		f       tlsfiles.Files
		want    string
		missing bool
	}{
		{f: tlsfiles.Files{CACert: missing}, want: "missing.pem", missing: true},
		{f: tlsfiles.Files{CACert: junk}, want: "holds no PEM certificate"},
		{f: tlsfiles.Files{CACert: keyFile}, want: "holds no PEM certificate"},
		{f: tlsfiles.Files{CACertDir: missing}, want: "missing.pem", missing: true},
		{f: tlsfiles.Files{CACertDir: emptyDir}, want: "no file of PEM certificates"},
		{f: tlsfiles.Files{Cert: certFile}, want: "without its key"},
		{f: tlsfiles.Files{Key: keyFile}, want: "without its certificate"},
		{f: tlsfiles.Files{Cert: certFile, Key: missing}, want: "missing.pem", missing: true},
		{f: tlsfiles.Files{Cert: junk, Key: keyFile}, want: "holds no PEM certificate"},
		{f: tlsfiles.Files{Cert: certFile, Key: otherKey}, want: "does not match"},
		{f: tlsfiles.Files{Cert: certFile, Key: junk}, want: keyFile[:0] + "junk"},
	} {
		_, err := tlsfiles.Load(tt.f)
		if err == nil || !strings.Contains(err.Error(), tt.want) || errors.Is(err, fs.ErrNotExist) != tt.missing {
			t.Errorf("Load(%+v) = %v, want an error with %q (missing: %v)", tt.f, err, tt.want, tt.missing)
		}
	}
	src := load(t, tlsfiles.Files{CACert: caFile})
	if c, err := src.ClientCertificate(); c != nil || err != nil {
		t.Errorf("ClientCertificate without one = %v, %v", c, err)
	}
	if (tlsfiles.Files{}).IsZero() != true || (tlsfiles.Files{Cert: "x"}).IsZero() {
		t.Error("IsZero")
	}
	if src.Files().CACert != caFile {
		t.Error("Files")
	}
	// Both in one file, as some tools write them.
	both := filepath.Join(dir, "both.pem")
	cert, _ := os.ReadFile(certFile)
	key, _ := os.ReadFile(keyFile)
	tlsfilestest.WriteFile(t, both, append(cert, key...))
	load(t, tlsfiles.Files{Cert: both, Key: both})
}
