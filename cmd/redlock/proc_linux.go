package main

import "syscall"

// setParentDeathSignal makes the kernel send COMMAND SIGTERM if redlock
// dies: nobody extends the lock any more, and it expires within one TTL.
func setParentDeathSignal(a *syscall.SysProcAttr) {
	a.Pdeathsig = syscall.SIGTERM
}
