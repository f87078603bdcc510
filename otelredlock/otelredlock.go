package otelredlock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/observe"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the name of the instrumentation scope, the meter's and the
// tracer's, under which an Observer reports.
const ScopeName = "github.com/quorumlock/redlock/otelredlock"

// Attribute keys.
const (
	keyOperation     = attribute.Key("redlock.operation")
	keyOutcome       = attribute.Key("redlock.outcome")
	keyKey           = attribute.Key("redlock.key")
	keyQuorum        = attribute.Key("redlock.quorum")
	keyTTL           = attribute.Key("redlock.ttl_ms")
	keyRounds        = attribute.Key("redlock.rounds")
	keyFence         = attribute.Key("redlock.fence")
	keyHeld          = attribute.Key("redlock.held_ms")
	keyRoundNumber   = attribute.Key("redlock.round.number")
	keyRoundOK       = attribute.Key("redlock.round.ok")
	keyRoundDuration = attribute.Key("redlock.round.duration_ms")
	keyNode          = attribute.Key("redlock.node.name")
	keyNodeOutcome   = attribute.Key("redlock.node.outcome")
	keyNodeLatency   = attribute.Key("redlock.node.latency_ms")
	keyNodeTTL       = attribute.Key("redlock.node.ttl_ms")
	keyNodeState     = attribute.Key("redlock.node.state")
	keyNodePrevious  = attribute.Key("redlock.node.previous_state")
	keyErrorType     = attribute.Key("error.type")
	keyErrorMessage  = attribute.Key("error.message")
)

// Values of redlock.outcome.
const (
	outcomeOK       = "ok"
	outcomeTaken    = "taken"
	outcomeNoQuorum = "no_quorum"
	outcomeRefused  = "refused"
	outcomeExpired  = "expired"
	outcomeLost     = "lost"
	outcomeReleased = "released"
	outcomeCanceled = "canceled"
	outcomeInvalid  = "invalid"
	outcomeError    = "error"
)

var (
	outcomes = []string{outcomeOK, outcomeTaken, outcomeNoQuorum, outcomeRefused, outcomeExpired,
		outcomeLost, outcomeReleased, outcomeCanceled, outcomeInvalid, outcomeError}
	operations      = []string{"acquire", "extend", "release", "adopt"}
	roundOperations = []string{"acquire", "cleanup", "extend", "release", "probe", "adopt", "drop-intent"}
	// healths are the node states, in the order of observe.NodeHealth.
	healths = [...]string{
		observe.NodeUnknown:     "unknown",
		observe.NodeHealthy:     "healthy",
		observe.NodeQuarantined: "quarantined",
		observe.NodeUnreachable: "unreachable",
		observe.NodeRefusing:    "refusing",
		observe.NodeBusy:        "busy",
	}
)

// Bucket boundaries, in seconds, of the histograms.
var (
	acquireBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	holdBuckets    = []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 600, 1800, 3600}
	latencyBuckets = []float64{0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}
)

// An Option configures an Observer.
type Option func(*config)

type config struct {
	mp    metric.MeterProvider
	tp    trace.TracerProvider
	attrs []attribute.KeyValue
}

// WithMeterProvider makes the Observer record its metrics with mp. The
// default, also for a nil mp, is otel.GetMeterProvider() as it is when New
// is called.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// WithTracerProvider makes the Observer start its spans with tp. The
// default, also for a nil tp, is otel.GetTracerProvider() as it is when New
// is called.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithAttributes adds attrs to every data point and every span the
// Observer records, for example to tell apart the Clients of one process.
// Their values should be few, as each makes time series of its own. An
// attribute with the key of one of the Observer's own replaces it.
// Default: none. Several WithAttributes add up.
func WithAttributes(attrs ...attribute.KeyValue) Option {
	return func(c *config) { c.attrs = append(c.attrs, attrs...) }
}

