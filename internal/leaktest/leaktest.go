// Package leaktest checks that a test binary leaves no goroutines running
// behind it. Every test package of the repository calls [Main] from its
// TestMain:
//
//	func TestMain(m *testing.M) { leaktest.Main(m) }
//
// or, with work of its own to undo after the tests,
//
//	func TestMain(m *testing.M) {
//		stop := startServers()
//		leaktest.Main(m, leaktest.Cleanup(stop))
//	}
//
// Main notes the goroutines that are running when it is called, runs the
// tests, runs the cleanups, and then waits a short grace period for every
// goroutine that was not running at the start to exit. If any is still
// running, it prints their stacks and exits with status 1 even though the
// tests passed. A goroutine that a test starts and never stops keeps its
// memory, its connections and often a server-side resource alive; in a
// lock library it can also keep extending or releasing a lock behind the
// caller's back.
//
// It imports nothing but the standard library, so every module of the
// repository can use it.
package leaktest

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

// DefaultGrace is how long Main waits, after the tests and the cleanups,
// for new goroutines to exit. Closing a client or a listener ends its
// goroutines soon after, not at once.
const DefaultGrace = 5 * time.Second

// allowed are the goroutines that are never reported, whoever started
// them: long-lived goroutines owned by the runtime or the standard library
// that no test can stop. A goroutine is allowed if any function in its
// stack, or the function that created it, is one of these. Each entry
// says why it may stay; add an entry for a third-party library only with
// an [Ignore] option in the TestMain that needs it, never here.
var allowed = []allowance{
	// signal.Notify starts one goroutine that relays signals for the rest
	// of the process's life; there is no way to stop it.
	{"os/signal.signal_recv", "signal.Notify's relay, which lives as long as the process"},
	{"os/signal.loop", "signal.Notify's relay, which lives as long as the process"},
	{"runtime.ensureSigM", "the runtime's signal mask goroutine, started by signal.Notify"},
	// internal/redistest starts redis-server processes with a parent-death
	// signal from one goroutine locked to its thread for good: the kernel
	// kills the servers when that thread ends, so it must outlive them all.
	{"github.com/quorumlock/redlock/internal/redistest.starterLoop", "the thread that redis-server processes are started from, which must outlive them"},
}

type allowance struct{ function, why string }

// An Option changes what Main does.
type Option func(*config)

type config struct {
	cleanups []func()
	ignore   []allowance
	grace    time.Duration
	out      io.Writer
}

// Cleanup makes Main call f after the tests have run and before it looks
// for leaked goroutines, for what TestMain set up before calling Main
// (servers, temporary directories). Cleanups run in the order given.
func Cleanup(f func()) Option {
	return func(c *config) { c.cleanups = append(c.cleanups, f) }
}

// Ignore makes Main accept goroutines that have function (such as
// "github.com/some/lib.(*pool).reaper") in their stack or as their
// creator: for a long-lived goroutine of a third-party library that the
// library gives no way to stop. why must say so; it is printed with the
// report, so that an allowance cannot hide silently.
func Ignore(function, why string) Option {
	return func(c *config) { c.ignore = append(c.ignore, allowance{function, why}) }
}

// Grace sets how long Main waits for new goroutines to exit; the default
// is DefaultGrace.
func Grace(d time.Duration) Option {
	return func(c *config) { c.grace = d }
}

// Main runs the tests of m, then the cleanups, then checks for leaked
// goroutines, and exits: with the status of m.Run if the tests failed or
// nothing leaked, and with status 1 if the tests passed but goroutines
// leaked. It does not return.
func Main(m *testing.M, opts ...Option) {
	os.Exit(run(m, opts...))
}

// A runner is what run needs of a testing.M.
type runner interface{ Run() int }

func run(m runner, opts ...Option) int {
	cfg := config{grace: DefaultGrace, out: os.Stderr}
	for _, o := range opts {
		o(&cfg)
	}
	before := Current()
	code := m.Run()
	for _, f := range cfg.cleanups {
		f()
	}
	ignore := make([]string, len(cfg.ignore))
	for i, a := range cfg.ignore {
		ignore[i] = a.function
	}
	leaked := Leaked(before, cfg.grace, ignore...)
	if len(leaked) == 0 {
		return code
	}
	fmt.Fprint(cfg.out, Report(leaked, cfg.grace))
	for _, a := range cfg.ignore {
		fmt.Fprintf(cfg.out, "leaktest: (this package ignores %s: %s)\n", a.function, a.why)
	}
	if code == 0 {
		code = 1
	}
	return code
}

// A Goroutine is one goroutine, as runtime.Stack shows it.
type Goroutine struct {
	ID    uint64
	State string   // such as "chan receive" or "IO wait, 2 minutes"
	Funcs []string // the functions of its stack, innermost first
	// CreatedBy is the function that started it ("" for the main
	// goroutine).
	CreatedBy string
	Stack     string // as runtime.Stack shows it
}

// has reports whether function is in g's stack or created it.
func (g Goroutine) has(function string) bool {
	return g.CreatedBy == function || slices.Contains(g.Funcs, function)
}

// Current returns every goroutine running now, except the caller's own
// and the runtime's system goroutines.
func Current() []Goroutine {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	all := parse(buf)
	self := selfID()
	return slices.DeleteFunc(all, func(g Goroutine) bool { return g.ID == self })
}

// selfID returns the caller's goroutine ID.
func selfID() uint64 {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	gs := parse(buf)
	if len(gs) == 0 {
		return 0
	}
	return gs[0].ID
}

// Leaked returns the goroutines that are running and were not in before,
// other than those that the package's own allowances accept and those
// with one of the functions in ignore in their stack or as their creator.
// It waits up to grace for them to exit before it reports them.
func Leaked(before []Goroutine, grace time.Duration, ignore ...string) []Goroutine {
	old := make(map[uint64]bool, len(before))
	for _, g := range before {
		old[g.ID] = true
	}
	deadline := time.Now().Add(grace)
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		var leaked []Goroutine
	next:
		for _, g := range Current() {
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

// Report describes leaked goroutines with their stacks, for Main's output.
func Report(leaked []Goroutine, grace time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nleaktest: FAIL: %d goroutine(s) started by the tests still running %v after they ended:\n\n", len(leaked), grace)
	for _, g := range leaked {
		b.WriteString(g.Stack)
		b.WriteString("\n\n")
	}
	b.WriteString("leaktest: stop them in the test that starts them (close the client, cancel the context, wait for the goroutine),\n" +
		"leaktest: or, for a library goroutine that cannot be stopped, pass leaktest.Ignore to leaktest.Main with the reason.\n")
	return b.String()
}

// parse parses the output of runtime.Stack.
func parse(buf []byte) []Goroutine {
	var out []Goroutine
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
		g := Goroutine{Stack: string(block)}
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
