package redistest

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	var opts []MainOption
	if os.Getenv(childEnv) != "" {
		opts = append(opts, grace(200*time.Millisecond))
	}
	Main(m, opts...)
}

// childEnv makes TestChildLeaks leak, in a child process.
const childEnv = "LEAKTEST_CHILD"

const self = "github.com/quorumlock/redlock/internal/redistest."

// blocked runs until stop is closed.
func blocked(stop <-chan struct{}) { <-stop }

// leakForever never returns.
func leakForever() {
	var never chan struct{}
	<-never
}

func TestParse(t *testing.T) {
	stack := `goroutine 7 [chan receive, 3 minutes]:
github.com/x/y.(*pool).reaper(0xc000123456, {0x7d8a40, 0xc000234567})
	/src/y/pool.go:42 +0x1a
github.com/x/y.F[...](...)
	/src/y/f.go:9
created by github.com/x/y.NewPool in goroutine 1
	/src/y/pool.go:30 +0x2b

goroutine 1 [running]:
main.main()
	/src/main.go:3 +0x1
`
	gs := parseStacks([]byte(stack))
	if len(gs) != 2 {
		t.Fatalf("parsed %d goroutines, want 2: %+v", len(gs), gs)
	}
	g := gs[0]
	if g.ID != 7 || g.State != "chan receive, 3 minutes" || g.CreatedBy != "github.com/x/y.NewPool" ||
		strings.Join(g.Funcs, " ") != "github.com/x/y.(*pool).reaper github.com/x/y.F[...]" {
		t.Errorf("parsed %+v", g)
	}
	if !g.has("github.com/x/y.(*pool).reaper") || !g.has("github.com/x/y.NewPool") || g.has("github.com/x/y.F") {
		t.Errorf("has() is wrong for %+v", g)
	}
	if gs[1].ID != 1 || gs[1].State != "running" || gs[1].Funcs[0] != "main.main" || gs[1].CreatedBy != "" {
		t.Errorf("parsed %+v", gs[1])
	}
}

func TestCurrentExcludesCaller(t *testing.T) {
	self := selfID()
	if self == 0 {
		t.Fatal("no goroutine ID for the caller")
	}
	for _, g := range goroutines() {
		if g.ID == self {
			t.Errorf("Current includes the caller, goroutine %d", self)
		}
	}
}

func TestLeakedFindsLeak(t *testing.T) {
	before := goroutines()
	stop := make(chan struct{})
	go blocked(stop)
	leaked := leakedSince(before, 50*time.Millisecond)
	if len(leaked) != 1 || !leaked[0].has(self+"blocked") || !strings.Contains(leaked[0].Stack, "redistest.blocked") {
		t.Errorf("Leaked found %+v, want the blocked goroutine", leaked)
	}
	if r := leakReport(leaked, time.Second); !strings.Contains(r, "FAIL: 1 goroutine") || !strings.Contains(r, leaked[0].Stack) {
		t.Errorf("Report = %q", r)
	}
	if got := leakedSince(before, 50*time.Millisecond, self+"blocked"); len(got) != 0 {
		t.Errorf("Leaked with the goroutine's function ignored = %+v", got)
	}
	if got := leakedSince(before, 50*time.Millisecond, self+"TestLeakedFindsLeak"); len(got) != 0 {
		t.Errorf("Leaked with the goroutine's creator ignored = %+v", got)
	}
	close(stop)
	if got := leakedSince(before, 5*time.Second); len(got) != 0 {
		t.Errorf("Leaked after the goroutine was stopped = %+v", got)
	}
}

func TestLeakedWaitsForExit(t *testing.T) {
	before := goroutines()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(100 * time.Millisecond)
	}()
	if got := leakedSince(before, 5*time.Second); len(got) != 0 {
		t.Errorf("a goroutine that exits within the grace period was reported: %+v", got)
	}
	wg.Wait()
}

// fakeM is a testing.M whose Run runs f.
type fakeM struct {
	f    func()
	code int
}

func (m fakeM) Run() int { m.f(); return m.code }

func TestRun(t *testing.T) {
	stop := make(chan struct{})
	var out bytes.Buffer
	leak := fakeM{f: func() { go blocked(stop) }}

	if code := runMain(leak, grace(50*time.Millisecond), func(c *mainConfig) { c.out = &out }); code != 1 {
		t.Errorf("run with a leak returned %d, want 1", code)
	}
	if s := out.String(); !strings.Contains(s, "redistest: FAIL: 1 goroutine") || !strings.Contains(s, "redistest.blocked") {
		t.Errorf("run's report does not show the leak:\n%s", s)
	}

	// A failed run keeps its own status.
	leak.code = 3
	out.Reset()
	if code := runMain(leak, grace(50*time.Millisecond), func(c *mainConfig) { c.out = &out }); code != 3 {
		t.Errorf("run of failing tests with a leak returned %d, want 3", code)
	}

	// What a cleanup stops has not leaked.
	leak.code = 0
	out.Reset()
	var order []int
	code := runMain(leak, grace(time.Second), func(c *mainConfig) { c.out = &out },
		Cleanup(func() { order = append(order, 1); close(stop) }),
		Cleanup(func() { order = append(order, 2) }))
	if code != 0 || out.Len() != 0 || len(order) != 2 || order[0] != 1 {
		t.Errorf("run with a cleanup that stops the goroutines: %d, cleanups %v, output %q", code, order, out.String())
	}

	// An ignored goroutine is accepted, and the report names the
	// allowance when something else leaks.
	stop2 := make(chan struct{})
	defer close(stop2)
	out.Reset()
	code = runMain(fakeM{f: func() { go blocked(stop2) }}, grace(50*time.Millisecond), func(c *mainConfig) { c.out = &out },
		IgnoreGoroutine(self+"blocked", "a test of Ignore"))
	if code != 0 || out.Len() != 0 {
		t.Errorf("run with the leak ignored: %d, output %q", code, out.String())
	}
}

// TestChildLeaks leaks a goroutine when it runs in the child process of
// TestMainFailsOnLeak, and does nothing otherwise.
func TestChildLeaks(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("runs only as the child of TestMainFailsOnLeak")
	}
	go leakForever()
}

// TestMainFailsOnLeak runs this test binary with a test that leaks, and
// checks that Main makes it fail with the leaked goroutine's stack.
func TestMainFailsOnLeak(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("in the child")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildLeaks$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 {
		t.Fatalf("child exited with %v, want exit status 1\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "PASS") {
		t.Errorf("the child's tests did not pass:\n%s", stdout.String())
	}
	if s := stderr.String(); !strings.Contains(s, "redistest: FAIL: 1 goroutine") || !strings.Contains(s, "redistest.leakForever") {
		t.Errorf("the child's report does not show the leak:\n%s", s)
	}
}
