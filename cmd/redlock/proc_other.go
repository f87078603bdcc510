//go:build !unix

package main

import (
	"errors"
	"os"
	"syscall"
)

// groupsSupported says whether COMMAND can lead a process group of its own.
const groupsSupported = false

// sysProcAttr returns no special process attributes.
func sysProcAttr(bool) *syscall.SysProcAttr { return nil }

// inForeground reports false: there is no terminal process group here.
func inForeground() bool { return false }

// isTerminal reports false: here redlock does not tell terminals apart,
// so that release --force needs --yes.
func isTerminal(*os.File) bool { return false }

// signalGroup is not supported.
func signalGroup(int, syscall.Signal) error {
	return errors.New("process groups are not supported on this system")
}
