package redlock

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock/driver"
	"github.com/quorumlock/redlock/internal/wire"
	"github.com/quorumlock/redlock/observe"
)

// nameNode is a Node that only has a name. It serves the tests of argument
// checking, which never reach a node; the algorithm itself is tested
// against real redis-server processes (driver/drivertest, run by each
// adapter).
type nameNode string

func (n nameNode) Name() string { return string(n) }
func (n nameNode) Eval(context.Context, *driver.Script, []string, []string) (any, error) {
	return nil, errors.New("nameNode has no server")
}

func nodes(names ...string) []Node {
	ns := make([]Node, len(names))
	for i, n := range names {
		ns[i] = nameNode(n)
	}
	return ns
}

func TestNewRejects(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes []Node
		opts  *Options
		want  string
	}{
		{"no nodes", nil, nil, "no nodes"},
		{"nil node", []Node{nameNode("a"), nil}, nil, "node 1 is nil"},
		{"duplicate", nodes("a:1", "b:1", "a:1"), nil, `"a:1" is given twice`},
		{"drift factor negative", nodes("a"), &Options{DriftFactor: -0.1}, "DriftFactor"},
		{"drift factor too big", nodes("a"), &Options{DriftFactor: 0.5}, "DriftFactor"},
		{"drift factor NaN", nodes("a"), &Options{DriftFactor: math.NaN()}, "DriftFactor"},
		{"min drift", nodes("a"), &Options{MinDrift: -time.Millisecond}, "MinDrift"},
		{"node timeout", nodes("a"), &Options{NodeTimeout: -1}, "NodeTimeout"},
		{"retry delay", nodes("a"), &Options{RetryDelay: -1}, "RetryDelay"},
		{"tries", nodes("a"), &Options{Tries: -1}, "Tries"},
		{"release timeout", nodes("a"), &Options{ReleaseTimeout: -1}, "ReleaseTimeout"},
		{"quarantine", nodes("a"), &Options{Quarantine: -1}, "Quarantine"},
		{"quarantine both ways", nodes("a"), &Options{Quarantine: time.Second, DisableQuarantine: true}, "DisableQuarantine"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.nodes, tc.opts)
			if c != nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, %v; want ErrInvalid mentioning %q", c, err, tc.want)
			}
		})
	}
}

