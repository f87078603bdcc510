package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
)

// rwHoldScript records the hold's variables in "env", marks that it runs
// with the file "started", and runs until the file "stop" appears.
const rwHoldScript = `echo "$REDLOCK_KEY $REDLOCK_FENCE $REDLOCK_LOCK_ID" > env.tmp && mv env.tmp env; touch started; ` +
	`while [ ! -e stop ]; do sleep 0.05; done`

// rwEnv is what rwHoldScript recorded.
type rwEnv struct {
	key   string
	fence int64
	id    string
}

func readRWEnv(t *testing.T, dir string) rwEnv {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "env"))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != 3 {
		t.Fatalf("the command's environment is incomplete: %q", b)
	}
	fence, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || fence <= 0 {
		t.Fatalf("REDLOCK_FENCE %q is not a positive number", f[1])
	}
	return rwEnv{key: f[0], fence: fence, id: f[2]}
}

// startHold starts 'redlock run' with flags on key, running rwHoldScript in
// a directory of its own, and waits until the command runs.
func startHold(t *testing.T, nodes, key string, flags ...string) (*proc, string) {
	t.Helper()
	dir := t.TempDir()
	args := append([]string{"run", "--no-quarantine"}, flags...)
	p := start(t, dir, nil, append(args, nodes, key, "--", "sh", "-c", rwHoldScript)...)
	waitFor(t, 60*time.Second, "the command of run "+strings.Join(flags, " ")+" to start", func() bool {
		return fileExists(filepath.Join(dir, "started")) || p.exited()
	})
	if p.exited() {
		t.Fatalf("run %s ended before its command started:\n%s", strings.Join(flags, " "), p.wait())
	}
	return p, dir
}

// stopHold makes rwHoldScript in dir end, and expects its run to exit 0.
func stopHold(t *testing.T, p *proc, dir string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	expect(t, p.wait(), 0)
}

// Two 'run --read' commands run at the same time: each waits for the
// other's file before it ends, so neither ends unless both ran at once.
func TestRunReadShared(t *testing.T) {
	t.Parallel()
	srv := redistest.StartN(t, 3, redistest.Config{})
	nodes := nodesFlag(srv...)
	dir := t.TempDir()
	script := `echo "$REDLOCK_FENCE" > "fence.$1"; touch "$1"; while [ ! -e "$2" ]; do sleep 0.05; done`
	var res [2]result
	var wg sync.WaitGroup
	for i, names := range [][2]string{{"a", "b"}, {"b", "a"}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i] = runIn(t, dir, nil, "run", "--no-quarantine", "--read", nodes, "shared", "--", "sh", "-c", script, "sh", names[0], names[1])
		}()
	}
	wg.Wait()
	for _, r := range res {
		expect(t, r, 0)
	}
	for _, name := range []string{"a", "b"} {
		b, err := os.ReadFile(filepath.Join(dir, "fence."+name))
		if err != nil {
			t.Fatal(err)
		}
		if f, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err != nil || f <= 0 {
			t.Fatalf("reader %s: REDLOCK_FENCE %q is not a positive number", name, b)
		}
	}
	// Both released at exit: a writer gets the lock at once.
	expect(t, run(t, "run", "--no-quarantine", "--write", "--wait", "0s", nodes, "shared", "--", "true"), 0)
}

