package tlsfiles_test

import (
	"crypto/tls"
	"errors"
	"io/fs"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/driver/tlsfiles"
	"github.com/quorumlock/redlock/internal/tlsfilestest"
)

func TestOptionsApply(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlsfilestest.NewCA(t, "ca")
	cert, key := ca.Issue(t, tlsfilestest.Leaf{CommonName: "c", Client: true}).Write(t, dir)
	files := tlsfiles.Files{CACert: ca.Write(t, dir), Cert: cert, Key: key}
	urlCfg := func() *tls.Config { return &tls.Config{ServerName: "h", MinVersion: tls.VersionTLS12} }

	u := urlCfg()
	if got, err := (tlsfiles.Options{}).Apply(u); got != u || err != nil {
		t.Errorf("zero Options: %v, %v; want the URL's own", got, err)
	}
	if got, err := (tlsfiles.Options{}).Apply(nil); got != nil || err != nil {
		t.Errorf("zero Options without TLS: %v, %v", got, err)
	}
	for _, o := range []tlsfiles.Options{{Config: &tls.Config{}}, {Files: files}, {ServerName: "x"}} {
		if _, err := o.Apply(nil); !errors.Is(err, tlsfiles.ErrNotTLS) || !strings.Contains(err.Error(), "rediss://") {
			t.Errorf("%+v without TLS: %v, want ErrNotTLS", o, err)
		}
	}

	mine := &tls.Config{MinVersion: tls.VersionTLS13}
	u = urlCfg()
	u.InsecureSkipVerify = true // skip_verify=true in the URL
	got, err := tlsfiles.Options{Config: mine}.Apply(u)
	if err != nil || got == mine || got.ServerName != "h" || !got.InsecureSkipVerify || got.MinVersion != tls.VersionTLS13 {
		t.Errorf("Config: %+v, %v", got, err)
	}
	if mine.ServerName != "" || mine.InsecureSkipVerify {
		t.Error("Apply modified Options.Config")
	}
	u = urlCfg()
	got, err = tlsfiles.Options{ServerName: "redis.internal"}.Apply(u)
	if err != nil || got.ServerName != "redis.internal" || u.ServerName != "h" {
		t.Errorf("ServerName: %+v, %v; URL's %q", got, err, u.ServerName)
	}
	got, err = tlsfiles.Options{Files: files, ServerName: "redis.internal"}.Apply(urlCfg())
	if err != nil || got.GetClientCertificate == nil || got.VerifyConnection == nil || got.ServerName != "redis.internal" {
		t.Errorf("Files: %+v, %v", got, err)
	}
	_, err = tlsfiles.Options{Files: tlsfiles.Files{CACert: filepath.Join(dir, "missing")}}.Apply(urlCfg())
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// A server that refuses the client's certificate under TLS 1.3 sends its
// alert and closes the connection after the client's handshake is over.
// The client's writes then fail with a reset or a broken pipe; those of a
// connection from Dial report the alert instead.
func TestDialReportsAlert(t *testing.T) {
	t.Parallel()
	ca := tlsfilestest.NewCA(t, "ca")
	cfg := serverConfig(t, ca.Issue(t, tlsfilestest.Leaf{CommonName: "server", Server: true}), ca)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	closed := make(chan struct{}, 1)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			tc := tls.Server(c, cfg)
			tc.Handshake() // fails: no client certificate
			tc.Close()
			closed <- struct{}{}
		}
	}()
	client := load(t, tlsfiles.Files{CACert: ca.Write(t, t.TempDir())}).Config(nil, "127.0.0.1")

	for _, tc := range []struct {
		name  string
		dial  func() (net.Conn, error)
		alert bool
	}{
		{"tls.Dial", func() (net.Conn, error) { return tls.Dial("tcp", l.Addr().String(), client) }, false},
		{"tlsfiles.Dial", func() (net.Conn, error) {
			return tlsfiles.Dial(t.Context(), &net.Dialer{}, "tcp", l.Addr().String(), client)
		}, true},
	} {
		c, err := tc.dial()
		if err != nil {
			t.Fatalf("%s: the handshake failed on the client's side: %v", tc.name, err)
		}
		<-closed
		// The first write may be accepted before the server's reset comes
		// back; one of the next fails.
		var werr error
		for i := 0; i < 1000 && werr == nil; i++ {
			_, werr = c.Write([]byte("PING\r\n"))
		}
		c.Close()
		if werr == nil {
			t.Fatalf("%s: every write succeeded after the server closed the connection", tc.name)
		}
		a, ok := tlsfiles.Alert(werr)
		if ok != tc.alert || ok && a != tlsfiles.AlertCertificateRequired {
			t.Errorf("%s: write after the server's refusal: %v; alert %v, want %v", tc.name, werr, ok, tc.alert)
		}
	}
}
