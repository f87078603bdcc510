package main

// The tests in this package build the redlock binary once and drive it as a
// user would, against real redis-server processes started by
// package redistest. They assert on outcomes, never on how long things
// took: where a test must wait for something, it waits for the condition
// itself, with generous bounds.

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
)

// bin is the redlock binary that TestMain builds.
var bin string

// runTimeout bounds every run of the binary.
const runTimeout = 90 * time.Second

func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.fuzzworker"); f != nil && f.Value.String() == "true" {
		// A worker process of go test -fuzz runs only the fuzz target,
		// which does not run the binary.
		redistest.Main(m)
	}
	dir, err := os.MkdirTemp("", "redlock-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "redlock")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building redlock:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	redistest.Main(m, redistest.Cleanup(func() { os.RemoveAll(dir) }))
}

// A result is what one run of the binary did.
type result struct {
	code           int
	stdout, stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit status %d\n--- stdout:\n%s--- stderr:\n%s", r.code, r.stdout, r.stderr)
}

// syncBuffer is a bytes.Buffer safe for a process to write while a test
// reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A proc is a running redlock process.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	done           chan struct{}
	res            result
}

// env returns the environment for the binary: the test's own without any
// REDLOCK_ variable, plus extra.
func env(extra ...string) []string {
	var out []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "REDLOCK_") {
			out = append(out, e)
		}
	}
	return append(out, extra...)
}

// start starts the binary with args in dir (the test's temporary directory
// when empty) and the given extra environment.
func start(t *testing.T, dir string, extraEnv []string, args ...string) *proc {
	t.Helper()
	return startWith(t, dir, nil, extraEnv, args...)
}

// startWith is start with stdin as the binary's standard input; nil gives
// it the null device.
func startWith(t *testing.T, dir string, stdin *os.File, extraEnv []string, args ...string) *proc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	if stdin != nil {
		cmd.Stdin = stdin
	}
	cmd.Env = env(extraEnv...)
	p := &proc{cmd: cmd, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() {
		defer cancel()
		err := cmd.Wait()
		p.res = result{code: cmd.ProcessState.ExitCode(), stdout: p.stdout.String(), stderr: p.stderr.String()}
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			p.res.stderr += "\n[test: " + err.Error() + "]"
		}
		if ctx.Err() != nil {
			p.res.stderr += "\n[test: killed after " + runTimeout.String() + "]"
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait waits for the process to exit and returns what it did.
func (p *proc) wait() result {
	<-p.done
	return p.res
}

// exited reports whether the process has exited.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// run runs the binary to completion.
func run(t *testing.T, args ...string) result {
	t.Helper()
	return start(t, t.TempDir(), nil, args...).wait()
}

// runIn runs the binary to completion in dir with extra environment.
func runIn(t *testing.T, dir string, extraEnv []string, args ...string) result {
	t.Helper()
	return start(t, dir, extraEnv, args...).wait()
}

// waitFor waits until cond holds, failing t after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fileExists reports whether path exists.
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// nodesFlag returns --nodes=URL,... for the servers.
func nodesFlag(servers ...*redistest.Server) string {
	return "--nodes=" + strings.Join(redistest.URLs(servers), ",")
}

// expect fails t unless r exited with code and its output contains each of
// the wanted strings.
func expect(t *testing.T, r result, code int, want ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("want exit status %d, got:\n%s", code, r)
	}
	for _, w := range want {
		if !strings.Contains(r.stdout+r.stderr, w) {
			t.Fatalf("want output containing %q, got:\n%s", w, r)
		}
	}
}

// processGone reports whether pid has exited (a zombie counts as exited).
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the command name in parentheses.
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] == 'Z'
	}
	return false
}
