package bench

import (
	"testing"

	"github.com/quorumlock/redlock/redistest"
)

// TestMain fails the tests if they leave goroutines running. A test binary
// started again by StartNetwork serves the network instead.
func TestMain(m *testing.M) {
	ServeNetworkIfChild()
	redistest.Main(m)
}
