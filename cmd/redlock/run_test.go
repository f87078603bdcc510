package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
)

// Eight concurrent runs on one key, each incrementing a file with
// read-sleep-write, lose no update and see strictly increasing fences.
func TestRunConcurrentNoLostUpdates(t *testing.T) {
	t.Parallel()
	srv := redistest.StartN(t, 5, redistest.Config{})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "counter"), []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const procs, rounds = 8, 3
	script := `v=$(cat counter); sleep 0.05; echo $((v+1)) > counter; echo "$REDLOCK_FENCE" >> fences`
	var wg sync.WaitGroup
	results := make(chan result, procs*rounds)
	for range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				results <- runIn(t, dir, nil, "run", "--no-quarantine", "--quiet", nodesFlag(srv...), "counter", "--", "sh", "-c", script)
			}
		}()
	}
	wg.Wait()
	close(results)
	for r := range results {
		expect(t, r, 0)
	}
	b, err := os.ReadFile(filepath.Join(dir, "counter"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != strconv.Itoa(procs*rounds) {
		t.Fatalf("counter is %s after %d increments: updates were lost", got, procs*rounds)
	}
	b, err = os.ReadFile(filepath.Join(dir, "fences"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(b))
	if len(lines) != procs*rounds {
		t.Fatalf("%d fences for %d runs:\n%s", len(lines), procs*rounds, b)
	}
	var last int64
	for i, l := range lines {
		f, err := strconv.ParseInt(l, 10, 64)
		if err != nil {
			t.Fatalf("REDLOCK_FENCE %q: %v", l, err)
		}
		if i > 0 && f <= last {
			t.Fatalf("fence %d after fence %d: not strictly increasing:\n%s", f, last, b)
		}
		last = f
	}
}

// With two of five nodes down the lock still works; with three down, run
// exits 69 whether it makes one attempt or waits.
func TestRunNodesDown(t *testing.T) {
	t.Parallel()
	srv := redistest.StartN(t, 5, redistest.Config{})
	nodes := nodesFlag(srv...)
	for _, s := range srv[:2] {
		if err := s.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	r := run(t, "run", "--no-quarantine", nodes, "k", "--", "sh", "-c", `echo "held $REDLOCK_KEY"`)
	expect(t, r, 0, "held k")

	if err := srv[2].Kill(); err != nil {
		t.Fatal(err)
	}
	r = run(t, "run", "--no-quarantine", "--wait", "0s", nodes, "k", "--", "echo", "must not run")
	expect(t, r, exitUnavailable, "too few nodes available for a quorum", "connection refused", "2 of 5 nodes voted, 3 needed")
	if strings.Contains(r.stdout, "must not run") {
		t.Fatalf("the command ran without the lock:\n%s", r)
	}
	r = run(t, "run", "--no-quarantine", "--wait", "500ms", nodes, "k", "--", "echo", "must not run")
	expect(t, r, exitUnavailable, "too few nodes available for a quorum")
	if strings.Contains(r.stdout, "must not run") {
		t.Fatalf("the command ran without the lock:\n%s", r)
	}
}

// Without --wait, run waits while too few nodes can vote, says why, and an
// interrupt ends the wait with status 130.
func TestRunInterruptWhileWaiting(t *testing.T) {
	t.Parallel()
	srv := redistest.StartN(t, 3, redistest.Config{})
	for _, s := range srv[:2] {
		if err := s.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	p := start(t, t.TempDir(), nil, "run", "--no-quarantine", nodesFlag(srv...), "k", "--", "echo", "must not run")
	waitFor(t, 30*time.Second, "the report of unreachable nodes", func() bool {
		return strings.Contains(p.stderr.String(), "only 1 of 3 nodes can vote") || p.exited()
	})
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	r := p.wait()
	expect(t, r, 128+int(syscall.SIGINT), "interrupted", "unreachable")
	if strings.Contains(r.stdout, "must not run") {
		t.Fatalf("the command ran without the lock:\n%s", r)
	}
}

// A command that runs past two TTLs keeps the lock all along: others get
// status 75 meanwhile, and status shows it held.
//
// On a loaded machine, the test does not take for granted that each
// extension (whose nodes have a tenth of the TTL to answer) and each
// other run completes in a given time: the command runs until the test
// tells it to stop, the TTL leaves room for slow rounds, and a check that
// too few nodes answered in time (status 69, or a status that cannot tell)
// is made again. A check that gets the lock says whether the first run's
// command was still running then, and what the first run said.
func TestRunKeepsLockPastTTL(t *testing.T) {
	t.Parallel()
	srv := redistest.StartN(t, 5, redistest.Config{})
	nodes := nodesFlag(srv...)
	dir := t.TempDir()
	const ttl = 3 * time.Second
	p := start(t, dir, nil, "run", "--no-quarantine", "--ttl", ttl.String(), nodes, "long", "--",
		"sh", "-c", "echo $$ > pid; touch started; while [ ! -e stop ]; do sleep 0.05; done; echo done")
	waitFor(t, 30*time.Second, "the command to start", func() bool { return fileExists(filepath.Join(dir, "started")) || p.exited() })
	if p.exited() {
		t.Fatalf("the first run ended before its command started:\n%s", p.wait())
	}
	// The second run's command says whether the first's is still running.
	overlap := `p=$(cat pid); s=$(awk '{print $3}' /proc/$p/stat 2>/dev/null)
if [ -n "$s" ] && [ "$s" != Z ]; then echo "must not run: the first command is still running"; else echo "must not run: the first command has ended"; fi`
	retry := func(what string, code int, args ...string) result {
		t.Helper()
		var r result
		for range 10 {
			if r = runIn(t, dir, nil, args...); r.code != exitUnavailable {
				break
			}
		}
		if r.code != code {
			if strings.Contains(r.stdout, "must not run") {
				t.Errorf("%s, another run got the lock:\n%s", what, r)
				p.cmd.Process.Signal(syscall.SIGTERM)
				t.Fatalf("the first run:\n%s", p.wait())
			}
			t.Fatalf("%s: want exit status %d, got:\n%s", what, code, r)
		}
		return r
	}
	r := retry("while the command runs", exitTaken, "run", "--no-quarantine", "--wait", "0s", nodes, "long", "--", "sh", "-c", overlap)
	expect(t, r, exitTaken, "held by another owner")

	// The lock was obtained before the command started: two TTLs on, it
	// has been extended.
	time.Sleep(2 * ttl)
	if p.exited() {
		t.Fatalf("the first run ended early:\n%s", p.wait())
	}
	r = retry("two TTLs on", exitTaken, "run", "--no-quarantine", "--wait", "0s", nodes, "long", "--", "sh", "-c", overlap)
	expect(t, r, exitTaken, "held by another owner")
	// status may see too few nodes in time to tell (SPLIT or UNKNOWN with
	// nodes that did not answer, or were not yet known to be servers of
	// their own): it is asked again. FREE would contradict the holder.
	for i := 0; ; i++ {
		r = runIn(t, dir, nil, "status", nodes, "long")
		if r.code == 0 && strings.Contains(r.stdout, "HELD") {
			break
		}
		if strings.Contains(r.stdout, "FREE") || i == 9 {
			t.Errorf("status does not show the lock held:\n%s", r)
			p.cmd.Process.Signal(syscall.SIGTERM)
			t.Fatalf("the first run:\n%s", p.wait())
		}
	}

	if err := os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	expect(t, p.wait(), 0, "done")
	// Released at exit: the next run gets the lock at once.
	expect(t, retry("after the release", 0, "run", "--no-quarantine", "--wait", "0s", nodes, "long", "--", "true"), 0)
}

// Deleting the lock's key on a majority of the nodes while the command runs
// stops the command and makes run exit 76; a command that ignores SIGTERM
// gets SIGKILL, and so does what it started.
func TestRunLockLost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		script string
		want   []string
	}{
		{"stops on SIGTERM", "touch started; sleep 60", []string{"LOST the lock", "SIGTERM"}},
		{"ignores SIGTERM", "trap '' TERM; sleep 60 & echo $! > grandchild; touch started; wait", []string{"LOST the lock", "sending SIGKILL"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.StartN(t, 5, redistest.Config{})
			dir := t.TempDir()
			key := "lost:" + strings.ReplaceAll(tc.name, " ", "-")
			p := start(t, dir, nil, "run", "--no-quarantine", "--ttl", "1s", "--kill-grace", "300ms", nodesFlag(srv...), key, "--", "sh", "-c", tc.script)
			waitFor(t, 30*time.Second, "the command to start", func() bool { return fileExists(filepath.Join(dir, "started")) || p.exited() })
			// run starts the command once a quorum has granted the lock:
			// a grant still on its way to one of these three nodes would
			// land after a single deletion and keep the lock on three of
			// five. The deletions go on, on the same majority, until run
			// exits.
			waitFor(t, 30*time.Second, "run to exit after its key was deleted on a majority", func() bool {
				for _, s := range srv[:3] {
					s.MustDo(t, "DEL", key)
				}
				return p.exited()
			})
			r := p.wait()
			expect(t, r, exitLockLost, tc.want...)
			if b, err := os.ReadFile(filepath.Join(dir, "grandchild")); err == nil {
				pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
				if err != nil {
					t.Fatal(err)
				}
				waitFor(t, 10*time.Second, "the command's child to be killed", func() bool { return processGone(pid) })
			}
		})
	}
}

// The command's exit status, or 128+signal, is run's; the command gets
// REDLOCK_KEY and REDLOCK_FENCE; the lock is released whatever the status.
func TestRunExitStatusAndEnvironment(t *testing.T) {
	t.Parallel()
	srv := redistest.StartN(t, 3, redistest.Config{})
	nodes := nodesFlag(srv...)

	r := run(t, "run", "--no-quarantine", nodes, "env-key", "--", "sh", "-c", `echo "key=$REDLOCK_KEY fence=$REDLOCK_FENCE"`)
	expect(t, r, 0, "key=env-key fence=")
	if f := strings.TrimSpace(r.stdout[strings.Index(r.stdout, "fence=")+len("fence="):]); f == "" || strings.Trim(f, "0123456789") != "" {
		t.Fatalf("REDLOCK_FENCE is not a number:\n%s", r)
	}

	expect(t, run(t, "run", "--no-quarantine", nodes, "k", "--", "sh", "-c", "exit 3"), 3)
	expect(t, run(t, "run", "--no-quarantine", nodes, "k", "--", "sh", "-c", "kill -TERM $$"), 128+int(syscall.SIGTERM))
	// Without "--" too; flags after KEY belong to the command.
	expect(t, run(t, "run", "--no-quarantine", nodes, "k", "sh", "-c", "echo $0", "--ttl"), 0, "--ttl")
	expect(t, run(t, "run", "--no-quarantine", nodes, "k", "--", "no-such-command-xyz"), exitNotFound, "cannot run no-such-command-xyz")

	// Each run above released the lock, failures included.
	r = run(t, "status", nodes, "k")
	expect(t, r, 0, "FREE")
	expect(t, run(t, "run", "--no-quarantine", "--wait", "0s", nodes, "k", "--", "true"), 0)
}

// A held lock makes a bounded wait end with status 75.
func TestRunTaken(t *testing.T) {
	t.Parallel()
	srv := redistest.StartN(t, 3, redistest.Config{})
	nodes := nodesFlag(srv...)
	dir := t.TempDir()
	p := start(t, dir, nil, "run", "--no-quarantine", nodes, "busy", "--", "sh", "-c", "touch started; while [ ! -e stop ]; do sleep 0.05; done")
	waitFor(t, 30*time.Second, "the command to start", func() bool { return fileExists(filepath.Join(dir, "started")) || p.exited() })
	expect(t, run(t, "run", "--no-quarantine", "--wait", "0s", nodes, "busy", "--", "true"), exitTaken, "held by another owner", "one attempt")
	expect(t, run(t, "run", "--no-quarantine", "--wait", "300ms", nodes, "busy", "--", "true"), exitTaken, "held by another owner", "--wait 300ms")
	if err := os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	expect(t, p.wait(), 0)
}

// SIGTERM and SIGHUP sent to run reach the command.
func TestRunForwardsSignals(t *testing.T) {
	t.Parallel()
	srv := redistest.StartN(t, 3, redistest.Config{})
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			script := `trap 'echo "got $1" > got; exit 7' ` + strings.TrimPrefix(sigName(sig), "SIG") +
				`; touch started; while :; do sleep 0.05; done`
			p := start(t, dir, nil, "run", "--no-quarantine", nodesFlag(srv...), "sig-"+sigName(sig), "--", "sh", "-c", script, "sh", sigName(sig))
			waitFor(t, 30*time.Second, "the command to start", func() bool { return fileExists(filepath.Join(dir, "started")) || p.exited() })
			if err := p.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			expect(t, p.wait(), 7)
			b, _ := os.ReadFile(filepath.Join(dir, "got"))
			if !strings.Contains(string(b), sigName(sig)) {
				t.Fatalf("the command did not get %v", sig)
			}
		})
	}
}

func sigName(s syscall.Signal) string {
	switch s {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGINT:
		return "SIGINT"
	}
	return s.String()
}

// With restart quarantine on (the default), fresh servers do not vote: one
// attempt fails with status 69 and says why, status shows the quarantine,
// and a run that waits gets the lock once the quarantine has passed.
func TestRunQuarantine(t *testing.T) {
	t.Parallel()
	srv := redistest.StartN(t, 3, redistest.Config{})
	nodes := nodesFlag(srv...)
	r := run(t, "run", "--quarantine", "1h", "--wait", "0s", nodes, "q", "--", "echo", "must not run")
	expect(t, r, exitUnavailable, "quarantined", "--no-quarantine")
	r = run(t, "status", "--quarantine", "1h", nodes, "q")
	expect(t, r, 0, "quarantined until")

	fresh := nodesFlag(redistest.StartN(t, 3, redistest.Config{})...)
	r = run(t, "run", "--ttl", "1s", fresh, "q", "--", "echo", "ran")
	expect(t, r, 0, "ran")
}
