package redlock

import (
	"testing"

	"github.com/quorumlock/redlock/internal/leaktest"
)

// TestMain fails the tests if they leave goroutines running.
func TestMain(m *testing.M) { leaktest.Main(m) }
