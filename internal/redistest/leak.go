package redistest

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// defaultGrace is how long Main waits, after the tests and the cleanups,
// for new goroutines to exit. Closing a client or a listener ends its
// goroutines soon after, not at once.
const defaultGrace = 5 * time.Second

// allowed are the goroutines that are never reported, whoever started
// them: long-lived goroutines owned by the runtime, the standard library or
// this package that no test can stop. A goroutine is allowed if any
// function in its stack, or the function that created it, is one of these.
// Each entry says why it may stay; a third-party library's goroutine is
// accepted only through an [IgnoreGoroutine] option in the TestMain that
// needs it.
var allowed = []allowance{
	// signal.Notify starts one goroutine that relays signals for the rest
	// of the process's life; there is no way to stop it.
	{"os/signal.signal_recv", "signal.Notify's relay, which lives as long as the process"},
	{"os/signal.loop", "signal.Notify's relay, which lives as long as the process"},
	{"runtime.ensureSigM", "the runtime's signal mask goroutine, started by signal.Notify"},
	// This package starts redis-server processes with a parent-death
	// signal from one goroutine locked to its thread for good: the kernel
	// kills the servers when that thread ends, so it must outlive them all.
	{"github.com/quorumlock/redlock/internal/redistest.starterLoop", "the thread that redis-server processes are started from, which must outlive them"},
}

type allowance struct{ function, why string }

// A MainOption changes what [Main] does.
type MainOption func(*mainConfig)

type mainConfig struct {
	cleanups []func()
	ignore   []allowance
	grace    time.Duration
	out      io.Writer
}

// Cleanup makes Main call f after the tests have run and before it looks
// for leaked goroutines, for what TestMain set up before calling Main,
// such as servers shared by the package's tests or a temporary directory.
// Cleanups run in the order given.
func Cleanup(f func()) MainOption {
	return func(c *mainConfig) { c.cleanups = append(c.cleanups, f) }
}

// IgnoreGoroutine makes Main accept goroutines that have function (such as
// "github.com/some/lib.(*pool).reaper") in their stack or as their
// creator: for a long-lived goroutine of a third-party library that the
// library gives no way to stop. why must say so; Main prints it with its
// report, so that an allowance cannot hide silently.
func IgnoreGoroutine(function, why string) MainOption {
	return func(c *mainConfig) { c.ignore = append(c.ignore, allowance{function, why}) }
}

// grace sets how long Main waits for new goroutines to exit; the default
// is defaultGrace.
func grace(d time.Duration) MainOption {
	return func(c *mainConfig) { c.grace = d }
}

// Main is a TestMain that fails the tests if they leave goroutines
// running:
//
//	func TestMain(m *testing.M) { redistest.Main(m) }
//
// It notes the goroutines that are running when it is called, runs the
// tests, runs the cleanups, and then waits up to five seconds for every
// goroutine that was not running at the start to exit. If any is still
// running, it prints their stacks and exits with status 1 even though the
// tests passed; otherwise it exits with the status of m.Run. It does not
// return.
//
// A goroutine that a test starts and never stops keeps its memory, its
// connections and often a server-side resource alive; in a lock library it
// can also keep extending or releasing a lock behind the caller's back.
func Main(m *testing.M, opts ...MainOption) {
	os.Exit(runMain(m, opts...))
}

// A runner is what runMain needs of a testing.M.
type runner interface{ Run() int }

func runMain(m runner, opts ...MainOption) int {
	cfg := mainConfig{grace: defaultGrace, out: os.Stderr}
	for _, o := range opts {
		o(&cfg)
	}
	before := goroutines()
	code := m.Run()
	for _, f := range cfg.cleanups {
		f()
	}
	ignore := make([]string, len(cfg.ignore))
	for i, a := range cfg.ignore {
		ignore[i] = a.function
	}
	leaked := leakedSince(before, cfg.grace, ignore...)
	if len(leaked) == 0 {
		return code
	}
	fmt.Fprint(cfg.out, leakReport(leaked, cfg.grace))
	for _, a := range cfg.ignore {
		fmt.Fprintf(cfg.out, "redistest: (this package ignores %s: %s)\n", a.function, a.why)
	}
	if code == 0 {
		code = 1
	}
	return code
}

