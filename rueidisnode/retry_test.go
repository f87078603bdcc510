package rueidisnode_test

import (
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/redistest"
)

// runs reports whether args runs s, by EVALSHA or EVAL.
func runs(args []string, s *redlock.Script) bool {
	if len(args) < 2 {
		return false
	}
	switch strings.ToUpper(args[0]) {
	case "EVALSHA":
		return args[1] == s.SHA1()
	case "EVAL":
		return args[1] == s.Source()
	}
	return false
}

// TestDialDoesNotRetry checks that a dialled client reports a lost reply
// instead of sending the command again.
func TestDialDoesNotRetry(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Config{})
	proxy := redistest.StartProxy(t, srv)
	release := script(t, "release")
	srv.MustDo(t, "SCRIPT", "LOAD", release.Source()) // so that EVALSHA applies it
	n := dial(t, proxy.URL())
	run(t, n, []step{{"acquire", "lock:noretry", []string{"tok", "60000"}, granted}})

	proxy.DropReplies(1, func(args []string) bool { return runs(args, release) })
	ctx := ctxTimeout(t, 5*time.Second)
	if got, err := n.Eval(ctx, release, []string{"lock:noretry"}, []string{"tok"}); err == nil {
		t.Fatalf("release with its reply lost = %#v, want an error", got)
	}
	if d := proxy.Dropped(); d != 1 {
		t.Fatalf("proxy dropped %d replies, want 1", d)
	}
	// The release was applied once; the node works again afterwards.
	run(t, n, []step{{"release", "lock:noretry", []string{"tok"}, zero}})
}
