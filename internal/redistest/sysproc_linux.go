package redistest

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// starter returns the channel through which startProcess runs cmd.Start on
// a thread that lives as long as the test binary.
var starter = sync.OnceValue(func() chan<- func() {
	c := make(chan func())
	go starterLoop(c)
	return c
})

// starterLoop runs the functions sent on c on its thread, forever. It is
// the one goroutine that Main lets outlive the tests.
func starterLoop(c <-chan func()) {
	runtime.LockOSThread() // and never unlock, so the thread never ends
	for start := range c {
		start()
	}
}

// startProcess starts cmd in a process group of its own, so that a kill can
// reach any child that redis-server forks to save its data, and asks the
// kernel to kill it when the test binary dies without running its cleanups
// (Ctrl-C, a panic, a timeout), so that no server outlives its test.
//
// The kernel sends that signal when the thread that started the process
// ends, not the whole parent, and the Go runtime ends a thread whenever a
// goroutine locked to it returns. So processes are started from one
// goroutine that stays locked to its thread for good.
func startProcess(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	errc := make(chan error, 1)
	starter() <- func() { errc <- cmd.Start() }
	return <-errc
}
