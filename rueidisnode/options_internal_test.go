package rueidisnode

import (
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/driver/drivertest"
	"github.com/quorumlock/redlock/driver/tlsfiles"
)

// TLS options are refused for a URL without TLS, and files that cannot be
// read fail Dial; options that set nothing change nothing.
func TestDialOptions(t *testing.T) {
	t.Parallel()
	const pw = drivertest.ACLPassword
	for _, url := range []string{"redis://u:" + pw + "@h:6379", "unix://u:" + pw + "@/tmp/redis.sock", "redis://u:" + pw + "@h:7000?cluster=true"} {
		n, err := Dial(url, WithServerName("h"))
		if err == nil {
			n.Close()
			t.Errorf("Dial(%q) with a TLS option succeeded", url)
			continue
		}
		if !errors.Is(err, tlsfiles.ErrNotTLS) || !strings.HasPrefix(err.Error(), "rueidisnode: ") || strings.Contains(err.Error(), pw) {
			t.Errorf("Dial(%q) with a TLS option: %v", url, err)
		}
	}
	dir := t.TempDir()
	_, err := Dial("rediss://h:6380?addr=h:6381", WithTLSFiles(tlsfiles.Files{CACert: dir + "/missing.pem"}))
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "missing.pem") {
		t.Errorf("Dial with a missing CA file: %v", err)
	}
	n, err := Dial("redis://h:6379", WithTLSConfig(nil), WithTLSFiles(tlsfiles.Files{}), WithServerName(""))
	if err != nil {
		t.Fatalf("Dial with empty options: %v", err)
	}
	n.Close()
}
