package goredisnode

import (
	"crypto/tls"
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/driver/drivertest"
	"github.com/quorumlock/redlock/driver/tlsfiles"
	"github.com/quorumlock/redlock/internal/tlsfilestest"
	"github.com/redis/go-redis/v9"
)

// tlsOf returns the TLS configuration and the dialer of n's client.
func tlsOf(t *testing.T, n *Node) (*tls.Config, bool) {
	t.Helper()
	switch c := n.owned.(type) {
	case *redis.Client:
		return c.Options().TLSConfig, c.Options().Dialer != nil
	case *redis.ClusterClient:
		return c.Options().TLSConfig, c.Options().Dialer != nil
	}
	t.Fatalf("Dial made a %T", n.owned)
	return nil, false
}

// The options reach the client of one server and of a cluster alike, and
// are refused for a URL without TLS.
func TestDialOptions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlsfilestest.NewCA(t, "ca")
	cert, key := ca.Issue(t, tlsfilestest.Leaf{CommonName: "c", Client: true}).Write(t, dir)
	files := tlsfiles.Files{CACert: ca.Write(t, dir), Cert: cert, Key: key}
	const pw = drivertest.ACLPassword
	for _, url := range []string{
		"rediss://u:" + pw + "@10.0.0.1:6380/2",
		"rediss://u:" + pw + "@10.0.0.1:7000?addr=10.0.0.2:7000",
		"rediss://u:" + pw + "@10.0.0.1:7000?cluster=true",
	} {
		n, err := Dial(url, WithTLSFiles(files), WithServerName("redis.internal"))
		if err != nil {
			t.Fatalf("Dial(%q): %v", url, err)
		}
		cfg, dialer := tlsOf(t, n)
		if cfg == nil || cfg.ServerName != "redis.internal" || cfg.GetClientCertificate == nil || cfg.VerifyConnection == nil || !dialer {
			t.Errorf("Dial(%q): TLS config %+v, dialer %v", url, cfg, dialer)
		}
		n.Close()

		// Without options, the URL's own: verified against the host.
		n, err = Dial(url)
		if err != nil {
			t.Fatalf("Dial(%q): %v", url, err)
		}
		if cfg, _ := tlsOf(t, n); cfg == nil || cfg.ServerName != "10.0.0.1" || cfg.InsecureSkipVerify || cfg.VerifyConnection != nil {
			t.Errorf("Dial(%q) without options: TLS config %+v", url, cfg)
		}
		n.Close()
	}

	for _, url := range []string{"redis://u:" + pw + "@h:6379", "unix://u:" + pw + "@/tmp/redis.sock", "redis://u:" + pw + "@h:7000?cluster=true"} {
		n, err := Dial(url, WithServerName("h"))
		if err == nil {
			n.Close()
			t.Errorf("Dial(%q) with a TLS option succeeded", url)
			continue
		}
		if !errors.Is(err, tlsfiles.ErrNotTLS) || !strings.HasPrefix(err.Error(), "goredisnode: ") || strings.Contains(err.Error(), pw) {
			t.Errorf("Dial(%q) with a TLS option: %v", url, err)
		}
	}
	_, err := Dial("rediss://h:6380", WithTLSFiles(tlsfiles.Files{CACert: dir + "/missing.pem"}))
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "missing.pem") {
		t.Errorf("Dial with a missing CA file: %v", err)
	}
	// Options that set nothing change nothing.
	n, err := Dial("redis://h:6379", WithTLSConfig(nil), WithTLSFiles(tlsfiles.Files{}), WithServerName(""))
	if err != nil {
		t.Fatalf("Dial with empty options: %v", err)
	}
	n.Close()
}
