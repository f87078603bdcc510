package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/redistest"
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

	// One server under two URLs would vote twice.
	r = run(t, "doctor", "--nodes", ok[0].URL()+"/0,"+ok[0].URL()+"/1,"+ok[1].URL())
	expect(t, r, exitFailure, "ERROR  independence", "the same Redis server as")
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