// A goroutine is one goroutine, as runtime.Stack shows it.
type goroutine struct {
	ID    uint64
	State string   // such as "chan receive" or "IO wait, 2 minutes"
	Funcs []string // the functions of its stack, innermost first
	// CreatedBy is the function that started it ("" for the main
	// goroutine).
	CreatedBy string
	Stack     string // as runtime.Stack shows it
}

// has reports whether function is in g's stack or created it.
func (g goroutine) has(function string) bool {
	return g.CreatedBy == function || slices.Contains(g.Funcs, function)
}

// goroutines returns every goroutine running now, except the caller's own
// and the runtime's system goroutines.
func goroutines() []goroutine {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	all := parseStacks(buf)
	self := selfID()
	return slices.DeleteFunc(all, func(g goroutine) bool { return g.ID == self })
}

// selfID returns the caller's goroutine ID.
func selfID() uint64 {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	gs := parseStacks(buf)
	if len(gs) == 0 {
		return 0
	}
	return gs[0].ID
}

// leakedSince returns the goroutines that are running and were not in before,
// other than those that the package's own allowances accept and those
// with one of the functions in ignore in their stack or as their creator.
// It waits up to grace for them to exit before it reports them.
func leakedSince(before []goroutine, grace time.Duration, ignore ...string) []goroutine {
	old := make(map[uint64]bool, len(before))
	for _, g := range before {
		old[g.ID] = true
	}
	deadline := time.Now().Add(grace)
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		var leaked []goroutine
	next:
		for _, g := range goroutines() {
			if old[g.ID] {
				continue
			}
			for _, a := range allowed {
				if g.has(a.function) {
					continue next
				}
			}
			for _, f := range ignore {
				if g.has(f) {
					continue next
				}
			}
			leaked = append(leaked, g)
		}
		if len(leaked) == 0 || !time.Now().Before(deadline) {
			return leaked
		}
		time.Sleep(wait)
	}
}

// leakReport describes leaked goroutines with their stacks, for Main's output.
func leakReport(leaked []goroutine, grace time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nredistest: FAIL: %d goroutine(s) started by the tests still running %v after they ended:\n\n", len(leaked), grace)
	for _, g := range leaked {
		b.WriteString(g.Stack)
		b.WriteString("\n\n")
	}
	b.WriteString("redistest: stop them in the test that starts them (close the client, cancel the context, wait for the goroutine),\n" +
		"redistest: or, for a library goroutine that cannot be stopped, pass redistest.IgnoreGoroutine to redistest.Main with the reason.\n")
	return b.String()
}

// parseStacks parses the output of runtime.Stack.
func parseStacks(buf []byte) []goroutine {
	var out []goroutine
	for _, block := range bytes.Split(bytes.TrimSpace(buf), []byte("\n\n")) {
		lines := strings.Split(string(block), "\n")
		head, ok := strings.CutPrefix(lines[0], "goroutine ")
		if !ok {
			continue
		}
		id, rest, ok := strings.Cut(head, " ")
		if !ok {
			continue
		}
		g := goroutine{Stack: string(block)}
		var err error
		if g.ID, err = strconv.ParseUint(id, 10, 64); err != nil {
			continue
		}
		g.State = strings.TrimSuffix(strings.TrimPrefix(rest, "["), "]:")
		for _, l := range lines[1:] {
			switch {
			case strings.HasPrefix(l, "\t"), l == "":
				// A file and line.
			case strings.HasPrefix(l, "created by "):
				f := strings.TrimPrefix(l, "created by ")
				f, _, _ = strings.Cut(f, " in goroutine ")
				g.CreatedBy = f
			case strings.HasPrefix(l, "..."):
				// "...additional frames elided..."
			default:
				g.Funcs = append(g.Funcs, funcName(l))
			}
		}
		out = append(out, g)
	}
	return out
}

// funcName returns the function of a stack line such as
// "net/http.(*conn).serve(0xc000123456, {0x7d8a40, 0xc000234567})".
func funcName(line string) string {
	if strings.HasSuffix(line, ")") {
		// The arguments: the last "(" not in a receiver such as "(*T)".
		if i := strings.LastIndex(line, "("); i > 0 && !strings.HasPrefix(line[i:], "(*") {
			return line[:i]
		}
	}
	return line
}
