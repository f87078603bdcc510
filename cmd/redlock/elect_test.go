package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
)

// Candidates that campaign again and again lead one at a time, each with
// a term greater than the last leader's: a leader's command takes a
// directory as its mark, and finding it taken means two leaders at once.
func TestElectOneLeaderAtATime(t *testing.T) {
	t.Parallel()
	srv := redistest.StartN(t, 3, redistest.Config{})
	dir := t.TempDir()
	const candidates, rounds = 4, 3
	script := `mkdir leading 2>/dev/null || echo "TWO LEADERS $REDLOCK_TERM" >> log; ` +
		`echo "$REDLOCK_TERM" >> terms; sleep 0.05; rmdir leading`
	var wg sync.WaitGroup
	results := make(chan result, candidates*rounds)
	for i := range candidates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				results <- runIn(t, dir, nil, "elect", "--no-quarantine", "--quiet", "--value", "candidate-"+strconv.Itoa(i),
					nodesFlag(srv...), "election", "--", "sh", "-c", script)
			}
		}()
	}
	wg.Wait()
	close(results)
	for r := range results {
		expect(t, r, 0)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "log")); err == nil {
		t.Fatalf("two leaders at once:\n%s", b)
	}
	b, err := os.ReadFile(filepath.Join(dir, "terms"))
	if err != nil {
		t.Fatal(err)
	}
	terms := strings.Fields(string(b))
	if len(terms) != candidates*rounds {
		t.Fatalf("%d terms for %d leaderships:\n%s", len(terms), candidates*rounds, b)
	}
	var last int64
	for i, s := range terms {
		term, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("REDLOCK_TERM %q: %v", s, err)
		}
		if i > 0 && term <= last {
			t.Fatalf("term %d after term %d: not strictly increasing:\n%s", term, last, b)
		}
		last = term
	}
}

// A second candidate waits while the first leads and says who leads;
// leader shows the first; when the first's leadership is lost its command
// is stopped and elect exits 76, and the second leads in a greater term.
// Once it resigns, nobody leads.
func TestElectTakeoverAndLeader(t *testing.T) {
	t.Parallel()
	srv := redistest.StartN(t, 3, redistest.Config{})
	nodes := nodesFlag(srv...)
	script := `echo "$REDLOCK_TERM" > term; echo "$REDLOCK_KEY $REDLOCK_VALUE $REDLOCK_FENCE $REDLOCK_LOCK_ID" > env; touch started; ` +
		`while [ ! -e stop ]; do sleep 0.05; done`
	readTerm := func(dir string) int64 {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, "term"))
		if err != nil {
			t.Fatal(err)
		}
		term, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			t.Fatalf("REDLOCK_TERM %q: %v", b, err)
		}
		return term
	}

	expect(t, run(t, "leader", nodes, "svc"), exitFailure, `election "svc": NO LEADER`)

	dirA, dirB := t.TempDir(), t.TempDir()
	a := start(t, dirA, nil, "elect", "--no-quarantine", "--ttl", "1s", "--kill-grace", "300ms", "--value", "alpha", nodes, "svc", "--", "sh", "-c", script)
	waitFor(t, 30*time.Second, "the first candidate to lead", func() bool { return fileExists(filepath.Join(dirA, "started")) || a.exited() })
	termA := readTerm(dirA)
	env, _ := os.ReadFile(filepath.Join(dirA, "env"))
	if !strings.HasPrefix(string(env), "svc alpha "+strconv.FormatInt(termA, 10)+" ") {
		t.Fatalf("REDLOCK_KEY, REDLOCK_VALUE and REDLOCK_FENCE: %q; the term is %d", env, termA)
	}

	r := run(t, "leader", nodes, "svc")
	expect(t, r, 0, `election "svc": LEADER "alpha" in term `+strconv.FormatInt(termA, 10))
	r = run(t, "leader", "--json", nodes, "svc")
	expect(t, r, 0)
	var rep leaderReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("leader --json: %v\n%s", err, r)
	}
	if !rep.Leader || rep.Value != "alpha" || rep.Term != termA || rep.ID == "" || rep.Ends == nil {
		t.Fatalf("leader --json: unexpected report:\n%s", r)
	}
	if id := strings.Fields(string(env))[3]; id != rep.ID {
		t.Fatalf("REDLOCK_LOCK_ID %q, and leader --json says the leadership's ID is %q", id, rep.ID)
	}
	expect(t, run(t, "elect", "--no-quarantine", "--wait", "0s", nodes, "svc", "--", "echo", "must not run"),
		exitTaken, `another candidate leads the election "svc"; not won in one attempt`)

	b := start(t, dirB, nil, "elect", "--no-quarantine", "--ttl", "1s", "--value", "beta", nodes, "svc", "--", "sh", "-c", script)
	waitFor(t, 30*time.Second, "the second candidate to say who leads", func() bool {
		return strings.Contains(b.stderr.String(), `waiting for the leadership of "svc": "alpha" leads, in term `+strconv.FormatInt(termA, 10)) || b.exited()
	})
	if fileExists(filepath.Join(dirB, "started")) {
		t.Fatalf("the second candidate ran its command while the first led:\n%s", b.stderr)
	}

	// The leadership's lock goes from every node: the first candidate
	// loses it, and the second takes over.
	for _, s := range srv {
		s.MustDo(t, "DEL", "svc")
	}
	expect(t, a.wait(), exitLockLost, `LOST the leadership of "svc"`, "SIGTERM", "was stopped")
	waitFor(t, 30*time.Second, "the second candidate to lead", func() bool { return fileExists(filepath.Join(dirB, "started")) || b.exited() })
	if termB := readTerm(dirB); termB <= termA {
		t.Fatalf("the second leader's term %d is not greater than the first's, %d", termB, termA)
	}
	expect(t, run(t, "leader", nodes, "svc"), 0, `LEADER "beta"`)

	if err := os.WriteFile(filepath.Join(dirB, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	expect(t, b.wait(), 0)
	// It resigned: nobody leads, and a new candidate leads at once.
	expect(t, run(t, "leader", "-q", nodes, "svc"), exitFailure)
	expect(t, run(t, "elect", "--no-quarantine", "--wait", "0s", nodes, "svc", "--", "sh", "-c", `echo "value=$REDLOCK_VALUE"; exit 3`), 3, "value=")
}

// leader exits 69 when too few nodes answer, and elect does as run does.
func TestElectNodesDown(t *testing.T) {
	t.Parallel()
	srv := redistest.StartN(t, 3, redistest.Config{})
	nodes := nodesFlag(srv...)
	for _, s := range srv[:2] {
		if err := s.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	expect(t, run(t, "leader", nodes, "down"), exitUnavailable, "cannot tell who leads", "too few nodes answered (1 of 3, 2 needed)")
	r := run(t, "elect", "--no-quarantine", "--wait", "500ms", nodes, "down", "--", "echo", "must not run")
	expect(t, r, exitUnavailable, `the leadership of "down" could not be won`, "too few nodes available")
	if strings.Contains(r.stdout, "must not run") {
		t.Fatalf("the command ran without the leadership:\n%s", r)
	}
}
