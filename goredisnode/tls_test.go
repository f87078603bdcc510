package goredisnode_test

import (
	"testing"

	"github.com/quorumlock/redlock/driver/tlsfiles"
	"github.com/quorumlock/redlock/goredisnode"
	"github.com/quorumlock/redlock/internal/tlsfilestest"
)

// TestDialTLS checks Dial's TLS options against servers that require
// client certificates: package tlsfilestest has the cases.
func TestDialTLS(t *testing.T) {
	t.Parallel()
	tlsfilestest.TestDial(t, func(url string, o tlsfiles.Options) (tlsfilestest.Node, error) {
		return goredisnode.Dial(url,
			goredisnode.WithTLSConfig(o.Config), goredisnode.WithTLSFiles(o.Files), goredisnode.WithServerName(o.ServerName))
	})
}