func TestNewDefaults(t *testing.T) {
	c, err := New(nodes("a", "b", "c", "d", "e"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.quorum != 3 || strings.Join(c.nodeNames(), ",") != "a,b,c,d,e" {
		t.Fatalf("Quorum %d, Nodes %v", c.quorum, c.nodeNames())
	}
	o := c.opts
	if o.DriftFactor != 0.01 || o.MinDrift != 2*time.Millisecond || o.RetryDelay != 50*time.Millisecond ||
		o.ReleaseTimeout != time.Second || o.Tries != 0 || o.Logger == nil {
		t.Fatalf("defaults: %+v", o)
	}
	for n, q := range map[int]int{1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 4} {
		names := make([]string, n)
		for i := range names {
			names[i] = string(rune('a' + i))
		}
		c, err := New(nodes(names...), nil)
		if err != nil || c.quorum != q {
			t.Errorf("N=%d: quorum %v (err %v), want %d", n, c.quorum, err, q)
		}
	}
}

func TestDriftAndValidity(t *testing.T) {
	c, _ := New(nodes("a"), nil)
	for ttl, want := range map[time.Duration]time.Duration{
		10 * time.Second:       102 * time.Millisecond,
		time.Second:            12 * time.Millisecond,
		100 * time.Millisecond: 3 * time.Millisecond,
	} {
		if got := c.drift(ttl); got != want {
			t.Errorf("drift(%v) = %v, want %v", ttl, got, want)
		}
	}
	start := time.Now()
	ttl := 10 * time.Second
	until := validUntil(start, ttl, c.drift(ttl))
	if until.Sub(start) != ttl-102*time.Millisecond {
		t.Fatalf("validUntil = start + %v", until.Sub(start))
	}
	// At the moment of the decision, the validity left is ttl − elapsed − drift.
	elapsed := 40 * time.Millisecond
	decided := start.Add(elapsed)
	if v := until.Sub(decided); v != ttl-elapsed-c.drift(ttl) {
		t.Fatalf("validity at decision %v, want ttl-elapsed-drift = %v", v, ttl-elapsed-c.drift(ttl))
	}

	c2, _ := New(nodes("a"), &Options{DriftFactor: 0.1, MinDrift: 5 * time.Millisecond})
	if got := c2.drift(time.Second); got != 105*time.Millisecond {
		t.Fatalf("custom drift(1s) = %v", got)
	}
}

func TestNodeTimeoutDefault(t *testing.T) {
	c, _ := New(nodes("a"), nil)
	for ttl, want := range map[time.Duration]time.Duration{
		10 * time.Second:       250 * time.Millisecond,
		time.Second:            100 * time.Millisecond,
		200 * time.Millisecond: 20 * time.Millisecond,
	} {
		if got := c.nodeTimeout(ttl); got != want {
			t.Errorf("nodeTimeout(%v) = %v, want %v", ttl, got, want)
		}
	}
	c2, _ := New(nodes("a"), &Options{NodeTimeout: 7 * time.Millisecond})
	if got := c2.nodeTimeout(time.Hour); got != 7*time.Millisecond {
		t.Errorf("explicit NodeTimeout: %v", got)
	}
}

func TestCheckLock(t *testing.T) {
	c, _ := New(nodes("a"), &Options{NodeTimeout: 50 * time.Millisecond})
	for _, tc := range []struct {
		key  string
		ttl  time.Duration
		want string // "" for valid
	}{
		{"", time.Second, "empty key"},
		{"redlock:node", time.Second, "reserved"},
		{"redlock:fence:k", time.Second, "reserved"},
		{"redlock:node:{@@@@}", time.Second, "reserved"},
		{"redlock:nodes", time.Second, ""},
		{"k", 0, "leaves a validity"},
		{"k", -time.Second, "leaves a validity"},
		{"k", 7 * time.Millisecond, "leaves a validity"},
		{"k", 52 * time.Millisecond, "NodeTimeout"},
		{"k", 60 * time.Millisecond, ""},
		{"k", time.Hour, ""},
	} {
		_, err := c.checkLock(tc.key, tc.ttl)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("checkLock(%q, %v): %v", tc.key, tc.ttl, err)
		case tc.want != "" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("checkLock(%q, %v): %v, want ErrInvalid mentioning %q", tc.key, tc.ttl, err, tc.want)
		}
	}
	// PX takes whole milliseconds: the TTL is cut to them, never rounded
	// up, so a node never holds the key for less than the client counts.
	ttl, err := c.checkLock("k", 1500*time.Millisecond+999*time.Microsecond)
	if err != nil || ttl != 1500*time.Millisecond {
		t.Fatalf("checkLock truncation: %v, %v", ttl, err)
	}
	ctx := context.Background()
	if _, err := c.TryLock(ctx, "", time.Second); !errors.Is(err, ErrInvalid) {
		t.Errorf("TryLock with an empty key: %v", err)
	}
	if _, err := c.Lock(ctx, "k", time.Millisecond); !errors.Is(err, ErrInvalid) {
		t.Errorf("Lock with a 1ms TTL: %v", err)
	}
}

func TestRetryDelayJitter(t *testing.T) {
	c, _ := New(nodes("a"), &Options{RetryDelay: 100 * time.Millisecond})
	seen := map[time.Duration]bool{}
	for range 1000 {
		d := c.retryDelay()
		if d < 50*time.Millisecond || d >= 150*time.Millisecond {
			t.Fatalf("retryDelay %v outside [50ms, 150ms)", d)
		}
		seen[d] = true
	}
	if len(seen) < 100 {
		t.Fatalf("only %d distinct delays in 1000 draws: not jittered", len(seen))
	}
}

func TestTokens(t *testing.T) {
	seen := map[string]bool{}
	for range 10000 {
		v := newToken("host:1 x")
		tok, owner, ok := strings.Cut(v, " ")
		if !ok || owner != "host:1 x" || len(tok) != 32 || strings.ContainsAny(tok, "+/= ") {
			t.Fatalf("value %q: want 32 URL-safe characters, a space and the owner", v)
		}
		if seen[tok] {
			t.Fatalf("token %q repeated", tok)
		}
		seen[tok] = true
	}
}

func TestOpError(t *testing.T) {
	e := &OpError{Op: "acquire", Key: "k", Quorum: 2, Rounds: 3, Err: ErrTaken, Nodes: []observe.NodeResult{
		{Node: "n1", Outcome: observe.OutcomeOK, Latency: time.Millisecond},
		{Node: "n2", Outcome: observe.OutcomeTaken, TTL: 2 * time.Second, Latency: time.Millisecond},
		{Node: "n3", Outcome: observe.OutcomeFailed, Err: errors.New("connection refused"), Latency: time.Millisecond},
	}}
	var err error = e
	if !errors.Is(err, ErrTaken) || errors.Is(err, ErrNoQuorum) || errors.Is(err, context.Canceled) {
		t.Fatal("errors.Is on OpError")
	}
	want := `redlock: acquire "k": lock is held by another owner after 3 rounds (1 of 3 nodes granted, quorum 2: n1 granted in 1ms; n2 taken (expires in 2s) in 1ms; n3 failed: connection refused in 1ms)`
	if err.Error() != want {
		t.Fatalf("Error():\n got %s\nwant %s", err, want)
	}
	e.ctxErr = context.DeadlineExceeded
	if !errors.Is(err, ErrTaken) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal("OpError with a context error must match both")
	}
	if !strings.HasPrefix(err.Error(), `redlock: acquire "k": context deadline exceeded after 3 rounds; last: lock is held`) {
		t.Fatalf("Error() = %s", err)
	}
	e.Err = nil
	if !strings.Contains(err.Error(), `"k": context deadline exceeded (`) {
		t.Fatalf("Error() without a completed round = %s", err)
	}
	var oe *OpError
	if !errors.As(fmtWrap(err), &oe) || oe.Nodes[2].Node != "n3" {
		t.Fatal("errors.As through a wrapper")
	}
	if observe.Outcome(42).String() != "Outcome(42)" || observe.OutcomeNoAnswer.String() != "no answer" {
		t.Fatal("Outcome.String")
	}
}