// An Observer is an observe.Observer that records metrics and spans with
// OpenTelemetry. It is safe for concurrent use. The package documentation
// lists what it records.
type Observer struct {
	tracer trace.Tracer
	static []attribute.KeyValue

	acquireDuration metric.Float64Histogram
	holdDuration    metric.Float64Histogram
	operations      metric.Int64Counter
	rounds          metric.Int64Counter
	nodeErrors      metric.Int64Counter
	nodeLatency     metric.Float64Histogram
	nodeState       metric.Int64ObservableGauge
	locksLost       metric.Int64Counter
	registration    metric.Registration

	// Attribute sets made in advance; read only after New.
	byOutcome   map[string]metric.MeasurementOption
	byOperation map[[2]string]metric.MeasurementOption // operation, outcome
	byRound     map[roundKey]metric.MeasurementOption
	noAttrs     metric.MeasurementOption

	nodes sync.Map // node name -> *node

	mu     sync.Mutex
	states map[string]*nodeState // by node name
}

type roundKey struct {
	op string
	ok bool
}

// node holds the attribute sets of one node's data points.
type node struct {
	name    attribute.KeyValue
	latency map[string]metric.MeasurementOption    // by operation
	errors  map[[2]string]metric.MeasurementOption // operation, outcome
	states  [len(healths)]metric.MeasurementOption // redlock.node.state by health
}

// nodeState is what the Client last reported of one node.
type nodeState struct {
	node   *node
	health observe.NodeHealth
	seen   time.Time
}

// New returns an Observer that records with the providers the options
// name. It fails if an instrument cannot be created.
func New(opts ...Option) (*Observer, error) {
	var c config
	for _, opt := range opts {
		opt(&c)
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	o := &Observer{
		tracer: c.tp.Tracer(ScopeName),
		static: c.attrs,
		states: make(map[string]*nodeState),
	}
	m := c.mp.Meter(ScopeName)
	var err, e error
	o.acquireDuration, e = m.Float64Histogram("redlock.acquire.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of Lock and TryLock calls, waiting included."),
		metric.WithExplicitBucketBoundaries(acquireBuckets...))
	err = errors.Join(err, e)
	o.holdDuration, e = m.Float64Histogram("redlock.hold.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from the acquisition of a lock to its release."),
		metric.WithExplicitBucketBoundaries(holdBuckets...))
	err = errors.Join(err, e)
	o.operations, e = m.Int64Counter("redlock.operations", metric.WithUnit("{operation}"),
		metric.WithDescription("Operations on locks: acquire (Lock, TryLock), extend and release."))
	err = errors.Join(err, e)
	o.rounds, e = m.Int64Counter("redlock.rounds", metric.WithUnit("{round}"),
		metric.WithDescription("Rounds of requests sent to every node."))
	err = errors.Join(err, e)
	o.nodeErrors, e = m.Int64Counter("redlock.node.errors", metric.WithUnit("{error}"),
		metric.WithDescription("Requests to a node that failed or got no answer in time."))
	err = errors.Join(err, e)
	o.nodeLatency, e = m.Float64Histogram("redlock.node.latency", metric.WithUnit("s"),
		metric.WithDescription("Time a node took to answer a request."),
		metric.WithExplicitBucketBoundaries(latencyBuckets...))
	err = errors.Join(err, e)
	o.nodeState, e = m.Int64ObservableGauge("redlock.node.state", metric.WithUnit("1"),
		metric.WithDescription("1 for the state the client last saw of a node, 0 for the others."))
	err = errors.Join(err, e)
	o.locksLost, e = m.Int64Counter("redlock.locks.lost", metric.WithUnit("{lock}"),
		metric.WithDescription("Locks lost while held: expired without extension, or no longer held by a quorum."))
	err = errors.Join(err, e)
	if err != nil {
		return nil, err
	}
	if o.registration, err = m.RegisterCallback(o.observeStates, o.nodeState); err != nil {
		return nil, err
	}

	o.noAttrs = o.attrs()
	o.byOutcome = make(map[string]metric.MeasurementOption, len(outcomes))
	o.byOperation = make(map[[2]string]metric.MeasurementOption, len(operations)*len(outcomes))
	for _, out := range outcomes {
		o.byOutcome[out] = o.attrs(keyOutcome.String(out))
		for _, op := range operations {
			o.byOperation[[2]string{op, out}] = o.attrs(keyOperation.String(op), keyOutcome.String(out))
		}
	}
	o.byRound = make(map[roundKey]metric.MeasurementOption, 2*len(roundOperations))
	for _, op := range roundOperations {
		for _, ok := range []bool{false, true} {
			o.byRound[roundKey{op, ok}] = o.attrs(keyOperation.String(op), keyRoundOK.Bool(ok))
		}
	}
	return o, nil
}

