package main

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/internal/wire"
)

func TestDoctorHealthy(t *testing.T) {
	t.Parallel()
	srv := redistest.StartN(t, 3, redistest.Config{})
	r := run(t, "doctor", nodesFlag(srv...))
	expect(t, r, 0, "HEALTHY: 3 of 3 nodes healthy, quorum 2", "round trip", "Redis 7", "independent master",
		"persistence", "noeviction", "clock offset", "up ", "votes")
	if strings.Contains(r.stdout, "WARN") || strings.Contains(r.stdout, "ERROR") {
		t.Fatalf("warnings on healthy nodes:\n%s", r)
	}

	var rep doctorReport
	r = run(t, "doctor", "--json", nodesFlag(srv...))
	expect(t, r, 0)
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, r)
	}
	if rep.Verdict != "healthy" || rep.Healthy != 3 || rep.Quorum != 2 || len(rep.Nodes) != 3 {
		t.Fatalf("doctor --json: unexpected report:\n%s", r)
	}
	for _, n := range rep.Nodes {
		if !n.Reachable || n.Role != "master" || n.MaxmemoryPolicy != "noeviction" || n.AppendOnly != "no" || n.Version == "" {
			t.Fatalf("doctor --json: unexpected node %+v", n)
		}
	}
}

// An allkeys-* eviction policy is an error, a replica is an error, a master
// with replicas is listed with them, and a server named twice is an error.
func TestDoctorFlagsProblems(t *testing.T) {
	t.Parallel()
	evicting := redistest.Start(t, redistest.Config{Args: []string{"--maxmemory-policy", "allkeys-lru"}})
	master := redistest.Start(t, redistest.Config{})
	replica := redistest.Start(t, redistest.Config{})
	host, port, _ := strings.Cut(master.Addr(), ":")
	replica.MustDo(t, "REPLICAOF", host, port)
	waitFor(t, 30*time.Second, "the replica to connect", func() bool {
		v, err := master.Do("INFO", "replication")
		s, _ := v.(string)
		return err == nil && strings.Contains(s, "connected_slaves:1")
	})
	ok := redistest.StartN(t, 2, redistest.Config{})

	// Three healthy nodes of five: a quorum, with problems.
	r := run(t, "doctor", nodesFlag(evicting, master, replica, ok[0], ok[1]))
	expect(t, r, exitFailure,
		"ERROR  eviction", "maxmemory-policy allkeys-lru can evict lock keys",
		"ERROR  role", "a replica of "+master.Addr(), "READONLY", "OK     role         a master with 1 replica", "INFO   replicas",
		"USABLE WITH WARNINGS")

	var rep doctorReport
	r = run(t, "doctor", "--json", nodesFlag(evicting, master, replica, ok[0], ok[1]))
	expect(t, r, exitFailure)
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, r)
	}
	levels := func(n nodeReport, check string) string {
		for _, f := range n.Findings {
			if f.Check == check {
				return f.Level
			}
		}
		return ""
	}
	switch {
	case rep.Verdict != "degraded":
		t.Fatalf("verdict %q, want degraded:\n%s", rep.Verdict, r.stdout)
	case levels(rep.Nodes[0], "eviction") != levelError || rep.Nodes[0].Healthy:
		t.Fatalf("the allkeys-lru node is not flagged as an error:\n%s", r.stdout)
	case levels(rep.Nodes[1], "replicas") != levelInfo || rep.Nodes[1].Replicas != 1 || len(rep.Nodes[1].ReplicaList) != 1:
		t.Fatalf("the master with a replica is not flagged:\n%s", r.stdout)
	case levels(rep.Nodes[2], "role") != levelError || rep.Nodes[2].Role != "slave" || rep.Nodes[2].Healthy:
		t.Fatalf("the replica is not flagged:\n%s", r.stdout)
	}

	// Without a quorum of healthy nodes the verdict fails.
	r = run(t, "doctor", nodesFlag(evicting, replica, ok[0]))
	expect(t, r, exitNoQuorum, "NO QUORUM")

	// One server under two URLs would vote twice: the lock client refuses
	// them, and doctor calls them unusable.
	r = run(t, "doctor", "--nodes", ok[0].URL()+"/0,"+ok[0].URL()+"/1,"+ok[1].URL())
	expect(t, r, exitUsage, "ERROR  independence", "the same Redis server as", "UNUSABLE")
}

