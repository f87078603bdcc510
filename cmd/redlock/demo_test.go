package main

import (
	"strings"
	"testing"

	"github.com/quorumlock/redlock/redistest"
)

// The demo works with nothing but this program: embedded nodes.
func TestDemoEmbedded(t *testing.T) {
	t.Parallel()
	r := run(t, "demo", "--phase", "1s")
	expect(t, r, 0, "embedded Redis-protocol nodes", "restart quarantine: off",
		"phase 1", "phase 2: stopping node 4 and node 5", "phase 3: stopping node 3",
		"errors.Is(err, redlock.ErrNoQuorum) = true",
		"PASS  no overlapping holders", "PASS  fences strictly increased", "PASS  no lost updates",
		"demo PASSED")
	if strings.Contains(r.stdout, "FAIL") {
		t.Fatalf("a check failed:\n%s", r)
	}
}

// With --nodes the demo runs against real servers, which it leaves
// running; with restart quarantine on, it waits for fresh servers first.
func TestDemoRealNodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no quarantine", []string{"--no-quarantine"}},
		{"quarantine", []string{"--ttl", "1s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.StartN(t, 5, redistest.Config{})
			args := append([]string{"demo", "--phase", "1s", nodesFlag(srv...)}, tc.args...)
			r := run(t, args...)
			expect(t, r, 0, "cutting off node 4 and node 5", "demo PASSED")
			if strings.Contains(r.stdout, "FAIL") {
				t.Fatalf("a check failed:\n%s", r)
			}
			for _, s := range srv {
				if !s.Running() {
					t.Fatalf("the demo stopped a real server")
				}
			}
		})
	}
}
