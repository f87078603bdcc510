package main

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
)

// tokenID is the ID that redlock shows for a lock key holding token: the
// first 12 hex digits of the token's SHA-1.
func tokenID(token string) string {
	sum := sha1.Sum([]byte(token))
	return hex.EncodeToString(sum[:6])
}

// parseJSON parses what a command printed with --json as a T.
func parseJSON[T any](t *testing.T, r result) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("the --json output as a %T: %v\n%s", v, err, r)
	}
	return v
}

// Inspect of a free lock, of one held by 'redlock run --owner' (with a node
// down, too), of a split one and of a key of another type.
func TestInspect(t *testing.T) {
	t.Parallel()
	srv := redistest.StartN(t, 3, redistest.Config{})
	nodes := nodesFlag(srv...)

	expect(t, run(t, "inspect", nodes, "job"), 0, `lock "job": FREE (3 of 3 nodes answered, quorum 2)`, "NODE", "OWNER")

	dir := t.TempDir()
	p := start(t, dir, nil, "run", "--no-quarantine", "--owner", "nightly report", nodes, "job", "--", "sh", "-c",
		`echo "$REDLOCK_LOCK_ID" > id.tmp && mv id.tmp id; while [ ! -e stop ]; do sleep 0.05; done`)
	waitFor(t, 30*time.Second, "the command to start", func() bool { return fileExists(filepath.Join(dir, "id")) || p.exited() })
	b, _ := os.ReadFile(filepath.Join(dir, "id"))
	id := strings.TrimSpace(string(b))
	if len(id) != 12 {
		t.Fatalf("REDLOCK_LOCK_ID is %q, not 12 hex digits\n%s", id, p.wait())
	}
	r := run(t, "inspect", "--no-quarantine", nodes, "job")
	expect(t, r, 0, `lock "job": HELD by `+id+` ("nightly report") on `, "of 3 nodes (quorum 2)", "nightly report", "healthy")
	r = run(t, "inspect", "--json", nodes, "job")
	expect(t, r, 0)
	rep := parseJSON[statusReport](t, r)
	if rep.State != "held" || rep.Holder != id || rep.Owner != "nightly report" || rep.HeldOn < 2 || rep.TTLMillis <= 0 ||
		rep.Ends == nil || rep.Fence <= 0 || rep.Answered != 3 || rep.Quorum != 2 || len(rep.Nodes) != 3 {
		t.Fatalf("inspect --json: unexpected report:\n%s", r)
	}
	for _, n := range rep.Nodes {
		if n.Held && (n.Holder != id || n.Owner != "nightly report" || n.TTLMillis <= 0) {
			t.Fatalf("inspect --json: a node shows another holder:\n%s", r)
		}
	}

	// One node down: a node that missed the grant, if one did, so that a
	// quorum of holders stays up.
	down := 0
	for i, n := range rep.Nodes {
		if !n.Held {
			down = i
		}
	}
	if err := srv[down].Kill(); err != nil {
		t.Fatal(err)
	}
	expect(t, run(t, "inspect", "--no-quarantine", nodes, "job"), 0, `HELD by `+id, "of 3 nodes (quorum 2)", "unreachable")
	r = run(t, "inspect", "--json", nodes, "job")
	expect(t, r, 0)
	if rep := parseJSON[statusReport](t, r); rep.State != "held" || rep.Answered != 2 || rep.Nodes[down].Answered || rep.Nodes[down].ReadError == "" {
		t.Fatalf("inspect --json with a node down: unexpected report:\n%s", r)
	}
	if err := os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	expect(t, p.wait(), 0)
	if err := srv[down].Restart(); err != nil {
		t.Fatal(err)
	}

	// A key on one node of three, as an acquisition that failed leaves it.
	srv[0].MustDo(t, "SET", "split", "some-token ops test", "PX", "600000")
	r = run(t, "inspect", nodes, "split")
	expect(t, r, 0, `lock "split": SPLIT: 1 of 3 nodes hold keys`, tokenID("some-token"), "ops test", "expire on their own")
	r = run(t, "status", "--json", nodes, "split")
	expect(t, r, 0)
	if rep := parseJSON[statusReport](t, r); rep.State != "split" || rep.Holder != "" || !rep.Nodes[0].Held ||
		rep.Nodes[0].Holder != tokenID("some-token") || rep.Nodes[0].Owner != "ops test" {
		t.Fatalf("status --json of a split key: unexpected report:\n%s", r)
	}

	// A key of another type: on one node the others still tell; on two,
	// the refusals leave too few.
	srv[0].MustDo(t, "HSET", "hash", "f", "v")
	expect(t, run(t, "inspect", nodes, "hash"), 0, `lock "hash": FREE (2 of 3 nodes answered, quorum 2)`, "WRONGTYPE", "another type")
	srv[1].MustDo(t, "HSET", "hash", "f", "v")
	expect(t, run(t, "inspect", nodes, "hash"), exitConfig, `lock "hash": UNKNOWN: only 1 of 3 nodes answered`, "WRONGTYPE", "another type")
	r = run(t, "inspect", "--json", nodes, "hash")
	expect(t, r, exitConfig)
	if rep := parseJSON[statusReport](t, r); rep.State != "unknown" || !strings.Contains(rep.Nodes[1].ReadError, "WRONGTYPE") {
		t.Fatalf("inspect --json of a key of another type: unexpected report:\n%s", r)
	}
}