// Unreachable nodes are errors; the verdict counts the rest.
func TestDoctorUnreachable(t *testing.T) {
	t.Parallel()
	srv := redistest.StartN(t, 3, redistest.Config{})
	if err := srv[2].Kill(); err != nil {
		t.Fatal(err)
	}
	expect(t, run(t, "doctor", nodesFlag(srv...)), exitFailure, "ERROR  reachable", "connection refused", "2 of 3 nodes healthy")
	if err := srv[1].Kill(); err != nil {
		t.Fatal(err)
	}
	expect(t, run(t, "doctor", nodesFlag(srv...)), exitNoQuorum, "NO QUORUM: 1 of 3 nodes healthy, 2 needed")
}

// Persistence that lets a restarted node vote without its keys is a
// warning; appendfsync always is fine.
func TestDoctorPersistence(t *testing.T) {
	t.Parallel()
	always := redistest.Start(t, redistest.Config{Persistence: true})
	everysec := redistest.Start(t, redistest.Config{Args: []string{"--appendonly", "yes", "--appendfsync", "everysec"}})
	rdb := redistest.Start(t, redistest.Config{Args: []string{"--save", "3600 1"}})
	r := run(t, "doctor", nodesFlag(always, everysec, rdb))
	expect(t, r, exitFailure, "appendfsync always: lock keys survive restarts",
		"appendfsync everysec: after a crash", `RDB snapshots (save "3600 1")`)
}

// nodeMicros returns the clock of the redis-server s in microseconds.
func nodeMicros(t *testing.T, s *redistest.Server) int64 {
	t.Helper()
	v, _ := s.MustDo(t, "TIME").([]any)
	if len(v) != 2 {
		t.Fatalf("TIME: %v", v)
	}
	sec, err1 := strconv.ParseInt(fmt.Sprint(v[0]), 10, 64)
	usec, err2 := strconv.ParseInt(fmt.Sprint(v[1]), 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("TIME: %v", v)
	}
	return sec*1e6 + usec
}

