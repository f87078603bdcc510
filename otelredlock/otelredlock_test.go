package otelredlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/admin"
	"github.com/quorumlock/redlock/goredisnode"
	"github.com/quorumlock/redlock/internal/clientx"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/observe"
	"github.com/quorumlock/redlock/otelredlock"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// The tests run the Observer inside a real Client, over goredisnode, against
// real redis-server processes, and read what it recorded back from the
// SDK's in-memory reader and span recorder.

// exampleURLs are the URLs of the servers that TestMain starts for the
// examples.
var exampleURLs []string

func TestMain(m *testing.M) {
	servers, closeAll := redistest.ForMain(3, redistest.Config{})
	exampleURLs = redistest.URLs(servers)
	redistest.Main(m, closeAll)
}

// static is the attribute that every test's Observer adds to everything.
var static = attribute.String("test.client", "c1")

// fixture is a Client with an Observer over three fresh servers, and what
// the Observer recorded.
type fixture struct {
	servers []*redistest.Server
	nodes   []string // the Client's node names, in the servers' order
	client  *redlock.Client
	obs     *otelredlock.Observer
	reader  *sdkmetric.ManualReader
	spans   *tracetest.SpanRecorder
	tracer  trace.Tracer // the test's own, for parent spans
}

// newFixture starts the servers and makes the Client; opts, if any, change
// its options.
func newFixture(t *testing.T, opts ...func(*redlock.Options)) *fixture {
	t.Helper()
	f := &fixture{
		servers: redistest.StartN(t, 3, redistest.Config{}),
		reader:  sdkmetric.NewManualReader(),
		spans:   tracetest.NewSpanRecorder(),
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(f.reader))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(f.spans))
	t.Cleanup(func() {
		mp.Shutdown(context.Background())
		tp.Shutdown(context.Background())
	})
	f.tracer = tp.Tracer("test")
	obs, err := otelredlock.New(otelredlock.WithMeterProvider(mp), otelredlock.WithTracerProvider(tp),
		otelredlock.WithAttributes(static))
	if err != nil {
		t.Fatal(err)
	}
	f.obs = obs
	var nodes []redlock.Node
	for _, s := range f.servers {
		n, err := goredisnode.Dial(s.URL())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		nodes = append(nodes, n)
	}
	// Nothing was ever locked on the fresh servers, so they need no
	// quarantine. The timeouts are generous, for a loaded machine.
	o := redlock.Options{Observer: obs, DisableQuarantine: true,
		NodeTimeout: 2 * time.Second, ReleaseTimeout: 5 * time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	f.client, err = redlock.New(nodes, &o)
	if err != nil {
		t.Fatal(err)
	}
	f.nodes = clientx.Of(f.client).Nodes()
	return f
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func keyFor(t *testing.T) string {
	return fmt.Sprintf("otelredlock:%s:%d", t.Name(), time.Now().UnixNano())
}

// held takes the lock on a fresh key for 10s, and waits until every
// server holds it.
func (f *fixture) held(t *testing.T) (context.Context, string, *redlock.Lock) {
	t.Helper()
	ctx, key := ctxT(t), keyFor(t)
	l, err := f.client.Lock(ctx, key, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	f.settle(t, l)
	return ctx, key, l
}

// settle waits until every server holds the lock's token, so that no
// request of the acquiring round is still on its way.
func (f *fixture) settle(t *testing.T, l *redlock.Lock) {
	t.Helper()
	for stop := time.Now().Add(10 * time.Second); ; {
		n := 0
		for _, s := range f.servers {
			if v, _ := s.Do("GET", l.Key()); v != nil && strings.HasPrefix(v.(string), strings.Split(l.Token(), ".")[0]+" ") {
				n++
			}
		}
		if n == len(f.servers) {
			return
		}
		if time.Now().After(stop) {
			t.Fatalf("the token of %s reached %d of %d servers", l.Key(), n, len(f.servers))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// collect returns the metrics recorded so far, by name. It checks that
// every data point carries the static attribute and no lock key.
func (f *fixture) collect(t *testing.T) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := f.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	ms := make(map[string]metricdata.Metrics)
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelredlock.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, otelredlock.ScopeName)
		}
		for _, m := range sm.Metrics {
			ms[m.Name] = m
			for _, a := range attrSets(m) {
				if v, ok := a.Value(static.Key); !ok || v != static.Value {
					t.Errorf("%s: data point %v lacks %v", m.Name, a.ToSlice(), static)
				}
				for _, kv := range a.ToSlice() {
					if kv.Key == "redlock.key" || strings.HasPrefix(kv.Value.Emit(), "otelredlock:") {
						t.Errorf("%s: data point %v carries a lock key", m.Name, a.ToSlice())
					}
				}
			}
		}
	}
	return ms
}

// attrSets returns the attributes of every data point of m.
func attrSets(m metricdata.Metrics) []attribute.Set {
	var sets []attribute.Set
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	}
	return sets
}

