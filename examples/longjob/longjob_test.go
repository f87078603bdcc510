package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/redistest"
)

// startNodes starts three fresh redis-server processes for t and returns
// them with their URLs.
func startNodes(t *testing.T) ([]*redistest.Server, []string) {
	t.Helper()
	servers := redistest.StartN(t, 3, redistest.Config{})
	return servers, redistest.URLs(servers)
}

// testConfig is the program's configuration for tests: a job of steps
// steps of step each, under a lock whose TTL is a second. Nobody has
// locked anything on the test's servers before, which have just started,
// so restart quarantine can be disabled, and the first lock need not
// wait one TTL. The program itself keeps it on.
func testConfig(key string, steps int, step time.Duration) config {
	return config{
		key:    key,
		ttl:    time.Second,
		steps:  steps,
		step:   step,
		budget: time.Minute,
		opts:   &redlock.Options{DisableQuarantine: true},
	}
}

// endless is a number of steps that a test never waits for: a job that
// should stop early and does not makes the test time out.
const endless = 100000

// TestFinish runs a job that takes longer than the TTL: AutoExtend keeps
// the lock alive to the end.
func TestFinish(t *testing.T) {
	_, urls := startNodes(t)
	cfg := testConfig("test:longjob:finish", 6, 300*time.Millisecond)
	if d := time.Duration(cfg.steps) * cfg.step; d <= cfg.ttl {
		t.Fatalf("the job takes %s, not longer than the TTL, %s", d, cfg.ttl)
	}
	var out bytes.Buffer
	if err := run(context.Background(), urls, &out, cfg); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, &out)
	}
	t.Logf("output:\n%s", &out)
	for _, want := range []string{"step 6/6 done", "job finished all 6 steps"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// checkLost checks that run stopped the job early because the lock was
// lost, and that it said so.
func checkLost(t *testing.T, err error, out *bytes.Buffer, cfg config) {
	t.Helper()
	t.Logf("output:\n%s", out)
	if !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("run: %v; want an error wrapping redlock.ErrLockLost", err)
	}
	if strings.Contains(out.String(), "job finished") {
		t.Errorf("the job finished although the lock was lost")
	}
	if !strings.Contains(out.String(), "lock lost") {
		t.Errorf("output does not say the lock was lost")
	}
	if cfg.loseAfter > 0 && !strings.Contains(out.String(), fmt.Sprintf("step %d/%d done", cfg.loseAfter, cfg.steps)) {
		t.Errorf("output lacks step %d, after which the lock was lost", cfg.loseAfter)
	}
}

// TestLoseKeys deletes the lock's key on a majority of the nodes, as the
// -lose flag does: the next extension finds the token gone, and the job's
// context ends with the extension's error, an *OpError wrapping
// ErrLockLost.
func TestLoseKeys(t *testing.T) {
	_, urls := startNodes(t)
	cfg := testConfig("test:longjob:keys", endless, 100*time.Millisecond)
	cfg.loseAfter, cfg.lose = 2, deleteOnMajority(urls)
	cfg.loseHow = "deleting the lock's key on a majority of the nodes"
	var out bytes.Buffer
	err := run(context.Background(), urls, &out, cfg)
	checkLost(t, err, &out, cfg)
	var oe *redlock.OpError
	if !errors.As(err, &oe) || oe.Op != "extend" {
		t.Errorf("run: %v; want it to wrap the *OpError of an extension", err)
	}
}

// TestLoseNodes stops two of the three nodes: extensions fail for want of
// a quorum, and the job's context ends at the lock's deadline with a
// cause wrapping ErrLockLost.
func TestLoseNodes(t *testing.T) {
	servers, urls := startNodes(t)
	cfg := testConfig("test:longjob:nodes", endless, 100*time.Millisecond)
	cfg.loseAfter = 2
	cfg.lose = func(context.Context, string) error {
		return errors.Join(servers[0].Stop(), servers[1].Stop())
	}
	cfg.loseHow = "stopping two of the three nodes"
	var out bytes.Buffer
	err := run(context.Background(), urls, &out, cfg)
	checkLost(t, err, &out, cfg)
}

// TestBudget gives the job a budget of one TTL: AutoExtend stops after
// three extensions, and the lock ends at its deadline under the job that
// overran it.
func TestBudget(t *testing.T) {
	_, urls := startNodes(t)
	cfg := testConfig("test:longjob:budget", endless, 100*time.Millisecond)
	cfg.budget = cfg.ttl
	var out bytes.Buffer
	err := run(context.Background(), urls, &out, cfg)
	checkLost(t, err, &out, cfg)
	if !strings.Contains(out.String(), "at most 3 times") {
		t.Errorf("output does not say the lock is extended at most 3 times")
	}
}

// TestInterrupt cancels the program's context: the job stops with that
// cause, not a lost lock, and the lock is released.
func TestInterrupt(t *testing.T) {
	servers, urls := startNodes(t)
	cfg := testConfig("test:longjob:interrupt", endless, 100*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	cfg.loseAfter = 2
	cfg.lose = func(context.Context, string) error { cancel(); return nil }
	cfg.loseHow = "interrupting the program"
	var out bytes.Buffer
	err := run(ctx, urls, &out, cfg)
	t.Logf("output:\n%s", &out)
	if !errors.Is(err, context.Canceled) || errors.Is(err, redlock.ErrLockLost) {
		t.Errorf("run: %v; want an error wrapping context.Canceled and not ErrLockLost", err)
	}
	held := 0
	for _, s := range servers {
		if s.MustDo(t, "EXISTS", cfg.key) == int64(1) {
			held++
		}
	}
	if held >= 2 {
		t.Errorf("the lock is still held on %d nodes after the interrupted job", held)
	}
}

func TestExtensions(t *testing.T) {
	for _, c := range []struct {
		ttl, budget time.Duration
		want        int
	}{
		{3 * time.Second, 0, 0},
		{3 * time.Second, time.Second, 1},
		{3 * time.Second, time.Millisecond, 1},
		{3 * time.Second, 2999 * time.Millisecond, 2},
		{3 * time.Second, time.Minute, 60},
		{time.Second, time.Second, 3},
	} {
		if got := extensions(c.ttl, c.budget); got != c.want {
			t.Errorf("extensions(%s, %s) = %d, want %d", c.ttl, c.budget, got, c.want)
		}
	}
}
