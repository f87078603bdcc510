package drivertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/quorumlock/redlock/driver"
	"github.com/quorumlock/redlock/internal/redistest"
)

// ExerciseCluster checks n, a node whose client talks to the Redis Cluster
// cl, below the lock algorithm: every script of the lock client runs, as
// [ExerciseScripts] runs them, on keys of every shape that Redis Cluster
// hashes differently (hash tags, braces that make no tag, UTF-8, bytes
// that are not), and each key lands on the master of its slot; if n is a
// [driver.Batcher], one batch of calls on keys in every master's slots
// gets a grant for each, also after the masters' script caches are
// flushed; and if n is a [driver.Notifier], a message published on any
// master wakes a subscriber, as a release announces itself to waiters
// anywhere in a cluster. It is for an adapter's tests of a cluster client
// that the caller made, which Dial cannot check.
//
// It leaves keys behind, whose names end with suffix: a test that calls it
// more than once on one cluster passes a different suffix each time.
func ExerciseCluster(t *testing.T, n driver.Node, cl *redistest.Cluster, suffix string) {
	t.Helper()
	ctx := ctxTimeout(t, 30*time.Second)
	masters := make(map[*redistest.Server]bool)
	for _, k := range clusterKeys {
		key := k + suffix
		ExerciseScripts(t, n, key)
		m, err := cl.MasterOf(key)
		if err != nil {
			t.Fatal(err)
		}
		masters[m] = true
		if got := m.MustDo(t, "GET", key); got != "tok2" {
			t.Fatalf("key %q holds %#v on the master of its slot, want tok2", key, got)
		}
	}
	if len(masters) != len(cl.Masters()) {
		t.Fatalf("the keys reached %d of the %d masters", len(masters), len(cl.Masters()))
	}

	// Keys in different slots: the error reply a cluster gives, and no
	// panic, also in a batch beside a call that works.
	cross := acquireStep("{a}"+suffix, "tok", "60000", nil)
	cross.keys[1] = "{b}" + suffix
	expectCrossSlot := func(what string, err error) {
		t.Helper()
		if reply := (*driver.ReplyError)(nil); !errors.As(err, &reply) || reply.Code() != "CROSSSLOT" {
			t.Fatalf("%s of a script whose keys are in two slots: %v, want a *driver.ReplyError with the code CROSSSLOT", what, err)
		}
	}
	_, err := eval(ctx, n, cross)
	expectCrossSlot("Eval", err)
	if b, ok := n.(driver.Batcher); ok {
		fine := acquireStep("{c}"+suffix, "tok", "60000", granted)
		calls := []driver.Call{
			{Script: Script(t, cross.script), Keys: cross.keys, Args: cross.args},
			{Script: Script(t, fine.script), Keys: fine.keys, Args: fine.args},
		}
		b.EvalBatch(ctx, calls)
		expectCrossSlot("EvalBatch", calls[0].Err)
		if status, ok := Status(canonical(calls[1].Reply)); calls[1].Err != nil || !ok || status != granted {
			t.Fatalf("a batched acquire beside one whose keys are in two slots: %#v, %v; want a grant", calls[1].Reply, calls[1].Err)
		}
	}

	if b, ok := n.(driver.Batcher); ok {
		for round, flush := range []bool{false, true} {
			if flush {
				for _, m := range cl.Masters() {
					m.MustDo(t, "SCRIPT", "FLUSH")
				}
			}
			calls := make([]driver.Call, len(clusterKeys))
			for i, k := range clusterKeys {
				st := acquireStep(k+suffix+":batch", "tok", "60000", granted)
				calls[i] = driver.Call{Script: Script(t, st.script), Keys: st.keys, Args: st.args}
			}
			b.EvalBatch(ctx, calls)
			for i, c := range calls {
				if status, ok := Status(canonical(c.Reply)); c.Err != nil || !ok || status != granted {
					t.Fatalf("round %d: batched acquire of %q: %#v, %v; want a grant", round, c.Keys[0], c.Reply, c.Err)
				}
				st := releaseStep(clusterKeys[i]+suffix+":batch", "tok", done)
				calls[i] = driver.Call{Script: Script(t, st.script), Keys: st.keys, Args: st.args}
			}
			b.EvalBatch(ctx, calls)
			for _, c := range calls {
				if status, ok := Status(canonical(c.Reply)); c.Err != nil || !ok || status != done {
					t.Fatalf("round %d: batched release of %q: %#v, %v; want it done", round, c.Keys[0], c.Reply, c.Err)
				}
			}
		}
	}

	if nt, ok := n.(driver.Notifier); ok {
		channel := "redlock:released:" + clusterKeys[0] + suffix
		wake := make(chan struct{}, 1)
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		if err := nt.Notify(sctx, channel, wake); err != nil {
			t.Fatalf("Notify: %v", err)
		}
		for i, m := range cl.Masters() {
			m.MustDo(t, "PUBLISH", channel, "")
			select {
			case <-wake:
			case <-ctx.Done():
				t.Fatalf("no wake after a message published on master %d", i)
			}
		}
	}
}
