package drivertest

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/driver"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/internal/wire"
)

// ExerciseFailover checks n, a node whose client asks the Sentinel
// sentinel for the master it monitors, across a failover that the Sentinel
// makes. master must be that master, and replica its only replica, which
// replicates through the Proxy link. The scripts run on master; a grant
// made while link is cut (its blackhole on) does not reach replica; master
// is killed, and once the Sentinel has promoted replica, n follows it
// there. The acquire script on the promoted replica must report the node
// quarantined when the client asks for a quarantine, although the replica
// is older than every TTL it has seen and has its master's node marker;
// without a quarantine it must grant the lock again, as it lacks the
// grant. It is for an adapter's tests of a Sentinel client that the
// caller made, which Dial cannot check.
func ExerciseFailover(t *testing.T, n driver.Node, master, replica *redistest.Server, link *redistest.Proxy, sentinel *redistest.Server) {
	t.Helper()
	started := time.Now()
	ctx := ctxTimeout(t, 60*time.Second)
	ExerciseScripts(t, n, "lock:sentinel")
	if got := master.MustDo(t, "GET", "lock:sentinel"); got != "tok2" {
		t.Fatalf("the master holds %#v, want tok2", got)
	}

	// Every TTL is short, so that the promoted replica is older than all
	// of them: only the promotion can explain a quarantine.
	const key, ttl = "lock:failover", "500"
	acquire := func(token, quarantine string) (any, error) {
		return eval(ctx, n, step{"acquire", []string{key, wire.MarkerKey(key)}, []string{token, ttl, quarantine}, nil})
	}
	run(t, n, []step{acquireStep(key, "tok0", ttl, granted), releaseStep(key, "tok0", done)})
	if err := replica.CaughtUp(master); err != nil {
		t.Fatal(err)
	}
	if got := replica.MustDo(t, "EXISTS", wire.MarkerKey(key)); got != int64(1) {
		t.Fatal("the node marker did not reach the replica")
	}
	link.SetBlackhole(true)
	if got, err := acquire("tokA", "0"); err != nil || status(got) != granted {
		t.Fatalf("acquire on the master = %#v, %v; want a grant", got, err)
	}

	// The Sentinel must know the replica before the master goes.
	waitFor(t, "Sentinel to know the replica", func() bool {
		v, _ := sentinel.MustDo(t, "SENTINEL", "REPLICAS", masterName(t, sentinel)).([]any)
		return len(v) == 1
	})
	if err := master.Kill(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the Sentinel to promote the replica", func() bool {
		return sentinelMaster(t, sentinel) == replica.Addr() && replicaRole(t, replica) == "master"
	})
	// The replica's process is older than every TTL used, with a second
	// to spare for uptime_in_seconds, which counts whole seconds.
	time.Sleep(time.Until(started.Add(2500 * time.Millisecond)))

	// The client follows the Sentinel; its first calls may fail while it
	// does.
	var got any
	waitFor(t, "the node to reach the promoted replica", func() bool {
		var err error
		got, err = acquire("tokB", ttl)
		return err == nil
	})
	if status(got) != -1 {
		t.Fatalf("acquire with a quarantine on the promoted replica = %#v, want status -1: quarantined", got)
	}
	if v := replica.MustDo(t, "GET", key); v != nil {
		t.Fatalf("the promoted replica holds %#v: its link was not cut", v)
	}
	if got, err := acquire("tokB", "0"); err != nil || status(got) != granted {
		t.Fatalf("acquire without a quarantine on the promoted replica = %#v, %v; want a grant, the one the quarantine refuses", got, err)
	}
}

// status returns the status of a script's reply, or -2 for a reply that
// has none.
func status(reply any) int64 {
	s, ok := Status(reply)
	if !ok {
		return -2
	}
	return s
}

// waitFor polls cond until it holds, and fails t after 20s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s after 20s", what)
		}
	}
}

// masterName returns the name of the one master sentinel monitors.
func masterName(t *testing.T, sentinel *redistest.Server) string {
	t.Helper()
	masters, _ := sentinel.MustDo(t, "SENTINEL", "MASTERS").([]any)
	if len(masters) != 1 {
		t.Fatalf("the Sentinel monitors %d masters, want 1", len(masters))
	}
	fields, _ := masters[0].([]any)
	for i := 0; i+1 < len(fields); i += 2 {
		if fields[i] == "name" {
			name, _ := fields[i+1].(string)
			return name
		}
	}
	t.Fatalf("SENTINEL MASTERS answered %#v", masters)
	return ""
}

// sentinelMaster returns the address sentinel gives for its master.
func sentinelMaster(t *testing.T, sentinel *redistest.Server) string {
	t.Helper()
	v, _ := sentinel.MustDo(t, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", masterName(t, sentinel)).([]any)
	if len(v) != 2 {
		return ""
	}
	host, _ := v[0].(string)
	port, _ := v[1].(string)
	return net.JoinHostPort(host, port)
}

// replicaRole returns the role that srv's INFO replication reports.
func replicaRole(t *testing.T, srv *redistest.Server) string {
	t.Helper()
	info, _ := srv.MustDo(t, "INFO", "replication").(string)
	for line := range strings.Lines(info) {
		if role, ok := strings.CutPrefix(strings.TrimSpace(line), "role:"); ok {
			return role
		}
	}
	return ""
}
