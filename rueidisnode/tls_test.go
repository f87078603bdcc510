package rueidisnode_test

import (
	"testing"

	"github.com/quorumlock/redlock/driver/tlsfiles"
	"github.com/quorumlock/redlock/internal/tlsfilestest"
	"github.com/quorumlock/redlock/rueidisnode"
)

// TestDialTLS checks Dial's TLS options against servers that require
// client certificates: package tlsfilestest has the cases.
func TestDialTLS(t *testing.T) {
	t.Parallel()
	tlsfilestest.TestDial(t, func(url string, o tlsfiles.Options) (tlsfilestest.Node, error) {
		return rueidisnode.Dial(url,
			rueidisnode.WithTLSConfig(o.Config), rueidisnode.WithTLSFiles(o.Files), rueidisnode.WithServerName(o.ServerName))
	})
}