func fmtWrap(err error) error { return errors.Join(errors.New("context"), err) }

func TestQuarantineFor(t *testing.T) {
	c, _ := New(nodes("a"), nil)
	if q := c.quarantineFor(0); q != 0 {
		t.Fatalf("nothing learned, no TTL: %v", q)
	}
	if q := c.quarantineFor(2 * time.Second); q != 2*time.Second {
		t.Fatalf("the TTL asked for: %v", q)
	}
	c.learn(5 * time.Second)
	c.learn(3 * time.Second) // never lowers
	if q := c.quarantineFor(2 * time.Second); q != 5*time.Second {
		t.Fatalf("learned: %v", q)
	}
	c2, _ := New(nodes("a"), &Options{Quarantine: time.Minute})
	c2.learn(5 * time.Second)
	if q := c2.quarantineFor(time.Second); q != time.Minute {
		t.Fatalf("override: %v", q)
	}
	c3, _ := New(nodes("a"), &Options{DisableQuarantine: true})
	c3.learn(time.Hour)
	if q := c3.quarantineFor(time.Hour); q != 0 {
		t.Fatalf("disabled: %v", q)
	}
}

func TestTallyQuarantine(t *testing.T) {
	// Three grants from nodes aged 1s, 5s and 10s: with a 4s bar only the
	// first is demoted; when a later answer raises the bar to 6s, the
	// second is demoted too and keeps what it is owed.
	r := &round{results: make([]observe.NodeResult, 3), decoded: []wire.Reply{{Age: time.Second}, {Age: 5 * time.Second}, {Age: 10 * time.Second}}}
	for i := range r.results {
		r.results[i].Outcome = observe.OutcomeOK
	}
	tl := tally{quorum: 2, voters: &voters{all: true}, slots: []uint16{1}, q: 4 * time.Second, floor: true}
	tl.judge(r)
	if got := [3]observe.Outcome{r.results[0].Outcome, r.results[1].Outcome, r.results[2].Outcome}; got != [3]observe.Outcome{observe.OutcomeQuarantined, observe.OutcomeOK, observe.OutcomeOK} {
		t.Fatalf("bar 4s: %v", got)
	}
	r.decoded[2].MaxTTL = 6 * time.Second
	tl.judge(r)
	if r.results[1].Outcome != observe.OutcomeQuarantined || r.results[1].TTL != time.Second || r.results[0].TTL != 3*time.Second || r.results[2].Outcome != observe.OutcomeOK {
		t.Fatalf("bar 6s: %+v", r.results)
	}
}

