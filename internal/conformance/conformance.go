// Package conformance is the test table that every Node adapter runs: the
// whole Redlock algorithm, exercised against real redis-server processes
// through the adapter under test.
package conformance

import (
	"testing"

	"github.com/quorumlock/redlock"
)

// A Dialer connects the adapter under test to the Redis server at url
// ("redis://127.0.0.1:PORT" or "unix:///path/to/socket"). It registers the
// closing of its client with t.Cleanup and fails t if it cannot connect.
type Dialer func(t testing.TB, url string) redlock.Node

// Run runs the conformance table against the adapter that dial creates.
func Run(t *testing.T, dial Dialer) {
	t.Helper()
	_ = dial // filled in by the core work; adapters call Run from their tests.
}
