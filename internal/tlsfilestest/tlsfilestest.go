// Package tlsfilestest makes certificate authorities and certificates for
// tests, in Go (no openssl needed), and starts redis-server processes that
// speak TLS and, as Redis does by default, ask every client for a
// certificate.
//
//	ca := tlsfilestest.NewCA(t, "test CA")
//	srv := tlsfilestest.StartRedis(t, tlsfilestest.RedisConfig{CA: ca})
//	client := ca.Issue(t, tlsfilestest.Leaf{CommonName: "locker", Client: true})
//	certFile, keyFile := client.Write(t, t.TempDir())
//	// rediss://127.0.0.1:PORT is srv.URL(); trust ca.Write(t, dir).
//
// Certificates use ECDSA P-256 keys; leaves are valid for 90 days from an
// hour ago unless told otherwise.
package tlsfilestest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
)

// A CA is a certificate authority that issues certificates.
type CA struct {
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// NewCA makes a self-signed certificate authority whose subject's common
// name is name, valid from an hour ago for a year. It fails t if it
// cannot.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"redlock tests"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, key: key}
}

// PEM returns the CA's certificate in PEM.
func (ca *CA) PEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// Write writes the CA's certificate in PEM to dir/NAME.crt, where NAME is
// the common name with spaces replaced, and returns the path.
func (ca *CA) Write(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, strings.ReplaceAll(ca.Cert.Subject.CommonName, " ", "-")+".crt")
	WriteFile(t, path, ca.PEM())
	return path
}

// Leaf says what certificate CA.Issue makes.
type Leaf struct {
	CommonName string
	// DNSNames and IPs are the names the certificate is valid for, as a
	// server's. A server certificate with neither is valid for
	// "localhost" and 127.0.0.1.
	DNSNames []string
	IPs      []net.IP
	// Server and Client say what the certificate may be used for: to
	// authenticate a TLS server, a TLS client, or both (Redis uses its
	// server certificate as a client certificate too, to replicas and on
	// the cluster bus, unless told otherwise).
	Server, Client bool
	// NotBefore and NotAfter bound its validity; by default from an hour
	// ago to 90 days from now.
	NotBefore, NotAfter time.Time
}

// A Pair is a certificate and its private key.
type Pair struct {
	Cert    *x509.Certificate
	CertPEM []byte
	KeyPEM  []byte
}

// Issue makes a certificate that ca signs. It fails t if it cannot.
func (ca *CA) Issue(t testing.TB, l Leaf) *Pair {
	t.Helper()
	key := newKey(t)
	if l.NotBefore.IsZero() {
		l.NotBefore = time.Now().Add(-time.Hour)
	}
	if l.NotAfter.IsZero() {
		l.NotAfter = time.Now().Add(90 * 24 * time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: l.CommonName, Organization: []string{"redlock tests"}},
		NotBefore:    l.NotBefore,
		NotAfter:     l.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		DNSNames:     l.DNSNames,
		IPAddresses:  l.IPs,
	}
	if l.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		if len(l.DNSNames) == 0 && len(l.IPs) == 0 {
			tmpl.DNSNames, tmpl.IPAddresses = []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}
		}
	}
	if l.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return &Pair{
		Cert:    cert,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
}

// Write writes the certificate and the key in PEM to dir/NAME.crt and
// dir/NAME.key, where NAME is the common name with spaces replaced, and
// returns their paths.
func (p *Pair) Write(t testing.TB, dir string) (certFile, keyFile string) {
	t.Helper()
	base := filepath.Join(dir, strings.ReplaceAll(p.Cert.Subject.CommonName, " ", "-"))
	return p.WriteTo(t, base+".crt", base+".key")
}

// WriteTo writes the certificate and the key in PEM to the given paths,
// each by writing a new file beside it and renaming it into place, as
// tools that rotate certificates do, and returns the paths.
func (p *Pair) WriteTo(t testing.TB, certFile, keyFile string) (string, string) {
	t.Helper()
	WriteFile(t, certFile, p.CertPEM)
	WriteFile(t, keyFile, p.KeyPEM)
	return certFile, keyFile
}

// TLS returns the pair as a tls.Certificate.
func (p *Pair) TLS(t testing.TB) tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// WriteFile writes data to path by writing a temporary file in the same
// directory and renaming it to path, so that a reader sees the old
// contents or the new, never a part. It fails t if it cannot.
func WriteFile(t testing.TB, path string, data []byte) {
	t.Helper()
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-")
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o600)
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		t.Fatal(err)
	}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// RedisConfig says how StartRedis runs a server.
