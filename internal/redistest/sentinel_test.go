package redistest

import (
	"net"
	"testing"
	"time"
)

// masterAddr asks sentinel which address serves name.
func masterAddr(t *testing.T, sentinel *Server, name string) string {
	t.Helper()
	v, ok := sentinel.MustDo(t, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", name).([]any)
	if !ok || len(v) != 2 {
		t.Fatalf("SENTINEL GET-MASTER-ADDR-BY-NAME answered %#v", v)
	}
	host, _ := v[0].(string)
	port, _ := v[1].(string)
	return net.JoinHostPort(host, port)
}

// TestSentinel checks that a Sentinel fails a master over to its replica
// once the master is gone.
func TestSentinel(t *testing.T) {
	t.Parallel()
	master := Start(t, Config{})
	replica := StartReplica(t, master, nil, Config{})
	s := StartSentinel(t, "m", master, Config{})
	if got := masterAddr(t, s, "m"); got != master.Addr() {
		t.Fatalf("Sentinel names %s the master, want %s", got, master.Addr())
	}
	if _, err := NewSentinel("m", Start(t, Config{Unix: true}), Config{}); err == nil {
		t.Fatal("NewSentinel of a master on a unix socket succeeded")
	}
	// Sentinel learns the replica from the master before it can promote
	// it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(pollInterval) {
		if v, _ := s.MustDo(t, "SENTINEL", "REPLICAS", "m").([]any); len(v) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Sentinel does not know the replica after 10s")
		}
	}
	expectDo(t, master, "OK", "SET", "k", "v")
	if err := replica.CaughtUp(master); err != nil {
		t.Fatal(err)
	}
	if err := master.Kill(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); masterAddr(t, s, "m") != replica.Addr(); time.Sleep(pollInterval) {
		if time.Now().After(deadline) {
			t.Fatal("Sentinel has not failed the master over to its replica after 20s")
		}
	}
	for deadline := time.Now().Add(10 * time.Second); replicationField(t, replica, "role") != "master"; time.Sleep(pollInterval) {
		if time.Now().After(deadline) {
			t.Fatal("the replica Sentinel names the master is not one")
		}
	}
	expectDo(t, replica, "v", "GET", "k")
	expectDo(t, replica, "OK", "SET", "k", "w")
}
