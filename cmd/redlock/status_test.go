package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
)

func TestStatus(t *testing.T) {
	t.Parallel()
	srv := redistest.StartN(t, 5, redistest.Config{})
	nodes := nodesFlag(srv...)

	expect(t, run(t, "status", nodes, "st"), 0, `lock "st": FREE (5 of 5 nodes answered, quorum 3)`)

	dir := t.TempDir()
	p := start(t, dir, nil, "run", "--no-quarantine", nodes, "st", "--", "sh", "-c",
		`echo "$REDLOCK_FENCE" > fence; while [ ! -e stop ]; do sleep 0.05; done`)
	waitFor(t, 30*time.Second, "the command to start", func() bool { return fileExists(filepath.Join(dir, "fence")) || p.exited() })
	b, _ := os.ReadFile(filepath.Join(dir, "fence"))
	fence, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}

	// The run recorded its TTL on the fresh servers, so a client with
	// restart quarantine on sees them quarantined for a while.
	r := run(t, "status", nodes, "st")
	expect(t, r, 0, `lock "st": HELD by `, "quarantined until")
	r = run(t, "status", "--no-quarantine", nodes, "st")
	// A quorum holds it; a node that was slow to answer may not.
	expect(t, r, 0, `lock "st": HELD by `, "of 5 nodes (quorum 3)", "unless extended", "fence counter: ", "healthy")

	var rep statusReport
	r = run(t, "status", "--json", nodes, "st")
	expect(t, r, 0)
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r)
	}
	if rep.State != "held" || rep.HeldOn < 3 || rep.Holder == "" || rep.TTLMillis <= 0 {
		t.Fatalf("status --json: unexpected report:\n%s", r)
	}
	// The lock's fence is the largest its quorum granted; a node that
	// answered after the quorum may have counted higher.
	if rep.Fence < fence {
		t.Fatalf("status shows fence counter %d below the holder's fence %d:\n%s", rep.Fence, fence, r)
	}

	// Nodes down: still held with three; unknown with fewer answers than a
	// quorum needs.
	// Two nodes go down: those that missed the grant, if any, first, so
	// that a quorum of holders stays up.
	var order []int
	for i, n := range rep.Nodes {
		if !n.Held {
			order = append(order, i)
		}
	}
	for i, n := range rep.Nodes {
		if n.Held {
			order = append(order, i)
		}
	}
	for _, i := range order[:2] {
		if err := srv[i].Kill(); err != nil {
			t.Fatal(err)
		}
	}
	expect(t, run(t, "status", "--no-quarantine", nodes, "st"), 0, "HELD", "of 5 nodes", "unreachable")
	if err := os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	expect(t, p.wait(), 0)
	expect(t, run(t, "status", nodes, "st"), 0, "FREE (3 of 5 nodes answered, quorum 3)")
	if err := srv[order[2]].Kill(); err != nil {
		t.Fatal(err)
	}
	expect(t, run(t, "status", nodes, "st"), exitUnavailable, "UNKNOWN: only 2 of 5 nodes answered")
}
