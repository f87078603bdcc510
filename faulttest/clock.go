package faulttest

import (
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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

// A NodeClock shifts the wall clock of one redis-server process that runs
// with the clock shim: Env gives the environment that loads the shim and
// points it at the clock's offset file, and Set rewrites the file. The
// process sees a new offset within a millisecond. Redis reads the wall
// clock for key expiry, TIME (and so fences and the restart marker) and
// uptime_in_seconds, so all of these move with it.
type NodeClock struct {
	path string
	mu   sync.Mutex // serializes Set
}

// NewNodeClock returns a clock with no offset whose file lives in dir.
func NewNodeClock(dir string) (*NodeClock, error) {
	c := &NodeClock{path: filepath.Join(dir, "clock-offset")}
	if err := c.Set(0); err != nil {
		return nil, err
	}
	return c, nil
}

// Env returns the environment variables that make a process use the clock.
func (c *NodeClock) Env(shim string) []string {
	return []string{"LD_PRELOAD=" + shim, "SHIM_OFFSET_FILE=" + c.path}
}

// Set sets the offset of the process's wall clock from the real one.
func (c *NodeClock) Set(offset time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	tmp := c.path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(offset.Microseconds(), 10)+"\n"), 0o600); err != nil {
		return fmt.Errorf("faulttest: %w", err)
	}
	if err := os.Rename(tmp, c.path); err != nil {
		return fmt.Errorf("faulttest: %w", err)
	}
	return nil
}
