package goredisnode_test

import (
	"testing"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/conformance"
)

// node adapts dial (node_test.go) to conformance.Dialer.
func node(t testing.TB, url string) redlock.Node { return dial(t, url) }

func TestConformance(t *testing.T) { conformance.Run(t, node) }

// BenchmarkLockRelease measures TryLock then Release on 1, 3 and 5 nodes.
func BenchmarkLockRelease(b *testing.B) { conformance.Benchmark(b, node) }
