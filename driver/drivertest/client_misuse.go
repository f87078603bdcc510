package drivertest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/clientx"
	"github.com/quorumlock/redlock/internal/redistest"
)

// testMisuse covers what users do by mistake and what a partial outage
// does to the nodes still up (issue 31): waiters that must not hammer the
// live node, TTLs above Options.MaxTTL, two nodes that are one server,
// and keys above the longest allowed.
func (s *suite) testMisuse(t *testing.T) {
	for _, q := range []bool{false, true} {
		for _, n := range []int{1, 4} {
			name := fmt.Sprintf("PartialOutageQuarantine%vWaiters%d", q, n)
			t.Run(name, func(t *testing.T) { s.testPartialOutage(t, q, n) })
		}
	}
	t.Run("SameServerOtherDB", func(t *testing.T) {
		srv := redistest.Start(t, redistest.Config{})
		s.testSameServer(t, srv, "redis://127.0.0.1:"+port(srv)+"/0", "redis://127.0.0.1:"+port(srv)+"/1")
	})
	t.Run("SameServerLocalhost", func(t *testing.T) {
		srv := redistest.Start(t, redistest.Config{})
		s.testSameServer(t, srv, "redis://localhost:"+port(srv), "redis://127.0.0.1:"+port(srv))
	})
	t.Run("MaxTTLLockLeavesNoWeight", s.testMaxTTLLeavesNoWeight)
	t.Run("QuarantineIsLogged", s.testQuarantineLogged)
}

// testSameServer gives a client two URLs of srv, a and b, beside another
// server: the first round must fail with ErrInvalid naming both nodes,
// before any vote is counted, and later rounds must fail at once, with
// nothing sent.
func (s *suite) testSameServer(t *testing.T, srv *redistest.Server, a, b string) {
	other := redistest.Start(t, redistest.Config{})
	c := s.client(t, []string{a, other.URL(), b}, nil)
	key := keyFor(t)
	_, err := c.Lock(ctxT(t), key, time.Second)
	if !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("Lock over one server given twice: %v, want ErrInvalid", err)
	}
	names := clientx.Of(c).Nodes()
	for _, n := range []string{names[0], names[2]} {
		if !strings.Contains(err.Error(), strconv.Quote(n)) {
			t.Errorf("error %q does not name node %q", err, n)
		}
	}
	if strings.Contains(err.Error(), strconv.Quote(names[1])) {
		t.Errorf("error %q names the other node %q", err, names[1])
	}
	t.Logf("error: %v", err)
	for _, db := range []int{0, 1} {
		if inDB(t, srv, db, key) {
			t.Errorf("the key was set in db %d of the doubled server", db)
		}
	}
	if inDB(t, other, 0, key) {
		t.Errorf("the key was set on the other server")
	}
	srv.MustDo(t, "CONFIG", "RESETSTAT")
	other.MustDo(t, "CONFIG", "RESETSTAT")
	for _, try := range []func() error{
		func() error { _, err := c.TryLock(ctxT(t), key, time.Second); return err },
		func() error { _, err := c.LockAll(ctxT(t), []string{key, key + "2"}, time.Second); return err },
		func() error { _, err := c.Semaphore(key, 2).TryAcquire(ctxT(t), time.Second); return err },
		func() error { _, err := c.Adopt(ctxT(t), key, "token"); return err },
	} {
		if err := try(); !errors.Is(err, redlock.ErrInvalid) {
			t.Errorf("a later acquisition: %v, want ErrInvalid", err)
		}
	}
	if n := commands(t, srv) + commands(t, other); n != 0 {
		t.Errorf("later acquisitions sent %d commands; want none", n)
	}
}

// testMaxTTLLeavesNoWeight takes a lock for Options.MaxTTL and releases
// it; after that, 2-second locks on that key and on another must not wait
// on nodes that did not restart. The servers are young (they started for
// the test), so a record of the long TTL that outlived its lock would
// quarantine them. The client that takes the 2-second locks learned
// nothing itself: what it must not meet is a weight left on the nodes.
// MaxTTL is above a minute: the nodes give back, on release, the weight of
// a grant longer than a minute only; a shorter one weighs until it could
// have ended (see hold in internal/wire/lua/node.lua).
func (s *suite) testMaxTTLLeavesNoWeight(t *testing.T) {
	cl := startCluster(t, 3, false)
	const maxTTL = 2 * time.Minute
	long := s.client(t, cl.urls(), &redlock.Options{MaxTTL: maxTTL})
	key := keyFor(t)
	l, err := long.TryLock(ctxT(t), key, maxTTL)
	if err != nil {
		t.Fatalf("TryLock for MaxTTL: %v", err)
	}
	if _, err := long.TryLock(ctxT(t), key+":over", maxTTL+time.Millisecond); !errors.Is(err, redlock.ErrInvalid) {
		t.Fatalf("TryLock above MaxTTL: %v, want ErrInvalid", err)
	}
	if err := l.Release(ctxT(t)); err != nil {
		t.Fatalf("Release: %v", err)
	}
	// The 2-second locks need nodes older than 2s. A slot's record that a
	// node writes anew takes the node's uptime a second short (node.lua),
	// hence the second more.
	time.Sleep(4 * time.Second)
	short := s.quarantineClient(t, cl.urls(), &redlock.Options{MaxTTL: maxTTL})
	for _, k := range []string{key, key + ":other"} {
		l, err := short.TryLock(ctxT(t), k, 2*time.Second)
		if err != nil {
			t.Errorf("2s TryLock on %q after the MaxTTL lock was released: %v", k, err)
			continue
		}
		l.Release(ctxT(t))
	}
}

