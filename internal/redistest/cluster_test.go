package redistest

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// expectMoved fails t unless s answers command with a MOVED redirection to
// slot on the master to.
func expectMoved(t *testing.T, s *Server, slot int, to *Server, args ...string) {
	t.Helper()
	_, err := s.Do(args...)
	var e Error
	if !errors.As(err, &e) {
		t.Fatalf("%s on %s: %v, want a MOVED error", args[0], s.Addr(), err)
	}
	if want := "MOVED " + strconv.Itoa(slot) + " " + to.Addr(); string(e) != want {
		t.Fatalf("%s on %s: %q, want %q", args[0], s.Addr(), e, want)
	}
}

// clusterInfo returns the fields of CLUSTER INFO on s.
func clusterInfo(t *testing.T, s *Server) map[string]string {
	t.Helper()
	text, _ := s.MustDo(t, "CLUSTER", "INFO").(string)
	fields := make(map[string]string)
	for line := range strings.Lines(text) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	return fields
}

func TestCluster(t *testing.T) {
	t.Parallel()
	c := StartCluster(t, 3, Config{})
	masters := c.Masters()
	if len(masters) != 3 {
		t.Fatalf("%d masters", len(masters))
	}
	addrs := c.Addrs()
	if want := "redis://" + addrs[0] + "?addr=" + addrs[1] + "&addr=" + addrs[2]; c.URL() != want {
		t.Errorf("URL() = %q, want %q", c.URL(), want)
	}
	for i, m := range masters {
		if m.Addr() != addrs[i] || addrs[i] == addrs[(i+1)%3] {
			t.Errorf("master %d: Addr %q, Addrs %q", i, m.Addr(), addrs)
		}
		info := clusterInfo(t, m)
		for k, want := range map[string]string{
			"cluster_state":          "ok",
			"cluster_slots_assigned": "16384",
			"cluster_slots_ok":       "16384",
			"cluster_known_nodes":    "3",
			"cluster_size":           "3",
		} {
			if info[k] != want {
				t.Errorf("master %d: %s:%s, want %s", i, k, info[k], want)
			}
		}
		if _, err := os.Stat(filepath.Join(m.dir, "nodes.conf")); err != nil {
			t.Errorf("master %d: %v", i, err)
		}
	}
	// Each master serves a third of the slots, in order, and redirects
	// the others.
	for _, tt := range []struct {
		slot   int
		master int
	}{{0, 0}, {5460, 0}, {5461, 1}, {10921, 1}, {10922, 2}, {16383, 2}} {
		if got := c.Owner(tt.slot); got != masters[tt.master] {
			t.Errorf("Owner(%d) = %s, want master %d", tt.slot, got.Addr(), tt.master)
		}
	}
	for _, key := range []string{"a", "b", "c", "{user1000}.following", "\xff\x00"} {
		slot, err := c.Slot(key)
		if err != nil {
			t.Fatal(err)
		}
		owner, err := c.MasterOf(key)
		if err != nil {
			t.Fatal(err)
		}
		if owner != c.Owner(slot) {
			t.Errorf("MasterOf(%q) is not Owner(%d)", key, slot)
		}
		expectDo(t, owner, "OK", "SET", key, "v")
		for _, m := range masters {
			if m != owner {
				expectMoved(t, m, slot, owner, "GET", key)
			}
		}
	}
}

func TestClusterUnix(t *testing.T) {
	t.Parallel()
	c, err := NewCluster(1, Config{Unix: true})
	if err == nil {
		c.Close()
		t.Fatal("NewCluster with Config.Unix succeeded")
	}
	if _, err := NewCluster(0, Config{}); err == nil {
		t.Fatal("NewCluster of no masters succeeded")
	}
}

// TestClusterKillAndRestart checks that a master killed and restarted
// comes back empty, with its node ID and its slots.
func TestClusterKillAndRestart(t *testing.T) {
	t.Parallel()
	c := StartCluster(t, 3, Config{})
	const key = "restart"
	owner, err := c.MasterOf(key)
	if err != nil {
		t.Fatal(err)
	}
	slot, _ := c.Slot(key)
	expectDo(t, owner, "OK", "SET", key, "v")
	id := owner.MustDo(t, "CLUSTER", "MYID")
	pid := owner.PID()
	if err := c.KillAndRestart(owner); err != nil {
		t.Fatal(err)
	}
	if owner.PID() == pid {
		t.Fatal("the master runs in the same process after KillAndRestart")
	}
	expectGone(t, pid)
	expectDo(t, owner, id, "CLUSTER", "MYID")
	expectDo(t, owner, nil, "GET", key) // empty, and still serving the slot
	expectDo(t, owner, "OK", "SET", key, "w")
	if info := clusterInfo(t, owner); info["cluster_state"] != "ok" || info["cluster_known_nodes"] != "3" {
		t.Fatalf("after the restart: %v", info)
	}
	for _, m := range c.Masters() {
		if m != owner {
			expectMoved(t, m, slot, owner, "GET", key)
		}
	}
}

