package main

// Tests of what a first week with redlock tripped on (issue 42): silence
// when a node is missing, bad input taken for an outage, half-answers and
// help that does not fit a screen.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
)

// lines returns the non-empty lines of s.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// run says in one line on stderr that it runs without a node, and why,
// whether the node has no server or refuses the password; with every node
// up it says nothing.
func TestRunSaysNodeMissing(t *testing.T) {
	t.Parallel()
	srv := redistest.StartN(t, 3, redistest.Config{})
	srv[2].MustDo(t, "ACL", "SETUSER", "alice", "on", ">s3cret", "~*", "&*", "+@all")

	r := run(t, "run", "--no-quarantine", nodesFlag(srv...), "k", "--", "true")
	expect(t, r, 0)
	if r.stderr != "" {
		t.Fatalf("with every node up, stderr is not empty:\n%s", r)
	}

	wrong := "redis://alice:wrong@" + srv[2].Addr()
	r = run(t, "run", "--no-quarantine", "--nodes", srv[0].URL()+","+srv[1].URL()+","+wrong, "k", "--", "true")
	expect(t, r, 0, "running with 2 of 3 nodes, which tolerates no further node failure", srv[2].Addr(), "WRONGPASS")
	if l := lines(r.stderr); len(l) != 1 {
		t.Fatalf("want one line on stderr, got %d:\n%s", len(l), r)
	}

	if err := srv[2].Kill(); err != nil {
		t.Fatal(err)
	}
	r = run(t, "run", "--no-quarantine", "--quiet", nodesFlag(srv...), "k", "--", "true")
	expect(t, r, 0, "running with 2 of 3 nodes", srv[2].Addr()+"/0 unreachable")
	if l := lines(r.stderr); len(l) != 1 {
		t.Fatalf("want one line on stderr, got %d:\n%s", len(l), r)
	}
}

// With no nodes named, a command says on stderr which it uses, once;
// with nodes named it does not.
func TestDefaultNodesSaid(t *testing.T) {
	t.Parallel()
	r := run(t, "inspect", "--timeout", "200ms", "k")
	if n := strings.Count(r.stderr, "using "+defaultNodes); n != 1 {
		t.Fatalf("want the default nodes said once on stderr, got %d times:\n%s", n, r)
	}
	srv := redistest.Start(t, redistest.Config{})
	r = run(t, "inspect", nodesFlag(srv), "k")
	if strings.Contains(r.stderr, defaultNodes) {
		t.Fatalf("the default nodes are said although --nodes is given:\n%s", r)
	}
}

// A node URL no client could dial is a usage error, not an outage.
func TestRunBadPortIsUsage(t *testing.T) {
	t.Parallel()
	for _, nodes := range []string{"redis://127.0.0.1:99999", "redis://127.0.0.1:0", "redis://h:1?addr=h:70000"} {
		r := run(t, "run", "--nodes", nodes, "k", "--", "echo", "must not run")
		expect(t, r, exitUsage, "want a number from 1 to 65535")
		if strings.Contains(r.stdout, "must not run") {
			t.Fatalf("the command ran:\n%s", r)
		}
	}
}

// A run that finds the lock taken names its holder as inspect does: its
// ID, and its owner label quoted, with what needs escaping escaped.
func TestRunTakenNamesOwner(t *testing.T) {
	t.Parallel()
	srv := redistest.StartN(t, 3, redistest.Config{})
	nodes := nodesFlag(srv...)
	dir := t.TempDir()
	const owner = `backup "nightly" ✓`
	p := start(t, dir, nil, "run", "--no-quarantine", "--owner", owner, nodes, "k", "--",
		"sh", "-c", `echo "$REDLOCK_LOCK_ID" > id; sleep 60`)
	var id string
	waitFor(t, 30*time.Second, "the holder to start", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "id"))
		id = strings.TrimSpace(string(b))
		return id != "" || p.exited()
	})
	if p.exited() {
		t.Fatalf("the holder ended:\n%s", p.wait())
	}
	r := run(t, "run", "--no-quarantine", "--wait", "0s", nodes, "k", "--", "echo", "must not run")
	expect(t, r, exitTaken, `held by another owner, `+id+` ("backup \"nightly\" ✓")`)
	p.cmd.Process.Signal(syscall.SIGTERM)
	p.wait()
}

// Help for what does not exist is a usage error; a misspelt command gets
// suggestions that read as text, not as escapes.
func TestHelpUnknown(t *testing.T) {
	t.Parallel()
	r := run(t, "help", "foo")
	expect(t, r, exitUsage, `no help for "foo"`)
	r = run(t, "rnu", "k")
	expect(t, r, exitUsage, "Did you mean this?\n  run\n")
	if strings.Contains(r.stderr, `\t`) {
		t.Fatalf("a literal \\t on stderr:\n%s", r)
	}
}

