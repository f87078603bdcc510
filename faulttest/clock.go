package faulttest

import (
	_ "embed"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"
)

//go:embed shim/clockshim.c
var shimSource []byte

// The shim is built once per test binary, into shimDir.
var (
	shimOnce sync.Once
	shimPath string
	shimErr  error
	shimDir  string
)

// BuildClockShim compiles the wall-clock shim (shim/clockshim.c) with gcc
// into a temporary directory, once per process, and returns the path of
// the shared library. CleanupClockShim removes it.
//
// A missing gcc or a failed build is an error that says so: scenarios that
// need the shim must fail, never skip.
func BuildClockShim() (string, error) {
	shimOnce.Do(func() {
		gcc, err := exec.LookPath("gcc")
		if err != nil {
			shimErr = fmt.Errorf("faulttest: gcc is needed to build the clock shim and is not in PATH (apt-get install -y gcc): %w", err)
			return
		}
		shimDir, err = os.MkdirTemp("", "faulttest-clockshim-")
		if err != nil {
			shimErr = fmt.Errorf("faulttest: %w", err)
			return
		}
		src := filepath.Join(shimDir, "clockshim.c")
		if err := os.WriteFile(src, shimSource, 0o600); err != nil {
			shimErr = fmt.Errorf("faulttest: %w", err)
			return
		}
		so := filepath.Join(shimDir, "clockshim.so")
		out, err := exec.Command(gcc, "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o", so, src, "-ldl").CombinedOutput()
		if err != nil {
			shimErr = fmt.Errorf("faulttest: building the clock shim with gcc failed: %w\n%s", err, out)
			return
		}
		shimPath = so
	})
	return shimPath, shimErr
}

// CleanupClockShim removes the directory BuildClockShim built into, if
// any. It is called once, when every test has run.
func CleanupClockShim() {
	if shimDir != "" {
		os.RemoveAll(shimDir)
	}
}

// A NodeClock sets the wall clock of one redis-server process that runs
// with the clock shim: Env gives the environment that loads the shim and
// points it at the clock's file, and Set and SetRate rewrite the file. The
// process sees the change within a millisecond. Redis reads the wall clock
// for key expiry, TIME (and so fences and the restart marker) and
// uptime_in_seconds, so all of these follow it: a step moves them at once,
// and a rate other than 1 makes keys live shorter (faster clock) or longer
// (slower clock) in real time. The monotonic clock, which Redis uses only
// to pace its timers and time its commands, is left alone.
type NodeClock struct {
	path string

	mu     sync.Mutex    // serializes changes, guards the fields below
	offset time.Duration // the process's wall clock minus the real one at anchor
	anchor time.Time     // when the offset and the rate were set
	rate   float64       // the process's clock seconds per real second
}

// NewNodeClock returns a clock with no offset and rate 1 whose file lives
// in dir.
func NewNodeClock(dir string) (*NodeClock, error) {
	c := &NodeClock{path: filepath.Join(dir, "clock-offset"), rate: 1}
	if err := c.Set(0); err != nil {
		return nil, err
	}
	return c, nil
}

// Env returns the environment variables that make a process use the clock.
func (c *NodeClock) Env(shim string) []string {
	return []string{"LD_PRELOAD=" + shim, "SHIM_OFFSET_FILE=" + c.path}
}

// Set steps the process's wall clock to offset from the real one; it keeps
// running at its rate.
func (c *NodeClock) Set(offset time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.write(offset, c.rate)
}

// SetRate makes the process's wall clock run at rate seconds per real
// second from now on, without a step: it goes on from the offset it has
// now. rate must be positive.
func (c *NodeClock) SetRate(rate float64) error {
	if !(rate > 0) {
		return fmt.Errorf("faulttest: clock rate %v is not positive", rate)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.write(c.offsetAt(time.Now()), rate)
}

// Rate returns the rate the clock runs at.
func (c *NodeClock) Rate() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rate
}

// OffsetAt returns what the process's wall clock shows minus the real one
// at t.
func (c *NodeClock) OffsetAt(t time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offsetAt(t)
}

func (c *NodeClock) offsetAt(t time.Time) time.Duration {
	return c.offset + time.Duration(float64(t.Sub(c.anchor))*(c.rate-1))
}

// write anchors offset and rate at the present moment and writes them for
// the shim, in the format shim/clockshim.c reads: the offset and the
// anchor in microseconds of the wall clock, and the rate in parts per
// billion. c.mu must be held.
func (c *NodeClock) write(offset time.Duration, rate float64) error {
	now := time.Now()
	line := fmt.Sprintf("%d %d %d\n", offset.Microseconds(), now.UnixMicro(), int64(math.Round(rate*1e9)))
	tmp := c.path + ".tmp"
	if err := os.WriteFile(tmp, []byte(line), 0o600); err != nil {
		return fmt.Errorf("faulttest: %w", err)
	}
	if err := os.Rename(tmp, c.path); err != nil {
		return fmt.Errorf("faulttest: %w", err)
	}
	c.offset, c.anchor, c.rate = offset, now, rate
	return nil
}
