//go:build !linux

package bench

import "time"

// preciseSleep sleeps for d; other systems than Linux use a Go timer, as
// precise as the runtime makes it there.
func preciseSleep(d time.Duration) { time.Sleep(d) }
