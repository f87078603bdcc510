//go:build !linux

package bench

import (
	"runtime"
	"time"
)

// lockThreadForTimers locks the calling goroutine to its thread; other
// systems than Linux keep their timer slack.
func lockThreadForTimers() { runtime.LockOSThread() }

// preciseSleep sleeps for d; other systems than Linux use a Go timer, as
// precise as the runtime makes it there.
func preciseSleep(d time.Duration) { time.Sleep(d) }
