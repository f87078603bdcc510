package bench

import (
	"runtime"
	"syscall"
	"time"
)

// prSetTimerSlack is prctl's PR_SET_TIMERSLACK.
const prSetTimerSlack = 29

// lockThreadForTimers locks the calling goroutine to its thread for good
// and sets the thread's timer slack to 1ns, so that preciseSleep wakes
// within tens of microseconds of its time rather than the default 50µs
// slack or more.
func lockThreadForTimers() {
	runtime.LockOSThread()
	syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, 1, 0)
}

// preciseSleep sleeps for d with nanosleep, which blocks the thread: a
// Go timer would wake no sooner than a whole millisecond in a process
// whose processors are idle (see the top of netem.go).
func preciseSleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	for {
		var left syscall.Timespec
		if err := syscall.Nanosleep(&ts, &left); err != syscall.EINTR {
			return
		}
		ts = left
	}
}