// logRecords is a slog.Handler that keeps every record.
type logRecords struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecords) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logRecords) WithGroup(string) slog.Handler            { return h }
func (h *logRecords) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}

// testQuarantineLogged locks on fresh servers with the quarantine on: the
// rounds wait until the servers are older than the TTL, and the client
// must say so at Info level, once per node, naming the node, the time
// left and DisableQuarantine.
func (s *suite) testQuarantineLogged(t *testing.T) {
	cl := startCluster(t, 3, false)
	h := &logRecords{}
	c := s.quarantineClient(t, cl.urls(), &redlock.Options{Logger: slog.New(h)})
	l, err := c.Lock(ctxT(t), keyFor(t), 2*time.Second)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	l.Release(ctxT(t))
	h.mu.Lock()
	defer h.mu.Unlock()
	per := map[string]int{}
	for _, r := range h.records {
		if r.Level != slog.LevelInfo || !strings.Contains(r.Message, "quarantine") {
			continue
		}
		attrs := map[string]string{}
		r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
		t.Logf("%s %v", r.Message, attrs)
		per[attrs["node"]]++
		if attrs["for"] == "" || !strings.Contains(attrs["hint"], "DisableQuarantine") {
			t.Errorf("record %q %v: want the time left and DisableQuarantine", r.Message, attrs)
		}
	}
	for _, n := range clientx.Of(c).Nodes() {
		if per[n] != 1 {
			t.Errorf("node %s: %d quarantine records, want 1 (once per quarantine, not per round)", n, per[n])
		}
	}
}

// commands returns how many commands clients sent srv since its last
// CONFIG RESETSTAT: the calls of scripts and of connection and
// subscription commands, not the commands the scripts call inside (which
// INFO's total_commands_processed counts too), nor the INFO that asks.
func commands(t *testing.T, srv *redistest.Server) int {
	return countCalls(t, srv, topLevel)
}

// countCalls returns how many calls of the commands that match srv has
// processed since its last CONFIG RESETSTAT.
func countCalls(t *testing.T, srv *redistest.Server, match func(name string) bool) int {
	t.Helper()
	v := srv.MustDo(t, "INFO", "commandstats")
	total := 0
	for _, line := range strings.Split(fmt.Sprint(v), "\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "cmdstat_"), ":calls=")
		if !ok || !match(name) {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		n, err := strconv.Atoi(calls)
		if err != nil {
			t.Fatalf("INFO commandstats: %q: %v", line, err)
		}
		total += n
	}
	return total
}

// topLevel reports whether a command of this name is one a client sends,
// rather than one the lock scripts call.
func topLevel(name string) bool {
	for _, p := range []string{"eval", "fcall", "script", "subscribe", "unsubscribe", "ssubscribe", "psubscribe", "punsubscribe", "ping", "hello", "client", "select", "auth", "multi", "exec"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// testPartialOutage has waiters Lock a key on three nodes of which two
// refuse connections and one is up, for a few seconds, and counts the
// commands the live node processes. Every round fails for want of a
// quorum, so each waiter must pace its rounds with RetryDelay: at most
// about 20 rounds a second of two commands each, which the bound of 50
// commands a second per waiter leaves room for. Before the fix a waiter
// woke itself with the release announcement of its own clean-up and made
// thousands of commands a second; the bound is a hundredth of that, so
// it is a count, not a timing.
func (s *suite) testPartialOutage(t *testing.T, quarantine bool, waiters int) {
	live := redistest.Start(t, redistest.Config{})
	urls := []string{
		"redis://127.0.0.1:" + strconv.Itoa(freePort(t)),
		live.URL(),
		"redis://127.0.0.1:" + strconv.Itoa(freePort(t)),
	}
	const wait = 3 * time.Second
	opts := redlock.Options{RetryDelay: 50 * time.Millisecond}
	clients := make([]*redlock.Client, waiters)
	for i := range clients {
		if quarantine {
			clients[i] = s.quarantineClient(t, urls, &opts)
		} else {
			clients[i] = s.client(t, urls, &opts)
		}
	}
	key := keyFor(t)
	live.MustDo(t, "CONFIG", "RESETSTAT")
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, waiters)
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.Lock(ctx, key, 5*time.Second)
			if l != nil {
				l.Release(context.Background())
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for _, c := range clients {
		c.Close()
	}
	used := commands(t, live)
	// No round ever had a quorum, so no release freed a lock that anyone
	// waited for: the clean-ups must have announced nothing.
	if pub := countCalls(t, live, func(name string) bool { return name == "publish" }); pub > 0 {
		t.Errorf("the clean-ups of failed rounds published %d release announcements; want none", pub)
	}
	for i, err := range errs {
		mustOpError(t, err, redlock.ErrNoQuorum)
		if i == 0 {
			t.Logf("waiter's error: %v", err)
		}
	}
	limit := 50 * waiters * int(wait/time.Second)
	t.Logf("%d waiters made %d commands on the live node in %v (limit %d)", waiters, used, wait, limit)
	if used > limit {
		t.Logf("%v", live.MustDo(t, "INFO", "commandstats"))
		t.Errorf("%d waiters made %d commands on the live node in %v; want at most %d (50 a second each)", waiters, used, wait, limit)
	}
}

// freePort returns a TCP port on 127.0.0.1 that the kernel has just
// handed out: one where no server listens, for a while.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
