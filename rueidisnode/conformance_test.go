package rueidisnode_test

import (
	"testing"

	"github.com/quorumlock/redlock/driver/drivertest"
	"github.com/quorumlock/redlock/rueidisnode"
)

// TestConformance checks the lock algorithm through this adapter.
func TestConformance(t *testing.T) { drivertest.TestClient(t, dial) }

// BenchmarkLockRelease measures TryLock then Release on 1, 3 and 5 nodes.
func BenchmarkLockRelease(b *testing.B) { drivertest.BenchmarkClient(b, dial) }

// dial is Dial without options, as package drivertest takes it.
func dial(url string) (*rueidisnode.Node, error) { return rueidisnode.Dial(url) }
