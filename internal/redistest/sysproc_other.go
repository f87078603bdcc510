//go:build unix && !linux

package redistest

import (
	"os/exec"
	"syscall"
)

// startProcess starts cmd in a process group of its own, so that a kill can
// reach any child that redis-server forks to save its data.
//
// Unlike on Linux, a server outlives a test binary that dies without
// running its cleanups.
func startProcess(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd.Start()
}