// A node marker (format 1) that holds its slot back for longer than the
// maximum TTL (1h) is an error while its quiet does so now, and a warning
// when its until, or its until2 and ttl2, would after a restart; a
// horizon within the maximum TTL is no finding. The recovery that doctor
// and docs/security.md give, HDEL of the fields doctor names, clears it.
// Issue 31, item 2.
func TestDoctorOversizedMarker(t *testing.T) {
	t.Parallel()
	srv := redistest.StartN(t, 3, redistest.Config{})
	nodes := nodesFlag(srv...)
	marker := wire.MarkerKey("nightly-report")
	us := func(i int, d time.Duration) string {
		return strconv.FormatInt(nodeMicros(t, srv[i])+d.Microseconds(), 10)
	}
	who := strings.Repeat("Tok3n_", 5) + "xy nightly"
	// Node 0: in a quarantine that ends in 100h: held back now.
	srv[0].MustDo(t, "HSET", marker, "quiet", us(0, 100*time.Hour))
	// Node 1: a 3h grant that it has not seen released: held back only
	// after a restart or a promotion. Its quiet (30 minutes) and its
	// until2 (3h ahead, but with a ttl2 of 30 minutes) are within the
	// maximum TTL.
	srv[1].MustDo(t, "HSET", marker, "until", us(1, 3*time.Hour), "who", who,
		"quiet", us(1, 30*time.Minute), "until2", us(1, 3*time.Hour), "ttl2", "1800000")
	r := run(t, "doctor", nodes)
	expect(t, r, exitFailure, "ERROR  markers", "WARN   markers",
		"1 node marker(s) hold their slots back longer than the maximum TTL (1h0m0s)", "1 of them hold their slots back now",
		marker+" (slot ", "holds the slot back for ", "HDEL "+marker+" quiet.",
		"would hold it back for ", `(until: the grant of holder `+wire.TokenID(who)+`, owner "nightly")`,
		"HDEL "+marker+" until who.", "USABLE WITH WARNINGS: 2 of 3 nodes healthy")
	if strings.Contains(r.stdout, wire.Token(who)) {
		t.Fatalf("doctor shows the token of the grant:\n%s", r)
	}

	// A quiet too large for a float64 is above any limit too, and so are
	// an until2 and a ttl2 of 3h: with them on a third node no quorum is
	// healthy.
	srv[2].MustDo(t, "HSET", marker, "quiet", "1e400", "until2", us(2, 3*time.Hour), "ttl2", "10800000")
	r = run(t, "doctor", "--json", nodes)
	expect(t, r, exitNoQuorum)
	var rep doctorReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, r)
	}
	remove := [][]string{{"quiet"}, {"until", "who"}, {"quiet", "until2", "ttl2"}}
	limit := time.Hour.Milliseconds()
	for i, n := range rep.Nodes {
		if len(n.OversizedMarkers) != 1 || n.Healthy != (i == 1) {
			t.Fatalf("doctor --json: node %d: %+v\n%s", i, n, r.stdout)
		}
		m := n.OversizedMarkers[0]
		if m.Key != marker || m.Slot != int(wire.Slot("nightly-report")) || !slices.Equal(m.Remove, remove[i]) ||
			(m.HeldBackMs > limit) != (i != 1) || (m.AfterRestartMs > limit) != (i != 0) {
			t.Fatalf("doctor --json: node %d: %+v\n%s", i, m, r.stdout)
		}
	}
	// The holds are those set above, less the time that passed since (a
	// minute at most, far more than a doctor run takes).
	if m := rep.Nodes[0].OversizedMarkers[0]; m.HeldBackMs > 100*limit || m.HeldBackMs < 100*limit-60000 || m.AfterRestartMs != 0 {
		t.Fatalf("doctor --json: node 0: %+v", m)
	}
	if m := rep.Nodes[1].OversizedMarkers[0]; m.Holder != wire.TokenID(who) || m.Owner != "nightly" || m.HeldBackMs > limit ||
		m.AfterRestartMs > 3*limit || m.AfterRestartMs < 3*limit-60000 {
		t.Fatalf("doctor --json: node 1: %+v", m)
	}
	if m := rep.Nodes[2].OversizedMarkers[0]; m.Quiet != "1e400" || m.HeldBackMs != math.MaxInt64 || m.AfterRestartMs > 3*limit {
		t.Fatalf("doctor --json: node 2: %+v", m)
	}
	if rep.Verdict != "failing" || strings.Contains(r.stdout, wire.Token(who)) {
		t.Fatalf("doctor --json: unexpected report:\n%s", r.stdout)
	}

	// The recovery: HDEL of the fields doctor names.
	for i, s := range srv {
		s.MustDo(t, append([]string{"HDEL", marker}, rep.Nodes[i].OversizedMarkers[0].Remove...)...)
	}
	r = run(t, "doctor", nodes)
	expect(t, r, 0, "HEALTHY", "node marker(s), none with a TTL above the maximum")
}

// In a cluster named as one node, each master's markers are read, those
// of its own slots: an oversized one is a finding of that master.
func TestDoctorClusterOversizedMarker(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3, redistest.Config{})
	m, err := cl.MasterOf("nightly-report")
	if err != nil {
		t.Fatal(err)
	}
	marker := wire.MarkerKey("nightly-report")
	m.MustDo(t, "HSET", marker, "until", strconv.FormatInt(nodeMicros(t, m)+(2*time.Hour).Microseconds(), 10),
		"who", strings.Repeat("Tok3n_", 5)+"xy nightly")
	r := run(t, "doctor", "--nodes", cl.URL())
	expect(t, r, exitFailure, "    WARN   markers      1 node marker(s) hold their slots back longer than the maximum TTL", marker,
		"HDEL "+marker+" until who", "USABLE WITH WARNINGS")
	if n := strings.Count(r.stdout, "OK     markers      no node marker holds"); n != 2 {
		t.Fatalf("want the two other masters without oversized markers, got %d:\n%s", n, r)
	}
}
