package redistest

import (
	"strings"
	"testing"
	"time"
)

// replicationField returns one field of s's INFO replication.
func replicationField(t *testing.T, s *Server, field string) string {
	t.Helper()
	info, err := s.replication()
	if err != nil {
		t.Fatal(err)
	}
	return info[field]
}

// expectReadOnly fails t unless s refuses a write as a replica does.
func expectReadOnly(t *testing.T, s *Server) {
	t.Helper()
	if _, err := s.Do("SET", "write", "x"); err == nil || !strings.HasPrefix(err.Error(), "READONLY") {
		t.Fatalf("a write to the replica: %v, want a READONLY error", err)
	}
}

func TestReplica(t *testing.T) {
	t.Parallel()
	master := Start(t, Config{})
	expectDo(t, master, "OK", "SET", "before", "1") // sent with the first sync
	replica := StartReplica(t, master, nil, Config{})
	if got := replicationField(t, replica, "role"); got != "slave" {
		t.Fatalf("role %q", got)
	}
	expectDo(t, replica, "1", "GET", "before")
	expectReadOnly(t, replica)
	expectDo(t, master, "OK", "SET", "after", "2", "PX", "600000")
	if err := replica.CaughtUp(master); err != nil {
		t.Fatal(err)
	}
	expectDo(t, replica, "2", "GET", "after")

	oldID := replicationField(t, replica, "master_replid")
	if got := replicationField(t, replica, "second_repl_offset"); got != "-1" {
		t.Fatalf("second_repl_offset %s before the promotion", got)
	}
	if err := replica.Promote(); err != nil {
		t.Fatal(err)
	}
	if got := replicationField(t, replica, "role"); got != "master" {
		t.Fatalf("role %q after Promote", got)
	}
	// A promotion renews the replication ID and remembers the old one.
	if id := replicationField(t, replica, "master_replid"); id == oldID {
		t.Fatal("the replication ID did not change with the promotion")
	}
	if got := replicationField(t, replica, "master_replid2"); got != oldID {
		t.Fatalf("master_replid2 %q, want the old ID %q", got, oldID)
	}
	if got := replicationField(t, replica, "second_repl_offset"); got == "-1" {
		t.Fatal("second_repl_offset is -1 after the promotion")
	}
	expectDo(t, replica, "2", "GET", "after")
	expectDo(t, replica, "OK", "SET", "write", "x")
	if err := replica.Promote(); err == nil {
		t.Fatal("Promote of a master succeeded")
	}
	expectDo(t, master, nil, "GET", "write") // no longer linked
}

// TestReplicaThroughProxy replicates a master on a unix socket through a
// Proxy, cuts the link with the blackhole, and checks that the replica
// neither gets the master's writes nor sees the link go down, that it
// catches up once the link is back, and that a replica promoted while its
// link is cut lacks what the master wrote meanwhile.
func TestReplicaThroughProxy(t *testing.T) {
	t.Parallel()
	master := Start(t, Config{Unix: true})
	if err := Start(t, Config{}).ReplicaOf(master, nil); err == nil {
		t.Fatal("ReplicaOf a unix socket without a Proxy succeeded")
	}
	expectDo(t, master, "OK", "SET", "before", "1")
	link := StartProxy(t, master)
	if err := Start(t, Config{}).ReplicaOf(master, StartProxy(t, Start(t, Config{}))); err == nil {
		t.Fatal("ReplicaOf through a Proxy to another server succeeded")
	}
	replica := StartReplica(t, master, link, Config{})
	expectDo(t, replica, "1", "GET", "before")
	expectDo(t, master, "OK", "SET", "linked", "2")
	if err := replica.CaughtUp(master); err != nil {
		t.Fatal(err)
	}
	expectDo(t, replica, "2", "GET", "linked")

	link.SetBlackhole(true)
	expectDo(t, master, "OK", "SET", "cut", "3")
	// Long enough for the write to arrive, were it relayed; the assertion
	// holds however long the test waits.
	time.Sleep(300 * time.Millisecond)
	expectDo(t, replica, nil, "GET", "cut")
	if got := replicationField(t, replica, "master_link_status"); got != "up" {
		t.Fatalf("master_link_status %q while the link is cut: the replica should not notice", got)
	}
	link.SetBlackhole(false) // closes the link; the replica reconnects
	if err := replica.CaughtUp(master); err != nil {
		t.Fatal(err)
	}
	expectDo(t, replica, "3", "GET", "cut")

	link.SetBlackhole(true)
	expectDo(t, master, "OK", "SET", "lost", "4")
	time.Sleep(300 * time.Millisecond)
	if err := replica.Promote(); err != nil {
		t.Fatal(err)
	}
	expectDo(t, replica, nil, "GET", "lost")
	expectDo(t, replica, "3", "GET", "cut")
	expectDo(t, replica, "OK", "SET", "own", "5")
	if got := replicationField(t, replica, "second_repl_offset"); got == "-1" {
		t.Fatal("second_repl_offset is -1 after the promotion")
	}
}
