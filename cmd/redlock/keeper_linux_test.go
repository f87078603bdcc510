package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
	"golang.org/x/sys/unix"
)

// treeScript starts a grandchild that ignores SIGTERM, as its parent does,
// and that starts a sleep of its own; it writes the grandchild's pid to
// the file grandchild and the sleep's to sleeper.
const treeScript = `trap "" TERM; sh -c 'trap "" TERM; sleep 30 & echo $! > sleeper; echo $$ > grandchild.tmp; mv grandchild.tmp grandchild; wait' & wait`

// checkScript, run by the second holder, says whether the first holder's
// grandchild and its sleep are still running.
const checkScript = `for f in grandchild sleeper; do p=$(cat $f); s=$(awk '{print $3}' /proc/$p/stat 2>/dev/null)
if [ -n "$s" ] && [ "$s" != Z ]; then echo "OVERLAP: the first holder's $f $p is still running (state $s)"; fi; done; echo "second holder ran"`

// readPid waits for the file name in dir to hold a pid, and returns it.
func readPid(t *testing.T, p *proc, dir, name string) int {
	t.Helper()
	var pid int
	waitFor(t, 30*time.Second, "the file "+name, func() bool {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err == nil {
			pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		return err == nil || p.exited()
	})
	if pid == 0 {
		t.Fatalf("no %s; the first holder ended:\n%s", name, p.wait())
	}
	return pid
}

// When redlock is killed with SIGKILL while it holds the lock or leads,
// everything its command started ends, a grandchild that ignores SIGTERM
// included, before the next holder's command runs: the keeper sees
// redlock die and kills the tree.
func TestKilledRedlockEndsCommandTree(t *testing.T) {
	t.Parallel()
	for _, verb := range []string{"run", "elect"} {
		t.Run(verb, func(t *testing.T) {
			t.Parallel()
			srv := redistest.StartN(t, 3, redistest.Config{})
			nodes := nodesFlag(srv...)
			dir := t.TempDir()
			key := "killed-" + verb
			a := start(t, dir, nil, verb, "--no-quarantine", "--ttl", "2s", nodes, key, "--", "sh", "-c", treeScript)
			grandchild := readPid(t, a, dir, "grandchild")
			sleeper := readPid(t, a, dir, "sleeper")
			if processGone(grandchild) || processGone(sleeper) {
				t.Fatalf("the grandchild or its sleep ended before redlock was killed:\n%s", a.stderr)
			}

			if err := a.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			if r := a.wait(); r.code != -1 {
				t.Fatalf("redlock was not killed:\n%s", r)
			}
			// The second holder waits for the lock to expire, one TTL at
			// most, and then looks at the first holder's tree.
			b := runIn(t, dir, nil, verb, "--no-quarantine", nodes, key, "--", "sh", "-c", checkScript)
			expect(t, b, 0, "second holder ran")
			if strings.Contains(b.stdout, "OVERLAP") {
				t.Fatalf("the killed holder's command ran on beside the next holder's:\n%s", b)
			}
			waitFor(t, 30*time.Second, "the grandchild and its sleep to be gone", func() bool {
				return processGone(grandchild) && processGone(sleeper)
			})
		})
	}
}

// A command that cannot be run is reported by redlock, as when it started
// the command itself, and the lock is released.
func TestKeeperCannotRun(t *testing.T) {
	t.Parallel()
	srv := redistest.StartN(t, 3, redistest.Config{})
	nodes := nodesFlag(srv...)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "not-executable"), []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	expect(t, run(t, "run", "--no-quarantine", nodes, "k", "--", "no-such-command-xyz"), exitNotFound,
		"redlock: cannot run no-such-command-xyz: executable file not found in $PATH")
	r := runIn(t, dir, nil, "run", "--no-quarantine", nodes, "k", "--", "./not-executable")
	expect(t, r, exitCannotExec, "redlock: cannot run ./not-executable: permission denied")
	expect(t, run(t, "run", "--no-quarantine", "--wait", "0s", nodes, "k", "--", "true"), 0)
}

// The keeper passes on the file descriptors that redlock inherited, under
// their numbers, and none of its own.
func TestKeeperFileDescriptors(t *testing.T) {
	t.Parallel()
	srv := redistest.StartN(t, 3, redistest.Config{})
	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "inherited"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// What the command may hold: its standard streams, fd 3, and what
	// this test process passes on to every child without meaning to.
	want := map[string]bool{"0": true, "1": true, "2": true, "3": true}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil {
			if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && flags&unix.FD_CLOEXEC == 0 {
				want[e.Name()] = true
			}
		}
	}

	cmd := exec.Command(bin, "run", "--no-quarantine", nodesFlag(srv...), "fds", "--", "sh", "-c", "echo through fd 3 >&3; ls /proc/$$/fd")
	cmd.Dir, cmd.Env, cmd.ExtraFiles = dir, env(), []*os.File{f}
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "inherited")); string(b) != "through fd 3\n" {
		t.Fatalf("fd 3 got %q", b)
	}
	for _, fd := range strings.Fields(string(out)) {
		if !want[fd] {
			t.Errorf("the command holds fd %s, which redlock did not inherit: the keeper's own?\n%s", fd, out)
		}
	}
}

// When the lock is lost and the command does not exit within
// --kill-grace of SIGTERM, the SIGKILL that follows reaches every process
// the command started, also one in a session and process group of its own,
// which a signal to the command's group misses.
func TestLostLockKillsEscapedDescendant(t *testing.T) {
	t.Parallel()
	srv := redistest.StartN(t, 5, redistest.Config{})
	dir := t.TempDir()
	const key = "lost:escaped"
	script := `trap '' TERM; setsid sh -c 'trap "" TERM; echo $$ > escaped.tmp; mv escaped.tmp escaped; sleep 60' & wait`
	p := start(t, dir, nil, "run", "--no-quarantine", "--ttl", "1s", "--kill-grace", "300ms", nodesFlag(srv...), key, "--", "sh", "-c", script)
	escaped := readPid(t, p, dir, "escaped")
	// As in TestRunLockLost: the deletions go on, on one majority, until
	// run exits.
	waitFor(t, 60*time.Second, "run to exit after its key was deleted on a majority", func() bool {
		for _, s := range srv[:3] {
			s.MustDo(t, "DEL", key)
		}
		return p.exited()
	})
	expect(t, p.wait(), exitLockLost, "LOST the lock", "sending SIGKILL")
	waitFor(t, 30*time.Second, "the descendant in a session of its own to be killed", func() bool { return processGone(escaped) })
}