// Readers shut out writers and are shown by inspect; a waiting writer
// keeps new readers out, gets in once the readers are done, with a fence
// above theirs, and then shuts out readers and writers alike, the plain
// form's too.
func TestRunWriteExcludes(t *testing.T) {
	t.Parallel()
	srv := redistest.StartN(t, 3, redistest.Config{})
	nodes := nodesFlag(srv...)
	const key = "rw"

	r1, d1 := startHold(t, nodes, key, "--read", "--owner", "reader one")
	r2, d2 := startHold(t, nodes, key, "--read", "--owner", "reader two")
	e1, e2 := readRWEnv(t, d1), readRWEnv(t, d2)
	if e1.key != key || e2.key != key || e1.id == e2.id || len(e1.id) != 12 {
		t.Fatalf("the readers' environments: %+v and %+v", e1, e2)
	}
	r := run(t, "inspect", "--no-quarantine", nodes, key)
	expect(t, r, 0, `lock "rw": SHARED by 2 readers`, "reader "+e1.id+` ("reader one"): ends in `,
		"reader "+e2.id+` ("reader two"): ends in `, "READERS", "WAITING")
	r = run(t, "status", "--json", nodes, key)
	expect(t, r, 0)
	rep := parseJSON[statusReport](t, r)
	if rep.State != "shared" || len(rep.Readers) != 2 || rep.Holder != "" || rep.WaitingWriters != 0 {
		t.Fatalf("status --json of two readers: unexpected report:\n%s", r)
	}
	for _, rd := range rep.Readers {
		if (rd.ID != e1.id || rd.Owner != "reader one") && (rd.ID != e2.id || rd.Owner != "reader two") || rd.TTLMillis <= 0 || rd.Ends == nil {
			t.Fatalf("status --json: unexpected reader %+v:\n%s", rd, r)
		}
	}

	r = run(t, "run", "--no-quarantine", "--write", "--wait", "0s", nodes, key, "--", "echo", "must not run")
	expect(t, r, exitTaken, `the lock "rw" is held by readers or another writer; not acquired in one attempt`)
	if strings.Contains(r.stdout, "must not run") {
		t.Fatalf("a writer ran beside readers:\n%s", r)
	}

	// A writer that waits: once inspect shows its intent, a new reader
	// is kept out.
	wdir := t.TempDir()
	w := start(t, wdir, nil, "run", "--no-quarantine", "--write", "--owner", "the writer", nodes, key, "--", "sh", "-c", rwHoldScript)
	waitFor(t, 60*time.Second, "inspect to show a writer waiting", func() bool {
		return strings.Contains(run(t, "inspect", "--no-quarantine", nodes, key).stdout, "writers waiting: 1") || w.exited()
	})
	if fileExists(filepath.Join(wdir, "started")) || w.exited() {
		t.Fatalf("the writer did not wait for the readers:\n%s", w.stderr)
	}
	r = run(t, "run", "--no-quarantine", "--read", "--wait", "0s", nodes, key, "--", "echo", "must not run")
	expect(t, r, exitTaken, `the lock "rw" is held by a writer, or a writer waits for it; not acquired in one attempt`)
	if strings.Contains(r.stdout, "must not run") {
		t.Fatalf("a reader ran while a writer waited:\n%s", r)
	}

	stopHold(t, r1, d1)
	if fileExists(filepath.Join(wdir, "started")) {
		t.Fatal("the writer ran beside a reader")
	}
	stopHold(t, r2, d2)
	waitFor(t, 60*time.Second, "the writer to start once the readers ended", func() bool {
		return fileExists(filepath.Join(wdir, "started")) || w.exited()
	})
	ew := readRWEnv(t, wdir)
	if ew.fence <= e1.fence || ew.fence <= e2.fence {
		t.Fatalf("the writer's fence %d is not above the readers' %d and %d", ew.fence, e1.fence, e2.fence)
	}
	r = run(t, "inspect", "--no-quarantine", nodes, key)
	expect(t, r, 0, `lock "rw": HELD by `+ew.id+` ("the writer")`)
	for _, flags := range [][]string{{"--read"}, {"--write"}, {}} {
		args := append(append([]string{"run", "--no-quarantine", "--wait", "0s"}, flags...), nodes, key, "--", "echo", "must not run")
		r := run(t, args...)
		expect(t, r, exitTaken, "not acquired in one attempt")
		if strings.Contains(r.stdout, "must not run") {
			t.Fatalf("run %s ran beside a writer:\n%s", strings.Join(flags, " "), r)
		}
	}
	stopHold(t, w, wdir)
	expect(t, run(t, "inspect", nodes, key), 0, `lock "rw": FREE`)
}

// Writers run one at a time and never beside a reader: four writers
// increment a file with read-sleep-write while readers check that no
// writer is in.
func TestRunWriteOneAtATime(t *testing.T) {
	t.Parallel()
	srv := redistest.StartN(t, 3, redistest.Config{})
	nodes := nodesFlag(srv...)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "counter"), []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const writers, readers, rounds = 4, 4, 2
	write := `touch writing; v=$(cat counter); sleep 0.05; echo $((v+1)) > counter; rm writing`
	read := `if [ -e writing ]; then echo "$REDLOCK_LOCK_ID" >> violations; fi; sleep 0.05; ` +
		`if [ -e writing ]; then echo "$REDLOCK_LOCK_ID" >> violations; fi`
	var wg sync.WaitGroup
	results := make(chan result, (writers+readers)*rounds)
	for i := range writers + readers {
		flag, script := "--write", write
		if i >= writers {
			flag, script = "--read", read
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				results <- runIn(t, dir, nil, "run", "--no-quarantine", "--quiet", flag, nodes, "one-at-a-time", "--", "sh", "-c", script)
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
	if got := strings.TrimSpace(string(b)); got != strconv.Itoa(writers*rounds) {
		t.Fatalf("counter is %s after %d increments by writers: updates were lost", got, writers*rounds)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "violations")); err == nil {
		t.Fatalf("readers ran while a writer was in:\n%s", b)
	}
}

// --read and --write exclude each other, and neither goes with --permits.
func TestRunReadWriteUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--read", "--write"}, "--read and --write exclude each other"},
		{[]string{"--write", "--read"}, "--read and --write exclude each other"},
		{[]string{"--read", "--permits", "2"}, "--permits and --read do not go together"},
		{[]string{"--permits", "2", "--write"}, "--permits and --write do not go together"},
	} {
		args := append(append([]string{"run"}, tc.args...), "--nodes", "redis://127.0.0.1:1", "k", "--", "echo", "must not run")
		r := run(t, args...)
		expect(t, r, exitUsage, tc.want, "redlock run --help")
		if strings.Contains(r.stdout, "must not run") {
			t.Fatalf("run %s ran its command:\n%s", strings.Join(tc.args, " "), r)
		}
	}
	expect(t, run(t, "run", "--help"), 0, "--read", "--write", "read-write lock")
}
