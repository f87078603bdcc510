package main

import (
	"bytes"
	"context"
	"errors"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/goredisnode"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/internal/wire"
)

// startNodes starts three fresh redis-server processes for t and returns
// them with their URLs.
func startNodes(t *testing.T) ([]*redistest.Server, []string) {
	t.Helper()
	servers := redistest.StartN(t, 3, redistest.Config{})
	return servers, redistest.URLs(servers)
}

// testConfig is the program's configuration for tests. Nobody has locked
// anything on the test's servers before, which have just started, so
// restart quarantine can be disabled, and the first lock need not wait
// one TTL. The programs themselves keep it on.
func testConfig(key string) config {
	return config{key: key, ttl: 2 * time.Second, wait: 30 * time.Second, opts: &redlock.Options{DisableQuarantine: true}}
}

var fenceRE = regexp.MustCompile(`(?m)^acquired "[^"]+"(?: again)?: fence (\d+)`)

func TestRun(t *testing.T) {
	servers, urls := startNodes(t)
	const key = "test:basic"
	var out bytes.Buffer
	if err := run(context.Background(), urls, &out, testConfig(key)); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, &out)
	}
	t.Logf("output:\n%s", &out)

	var fences []int64
	for _, m := range fenceRE.FindAllStringSubmatch(out.String(), -1) {
		f, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil {
			t.Fatalf("fence %q: %v", m[1], err)
		}
		fences = append(fences, f)
	}
	if len(fences) != 2 {
		t.Fatalf("output shows %d fences, want 2 (first lock, second lock):\n%s", len(fences), &out)
	}
	if fences[0] <= 0 || fences[1] <= fences[0] {
		t.Errorf("fences %d then %d: want positive and increasing", fences[0], fences[1])
	}
	for _, want := range []string{
		"errors.Is(err, redlock.ErrTaken) = true",
		"valid for ",
		"released \"" + key + "\" (fence " + strconv.FormatInt(fences[1], 10) + ")",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, &out)
		}
	}

	// The fences printed are the ones the nodes gave: the lock's fence is
	// the largest its granting nodes gave, and the release lifted every
	// node's counter to at least that.
	exact, gone := false, 0
	for _, s := range servers {
		v := s.MustDo(t, "HGET", wire.MarkerKey(key), wire.MarkerFence)
		str, ok := v.(string)
		if !ok {
			t.Fatalf("%s: fence counter is %v (%T), want a number", s.Addr(), v, v)
		}
		n, err := strconv.ParseInt(str, 10, 64)
		if err != nil {
			t.Fatalf("%s: fence counter %q: %v", s.Addr(), str, err)
		}
		if n < fences[1] {
			t.Errorf("%s: fence counter %d is below the last fence printed, %d", s.Addr(), n, fences[1])
		}
		exact = exact || n == fences[1]
		if s.MustDo(t, "EXISTS", key) == int64(0) {
			gone++
		}
	}
	// Release returns once a quorum has confirmed; the program closes the
	// client, which waits for the other releases, before its nodes.
	if gone != len(servers) {
		t.Errorf("the lock key is gone from %d of %d nodes after the program ended, want all", gone, len(servers))
	}
	if !exact {
		t.Errorf("no node's fence counter is the last fence printed, %d", fences[1])
	}
}

// TestRunHeldElsewhere holds the lock from another client for the whole
// run: the program waits, and reports its context's end and ErrTaken.
func TestRunHeldElsewhere(t *testing.T) {
	_, urls := startNodes(t)
	const key = "test:basic:held"
	cfg := testConfig(key)
	var nodes []redlock.Node
	for _, u := range urls {
		n, err := goredisnode.Dial(u)
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		nodes = append(nodes, n)
	}
	other, err := redlock.New(nodes, cfg.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := other.Close(); err != nil {
			t.Error(err)
		}
	}()
	held, err := other.Lock(context.Background(), key, time.Minute)
	if err != nil {
		t.Fatalf("holding the lock: %v", err)
	}

	// The wait ends with the caller's context, or with -wait, whichever
	// comes first.
	t.Run("context", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		checkHeldElsewhere(t, ctx, urls, cfg)
	})
	t.Run("wait", func(t *testing.T) {
		cfg := cfg
		cfg.wait = 300 * time.Millisecond
		checkHeldElsewhere(t, context.Background(), urls, cfg)
	})
	if err := held.Release(context.Background()); err != nil {
		t.Errorf("releasing the lock held elsewhere: %v", err)
	}
}

// checkHeldElsewhere runs the program while the lock is held elsewhere:
// it must wait, and report its wait's end and ErrTaken.
func checkHeldElsewhere(t *testing.T, ctx context.Context, urls []string, cfg config) {
	t.Helper()
	var out bytes.Buffer
	err := run(ctx, urls, &out, cfg)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, redlock.ErrTaken) {
		t.Errorf("run while the lock is held elsewhere: %v; want an error wrapping context.DeadlineExceeded and ErrTaken", err)
	}
	if strings.Contains(out.String(), "acquired") {
		t.Errorf("run acquired a lock that was held elsewhere:\n%s", &out)
	}
}

// TestWholeInOneFile checks that the program can be copied as it is: one
// file, importing nothing of this repository's examples.
func TestWholeInOneFile(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var program []string
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") {
			program = append(program, f)
		}
	}
	if len(program) != 1 || program[0] != "main.go" {
		t.Fatalf("the program's files are %q, want only main.go", program)
	}
	parsed, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range parsed.Imports {
		if strings.Contains(imp.Path.Value, "/examples") {
			t.Errorf("main.go imports %s: an example must be whole in one file", imp.Path.Value)
		}
	}
}
