package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/internal/wire"
)

// holdScript records the permit's variables in "env", marks that it runs,
// and runs until the file "stop" appears.
const holdScript = `echo "$REDLOCK_SLOT $REDLOCK_FENCE $REDLOCK_PERMITS $REDLOCK_KEY $REDLOCK_LOCK_ID" > env; touch started; ` +
	`while [ ! -e stop ]; do sleep 0.05; done`

// permitEnv is what holdScript recorded.
type permitEnv struct {
	slot    int
	fence   int64
	permits int
	key, id string
}

func readPermitEnv(t *testing.T, dir string) permitEnv {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "env"))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != 5 {
		t.Fatalf("the command's environment is incomplete: %q", b)
	}
	var e permitEnv
	var err1, err2, err3 error
	e.slot, err1 = strconv.Atoi(f[0])
	e.fence, err2 = strconv.ParseInt(f[1], 10, 64)
	e.permits, err3 = strconv.Atoi(f[2])
	if err1 != nil || err2 != nil || err3 != nil {
		t.Fatalf("REDLOCK_SLOT, REDLOCK_FENCE or REDLOCK_PERMITS is not a number: %q", b)
	}
	e.key, e.id = f[3], f[4]
	return e
}

// Two runs hold the two permits of a semaphore at once, in different
// slots; a third must wait, says why, and runs once one of them ends, in
// the slot that was freed, with a greater fence.
func TestRunPermits(t *testing.T) {
	t.Parallel()
	srv := redistest.StartN(t, 3, redistest.Config{})
	nodes := nodesFlag(srv...)
	var dirs [3]string
	var procs [3]*proc
	for i := range 2 {
		dirs[i] = t.TempDir()
		procs[i] = start(t, dirs[i], nil, "run", "--no-quarantine", "--permits", "2", nodes, "sem", "--", "sh", "-c", holdScript)
	}
	for i := range 2 {
		waitFor(t, 30*time.Second, "the holders of both permits to start", func() bool {
			return fileExists(filepath.Join(dirs[i], "started")) || procs[i].exited()
		})
		if procs[i].exited() {
			t.Fatalf("a holder of a permit ended early:\n%s", procs[i].wait())
		}
	}
	a, b := readPermitEnv(t, dirs[0]), readPermitEnv(t, dirs[1])
	if a.slot == b.slot || a.slot < 0 || a.slot > 1 || b.slot < 0 || b.slot > 1 {
		t.Fatalf("two permits of 2 in slots %d and %d", a.slot, b.slot)
	}
	if a.permits != 2 || a.key != "sem" || a.id == "" || a.id == b.id {
		t.Fatalf("the environments of the holders: %+v and %+v", a, b)
	}

	expect(t, run(t, "run", "--no-quarantine", "--permits", "2", "--wait", "0s", nodes, "sem", "--", "echo", "must not run"),
		exitTaken, `all 2 permits of the semaphore "sem" are held by others; not acquired in one attempt`)
	// The semaphore's keys are not the lock's.
	expect(t, run(t, "run", "--no-quarantine", "--wait", "0s", nodes, "sem", "--", "echo", "the lock"), 0, "the lock")

	dirs[2] = t.TempDir()
	procs[2] = start(t, dirs[2], nil, "run", "--no-quarantine", "--permits", "2", nodes, "sem", "--", "sh", "-c", holdScript)
	waitFor(t, 30*time.Second, "the third run to say why it waits", func() bool {
		return strings.Contains(procs[2].stderr.String(), `waiting for a permit of the semaphore "sem": all 2 permits are held by others`) || procs[2].exited()
	})
	if fileExists(filepath.Join(dirs[2], "started")) {
		t.Fatalf("a third command ran while both permits of 2 were held:\n%s", procs[2].stderr)
	}

	if err := os.WriteFile(filepath.Join(dirs[0], "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	expect(t, procs[0].wait(), 0)
	waitFor(t, 30*time.Second, "the third run to get the freed permit", func() bool {
		return fileExists(filepath.Join(dirs[2], "started")) || procs[2].exited()
	})
	c := readPermitEnv(t, dirs[2])
	if c.slot != a.slot || c.fence <= a.fence {
		t.Fatalf("the freed permit was slot %d with fence %d; the third run got slot %d with fence %d", a.slot, a.fence, c.slot, c.fence)
	}
	for _, i := range []int{1, 2} {
		if err := os.WriteFile(filepath.Join(dirs[i], "stop"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		expect(t, procs[i].wait(), 0)
	}
}

// Deleting a permit's slot on the nodes while its command runs stops the
// command, and run exits 76.
func TestRunPermitLost(t *testing.T) {
	t.Parallel()
	srv := redistest.StartN(t, 3, redistest.Config{})
	dir := t.TempDir()
	p := start(t, dir, nil, "run", "--no-quarantine", "--permits", "3", "--ttl", "1s", "--kill-grace", "300ms",
		nodesFlag(srv...), "lost-sem", "--", "sh", "-c", holdScript)
	waitFor(t, 30*time.Second, "the command to start", func() bool { return fileExists(filepath.Join(dir, "started")) || p.exited() })
	e := readPermitEnv(t, dir)
	for _, s := range srv {
		s.MustDo(t, "DEL", wire.PermitKey("lost-sem", e.slot))
	}
	r := p.wait()
	expect(t, r, exitLockLost, `LOST a permit of the semaphore "lost-sem"`, "SIGTERM", "was stopped")
}

// The variables of the permits do not leak from redlock's environment
// into a lock's command.
func TestRunVariablesNotInherited(t *testing.T) {
	t.Parallel()
	srv := redistest.StartN(t, 3, redistest.Config{})
	r := runIn(t, t.TempDir(), []string{"REDLOCK_SLOT=9", "REDLOCK_PERMITS=9", "REDLOCK_TERM=9", "REDLOCK_FENCE=9"},
		"run", "--no-quarantine", nodesFlag(srv...), "plain", "--", "sh", "-c", `echo "slot=[$REDLOCK_SLOT] permits=[$REDLOCK_PERMITS] term=[$REDLOCK_TERM] fence=[$REDLOCK_FENCE]"`)
	expect(t, r, 0, "slot=[] permits=[] term=[] fence=[")
	if strings.Contains(r.stdout, "fence=[9]") {
		t.Fatalf("REDLOCK_FENCE was inherited:\n%s", r)
	}
}