// TestClusterMoveSlot moves a slot with its keys from one master to
// another and back.
func TestClusterMoveSlot(t *testing.T) {
	t.Parallel()
	c := StartCluster(t, 3, Config{})
	masters := c.Masters()
	const key = "{moved}a"
	slot, err := c.Slot(key)
	if err != nil {
		t.Fatal(err)
	}
	from := c.Owner(slot)
	to := masters[0]
	if to == from {
		to = masters[1]
	}
	// More keys than one MIGRATE moves, one of them with an expiry.
	expectDo(t, from, "OK", "SET", key, "v", "PX", "600000")
	for i := range migrateBatch + 5 {
		expectDo(t, from, int64(1), "SADD", "{moved}set"+strconv.Itoa(i), "m")
	}
	other, _ := c.Slot("{other}")
	otherOwner := c.Owner(other)
	if err := c.MoveSlot(slot, to); err != nil {
		t.Fatal(err)
	}
	if c.Owner(slot) != to {
		t.Fatalf("Owner(%d) is not the master the slot moved to", slot)
	}
	expectDo(t, to, "v", "GET", key)
	if ttl, _ := to.MustDo(t, "PTTL", key).(int64); ttl <= 0 || ttl > 600000 {
		t.Fatalf("PTTL after the move: %d", ttl)
	}
	expectDo(t, to, int64(migrateBatch+6), "CLUSTER", "COUNTKEYSINSLOT", strconv.Itoa(slot))
	expectDo(t, from, int64(0), "CLUSTER", "COUNTKEYSINSLOT", strconv.Itoa(slot))
	for _, m := range masters {
		if m != to {
			expectMoved(t, m, slot, to, "GET", key)
		}
	}
	// Only the one slot moved.
	if c.Owner(other) != otherOwner {
		t.Fatalf("slot %d moved too", other)
	}
	expectDo(t, otherOwner, nil, "GET", "{other}")
	if err := c.MoveSlot(slot, from); err != nil {
		t.Fatal(err)
	}
	expectDo(t, from, "v", "GET", key)
	expectMoved(t, to, slot, from, "GET", key)
	if err := c.MoveSlot(slot, from); err != nil {
		t.Fatalf("MoveSlot to the owner: %v", err)
	}
	if err := c.MoveSlot(slot, StartN(t, 1, Config{})[0]); err == nil {
		t.Fatal("MoveSlot to a server outside the cluster succeeded")
	}
}

// TestClusterBeginMove checks a slot in the middle of a move: its old
// owner serves the keys it has, redirects those it has none of with ASK,
// and answers TRYAGAIN for commands with some of each.
func TestClusterBeginMove(t *testing.T) {
	t.Parallel()
	c := StartCluster(t, 2, Config{})
	const a, b, absent = "{m}a", "{m}b", "{m}absent"
	slot, err := c.Slot(a)
	if err != nil {
		t.Fatal(err)
	}
	from := c.Owner(slot)
	to := c.Masters()[0]
	if to == from {
		to = c.Masters()[1]
	}
	if m, err := c.BeginMove(slot, from); m != nil || err != nil {
		t.Fatalf("BeginMove to the owner = %v, %v; want nothing to do", m, err)
	}
	expectDo(t, from, "OK", "MSET", a, "1", b, "2")
	m, err := c.BeginMove(slot, to)
	if err != nil {
		t.Fatal(err)
	}
	expectDo(t, from, "1", "GET", a)
	ask := "ASK " + strconv.Itoa(slot) + " " + to.Addr()
	if _, err := from.Do("GET", absent); err == nil || err.Error() != ask {
		t.Fatalf("GET of a key the old owner lacks: %v, want %q", err, ask)
	}
	if n, err := m.Migrate(1); n != 1 || err != nil {
		t.Fatalf("Migrate(1) = %d, %v", n, err)
	}
	if _, err := from.Do("MGET", a, b); err == nil || !strings.HasPrefix(err.Error(), "TRYAGAIN") {
		t.Fatalf("MGET of a moved and a staying key: %v, want TRYAGAIN", err)
	}
	if err := m.Finish(); err != nil {
		t.Fatal(err)
	}
	if c.Owner(slot) != to {
		t.Fatal("Owner after Finish is not the new owner")
	}
	expectDo(t, to, []any{"1", "2"}, "MGET", a, b)
	if _, err := m.Migrate(1); err == nil {
		t.Fatal("Migrate after Finish succeeded")
	}
	if err := m.Finish(); err == nil {
		t.Fatal("a second Finish succeeded")
	}
	if err := c.MoveSlot(slot, from); err != nil { // the move left no lock behind
		t.Fatal(err)
	}
}