type RedisConfig struct {
	// CA signs the server's certificate (unless Cert is given) and is the
	// authority whose client certificates the server accepts. Required.
	CA *CA
	// Cert is the server's certificate and key; by default one that CA
	// issues for "localhost" and 127.0.0.1, usable by a server and a
	// client.
	Cert *Pair
	// AuthClients is the server's tls-auth-clients: "yes" (the default
	// when empty, as in Redis), "optional" or "no".
	AuthClients string
	// Args are more redis-server arguments, after those of TLS, as in
	// redistest.Config.
	Args []string
	// Cluster makes the server a cluster node (see Redis.Cluster).
	Cluster bool
}

// A Redis is a redis-server process that serves TLS on a port of its own,
// beside the plain port that its redistest.Server methods (Do, MustDo,
// Kill, Restart, ...) use.
type Redis struct {
	*redistest.Server
	// TLSAddr is the address of the TLS port, "127.0.0.1:PORT".
	TLSAddr string
	// Dir holds the server's certificate files.
	Dir string
}

// StartRedis starts a redis-server with TLS as cfg says, and closes it
// when t ends. It fails t if the server does not start.
func StartRedis(t testing.TB, cfg RedisConfig) *Redis {
	t.Helper()
	if cfg.CA == nil {
		t.Fatal("tlsfilestest: RedisConfig.CA is required")
	}
	dir := t.TempDir()
	if cfg.Cert == nil {
		cfg.Cert = cfg.CA.Issue(t, Leaf{CommonName: "redis server", Server: true, Client: true})
	}
	certFile, keyFile := cfg.Cert.Write(t, dir)
	caFile := cfg.CA.Write(t, dir)
	if cfg.AuthClients == "" {
		cfg.AuthClients = "yes"
	}
	// Another process may take the free port before redis-server binds
	// it: try a few.
	var err error
	for range 3 {
		var port string
		if port, err = freePort(); err != nil {
			break
		}
		args := []string{
			"--tls-port", port,
			"--tls-cert-file", certFile,
			"--tls-key-file", keyFile,
			"--tls-ca-cert-file", caFile,
			"--tls-auth-clients", cfg.AuthClients,
		}
		if cfg.Cluster {
			// CLUSTER SLOTS and redirections name the TLS ports.
			args = append(args, "--tls-cluster", "yes", "--cluster-enabled", "yes",
				"--cluster-config-file", "nodes.conf")
		}
		var s *redistest.Server
		s, err = redistest.New(redistest.Config{Args: append(args, cfg.Args...)})
		if err == nil {
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Error(err)
				}
			})
			return &Redis{Server: s, TLSAddr: "127.0.0.1:" + port, Dir: dir}
		}
		if !strings.Contains(err.Error(), "in use") {
			break
		}
	}
	t.Fatal(err)
	return nil
}

// URL returns the server's URL for TLS, "rediss://127.0.0.1:PORT".
func (r *Redis) URL() string { return "rediss://" + r.TLSAddr }

// TrustClientsOf makes the server accept client certificates of the given
// authorities only, from its next handshake on (CONFIG SET
// tls-ca-cert-file). Connections already open are left as they are.
func (r *Redis) TrustClientsOf(t testing.TB, cas ...*CA) {
	t.Helper()
	var bundle []byte
	for _, ca := range cas {
		bundle = append(bundle, ca.PEM()...)
	}
	path := filepath.Join(r.Dir, "clients-"+strconv.FormatInt(time.Now().UnixNano(), 36)+".crt")
	WriteFile(t, path, bundle)
	r.MustDo(t, "CONFIG", "SET", "tls-ca-cert-file", path)
}

// KillClients closes every client connection of the server but those of
// its redistest methods (CLIENT KILL TYPE normal), and returns how many it
// closed. The clients make new connections, with new handshakes, for
// their next commands.
func (r *Redis) KillClients(t testing.TB) int64 {
	t.Helper()
	n, _ := r.MustDo(t, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes").(int64)
	return n
}

// Cluster makes the server, started with RedisConfig.Cluster, a cluster
// of one master that serves every hash slot, and waits until it reports
// cluster_state:ok. Its URL for a cluster client is URL()+"?cluster=true".
func (r *Redis) Cluster(t testing.TB) {
	t.Helper()
	r.MustDo(t, "CLUSTER", "ADDSLOTSRANGE", "0", "16383")
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := r.Do("CLUSTER", "INFO")
		s, _ := v.(string)
		if err == nil && strings.Contains(s, "cluster_state:ok") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("tlsfilestest: cluster not ok after 30s: %v %s", err, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freePort returns a TCP port on 127.0.0.1 that the kernel has just handed
// out.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", errors.Join(errors.New("tlsfilestest: finding a free port"), err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port, nil
}
