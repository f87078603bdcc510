package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
)

// release --force removes a lock that a 'redlock run' holds: the run
// learns of the loss and stops its command, and the next holder's fence is
// greater. Without --force, or without --yes on a stdin that is not a
// terminal, it removes nothing.
func TestReleaseForce(t *testing.T) {
	t.Parallel()
	srv := redistest.StartN(t, 3, redistest.Config{})
	nodes := nodesFlag(srv...)

	dir := t.TempDir()
	p := start(t, dir, nil, "run", "--no-quarantine", "--ttl", "3s", "--owner", "stuck-job", nodes, "job", "--", "sh", "-c",
		`echo "$REDLOCK_FENCE $REDLOCK_LOCK_ID" > held.tmp && mv held.tmp held; while :; do sleep 0.05; done`)
	waitFor(t, 30*time.Second, "the command to start", func() bool { return fileExists(filepath.Join(dir, "held")) || p.exited() })
	b, _ := os.ReadFile(filepath.Join(dir, "held"))
	fenceText, id, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	fence, err := strconv.ParseInt(fenceText, 10, 64)
	if err != nil || len(id) != 12 {
		t.Fatalf("the command saw REDLOCK_FENCE and REDLOCK_LOCK_ID %q\n%s", b, p.wait())
	}

	expect(t, run(t, "release", nodes, "job"), exitUsage, "--force", "redlock run")
	expect(t, run(t, "release", "--force", nodes, "job"), exitUsage, "not a terminal", "--yes")
	expect(t, run(t, "inspect", nodes, "job"), 0, "HELD by "+id)

	r := run(t, "release", "--force", "--yes", "--json", nodes, "job")
	expect(t, r, 0)
	rep := parseJSON[releaseReport](t, r)
	if !rep.Released || rep.Removed < 2 || rep.Confirmed != 3 || rep.FenceFloor < fence {
		t.Fatalf("release --json: unexpected report:\n%s", r)
	}
	for _, n := range rep.Nodes {
		if n.Removed && (n.Holder != id || n.Owner != "stuck-job" || n.TTLMillis <= 0) {
			t.Fatalf("release --json: a node removed another holder's key:\n%s", r)
		}
	}
	// The holder learns of it at its next extension, and stops its
	// command.
	expect(t, p.wait(), exitLockLost, "LOST the lock")

	r = run(t, "run", "--no-quarantine", "--wait", "0s", nodes, "job", "--", "sh", "-c", `echo "fence=$REDLOCK_FENCE"`)
	expect(t, r, 0, "fence=")
	_, after, _ := strings.Cut(r.stdout, "fence=")
	next, err := strconv.ParseInt(strings.TrimSpace(after), 10, 64)
	if err != nil || next <= fence || next <= rep.FenceFloor {
		t.Fatalf("the next holder's fence %q is not above the removed holder's %d and the floor %d:\n%s", after, fence, rep.FenceFloor, r)
	}
	expect(t, run(t, "release", "--force", "--yes", nodes, "job"), 0, `lock "job": nothing to remove`)

	// A holder that crashed with a long TTL, and a node down.
	if err := srv[2].Kill(); err != nil {
		t.Fatal(err)
	}
	for _, s := range srv[:2] {
		s.MustDo(t, "SET", "crashed", "crashed-token batch 7", "PX", "3600000")
	}
	r = run(t, "release", "--force", "-y", nodes, "crashed")
	expect(t, r, 0, `lock "crashed": REMOVED the keys of `+tokenID("crashed-token")+` ("batch 7") from 2 of 3 nodes (2 confirmed, quorum 2)`,
		"fence floor: ", "not stopped")
	for _, s := range srv[:2] {
		if v := s.MustDo(t, "GET", "crashed"); v != nil {
			t.Fatalf("the key is still there after release --force: %v\n%s", v, r)
		}
	}

	// Refusals and too few nodes: nothing is released.
	for _, s := range srv[:2] {
		s.MustDo(t, "HSET", "hash", "f", "v")
	}
	expect(t, run(t, "release", "--force", "-y", nodes, "hash"), exitConfig, "NOT RELEASED", "WRONGTYPE", "another type")
	if err := srv[1].Kill(); err != nil {
		t.Fatal(err)
	}
	r = run(t, "release", "--force", "-y", "--json", nodes, "crashed")
	expect(t, r, exitUnavailable, "not released")
	if rep := parseJSON[releaseReport](t, r); rep.Released || rep.Confirmed != 1 {
		t.Fatalf("release --json with two nodes down: unexpected report:\n%s", r)
	}
}
