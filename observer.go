package redlock

import (
	"context"
	"time"

	"github.com/quorumlock/redlock/observe"
)

// hooks is how the Client tells its Observer what it does. Without an
// Observer it is noHooks, whose methods do nothing, so that the Client
// does none of the work of making events.
type hooks interface {
	// begin starts an operation: it returns the context the operation
	// goes on with, and the OpEvent that end completes.
	begin(ctx context.Context, op, key string) (context.Context, observe.OpEvent)
	// end reports the end of an operation that begin started.
	end(ctx context.Context, ev observe.OpEvent, err error)
	// round reports a round once it is decided.
	round(ctx context.Context, op, key string, n int, r *round)
	// lost reports that the lock on key, with the given fence and
	// obtained by a round that started at start, was lost.
	lost(ctx context.Context, key string, fence int64, start time.Time, cause error)
	// event reports any other event.
	event(ctx context.Context, e observe.Event)
}

// newHooks returns the hooks that tell obs, for a Client whose quorum is
// quorum; noHooks if obs is nil.
func newHooks(obs observe.Observer, quorum int) hooks {
	if obs == nil {
		return noHooks{}
	}
	return observing{obs: obs, quorum: quorum}
}

type noHooks struct{}

func (noHooks) begin(ctx context.Context, _, _ string) (context.Context, observe.OpEvent) {
	return ctx, observe.OpEvent{}
}
func (noHooks) end(context.Context, observe.OpEvent, error)           {}
func (noHooks) round(context.Context, string, string, int, *round)    {}
func (noHooks) lost(context.Context, string, int64, time.Time, error) {}
func (noHooks) event(context.Context, observe.Event)                  {}

// observing is the hooks of a Client with an Observer.
type observing struct {
	obs    observe.Observer
	quorum int
}

func (o observing) begin(ctx context.Context, op, key string) (context.Context, observe.OpEvent) {
	ev := observe.OpEvent{Op: op, Key: key, Quorum: o.quorum, Start: time.Now()}
	return o.obs.Start(ctx, op, key), ev
}

func (o observing) end(ctx context.Context, ev observe.OpEvent, err error) {
	ev.Duration, ev.Err = time.Since(ev.Start), err
	o.obs.Observe(ctx, ev)
}

func (o observing) round(ctx context.Context, op, key string, n int, r *round) {
	o.obs.Observe(ctx, observe.RoundEvent{Op: op, Key: key, Round: n, Start: r.start,
		Duration: r.took, OK: r.ok, Quorum: o.quorum, Nodes: r.verdict})
}

func (o observing) lost(ctx context.Context, key string, fence int64, start time.Time, cause error) {
	o.obs.Observe(ctx, observe.LostEvent{Key: key, Fence: fence, Held: time.Since(start), Cause: cause})
}

func (o observing) event(ctx context.Context, e observe.Event) { o.obs.Observe(ctx, e) }
