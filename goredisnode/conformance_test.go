package goredisnode_test

import (
	"testing"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/goredisnode"
	"github.com/quorumlock/redlock/internal/conformance"
)

func TestConformance(t *testing.T) {
	conformance.Run(t, func(t testing.TB, url string) redlock.Node {
		t.Helper()
		n, err := goredisnode.Dial(url)
		if err != nil {
			t.Fatalf("Dial(%q): %v", url, err)
		}
		t.Cleanup(func() { n.Close() })
		return n
	})
}
