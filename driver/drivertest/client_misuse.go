package drivertest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/redistest"
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