// matches reports whether set has every attribute of want.
func matches(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// metric returns the metric named name, checking its unit.
func metric(t *testing.T, ms map[string]metricdata.Metrics, name, unit string) metricdata.Metrics {
	t.Helper()
	m, ok := ms[name]
	if !ok {
		t.Fatalf("no metric %s; have %v", name, keys(ms))
	}
	if m.Unit != unit {
		t.Errorf("%s: unit %q, want %q", name, m.Unit, unit)
	}
	return m
}

func keys(ms map[string]metricdata.Metrics) []string {
	var ks []string
	for k := range ms {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// count adds up the counter name over the data points that have want.
func count(t *testing.T, ms map[string]metricdata.Metrics, name, unit string, want ...attribute.KeyValue) int64 {
	t.Helper()
	sum, ok := metric(t, ms, name, unit).Data.(metricdata.Sum[int64])
	if !ok || !sum.IsMonotonic {
		t.Fatalf("%s: %T, want a monotonic Sum[int64]", name, ms[name].Data)
	}
	var n int64
	for _, p := range sum.DataPoints {
		if matches(p.Attributes, want) {
			n += p.Value
		}
	}
	return n
}

// countOr0 is count, but 0 if there is no metric name.
func countOr0(t *testing.T, ms map[string]metricdata.Metrics, name string, want ...attribute.KeyValue) int64 {
	t.Helper()
	if _, ok := ms[name]; !ok {
		return 0
	}
	return count(t, ms, name, ms[name].Unit, want...)
}

// histCount adds up the counts of the histogram name, in seconds, over the
// data points that have want.
func histCount(t *testing.T, ms map[string]metricdata.Metrics, name string, want ...attribute.KeyValue) uint64 {
	t.Helper()
	h, ok := metric(t, ms, name, "s").Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s: %T, want a Histogram[float64]", name, ms[name].Data)
	}
	var n uint64
	for _, p := range h.DataPoints {
		if matches(p.Attributes, want) {
			n += p.Count
			if p.Count > 0 && p.Sum < 0 {
				t.Errorf("%s %v: negative sum %v", name, p.Attributes.ToSlice(), p.Sum)
			}
		}
	}
	return n
}

// states returns redlock.node.state: node -> state -> value.
func states(t *testing.T, ms map[string]metricdata.Metrics) map[string]map[string]int64 {
	t.Helper()
	g, ok := metric(t, ms, "redlock.node.state", "1").Data.(metricdata.Gauge[int64])
	if !ok {
		t.Fatalf("redlock.node.state: %T, want a Gauge[int64]", ms["redlock.node.state"].Data)
	}
	st := make(map[string]map[string]int64)
	for _, p := range g.DataPoints {
		n, _ := p.Attributes.Value("redlock.node.name")
		s, _ := p.Attributes.Value("redlock.node.state")
		if st[n.AsString()] == nil {
			st[n.AsString()] = make(map[string]int64)
		}
		st[n.AsString()][s.AsString()] = p.Value
	}
	return st
}

// checkStates checks that every node has one value per state, with 1 for
// the one want gives (want[node]) and 0 for the others. A node missing
// from want must be in state other.
func checkStates(t *testing.T, st map[string]map[string]int64, nodes []string, want map[string]string, other string) {
	t.Helper()
	for _, n := range nodes {
		w := want[n]
		if w == "" {
			w = other
		}
		got := st[n]
		if len(got) != 6 {
			t.Errorf("node %s: states %v, want healthy, quarantined, unreachable, refusing, busy and unknown", n, got)
		}
		for _, s := range []string{"healthy", "quarantined", "unreachable", "refusing", "busy", "unknown"} {
			v := int64(0)
			if s == w {
				v = 1
			}
			if got[s] != v {
				t.Errorf("node %s: redlock.node.state{%s} = %d, want %d (all: %v)", n, s, got[s], v, got)
			}
		}
	}
}

// span returns the one ended span named name, and fails t unless there is
// exactly one.
func span(t *testing.T, spans []sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	var found []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans %s, want 1; all: %v", len(found), name, spanNames(spans))
	}
	return found[0]
}

func spanNames(spans []sdktrace.ReadOnlySpan) []string {
	var names []string
	for _, s := range spans {
		names = append(names, s.Name())
	}
	return names
}

// attr returns the attribute key of kvs.
func attr(kvs []attribute.KeyValue, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range kvs {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// checkAttrs checks that kvs hold every attribute of want.
func checkAttrs(t *testing.T, what string, kvs []attribute.KeyValue, want ...attribute.KeyValue) {
	t.Helper()
	for _, w := range want {
		if v, ok := attr(kvs, w.Key); !ok || v != w.Value {
			t.Errorf("%s: %s = %v (present %v), want %v", what, w.Key, v.Emit(), ok, w.Value.Emit())
		}
	}
}

// roundEvents returns the span's "redlock.round" events, each with the
// "redlock.node" events that follow it.
func roundEvents(s sdktrace.ReadOnlySpan) (rounds []sdktrace.Event, nodes [][]sdktrace.Event) {
	for _, e := range s.Events() {
		switch e.Name {
		case "redlock.round":
			rounds = append(rounds, e)
			nodes = append(nodes, nil)
		case "redlock.node":
			if len(nodes) > 0 {
				nodes[len(nodes)-1] = append(nodes[len(nodes)-1], e)
			}
		}
	}
	return rounds, nodes
}

// checkNodeEvents checks that a round's node events name every node once
// and returns how many had outcome.
func checkNodeEvents(t *testing.T, f *fixture, events []sdktrace.Event, outcome string) int {
	t.Helper()
	var names []string
	n := 0
	for _, e := range events {
		v, _ := attr(e.Attributes, "redlock.node.name")
		names = append(names, v.AsString())
		if o, _ := attr(e.Attributes, "redlock.node.outcome"); o.AsString() == outcome {
			n++
			if outcome != "no_answer" {
				if _, ok := attr(e.Attributes, "redlock.node.latency_ms"); !ok {
					t.Errorf("node event %v lacks redlock.node.latency_ms", e.Attributes)
				}
			}
		}
	}
	slices.Sort(names)
	want := slices.Clone(f.nodes)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("node events name %v, want %v", names, want)
	}
	return n
}

func TestLockRelease(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, key := ctxT(t), keyFor(t)
	ctx, parent := f.tracer.Start(ctx, "parent")

	l, err := f.client.Lock(ctx, key, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	parent.End()

	spans := f.spans.Ended()
	acq := span(t, spans, "redlock.acquire")
	if acq.SpanKind() != trace.SpanKindClient || acq.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("acquire span: kind %v, parent %v; want a client span under the caller's", acq.SpanKind(), acq.Parent().SpanID())
	}
	if acq.Status().Code != codes.Unset {
		t.Errorf("acquire span status %v, want unset", acq.Status())
	}
	checkAttrs(t, "acquire span", acq.Attributes(), static,
		attribute.String("redlock.key", key), attribute.String("redlock.operation", "acquire"),
		attribute.Int("redlock.quorum", 2), attribute.Int64("redlock.fence", l.Fence()),
		attribute.Int64("redlock.ttl_ms", 10000), attribute.String("redlock.outcome", "ok"))
	if _, ok := attr(acq.Attributes(), "error.type"); ok {
		t.Errorf("acquire span has error.type: %v", acq.Attributes())
	}
	// On a loaded machine a round may time out: each failed round is
	// followed by its cleanup, and the last one succeeds.
	rounds, nodes := roundEvents(acq)
	attempts := (len(rounds) + 1) / 2
	checkAttrs(t, "acquire span", acq.Attributes(), attribute.Int("redlock.rounds", attempts))
	for i, r := range rounds {
		op, ok := "acquire", i == len(rounds)-1
		if i%2 == 1 {
			op, ok = "cleanup", true
		}
		checkAttrs(t, "round event", r.Attributes, attribute.String("redlock.operation", op),
			attribute.Int("redlock.round.number", i/2+1))
		if v, _ := attr(r.Attributes, "redlock.round.ok"); op == "acquire" && v.AsBool() != ok {
			t.Errorf("acquire round %d of %d: redlock.round.ok = %v", i/2+1, attempts, v.AsBool())
		}
	}
	if n := checkNodeEvents(t, f, nodes[len(nodes)-1], "ok"); n < 2 {
		t.Errorf("acquire round: %d nodes granted, want at least 2: %v", n, nodes[len(nodes)-1])
	}
	healthy := 0
	for _, e := range acq.Events() {
		if v, _ := attr(e.Attributes, "redlock.node.state"); e.Name == "redlock.node.state" && v.AsString() == "healthy" {
			healthy++
		}
	}
	if healthy < 2 {
		t.Errorf("acquire span: %d nodes became healthy, want at least 2: %v", healthy, acq.Events())
	}

	rel := span(t, spans, "redlock.release")
	if rel.Status().Code != codes.Unset || rel.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("release span: status %v, parent %v", rel.Status(), rel.Parent().SpanID())
	}
	checkAttrs(t, "release span", rel.Attributes(), static, attribute.String("redlock.key", key),
		attribute.String("redlock.operation", "release"), attribute.String("redlock.outcome", "ok"),
		attribute.Int("redlock.quorum", 2))
	if v, ok := attr(rel.Attributes(), "redlock.held_ms"); !ok || v.AsInt64() < 0 {
		t.Errorf("release span: redlock.held_ms = %v", v.Emit())
	}
	if rounds, _ := roundEvents(rel); len(rounds) != 1 {
		t.Errorf("release span: %d round events, want 1", len(rounds))
	} else {
		checkAttrs(t, "release round event", rounds[0].Attributes, attribute.String("redlock.operation", "release"),
			attribute.Bool("redlock.round.ok", true))
	}

	ms := f.collect(t)
	acquireOK := []attribute.KeyValue{attribute.String("redlock.operation", "acquire"), attribute.String("redlock.outcome", "ok")}
	if n := count(t, ms, "redlock.operations", "{operation}", acquireOK...); n != 1 {
		t.Errorf("operations{acquire, ok} = %d, want 1", n)
	}
	if n := count(t, ms, "redlock.operations", "{operation}", attribute.String("redlock.operation", "release"),
		attribute.String("redlock.outcome", "ok")); n != 1 {
		t.Errorf("operations{release, ok} = %d, want 1", n)
	}
	if n := count(t, ms, "redlock.operations", "{operation}"); n != 2 {
		t.Errorf("operations = %d in all, want 2", n)
	}
	if n := count(t, ms, "redlock.rounds", "{round}", attribute.String("redlock.operation", "acquire")); n != int64(attempts) {
		t.Errorf("rounds{acquire} = %d, want %d", n, attempts)
	}
	if n := histCount(t, ms, "redlock.acquire.duration", attribute.String("redlock.outcome", "ok")); n != 1 {
		t.Errorf("acquire.duration{ok} count %d, want 1", n)
	}
	if n := histCount(t, ms, "redlock.hold.duration", attribute.String("redlock.outcome", "ok")); n != 1 {
		t.Errorf("hold.duration{ok} count %d, want 1", n)
	}
	for _, op := range []string{"acquire", "release"} {
		if n := count(t, ms, "redlock.rounds", "{round}", attribute.String("redlock.operation", op),
			attribute.Bool("redlock.round.ok", true)); n != 1 {
			t.Errorf("rounds{%s, ok} = %d, want 1", op, n)
		}
	}
	if n := count(t, ms, "redlock.rounds", "{round}"); n != int64(len(rounds))+1 {
		t.Errorf("rounds = %d in all, want %d", n, len(rounds)+1)
	}
	if n := histCount(t, ms, "redlock.node.latency", attribute.String("redlock.operation", "acquire")); n < 2 || n > uint64(3*attempts) {
		t.Errorf("node.latency{acquire} count %d, want 2 to %d", n, 3*attempts)
	}
	for _, a := range attrSets(ms["redlock.node.latency"]) {
		if v, _ := a.Value("redlock.node.name"); !slices.Contains(f.nodes, v.AsString()) {
			t.Errorf("node.latency for node %q, not one of %v", v.AsString(), f.nodes)
		}
	}
	if _, ok := ms["redlock.locks.lost"]; ok {
		t.Errorf("locks.lost recorded with no lock lost: %+v", ms["redlock.locks.lost"])
	}
	st := states(t, ms)
	healthyNodes := 0
	for _, n := range f.nodes {
		if st[n]["healthy"] == 1 {
			healthyNodes++
		}
		if st[n]["healthy"]+st[n]["unknown"]+st[n]["unreachable"]+st[n]["quarantined"]+st[n]["refusing"]+st[n]["busy"] != 1 {
			t.Errorf("node %s: states %v, want one of them 1", n, st[n])
		}
	}
	if healthyNodes < 2 {
		t.Errorf("%d nodes healthy, want at least 2: %v", healthyNodes, st)
	}
}

func TestTaken(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, key, l := f.held(t)
	before := f.collect(t)
	if _, err := f.client.TryLock(ctx, key, 10*time.Second); !errors.Is(err, redlock.ErrTaken) {
		t.Fatalf("TryLock of a held key: %v, want ErrTaken", err)
	}

	var refused sdktrace.ReadOnlySpan
	for _, s := range f.spans.Ended() {
		if v, _ := attr(s.Attributes(), "redlock.outcome"); s.Name() == "redlock.acquire" && v.AsString() == "taken" {
			refused = s
		}
	}
	if refused == nil {
		t.Fatalf("no acquire span with outcome taken: %v", spanNames(f.spans.Ended()))
	}
	if refused.Status().Code != codes.Error || refused.Status().Description == "" {
		t.Errorf("refused span status %v, want Error with the error", refused.Status())
	}
	checkAttrs(t, "refused span", refused.Attributes(), attribute.String("error.type", "taken"),
		attribute.Int("redlock.rounds", 1), attribute.Int("redlock.quorum", 2))
	if _, ok := attr(refused.Attributes(), "redlock.fence"); ok {
		t.Errorf("refused span has a fence: %v", refused.Attributes())
	}
	rounds, nodes := roundEvents(refused)
	if len(rounds) != 2 {
		t.Fatalf("refused span: %d round events, want the round and its cleanup: %v", len(rounds), refused.Events())
	}
	checkAttrs(t, "refused round", rounds[0].Attributes, attribute.String("redlock.operation", "acquire"),
		attribute.Bool("redlock.round.ok", false))
	checkAttrs(t, "cleanup round", rounds[1].Attributes, attribute.String("redlock.operation", "cleanup"),
		attribute.Int("redlock.round.number", 1))
	if n := checkNodeEvents(t, f, nodes[0], "taken"); n < 2 {
		t.Errorf("refused round: %d nodes report the key taken, want at least 2: %v", n, nodes[0])
	}
	for _, e := range nodes[0] {
		if o, _ := attr(e.Attributes, "redlock.node.outcome"); o.AsString() == "taken" {
			if v, ok := attr(e.Attributes, "redlock.node.ttl_ms"); !ok || v.AsInt64() <= 0 {
				t.Errorf("taken node event %v: want the owner's ttl", e.Attributes)
			}
		}
	}

	ms := f.collect(t)
	if n := count(t, ms, "redlock.operations", "{operation}", attribute.String("redlock.operation", "acquire"),
		attribute.String("redlock.outcome", "taken")); n != 1 {
		t.Errorf("operations{acquire, taken} = %d, want 1", n)
	}
	if n := histCount(t, ms, "redlock.acquire.duration", attribute.String("redlock.outcome", "taken")); n != 1 {
		t.Errorf("acquire.duration{taken} count %d, want 1", n)
	}
	failed := []attribute.KeyValue{attribute.String("redlock.operation", "acquire"), attribute.Bool("redlock.round.ok", false)}
	if n, was := count(t, ms, "redlock.rounds", "{round}", failed...), countOr0(t, before, "redlock.rounds", failed...); n != was+1 {
		t.Errorf("rounds{acquire, failed} = %d, want one more than %d", n, was)
	}
	cleanup := attribute.String("redlock.operation", "cleanup")
	if n, was := count(t, ms, "redlock.rounds", "{round}", cleanup), countOr0(t, before, "redlock.rounds", cleanup); n != was+1 {
		t.Errorf("rounds{cleanup} = %d, want one more than %d", n, was)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestNodeDown(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := ctxT(t)
	admin.New(f.client).Probe(ctx)
	ms := f.collect(t)
	checkStates(t, states(t, ms), f.nodes, nil, "healthy")
	if n := count(t, ms, "redlock.rounds", "{round}", attribute.String("redlock.operation", "probe"),
		attribute.Bool("redlock.round.ok", true)); n != 1 {
		t.Errorf("rounds{probe, ok} = %d, want 1", n)
	}
	if n := histCount(t, ms, "redlock.node.latency", attribute.String("redlock.operation", "probe")); n != 3 {
		t.Errorf("node.latency{probe} count %d, want 3", n)
	}

	if err := f.servers[2].Kill(); err != nil {
		t.Fatal(err)
	}
	// Probe makes no span of its own and leaves the caller's alone.
	pctx, parent := f.tracer.Start(ctx, "parent")
	probed := admin.New(f.client).Probe(pctx)
	parent.End()
	if probed[2].Health != observe.NodeUnreachable {
		t.Fatalf("Probe with the node killed: %+v", probed[2])
	}
	spans := f.spans.Ended()
	if len(spans) != 1 || len(spans[0].Events()) != 0 {
		t.Errorf("spans after Probe: %v, events %v; want the caller's span alone, untouched", spanNames(spans), spans[0].Events())
	}

	ms = f.collect(t)
	down := f.nodes[2]
	checkStates(t, states(t, ms), f.nodes, map[string]string{down: "unreachable"}, "healthy")
	if n := count(t, ms, "redlock.node.errors", "{error}", attribute.String("redlock.node.name", down),
		attribute.String("redlock.operation", "probe")); n != 1 {
		t.Errorf("node.errors{%s, probe} = %d, want 1", down, n)
	}
	if n := count(t, ms, "redlock.node.errors", "{error}"); n != 1 {
		t.Errorf("node.errors = %d in all, want 1", n)
	}
	for _, a := range attrSets(ms["redlock.node.errors"]) {
		if v, _ := a.Value("redlock.node.outcome"); v.AsString() != "failed" && v.AsString() != "no_answer" {
			t.Errorf("node.errors with outcome %q", v.AsString())
		}
	}
	if n := count(t, ms, "redlock.rounds", "{round}", attribute.String("redlock.operation", "probe"),
		attribute.Bool("redlock.round.ok", false)); n != 1 {
		t.Errorf("rounds{probe, failed} = %d, want 1", n)
	}

	// Close stops the gauge and nothing else.
	if err := f.obs.Close(); err != nil {
		t.Fatal(err)
	}
	admin.New(f.client).Probe(ctx)
	ms = f.collect(t)
	if _, ok := ms["redlock.node.state"]; ok {
		t.Errorf("redlock.node.state reported after Close")
	}
	if n := count(t, ms, "redlock.node.errors", "{error}", attribute.String("redlock.node.name", down)); n != 2 {
		t.Errorf("node.errors{%s} = %d after Close and a second Probe, want 2", down, n)
	}
}

func TestLockLost(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, key, l := f.held(t)
	f.servers[0].MustDo(t, "DEL", key)
	f.servers[1].MustDo(t, "DEL", key)
	if err := l.Extend(ctx, 10*time.Second); !errors.Is(err, redlock.ErrLockLost) {
		t.Fatalf("Extend of a lock deleted on 2 of 3 nodes: %v, want ErrLockLost", err)
	}

	ext := span(t, f.spans.Ended(), "redlock.extend")
	if ext.Status().Code != codes.Error {
		t.Errorf("extend span status %v, want Error", ext.Status())
	}
	checkAttrs(t, "extend span", ext.Attributes(), attribute.String("redlock.outcome", "lost"),
		attribute.String("error.type", "lost"), attribute.Int64("redlock.ttl_ms", 10000), attribute.String("redlock.key", key))
	var lost []sdktrace.Event
	for _, e := range ext.Events() {
		if e.Name == "redlock.lost" {
			lost = append(lost, e)
		}
	}
	if len(lost) != 1 {
		t.Fatalf("extend span: %d redlock.lost events, want 1: %v", len(lost), ext.Events())
	}
	checkAttrs(t, "lost event", lost[0].Attributes, attribute.Int64("redlock.fence", l.Fence()))
	if v, _ := attr(lost[0].Attributes, "error.message"); v.AsString() == "" {
		t.Errorf("lost event without the cause: %v", lost[0].Attributes)
	}
	_, nodes := roundEvents(ext)
	if n := checkNodeEvents(t, f, nodes[0], "absent"); n < 2 {
		t.Errorf("extend round: %d nodes absent, want 2: %v", n, nodes[0])
	}

	if err := l.Release(ctx); !errors.Is(err, redlock.ErrLockLost) {
		t.Errorf("Release of a lost lock: %v, want ErrLockLost", err)
	}
	ms := f.collect(t)
	if n := count(t, ms, "redlock.locks.lost", "{lock}"); n != 1 {
		t.Errorf("locks.lost = %d, want 1", n)
	}
	if n := count(t, ms, "redlock.operations", "{operation}", attribute.String("redlock.operation", "extend"),
		attribute.String("redlock.outcome", "lost")); n != 1 {
		t.Errorf("operations{extend, lost} = %d, want 1", n)
	}
	if n := histCount(t, ms, "redlock.hold.duration", attribute.String("redlock.outcome", "lost")); n != 1 {
		t.Errorf("hold.duration{lost} count %d, want 1", n)
	}

	// A second Release changes nothing but the count of operations.
	if err := l.Release(ctx); !errors.Is(err, redlock.ErrReleased) {
		t.Errorf("second Release: %v, want ErrReleased", err)
	}
	ms = f.collect(t)
	if n := count(t, ms, "redlock.operations", "{operation}", attribute.String("redlock.operation", "release"),
		attribute.String("redlock.outcome", "released")); n != 1 {
		t.Errorf("operations{release, released} = %d, want 1", n)
	}
	if n := histCount(t, ms, "redlock.hold.duration"); n != 1 {
		t.Errorf("hold.duration count %d after a second Release, want 1", n)
	}
}

// TestLostAtDeadline lets a lock expire while its context is in use: the
// loss is reported with a background context, outside any span.
func TestLostAtDeadline(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(o *redlock.Options) { o.NodeTimeout = 150 * time.Millisecond })
	ctx, key := ctxT(t), keyFor(t)
	l, err := f.client.Lock(ctx, key, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Context().Done():
	case <-ctx.Done():
		t.Fatal("the lock's context did not end at its deadline")
	}
	// The loss is reported just after the context ends.
	for {
		ms := f.collect(t)
		if _, ok := ms["redlock.locks.lost"]; ok {
			if n := count(t, ms, "redlock.locks.lost", "{lock}"); n != 1 {
				t.Fatalf("locks.lost = %d, want 1", n)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatal("locks.lost not recorded")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, s := range f.spans.Ended() {
		for _, e := range s.Events() {
			if e.Name == "redlock.lost" {
				t.Errorf("span %s has a redlock.lost event for a loss at the deadline", s.Name())
			}
		}
	}
	if err := l.Release(ctx); !errors.Is(err, redlock.ErrExpired) {
		t.Errorf("Release after the deadline: %v, want ErrExpired", err)
	}
	ms := f.collect(t)
	if n := histCount(t, ms, "redlock.hold.duration", attribute.String("redlock.outcome", "expired")); n != 1 {
		t.Errorf("hold.duration{expired} count %d, want 1", n)
	}
	checkAttrs(t, "release span", span(t, f.spans.Ended(), "redlock.release").Attributes(),
		attribute.String("redlock.outcome", "expired"))
}

func TestCanceled(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx, key, l := f.held(t)
	wait, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() {
		_, err := f.client.Lock(wait, key, 10*time.Second)
		done <- err
	}()
	// Cancel once the waiting Lock has made a round.
	for count(t, f.collect(t), "redlock.rounds", "{round}", attribute.String("redlock.operation", "cleanup")) == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock cancelled while waiting: %v", err)
	}
	ms := f.collect(t)
	if n := count(t, ms, "redlock.operations", "{operation}", attribute.String("redlock.operation", "acquire"),
		attribute.String("redlock.outcome", "canceled")); n != 1 {
		t.Errorf("operations{acquire, canceled} = %d, want 1", n)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestConcurrent runs operations, probes and collections at once, for the
// race detector, and checks that nothing is lost or counted twice.
func TestConcurrent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := ctxT(t)
	const workers, locks = 8, 5
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		calls   = map[string]int64{} // by operation
		ok      = map[string]int64{}
		acquire = int64(0)
	)
	done := func(op string, err error) {
		mu.Lock()
		defer mu.Unlock()
		calls[op]++
		if err == nil {
			ok[op]++
		} else {
			t.Logf("%s: %v", op, err) // possible on a loaded machine
		}
	}
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range locks {
				l, err := f.client.Lock(ctx, fmt.Sprintf("%s:%d:%d", keyFor(t), w, i), 10*time.Second)
				done("acquire", err)
				if err != nil {
					continue
				}
				done("extend", l.Extend(ctx, 10*time.Second))
				done("release", l.Release(ctx))
			}
		}()
	}
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(1)
	go func() {
		defer bg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			admin.New(f.client).Probe(ctx)
			var rm metricdata.ResourceMetrics
			f.reader.Collect(ctx, &rm)
		}
	}()
	wg.Wait()
	close(stop)
	bg.Wait()
	acquire = calls["acquire"]
	if acquire != workers*locks || ok["acquire"] == 0 {
		t.Fatalf("%d Lock calls, %d successful; want %d, most of them successful", acquire, ok["acquire"], workers*locks)
	}

	ms := f.collect(t)
	spans := 0
	for _, op := range []string{"acquire", "extend", "release"} {
		opAttr := attribute.String("redlock.operation", op)
		if n := count(t, ms, "redlock.operations", "{operation}", opAttr); n != calls[op] {
			t.Errorf("operations{%s} = %d, want %d", op, n, calls[op])
		}
		if n := countOr0(t, ms, "redlock.operations", opAttr, attribute.String("redlock.outcome", "ok")); n != ok[op] {
			t.Errorf("operations{%s, ok} = %d, want %d", op, n, ok[op])
		}
		spans += int(calls[op])
	}
	if n := histCount(t, ms, "redlock.hold.duration"); n != uint64(calls["release"]) {
		t.Errorf("hold.duration count %d, want %d", n, calls["release"])
	}
	if n := len(f.spans.Ended()); n != spans {
		t.Errorf("%d spans, want %d", n, spans)
	}
	st := states(t, ms)
	for _, n := range f.nodes {
		if len(st[n]) != 6 || st[n]["healthy"]+st[n]["unknown"]+st[n]["unreachable"]+st[n]["quarantined"]+st[n]["refusing"]+st[n]["busy"] != 1 {
			t.Errorf("node %s: states %v, want one of the six 1", n, st[n])
		}
	}
}

// TestGlobalProviders checks that an Observer made without options works
// with the global providers, which record nothing unless set.
func TestGlobalProviders(t *testing.T) {
	t.Parallel()
	obs, err := otelredlock.New(otelredlock.WithMeterProvider(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
	srv := redistest.Start(t, redistest.Config{})
	n, err := goredisnode.Dial(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	c, err := redlock.New([]redlock.Node{n}, &redlock.Options{Observer: obs, DisableQuarantine: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	l, err := c.Lock(ctx, keyFor(t), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	admin.New(c).Probe(ctx)
}
