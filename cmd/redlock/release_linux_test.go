package main

import (
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/quorumlock/redlock/internal/redistest"
	"golang.org/x/sys/unix"
)

// openTerminal returns a new pseudo-terminal: the end that a test types
// into, and the terminal that a process reads.
func openTerminal(t *testing.T) (keyboard, tty *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s
}

// On a terminal, release --force shows the lock and removes it only when
// the answer is yes.
func TestReleaseAsks(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Config{})
	nodes := nodesFlag(srv)
	srv.MustDo(t, "SET", "job", "hung-token cron on db-2", "PX", "3600000")

	for _, answer := range []string{"\n", "n\n", "yes please\n"} {
		keyboard, tty := openTerminal(t)
		if _, err := keyboard.WriteString(answer); err != nil {
			t.Fatal(err)
		}
		r := startWith(t, t.TempDir(), tty, nil, "release", "--force", nodes, "job").wait()
		expect(t, r, exitFailure, `lock "job": HELD by `+tokenID("hung-token"), "cron on db-2", "[y/N]", "not answered yes")
		if v := srv.MustDo(t, "GET", "job"); v == nil {
			t.Fatalf("answered %q, and the lock was removed:\n%s", answer, r)
		}
	}
	keyboard, tty := openTerminal(t)
	if _, err := keyboard.WriteString("y\n"); err != nil {
		t.Fatal(err)
	}
	r := startWith(t, t.TempDir(), tty, nil, "release", "--force", nodes, "job").wait()
	expect(t, r, 0, "[y/N]", `lock "job": REMOVED the keys of `+tokenID("hung-token"))
	if v := srv.MustDo(t, "GET", "job"); v != nil {
		t.Fatalf("answered yes, and the key is still there: %v\n%s", v, r)
	}
}
