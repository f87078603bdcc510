//go:build unix

package main

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// groupsSupported says whether COMMAND can lead a process group of its own.
const groupsSupported = true

// sysProcAttr returns the process attributes for COMMAND: a process group
// of its own when ownGroup is set, and the parent-death signal where the
// system has one.
func sysProcAttr(ownGroup bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: ownGroup}
	setParentDeathSignal(a)
	return a
}

// inForeground reports whether stdin is a terminal whose foreground
// process group is redlock's own. COMMAND then stays in that group, so that
// it can use the terminal and the keyboard's signals reach it.
func inForeground() bool {
	pgrp, err := unix.IoctlGetInt(0, unix.TIOCGPGRP)
	return err == nil && pgrp == unix.Getpgrp()
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	return err == nil
}

// signalGroup sends sig to the process group that pid leads.
func signalGroup(pid int, sig syscall.Signal) error {
	return syscall.Kill(-pid, sig)
}