// Close stops reporting redlock.node.state. The Observer records
// everything else as before.
func (o *Observer) Close() error {
	return o.registration.Unregister()
}

// attrs returns the measurement option for the static attributes and kv.
func (o *Observer) attrs(kv ...attribute.KeyValue) metric.MeasurementOption {
	all := make([]attribute.KeyValue, 0, len(o.static)+len(kv))
	all = append(append(all, o.static...), kv...)
	return metric.WithAttributeSet(attribute.NewSet(all...))
}

// outcomeOption returns the attributes for outcome out alone.
func (o *Observer) outcomeOption(out string) metric.MeasurementOption {
	if a, ok := o.byOutcome[out]; ok {
		return a
	}
	return o.attrs(keyOutcome.String(out))
}

// node returns the attribute sets of the node named name, making them on
// first use.
func (o *Observer) node(name string) *node {
	if n, ok := o.nodes.Load(name); ok {
		return n.(*node)
	}
	n := &node{
		name:    keyNode.String(name),
		latency: make(map[string]metric.MeasurementOption, len(roundOperations)),
		errors:  make(map[[2]string]metric.MeasurementOption, 2*len(roundOperations)),
	}
	for _, op := range roundOperations {
		n.latency[op] = o.attrs(n.name, keyOperation.String(op))
		for _, out := range []string{"failed", "no_answer"} {
			n.errors[[2]string{op, out}] = o.attrs(n.name, keyOperation.String(op), keyNodeOutcome.String(out))
		}
	}
	for h, s := range healths {
		n.states[h] = o.attrs(n.name, keyNodeState.String(s))
	}
	actual, loaded := o.nodes.LoadOrStore(name, n)
	if !loaded {
		o.mu.Lock()
		if _, ok := o.states[name]; !ok {
			o.states[name] = &nodeState{node: n}
		}
		o.mu.Unlock()
	}
	return actual.(*node)
}

// observeStates reports redlock.node.state.
func (o *Observer) observeStates(_ context.Context, obs metric.Observer) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, st := range o.states {
		for h, a := range st.node.states {
			var v int64
			if observe.NodeHealth(h) == st.health {
				v = 1
			}
			obs.ObserveInt64(o.nodeState, v, a)
		}
	}
	return nil
}

// span is the span of one operation, kept in the context Start returns.
type span struct {
	trace.Span
	op string
}

type spanKey struct{}

// spanOf returns the span of the operation ctx belongs to, if it is one of
// ours and still recording.
func spanOf(ctx context.Context) *span {
	s, _ := ctx.Value(spanKey{}).(*span)
	if s == nil || !s.IsRecording() {
		return nil
	}
	return s
}