// What the lock client refuses, doctor calls unusable, with the status of
// run on the same nodes: one server under two URLs.
func TestDoctorSameServerUnusable(t *testing.T) {
	t.Parallel()
	srv := redistest.StartN(t, 2, redistest.Config{})
	_, port, _ := strings.Cut(srv[0].Addr(), ":")
	nodes := "--nodes=" + srv[0].URL() + ",redis://localhost:" + port + "," + srv[1].URL()
	r := run(t, "doctor", "--no-quarantine", nodes)
	expect(t, r, exitUsage, "ERROR  independence", "verdict: UNUSABLE: the lock client refuses these nodes")
	if strings.Contains(r.stdout, "USABLE WITH WARNINGS") || strings.Contains(r.stderr, "--help") {
		t.Fatalf("doctor contradicts itself:\n%s", r)
	}
	expect(t, run(t, "run", "--no-quarantine", nodes, "k", "--", "true"), exitUsage, "the same Redis server")
}

// doctor says how many node failures the nodes tolerate, for any number
// of them, and how many more when some are down.
func TestDoctorSaysTolerance(t *testing.T) {
	t.Parallel()
	srv := redistest.StartN(t, 3, redistest.Config{})
	expect(t, run(t, "doctor", nodesFlag(srv[0])), 0, "HEALTHY: 1 of 1 nodes healthy, quorum 1; 1 node(s) tolerate no node failure (3 independent masters tolerate one")
	expect(t, run(t, "doctor", nodesFlag(srv...)), 0, "HEALTHY: 3 of 3 nodes healthy, quorum 2; 3 node(s) tolerate one node failure\n")
	if err := srv[2].Kill(); err != nil {
		t.Fatal(err)
	}
	expect(t, run(t, "doctor", nodesFlag(srv...)), exitFailure, "3 node(s) tolerate one node failure, no further node failure now")
}

// doctor --json never calls a node healthy in one field and unhealthy in
// the other: an allkeys-lru node votes, but is unfit for locks.
func TestDoctorJSONStateAgrees(t *testing.T) {
	t.Parallel()
	srv := redistest.StartN(t, 3, redistest.Config{})
	srv[1].MustDo(t, "CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
	r := run(t, "doctor", "--json", "--no-quarantine", nodesFlag(srv...))
	expect(t, r, exitFailure)
	var rep doctorReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, r)
	}
	for i, n := range rep.Nodes {
		if (n.State == "healthy") != n.Healthy {
			t.Errorf("node %d: state %q, healthy %v", i, n.State, n.Healthy)
		}
	}
	if rep.Nodes[1].State != stateUnfit || rep.Nodes[1].Healthy {
		t.Fatalf("the allkeys-lru node: state %q, healthy %v", rep.Nodes[1].State, rep.Nodes[1].Healthy)
	}
}

// On a server outside a cluster, doctor's word on node markers speaks of
// the server, not of hash slots.
func TestDoctorMarkersPlainServer(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Config{})
	expect(t, run(t, "run", "--no-quarantine", nodesFlag(srv), "k", "--", "true"), 0)
	r := run(t, "doctor", nodesFlag(srv))
	expect(t, r, 0, "node marker(s), none with a TTL above the maximum (1h0m0s)")
	if strings.Contains(r.stdout, "slot") {
		t.Fatalf("doctor speaks of slots on a plain server:\n%s", r)
	}
}

// fullHelp returns the help of a command or topic, X: 'redlock help X',
// and after it 'redlock help X-details' if the first screen names it.
func fullHelp(t *testing.T, x string) result {
	t.Helper()
	r := run(t, "help", x)
	if r.code == 0 && strings.Contains(r.stdout, "'redlock help "+x+"-details'") {
		more := run(t, "help", x+"-details")
		r.code, r.stdout, r.stderr = more.code, r.stdout+more.stdout, r.stderr+more.stderr
	}
	return r
}

// The first screen of any help fits 40 lines: of every command, with
// 'help X' and 'X --help', and of every topic. What does not fit is in the
// topic X-details, which the first screen names, which begins by saying
// what it continues, and which the first screen of redlock does not list.
func TestHelpFitsScreen(t *testing.T) {
	t.Parallel()
	details := 0
	for _, x := range append(slices.Clone(helpCommands), helpTopics...) {
		forms := [][]string{{"help", x}}
		if slices.Contains(helpCommands, x) {
			forms = append(forms, []string{x, "--help"})
		}
		for _, args := range forms {
			r := run(t, args...)
			expect(t, r, 0)
			if n := strings.Count(r.stdout, "\n"); n > maxScreen {
				t.Errorf("redlock %s is %d lines long, more than %d:\n%s", strings.Join(args, " "), n, maxScreen, r.stdout)
			}
		}
		if r := run(t, "help", x); strings.Contains(r.stdout, "'redlock help "+x+"-details'") {
			details++
			more := run(t, "help", x+"-details")
			expect(t, more, 0, x)
			if first, _, _ := strings.Cut(more.stdout, "\n"); !strings.Contains(first, x) {
				t.Errorf("redlock help %s-details does not begin by naming %s:\n%s", x, x, more.stdout)
			}
		}
	}
	if details == 0 {
		t.Fatal("no help has a -details topic: nothing was too long, or the first screens do not name it")
	}
}
