package redlock

import (
	"testing"

	"github.com/quorumlock/redlock/internal/redistest"
)

// TestMain fails the tests if they leave goroutines running.
func TestMain(m *testing.M) { redistest.Main(m) }
