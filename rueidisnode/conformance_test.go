package rueidisnode_test

import (
	"testing"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/conformance"
	"github.com/quorumlock/redlock/rueidisnode"
)

func TestConformance(t *testing.T) {
	conformance.Run(t, func(t testing.TB, url string) redlock.Node {
		t.Helper()
		n, err := rueidisnode.Dial(url)
		if err != nil {
			t.Fatalf("Dial(%q): %v", url, err)
		}
		t.Cleanup(func() { n.Close() })
		return n
	})
}
