package drivertest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
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

// writeCert writes a self-signed certificate for 127.0.0.1 and its key to
// dir and returns their paths.
func writeCert(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "redlock test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile = filepath.Join(dir, "cert.pem")
	keyFile = filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// testTLS runs the scripts over rediss:// against a redis-server with a
// TLS port, and checks that the server certificate is verified.
func testTLS[N Node](t *testing.T, a Adapter[N]) {
	certFile, keyFile := writeCert(t, t.TempDir())
	port := strconv.Itoa(freePort(t))
	srv := redistest.Start(t, redistest.Config{Args: []string{
		"--tls-port", port,
		"--tls-cert-file", certFile,
		"--tls-key-file", keyFile,
		"--tls-ca-cert-file", certFile,
		"--tls-auth-clients", "no",
	}})
	addUser(t, srv)
	hostPort := "127.0.0.1:" + port

	// The certificate is self-signed, so verification is skipped here.
	n := dial(t, a, "rediss://"+ACLUser+":"+ACLPassword+"@"+hostPort+"/2?skip_verify=true")
	CheckName(t, n.Name(), hostPort+"/2")
	run(t, n, scriptSteps("lock:tls"))
	if !inDB(t, srv, 2, "lock:tls") {
		t.Error("key is not in database 2")
	}

	// With verification, the unknown certificate is refused.
	n = dial(t, a, "rediss://"+hostPort)
	_, err := eval(ctxTimeout(t, 5*time.Second), n, acquireStep("lock:tls2", "tok", "1000", nil))
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("Eval with an unverifiable certificate: %v, want a certificate error", err)
	}
}