// Start starts the span of an operation on the lock on key and returns a
// context that holds it. It is called by the Client.
func (o *Observer) Start(ctx context.Context, op, key string) context.Context {
	attrs := make([]attribute.KeyValue, 0, len(o.static)+2)
	attrs = append(append(attrs, o.static...), keyOperation.String(op), keyKey.String(key))
	ctx, s := o.tracer.Start(ctx, "redlock."+op,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	if !s.IsRecording() {
		return ctx
	}
	return context.WithValue(ctx, spanKey{}, &span{Span: s, op: op})
}

// Observe records e. It is called by the Client; it ignores the events it
// does not know.
func (o *Observer) Observe(ctx context.Context, e observe.Event) {
	switch e := e.(type) {
	case observe.OpEvent:
		o.op(ctx, e)
	case observe.RoundEvent:
		o.round(ctx, e)
	case observe.LostEvent:
		o.locksLost.Add(ctx, 1, o.noAttrs)
		if s := spanOf(ctx); s != nil {
			s.AddEvent("redlock.lost", trace.WithAttributes(
				keyFence.Int64(e.Fence), keyHeld.Int64(e.Held.Milliseconds()),
				keyErrorMessage.String(errText(e.Cause))))
		}
	case observe.NodeEvent:
		o.nodeEvent(ctx, e)
	}
}

// op records the end of an operation and ends its span.
func (o *Observer) op(ctx context.Context, e observe.OpEvent) {
	out := outcome(e.Err)
	a, ok := o.byOperation[[2]string{e.Op, out}]
	if !ok {
		a = o.attrs(keyOperation.String(e.Op), keyOutcome.String(out))
	}
	o.operations.Add(ctx, 1, a)
	switch e.Op {
	case "acquire":
		o.acquireDuration.Record(ctx, e.Duration.Seconds(), o.outcomeOption(out))
	case "release":
		if out != outcomeReleased {
			o.holdDuration.Record(ctx, e.Held.Seconds(), o.outcomeOption(out))
		}
	}

	s := spanOf(ctx)
	if s == nil || s.op != e.Op {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs, keyOutcome.String(out))
	if e.Quorum > 0 {
		attrs = append(attrs, keyQuorum.Int(e.Quorum))
	}
	switch e.Op {
	case "acquire":
		attrs = append(attrs, keyRounds.Int(e.Rounds), keyTTL.Int64(e.TTL.Milliseconds()))
		if e.Err == nil {
			attrs = append(attrs, keyFence.Int64(e.Fence))
		}
	case "extend":
		attrs = append(attrs, keyTTL.Int64(e.TTL.Milliseconds()))
	case "release":
		attrs = append(attrs, keyHeld.Int64(e.Held.Milliseconds()))
	}
	if e.Err != nil {
		attrs = append(attrs, keyErrorType.String(out))
		s.SetStatus(codes.Error, e.Err.Error())
	}
	s.SetAttributes(attrs...)
	s.End()
}

// round records one round and adds its events to the operation's span.
func (o *Observer) round(ctx context.Context, e observe.RoundEvent) {
	a, ok := o.byRound[roundKey{e.Op, e.OK}]
	if !ok {
		a = o.attrs(keyOperation.String(e.Op), keyRoundOK.Bool(e.OK))
	}
	o.rounds.Add(ctx, 1, a)
	for _, r := range e.Nodes {
		n := o.node(r.Node)
		switch {
		case r.Outcome == observe.OutcomeFailed || r.Outcome == observe.OutcomeRefused || r.Outcome == observe.OutcomeNoAnswer && r.Err != nil:
			out := nodeOutcome(r.Outcome)
			a, ok := n.errors[[2]string{e.Op, out}]
			if !ok {
				a = o.attrs(n.name, keyOperation.String(e.Op), keyNodeOutcome.String(out))
			}
			o.nodeErrors.Add(ctx, 1, a)
		case r.Outcome != observe.OutcomeNoAnswer:
			a, ok := n.latency[e.Op]
			if !ok {
				a = o.attrs(n.name, keyOperation.String(e.Op))
			}
			o.nodeLatency.Record(ctx, r.Latency.Seconds(), a)
		}
	}

	s := spanOf(ctx)
	if s == nil {
		return
	}
	if e.Quorum > 0 {
		s.SetAttributes(keyQuorum.Int(e.Quorum))
	}
	s.AddEvent("redlock.round", trace.WithTimestamp(e.Start), trace.WithAttributes(
		keyOperation.String(e.Op), keyRoundNumber.Int(e.Round), keyRoundOK.Bool(e.OK),
		keyRoundDuration.Float64(ms(e.Duration))))
	for _, r := range e.Nodes {
		attrs := make([]attribute.KeyValue, 0, 5)
		attrs = append(attrs, keyNode.String(r.Node), keyNodeOutcome.String(nodeOutcome(r.Outcome)))
		at := e.Start.Add(e.Duration)
		if r.Outcome != observe.OutcomeNoAnswer {
			at = e.Start.Add(r.Latency)
			attrs = append(attrs, keyNodeLatency.Float64(ms(r.Latency)))
		}
		if r.Outcome == observe.OutcomeTaken || r.Outcome == observe.OutcomeQuarantined {
			attrs = append(attrs, keyNodeTTL.Int64(r.TTL.Milliseconds()))
		}
		if r.Err != nil {
			attrs = append(attrs, keyErrorMessage.String(r.Err.Error()))
		}
		s.AddEvent("redlock.node", trace.WithTimestamp(at), trace.WithAttributes(attrs...))
	}
}

// nodeEvent records a node's change of state.
func (o *Observer) nodeEvent(ctx context.Context, e observe.NodeEvent) {
	n := o.node(e.State.Node)
	o.mu.Lock()
	st := o.states[e.State.Node]
	if st == nil { // o.node is making it at this moment
		st = &nodeState{node: n}
		o.states[e.State.Node] = st
	}
	// Events of concurrent rounds may arrive out of order; the latest
	// observation wins.
	if !e.State.Seen.Before(st.seen) {
		st.health, st.seen = e.State.Health, e.State.Seen
	}
	o.mu.Unlock()

	if s := spanOf(ctx); s != nil {
		attrs := []attribute.KeyValue{n.name, keyNodeState.String(health(e.State.Health)),
			keyNodePrevious.String(health(e.Previous))}
		if e.State.Err != nil {
			attrs = append(attrs, keyErrorMessage.String(e.State.Err.Error()))
		}
		s.AddEvent("redlock.node.state", trace.WithAttributes(attrs...))
	}
}

// outcome classifies the error of an operation.
func outcome(err error) string {
	switch {
	case err == nil:
		return outcomeOK
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return outcomeCanceled
	case errors.Is(err, redlock.ErrTaken):
		return outcomeTaken
	case errors.Is(err, redlock.ErrNoQuorum):
		return outcomeNoQuorum
	case errors.Is(err, redlock.ErrRefused):
		return outcomeRefused
	case errors.Is(err, redlock.ErrExpired):
		return outcomeExpired
	case errors.Is(err, redlock.ErrLockLost):
		return outcomeLost
	case errors.Is(err, redlock.ErrReleased):
		return outcomeReleased
	case errors.Is(err, redlock.ErrInvalid):
		return outcomeInvalid
	}
	return outcomeError
}

// nodeOutcome names what a node did.
func nodeOutcome(o observe.Outcome) string {
	switch o {
	case observe.OutcomeNoAnswer:
		return "no_answer"
	case observe.OutcomeOK:
		return "ok"
	case observe.OutcomeTaken:
		return "taken"
	case observe.OutcomeAbsent:
		return "absent"
	case observe.OutcomeFailed:
		return "failed"
	case observe.OutcomeQuarantined:
		return "quarantined"
	case observe.OutcomeRefused:
		return "refused"
	}
	return "other"
}

// health names a node's state.
func health(h observe.NodeHealth) string {
	if h >= 0 && int(h) < len(healths) {
		return healths[h]
	}
	return "other"
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
