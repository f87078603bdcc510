package drivertest

import (
	"context"
	"testing"
	"time"

	"github.com/quorumlock/redlock/driver"
	"github.com/quorumlock/redlock/internal/redistest"
)

// testBatch checks EvalBatch: the calls of a batch run in order, each gets
// its own reply or error as Eval would give it, scripts the server has not
// cached are sent again with EVAL, and a batch whose context has ended
// fails every call.
func testBatch[N Node](t *testing.T, a Adapter[N]) {
	srv := redistest.Start(t, redistest.Config{})
	n := dial(t, a, srv.URL())
	b, ok := any(n).(driver.Batcher)
	if !ok {
		t.Fatalf("%T does not implement driver.Batcher", n)
	}
	steps := []step{
		acquireStep("batch:a", "tok1", "60000", granted),
		acquireStep("batch:b", "tok2", "60000", granted),
		acquireStep("batch:a", "tok3", "60000", refused), // after tok1, in the same batch
		releaseStep("batch:b", "tok2", done),
		extendStep("batch:a", "tok1", "not a number", nil), // an error reply
		releaseStep("batch:a", "tok1", done),
	}
	for round, flush := range []bool{true, false} {
		if flush {
			srv.MustDo(t, "SCRIPT", "FLUSH")
		}
		srv.MustDo(t, "CONFIG", "RESETSTAT")
		calls := make([]driver.Call, len(steps))
		for i, st := range steps {
			calls[i] = driver.Call{Script: Script(t, st.script), Keys: st.keys, Args: st.args}
		}
		b.EvalBatch(ctxTimeout(t, 5*time.Second), calls)
		for i, st := range steps {
			c := calls[i]
			if st.want == nil {
				if c.Err == nil || !a.IsErrorReply(c.Err) {
					t.Errorf("round %d, call %d (%s %v): %#v, %v; want an error reply", round, i, st.script, st.args, c.Reply, c.Err)
				}
				continue
			}
			if status, ok := Status(c.Reply); c.Err != nil || !ok || status != st.want {
				t.Errorf("round %d, call %d (%s %v): %#v, %v; want status %v", round, i, st.script, st.args, c.Reply, c.Err, st.want)
			}
		}
		// The batch is sent with EVALSHA first; after a flush, each
		// script again once with EVAL for each call that needed it.
		wantEval := 0
		if flush {
			wantEval = len(steps)
		}
		if got := commandCalls(t, srv, "eval"); got != wantEval {
			t.Errorf("round %d: %d EVAL calls, want %d", round, got, wantEval)
		}
		if got := commandCalls(t, srv, "evalsha"); got != len(steps) {
			t.Errorf("round %d: %d EVALSHA calls, want %d", round, got, len(steps))
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := []driver.Call{
		{Script: Script(t, "acquire"), Keys: steps[0].keys, Args: steps[0].args},
		{Script: Script(t, "acquire"), Keys: steps[1].keys, Args: steps[1].args},
	}
	b.EvalBatch(ctx, calls)
	for i, c := range calls {
		if c.Err == nil {
			t.Errorf("call %d of a cancelled batch: %#v, want an error", i, c.Reply)
		}
	}
	if v := srv.MustDo(t, "EXISTS", "batch:a", "batch:b"); v != int64(0) {
		t.Errorf("a cancelled batch ran: EXISTS = %#v", v)
	}
}