func TestNodeHealthString(t *testing.T) {
	if observe.NodeQuarantined.String() != "quarantined" || observe.NodeHealth(9).String() != "NodeHealth(9)" || observe.OutcomeQuarantined.String() != "quarantined" {
		t.Fatal("String")
	}
}

func TestGate(t *testing.T) {
	c, _ := New(nodes("a"), nil)
	ctx := context.Background()
	g1, err := c.enter(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	// A second goroutine waits behind the first, and gives up with its
	// context.
	cctx, cancel := context.WithCancel(ctx)
	entered := make(chan error)
	go func() {
		g, err := c.enter(cctx, "k")
		if err == nil {
			c.leave("k", g)
		}
		entered <- err
	}()
	other, err := c.enter(ctx, "other key")
	if err != nil {
		t.Fatal("a different key waits behind the first:", err)
	}
	c.leave("other key", other)
	cancel()
	if err := <-entered; !errors.Is(err, context.Canceled) {
		t.Fatalf("waiting goroutine: %v", err)
	}
	c.leave("k", g1)
	// Once everybody has left, the gate is forgotten.
	c.gmu.Lock()
	n := len(c.gates)
	c.gmu.Unlock()
	if n != 0 {
		t.Fatalf("%d gates left", n)
	}
	g2, err := c.enter(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	// A gate left with a wake in it, as after a Release by another
	// goroutine, is taken again (a spare, or anew) without it.
	if !c.wakeLocal("k") {
		t.Fatal("wakeLocal found no gate for k")
	}
	c.leave("k", g2)
	g3, err := c.enter(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-g3.wake:
		t.Fatal("a wake meant for an earlier contender was left in the gate")
	default:
	}
	c.leave("k", g3)
}

func TestHandoff(t *testing.T) {
	c, _ := New(nodes("a"), &Options{RetryDelay: 40 * time.Millisecond})
	if d := c.handoffWait("k"); d != 0 {
		t.Fatalf("no release yet, wait %v", d)
	}
	c.noteHandoff("k")
	if d := c.handoffWait("k"); d <= 0 || d > c.handoffWindow() || c.handoffWindow() <= 2*c.wakeWindow() {
		t.Fatalf("after a release that woke waiters, wait %v, want within (0, %v], beyond twice the wake window %v", d, c.handoffWindow(), c.wakeWindow())
	}
	if d := c.handoffWait("k"); d != 0 {
		t.Fatalf("the hold-back applies once, then %v", d)
	}
	for range 100 {
		if d := c.wakeDelay(0); d < 0 || d > 8*time.Millisecond {
			t.Fatalf("wakeDelay %v outside [0, RetryDelay/5]", d)
		}
		// After nine wake windows of waiting, a tenth of the window.
		if d := c.wakeDelay(9 * c.wakeWindow()); d < 0 || d > 800*time.Microsecond {
			t.Fatalf("wakeDelay after a long wait %v outside [0, RetryDelay/50]", d)
		}
	}
	slow, _ := New(nodes("a"), &Options{RetryDelay: time.Hour})
	if w := slow.wakeWindow(); w != 10*time.Millisecond {
		t.Fatalf("wake window with an hour's RetryDelay: %v", w)
	}
	fast, _ := New(nodes("a"), &Options{RetryDelay: time.Millisecond})
	if w := fast.wakeWindow(); w != 2*time.Millisecond {
		t.Fatalf("wake window with a RetryDelay of 1ms: %v, want the floor of 2ms", w)
	}
}

// An answer is one node's reply in a syntheticRound.
type answer struct {
	node int
	val  any
}

// syntheticRound is a round of three acquire replies, already received in
// the given order, for tests of the decision rule alone.
func syntheticRound(answers ...answer) *round {
	r := &round{answered: make(chan int, len(answers)), reqs: make([]request, 3), results: make([]observe.NodeResult, 3),
		decoded: make([]wire.Reply, 3), pending: 3, call: wire.Set{Name: "k"}.Acquire("token", time.Second, 0),
		start: time.Now(), deadline: time.Now().Add(time.Minute)}
	for i := range r.decoded {
		r.decoded[i].Age = -1
		r.reqs[i].node = i
	}
	for _, a := range answers {
		r.reqs[a.node].val = a.val
		r.answered <- a.node
	}
	return r
}

func TestCollectHearsEveryoneBeforeTrustingYoungNodes(t *testing.T) {
	// Two nodes restarted half a second ago grant first; the survivor,
	// up for two hours, answers last and knows of a 1s lock.
	young := []any{int64(1), int64(5), int64(500), int64(300)}
	survivor := func(maxTTL int64) answer {
		return answer{node: 2, val: []any{int64(0), int64(800), int64(7_200_000), maxTTL}}
	}
	bar := 300 * time.Millisecond
	r := syntheticRound(answer{node: 0, val: young}, answer{node: 1, val: young}, survivor(1000))
	if r.collect(&tally{quorum: 2, voters: &voters{all: true}, slots: []uint16{1}, q: bar}) {
		t.Fatal("a quorum of young nodes was trusted before the survivor's answer raised the bar to 1s")
	}
	if got := [3]observe.Outcome{r.results[0].Outcome, r.results[1].Outcome, r.results[2].Outcome}; got != [3]observe.Outcome{observe.OutcomeQuarantined, observe.OutcomeQuarantined, observe.OutcomeTaken} {
		t.Fatalf("outcomes %v", got)
	}
	// When nobody knows of a longer lock, the same grants stand.
	if r := syntheticRound(answer{node: 0, val: young}, answer{node: 1, val: young}, survivor(100)); !r.collect(&tally{quorum: 2, voters: &voters{all: true}, slots: []uint16{1}, q: bar}) {
		t.Fatal("grants from nodes older than every TTL known were refused")
	}
	// A client that heard every node after the young ones started has
	// the survivor's TTL in its bar already: it trusts their grants
	// without waiting for the survivor.
	r = syntheticRound(answer{node: 0, val: young}, answer{node: 1, val: young})
	r.start = time.Now()
	if !r.collect(&tally{quorum: 2, voters: &voters{all: true}, slots: []uint16{1}, q: bar, heard: heardAt(time.Now().Add(-400 * time.Millisecond))}) || r.pending != 1 {
		t.Fatalf("heard all after the restart: decided %v with %d answers pending", r.results, r.pending)
	}
	// One that last heard every node before they restarted does not.
	r = syntheticRound(answer{node: 0, val: young}, answer{node: 1, val: young}, survivor(1000))
	r.start = time.Now()
	if r.collect(&tally{quorum: 2, voters: &voters{all: true}, slots: []uint16{1}, q: bar, heard: heardAt(time.Now().Add(-600 * time.Millisecond))}) {
		t.Fatal("a quorum of nodes restarted after the last full hearing was trusted before the survivor's answer")
	}
	// Without quarantine the round is decided on the first two answers.
	r = syntheticRound(answer{node: 0, val: young}, answer{node: 1, val: young})
	if !r.collect(&tally{quorum: 2, voters: &voters{all: true}}) || r.pending != 1 {
		t.Fatalf("without quarantine: decided %v with %d answers pending", r.results, r.pending)
	}
}

func TestDeadlineDoesNotTrustUnheardYoungNodes(t *testing.T) {
	// Two nodes restarted half a second ago grant; the survivor, which
	// may keep a long lock they lost, never answers: at the deadline
	// their grants do not count, whoever else is silent.
	young := []any{int64(1), int64(5), int64(500), int64(300)}
	ended := make(chan struct{})
	close(ended)
	r := syntheticRound(answer{node: 0, val: young}, answer{node: 1, val: young})
	r.expired = ended
	if r.collect(&tally{quorum: 2, voters: &voters{all: true}, slots: []uint16{1}, q: 300 * time.Millisecond}) {
		t.Fatal("at the deadline, two young nodes' grants counted without a word from the third node")
	}
	for _, i := range []int{0, 1} {
		if res := r.results[i]; res.Outcome != observe.OutcomeQuarantined || !errors.Is(res.Err, errUnheard) || res.TTL <= 0 {
			t.Fatalf("node %d: %+v, want quarantined (errUnheard) for a while", i, res)
		}
	}
	// The same grants count at the deadline for a client that heard every
	// node in the slot after the young ones started.
	r = syntheticRound(answer{node: 0, val: young}, answer{node: 1, val: young})
	r.expired = ended
	r.start = time.Now()
	if !r.collect(&tally{quorum: 2, voters: &voters{all: true}, slots: []uint16{1}, q: 300 * time.Millisecond, heard: heardAt(time.Now().Add(-400 * time.Millisecond))}) {
		t.Fatalf("heard every node after the restart: refused at the deadline: %v", r.results)
	}
}

// heardAt is a tally's hearing of three nodes, each last heard at t.
func heardAt(t time.Time) []time.Time { return []time.Time{t, t, t} }

// gatedNode answers the scripts as an old, healthy node would, in memory,
// and logs each call it completes. Its acquire calls wait for gate, if
// gate is not nil. It serves the tests of the order of requests only.
type gatedNode struct {
	name string
	gate chan struct{}
	mu   *sync.Mutex
	log  *[]string
}

// The replies of gatedNode, made once: the client never changes a reply.
var (
	grantedReply  any = []int64{1, 1, int64(2 * time.Hour / time.Millisecond), 1000} // by a node up for 2h
	releasedReply any = []int64{1, 0}                                                // deleted, nobody woken
)

func (n gatedNode) Name() string { return n.name }
func (n gatedNode) Eval(ctx context.Context, s *driver.Script, _, _ []string) (any, error) {
	if s.Name() == "probe" { // the client's identification of its nodes, once: not logged
		return []any{int64(2 * time.Hour / time.Millisecond), int64(0), int64(0), "id-" + n.name}, nil
	}
	v := releasedReply
	if s.Name() == "extend" {
		v = int64(1)
	}
	if s.Name() == "acquire" {
		if n.gate != nil {
			select {
			case <-n.gate:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		v = grantedReply
	}
	if n.log != nil {
		n.mu.Lock()
		defer n.mu.Unlock()
		*n.log = append(*n.log, n.name+" "+s.Name())
	}
	return v, nil
}

// slowNodeLog is a Client over three gatedNodes, of which c answers its
// acquire only once gate is closed; log records every call completed.
type slowNodeLog struct {
	c    *Client
	gate chan struct{}
	mu   sync.Mutex
	log  []string
}

func newSlowNodeLog(t *testing.T) *slowNodeLog {
	s := &slowNodeLog{gate: make(chan struct{})}
	nodes := []Node{
		gatedNode{name: "a", mu: &s.mu, log: &s.log},
		gatedNode{name: "b", mu: &s.mu, log: &s.log},
		gatedNode{name: "c", mu: &s.mu, log: &s.log, gate: s.gate},
	}
	// c's acquire must still be waiting for gate when the test has made
	// its calls: the default node timeout of a 10s lock, 250ms, is a
	// stall that a loaded machine can have between two of them.
	var err error
	if s.c, err = New(nodes, &Options{DisableQuarantine: true, NodeTimeout: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	return s
}

// snapshot returns the calls completed so far.
func (s *slowNodeLog) snapshot() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

// finish lets c's acquire return, closes the Client, which waits for the
// requests behind it, and returns the calls c completed, in order.
func (s *slowNodeLog) finish() []string {
	close(s.gate)
	s.c.Close()
	got := s.callsTo("c")
	return got
}

func TestReleaseFollowsEachNodesAcquire(t *testing.T) {
	s := newSlowNodeLog(t)
	ctx := context.Background()
	// a and b grant; c's grant is still on its way when the lock is
	// returned, and when it is released.
	l, err := s.c.TryLock(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release waited for the slow node or failed: %v", err)
	}
	if early := s.snapshot(); slices.Contains(early, "c release") || len(early) != 4 {
		t.Fatalf("before c's acquire returned: %q, want a and b acquired and released, nothing sent to c", early)
	}
	if got := s.finish(); !slices.Equal(got, []string{"c acquire", "c release"}) {
		t.Fatalf("c saw %q, want its acquire, then its release", got)
	}
}

func TestExtendFollowsEachNodesAcquire(t *testing.T) {
	s := newSlowNodeLog(t)
	ctx := context.Background()
	// c's grant is on its way while the lock is extended twice and
	// released: each of those waits for the one before it on c, and none
	// waits on a and b.
	l, err := s.c.TryLock(ctx, "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := l.Extend(ctx, 10*time.Second); err != nil {
			t.Fatalf("Extend waited for the slow node or failed: %v", err)
		}
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	got := s.finish()
	if want := []string{"c acquire", "c extend", "c extend", "c release"}; !slices.Equal(got, want) {
		t.Fatalf("c saw %q, want %q", got, want)
	}
	if len(s.log) != 12 {
		t.Fatalf("the nodes saw %q, want four requests each", s.log)
	}
}

// TestOutcomeOfStatus checks that the statuses of decoded replies have the
// values of the Outcomes of the same names, as round.record converts them.
func TestOutcomeOfStatus(t *testing.T) {
	for s, o := range map[wire.Status]observe.Outcome{wire.OK: observe.OutcomeOK, wire.Taken: observe.OutcomeTaken, wire.Absent: observe.OutcomeAbsent, wire.Failed: observe.OutcomeFailed, wire.Quarantined: observe.OutcomeQuarantined} {
		if observe.Outcome(s) != o || observe.Outcome(s).String() != o.String() {
			t.Errorf("status %d is outcome %v, want %v", s, observe.Outcome(s), o)
		}
	}
}

// newSlowNodeLock returns a slowNodeLog and a lock taken on its nodes,
// whose acquire on node c is still on its way.
func newSlowNodeLock(t *testing.T) (*slowNodeLog, *Lock) {
	s := newSlowNodeLog(t)
	l, err := s.c.TryLock(context.Background(), "k", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return s, l
}

// callsTo returns the calls that node completed, in order.
func (s *slowNodeLog) callsTo(node string) []string {
	var got []string
	for _, e := range s.log {
		if strings.HasPrefix(e, node+" ") {
			got = append(got, e)
		}
	}
	return got
}

// TestWaitingRequestFollowsItsPredecessor checks that a round's request to
// a slow node waits behind that node's request of the round before, and is
// sent once that one has returned.
func TestWaitingRequestFollowsItsPredecessor(t *testing.T) {
	s, l := newSlowNodeLock(t)
	ctx := context.Background()
	// c's acquire is still on its way: the extension's request to c waits.
	r := s.c.send(ctx, 5*time.Second, 1, l.ks.Extend(l.token, 10*time.Second), l.last)
	if l.last.reqs[2].next.Load() != &r.reqs[2] {
		t.Fatal("the extension's request to c was not left waiting behind c's acquire")
	}
	close(s.gate)
	r.drain()
	s.c.Close()
	got := s.callsTo("c")
	if !slices.Equal(got, []string{"c acquire", "c extend"}) {
		t.Fatalf("c saw %q, want its acquire, then its extension", got)
	}
}

// TestTwoRequestsFollowOneRound checks that two rounds sent after the same
// round (a release, and a writer's intent taken back in the background)
// are both sent to a slow node once its request of that round returns:
// neither is lost, and Close does not wait for ever.
func TestTwoRequestsFollowOneRound(t *testing.T) {
	s, l := newSlowNodeLock(t)
	ctx := context.Background()
	first := s.c.send(ctx, 5*time.Second, 1, l.ks.Extend(l.token, 10*time.Second), l.last)
	second := s.c.send(ctx, 5*time.Second, 1, l.ks.Extend(l.token, 10*time.Second), l.last)
	if l.last.reqs[2].next.Load() != &first.reqs[2] || first.reqs[2].next.Load() != &second.reqs[2] {
		t.Fatal("the second request to c does not follow the first, which follows c's acquire")
	}
	close(s.gate)
	first.drain()
	second.drain()
	closed := make(chan struct{})
	go func() {
		s.c.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close still waits for a request that was never sent")
	}
	got := s.callsTo("c")
	if !slices.Equal(got, []string{"c acquire", "c extend", "c extend"}) {
		t.Fatalf("c saw %q, want its acquire, then both extensions", got)
	}
}
