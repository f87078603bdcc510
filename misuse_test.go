package redlock

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock/driver"
	"github.com/quorumlock/redlock/observe"
)

// countingNode counts the requests it gets and answers none of them.
type countingNode struct {
	name  string
	evals *atomic.Int64
}

func (n countingNode) Name() string { return n.name }
func (n countingNode) Eval(context.Context, *driver.Script, []string, []string) (any, error) {
	n.evals.Add(1)
	return nil, errors.New("countingNode has no server")
}

func TestMaxTTL(t *testing.T) {
	for _, o := range []Options{
		{MaxTTL: -time.Second},
		{Quarantine: 2 * time.Hour},
		{Quarantine: 2 * time.Minute, MaxTTL: time.Minute},
	} {
		if _, err := New(nodes("a"), &o); !errors.Is(err, ErrInvalid) {
			t.Errorf("New(%+v): %v, want ErrInvalid", o, err)
		}
	}
	if _, err := New(nodes("a"), &Options{Quarantine: 2 * time.Hour, MaxTTL: 3 * time.Hour}); err != nil {
		t.Errorf("Quarantine below MaxTTL: %v", err)
	}
	c, _ := New(nodes("a"), nil)
	if c.opts.MaxTTL != time.Hour {
		t.Errorf("default MaxTTL %v, want 1h", c.opts.MaxTTL)
	}

	var evals atomic.Int64
	c, err := New([]Node{countingNode{"a", &evals}, countingNode{"b", &evals}, countingNode{"c", &evals}}, &Options{MaxTTL: time.Minute, Tries: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	huge := time.Duration(1<<63 - 1)
	for _, ttl := range []time.Duration{time.Minute + time.Millisecond, time.Hour, huge} {
		_, err1 := c.Lock(ctx, "k", ttl)
		_, err2 := c.TryLock(ctx, "k", ttl)
		_, err3 := c.LockAll(ctx, []string{"k", "j"}, ttl)
		_, err4 := c.RWLock("k").TryLock(ctx, ttl)
		_, err5 := c.RWLock("k").TryRLock(ctx, ttl)
		_, err6 := c.Semaphore("k", 2).TryAcquire(ctx, ttl)
		for i, err := range []error{err1, err2, err3, err4, err5, err6} {
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "MaxTTL") {
				t.Errorf("TTL %v, call %d: %v, want ErrInvalid naming MaxTTL", ttl, i+1, err)
			}
		}
	}
	l := &Lock{c: c, until: time.Now().Add(time.Minute)}
	if err := l.Extend(ctx, 2*time.Minute); !errors.Is(err, ErrInvalid) {
		t.Errorf("Extend beyond MaxTTL: %v, want ErrInvalid", err)
	}
	if n := evals.Load(); n != 0 {
		t.Errorf("%d requests sent for TTLs above MaxTTL; want none", n)
	}
	if _, err := c.checkTTL(time.Minute); err != nil {
		t.Errorf("TTL equal to MaxTTL: %v", err)
	}
}

func TestTermTTLHugeTTL(t *testing.T) {
	for _, ttl := range []time.Duration{time.Second, time.Hour, 1 << 60, 1<<63 - 1} {
		if f := termTTL(ttl); f < ttl || f < time.Minute {
			t.Errorf("termTTL(%v) = %v: below the TTL or a minute", ttl, f)
		}
	}
}

func TestLearningDecays(t *testing.T) {
	var l learning
	t0 := time.Now()
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	l.add(time.Hour, t0)
	l.add(2*time.Second, at(time.Second))
	if q := l.max(at(59 * time.Minute)); q != time.Hour {
		t.Fatalf("within the long lock's life: %v, want 1h", q)
	}
	l.add(10*time.Second, at(time.Hour-time.Second))
	if q := l.max(at(time.Hour)); q != 10*time.Second {
		t.Fatalf("after the long lock's life, with a 10s lock seen 1s before: %v, want 10s", q)
	}
	if q := l.max(at(time.Hour + 9*time.Second)); q != 0 {
		t.Fatalf("after every lock's life: %v, want 0", q)
	}
	// Many distinct TTLs, each ending after the one before: the bar is
	// never below the longest live one, and ends with the last.
	var m learning
	type seen struct {
		ttl        time.Duration
		start, end time.Time
	}
	var all []seen
	for i := range 100 {
		now := at(time.Duration(i) * 2 * time.Second)
		ttl := time.Duration(100-i) * time.Second
		m.add(ttl, now)
		all = append(all, seen{ttl, now, now.Add(ttl)})
		for _, probe := range []time.Time{now, now.Add(time.Second)} {
			var want time.Duration
			for _, s := range all {
				if !probe.Before(s.start) && probe.Before(s.end) {
					want = max(want, s.ttl)
				}
			}
			if q := m.max(probe); q < want {
				t.Fatalf("after %d TTLs, at %v: %v, below the longest live TTL %v", i+1, probe.Sub(t0), q, want)
			}
		}
		if len(m.weights) > maxWeights {
			t.Fatalf("%d weights kept", len(m.weights))
		}
	}
	if q := m.max(all[99].end); q != 0 {
		t.Fatalf("after every lock's life: %v, want 0", q)
	}
}

func TestLongKeys(t *testing.T) {
	var evals atomic.Int64
	c, _ := New([]Node{countingNode{"a", &evals}}, &Options{Tries: 1})
	ctx := context.Background()
	ok := strings.Repeat("k", maxKeyLen)
	if err := checkKey(ok); err != nil {
		t.Fatalf("a key of %d bytes: %v", maxKeyLen, err)
	}
	long := strings.Repeat("é", 1<<19) // 1 MiB
	errs := map[string]error{"checkKey": checkKey(long)}
	_, errs["Lock"] = c.Lock(ctx, long, time.Second)
	_, errs["TryLock"] = c.TryLock(ctx, long, time.Second)
	_, errs["LockAll"] = c.LockAll(ctx, []string{"a", long}, time.Second)
	_, errs["RWLock"] = c.RWLock(long).TryLock(ctx, time.Second)
	_, errs["RLock"] = c.RWLock(long).TryRLock(ctx, time.Second)
	_, errs["Semaphore"] = c.Semaphore(long, 2).TryAcquire(ctx, time.Second)
	_, errs["Campaign"] = c.Election(long, time.Second).Campaign(ctx, "v")
	_, errs["Adopt"] = c.Adopt(ctx, long, "token")
	for name, err := range errs {
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
		if err != nil && len(err.Error()) > 300 {
			t.Errorf("%s: an error text of %d bytes", name, len(err.Error()))
		}
	}
	if n := evals.Load(); n != 0 {
		t.Errorf("%d requests sent for a long key; want none", n)
	}
	if msg := (&OpError{Op: "acquire", Key: long, Err: ErrTaken}).Error(); len(msg) > 200 || !strings.Contains(msg, "(1048576 bytes)") {
		t.Errorf("OpError with a long key: %d bytes: %.200s", len(msg), msg)
	}
}

func TestErrorTexts(t *testing.T) {
	ms := time.Millisecond
	expired := &OpError{Op: "release", Key: "k", Quorum: 3, Err: ErrExpired, Nodes: []observe.NodeResult{
		{Node: "a", Outcome: observe.OutcomeOK, Latency: ms}, {Node: "b", Outcome: observe.OutcomeOK, Latency: ms}, {Node: "c", Outcome: observe.OutcomeAbsent, Latency: ms},
	}}
	want := `redlock: release "k": lock validity has ended (2 of 3 nodes deleted the key, quorum 3: a deleted it in 1ms; b deleted it in 1ms; c absent in 1ms)`
	if got := expired.Error(); got != want {
		t.Errorf("release after expiry:\n got %s\nwant %s", got, want)
	}
	readonly := &driver.ReplyError{Msg: "READONLY You can't write against a read only replica. script: 43ee0ab7030aea94cdf703f736e249f897fdda2a, on @user_script:102."}
	oom := &driver.ReplyError{Msg: "OOM command not allowed when used memory > 'maxmemory'. script: 43ee0ab7030aea94cdf703f736e249f897fdda2a, on @user_script:7."}
	refused := &OpError{Op: "acquire", Key: "k", Quorum: 2, Err: ErrRefused, Nodes: []observe.NodeResult{
		{Node: "a", Outcome: observe.OutcomeRefused, Err: readonly, Latency: ms}, {Node: "b", Outcome: observe.OutcomeRefused, Err: readonly, Latency: ms}, {Node: "c", Outcome: observe.OutcomeRefused, Err: oom, Latency: ms},
	}}
	want = `redlock: acquire "k": refused by a, b: is a replica (READONLY); by c: OOM command not allowed when used memory > 'maxmemory'. (0 of 3 nodes granted, quorum 2: a refused in 1ms; b refused in 1ms; c refused in 1ms)`
	if got := refused.Error(); got != want {
		t.Errorf("replicas:\n got %s\nwant %s", got, want)
	}
	if got := (observe.NodeResult{Node: "a", Outcome: observe.OutcomeRefused, Err: readonly, Latency: ms}).String(); got != "a refused: is a replica (READONLY) in 1ms" {
		t.Errorf("NodeResult of a replica: %s", got)
	}
}

// records is a slog.Handler that keeps the records it is given.
type records struct {
	mu   sync.Mutex
	msgs []string
}

func (h *records) Enabled(context.Context, slog.Level) bool { return true }
func (h *records) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *records) WithGroup(string) slog.Handler            { return h }
func (h *records) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	msg := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool { msg += " " + a.String(); return true })
	h.msgs = append(h.msgs, msg)
	return nil
}

func TestQuarantineLoggedOncePerQuarantine(t *testing.T) {
	h := &records{}
	c, _ := New(nodes("a", "b", "c"), &Options{Logger: slog.New(h)})
	held := []any{int64(-1), int64(5000), int64(100), int64(1000)} // sits out 5s more
	old := []any{int64(1), int64(5), int64(7200000), int64(1000)}  // up for 2h: grants
	for _, a0 := range []any{held, held, old, held} {
		r := syntheticRound(answer{0, a0}, answer{1, old}, answer{2, old})
		r.drain()
		c.noteHealth(context.Background(), r, time.Second)
	}
	if len(h.msgs) != 1 {
		t.Fatalf("%d records for one quarantine, want 1: %q", len(h.msgs), h.msgs)
	}
	for _, want := range []string{"INFO", "quarantine", "node=a", "for=5s", "DisableQuarantine"} {
		if !strings.Contains(h.msgs[0], want) {
			t.Errorf("record %q lacks %q", h.msgs[0], want)
		}
	}
}
