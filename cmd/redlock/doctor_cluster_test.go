package main

import (
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
)

// startClusterReplica starts a cluster-enabled redis-server and makes it
// a replica of master, a cluster's master (CLUSTER MEET, CLUSTER
// REPLICATE), and waits until master knows it as its replica and it has
// master's data.
func startClusterReplica(t *testing.T, master *redistest.Server) *redistest.Server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, busPort, _ := net.SplitHostPort(l.Addr().String())
	l.Close()
	r := redistest.Start(t, redistest.Config{Args: []string{
		"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
		"--cluster-port", busPort, "--cluster-node-timeout", "5000",
	}})
	id, _ := master.MustDo(t, "CLUSTER", "MYID").(string)
	nodes, _ := master.MustDo(t, "CLUSTER", "NODES").(string)
	var bus string
	for line := range strings.Lines(nodes) {
		if f := strings.Fields(line); len(f) > 2 && strings.Contains(f[2], "myself") {
			_, bus, _ = strings.Cut(f[1], "@")
			bus, _, _ = strings.Cut(bus, ",")
		}
	}
	host, port, _ := net.SplitHostPort(master.Addr())
	master.MustDo(t, "CONFIG", "SET", "repl-diskless-sync-delay", "0")
	r.MustDo(t, "CLUSTER", "MEET", host, port, bus)
	waitFor(t, 30*time.Second, "the replica to know its master", func() bool {
		_, err := r.Do("CLUSTER", "REPLICATE", id)
		return err == nil
	})
	waitFor(t, 30*time.Second, "the master to know its replica", func() bool {
		for line := range strings.Lines(nodesOf(t, master)) {
			if f := strings.Fields(line); len(f) > 3 && strings.HasPrefix(f[1], r.Addr()+"@") && f[3] == id {
				return true
			}
		}
		return false
	})
	waitFor(t, 30*time.Second, "the replica to synchronize", func() bool {
		v, _ := r.Do("INFO", "replication")
		s, _ := v.(string)
		return strings.Contains(s, "master_link_status:up") && strings.Contains(s, "master_sync_in_progress:0")
	})
	return r
}

// doctorJSON runs doctor --json with args and decodes its report. It
// fails t unless doctor exits with code, if code is not negative.
func doctorJSON(t *testing.T, code int, args ...string) doctorReport {
	t.Helper()
	r := run(t, append([]string{"doctor", "--json"}, args...)...)
	if code >= 0 {
		expect(t, r, code)
	}
	var rep doctorReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, r)
	}
	return rep
}

// A cluster named as one node is reported as a cluster: its state and
// coverage, and each master with its slots, its replicas and the lock
// records of one of its slots. After a failover, the promoted master and
// the slot records that predate the promotion are named, and the lock
// client does keep that slot in quarantine at its first use.
func TestDoctorCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3, redistest.Config{})
	masters := cl.Masters()
	r := run(t, "doctor", "--nodes", cl.URL())
	expect(t, r, 0, "HEALTHY: 1 of 1 nodes healthy, quorum 1",
		"OK     cluster      cluster_state ok: all 16384 slots served by 3 master(s)",
		"master "+masters[0].Addr()+" (slots 0-5460)", "master "+masters[1].Addr()+" (slots 5461-10921)",
		"master "+masters[2].Addr()+" (slots 10922-16383)",
		"a master of the cluster, serving slots 0-5460", "not promoted since its process started", "has no lock records yet")
	if strings.Contains(r.stdout, "WARN") || strings.Contains(r.stdout, "ERROR") {
		t.Fatalf("warnings on a healthy cluster:\n%s", r)
	}
	rep := doctorJSON(t, 0, "--nodes", cl.URL())
	n := rep.Nodes[0]
	if n.Cluster == nil || n.Cluster.State != "ok" || n.Cluster.SlotsOK != 16384 || n.Role != "cluster" || len(n.Masters) != 3 {
		t.Fatalf("doctor --json: unexpected cluster report %+v", n)
	}
	for i, m := range n.Masters {
		if m.Node != masters[i].Addr() || m.Slots == "" || m.RunID == "" || m.Promoted || m.SlotRecords == nil || m.SlotRecords.Present {
			t.Fatalf("doctor --json: master %d: %+v", i, m)
		}
	}

	// A replica for the first master, and a lock in the slot whose
	// records doctor reads there.
	replica := startClusterReplica(t, masters[0])
	key := n.Masters[0].SlotRecords.Key
	expect(t, run(t, "run", "--no-quarantine", "--ttl", "5s", "--nodes", cl.URL(), key, "--", "true"), 0)
	if err := replica.CaughtUp(masters[0]); err != nil {
		t.Fatal(err)
	}
	r = run(t, "doctor", "--nodes", cl.URL())
	expect(t, r, 0, "1 replica(s): "+replica.Addr()+" (online)",
		"slot "+strconv.Itoa(n.Masters[0].SlotRecords.Slot)+"'s records started", "out of quarantine: the slot votes", "largest recent TTL 5s")

	// The replica takes over (without the other masters' votes, which a
	// test cannot wait for); its old master becomes its replica.
	replica.MustDo(t, "CLUSTER", "FAILOVER", "TAKEOVER")
	defer func() {
		if t.Failed() {
			v, _ := replica.Do("INFO", "replication")
			t.Logf("replica: %v\nnodes of masters[1]:\n%s\nreplica nodes:\n%s", v, nodesOf(t, masters[1]), nodesOf(t, replica))
			c, _ := masters[1].Do("CLUSTER", "INFO")
			t.Logf("%v", c)
		}
	}()
	waitFor(t, 30*time.Second, "the failover", func() bool {
		info, _ := replica.Do("INFO", "replication")
		s, _ := info.(string)
		old, _ := masters[0].Do("INFO", "replication")
		o, _ := old.(string)
		if !strings.Contains(s, "role:master") || !strings.Contains(s, "connected_slaves:1") ||
			!strings.Contains(o, "role:slave") || !strings.Contains(o, "master_link_status:up") {
			return false
		}
		// Every node agrees that the cluster is ok, with the new master
		// serving the slots of the old.
		for _, m := range append(masters, replica) {
			v, _ := m.Do("CLUSTER", "INFO")
			if c, _ := v.(string); !strings.Contains(c, "cluster_state:ok") {
				return false
			}
			found := false
			for line := range strings.Lines(nodesOf(t, m)) {
				f := strings.Fields(line)
				found = found || len(f) > 8 && strings.HasPrefix(f[1], replica.Addr()+"@") && strings.Contains(f[2], "master") && f[8] == "0-5460"
			}
			if !found {
				return false
			}
		}
		return true
	})
	waitFor(t, 30*time.Second, "the cluster to agree on the new master", func() bool {
		rep := doctorJSON(t, -1, "--nodes", cl.URL())
		for _, m := range rep.Nodes[0].Masters {
			if m.Node == replica.Addr() {
				return true
			}
		}
		return false
	})
	r = run(t, "doctor", "--nodes", cl.URL())
	expect(t, r, 0, "master "+replica.Addr()+" (slots 0-5460)",
		"promoted from replica to master since its process started",
		"records predate the promotion", "sits out one quarantine at its first use", "largest recent TTL 5s",
		"1 replica(s): "+masters[0].Addr())
	rep = doctorJSON(t, 0, "--nodes", cl.URL())
	if m := rep.Nodes[0].Masters[0]; !m.Promoted || m.SlotRecords == nil || !m.SlotRecords.Stale || !rep.Nodes[0].Promoted {
		t.Fatalf("doctor --json: the promoted master %+v", m)
	}
	// The lock client agrees: the slot is quarantined at its first use.
	r = run(t, "run", "--wait", "0s", "--ttl", "5s", "--nodes", cl.URL(), key, "--", "echo", "must not run")
	expect(t, r, exitUnavailable, "quarantined")
	if strings.Contains(r.stdout, "must not run") {
		t.Fatalf("the command ran:\n%s", r)
	}
}

// nodesOf returns s's CLUSTER NODES.
func nodesOf(t *testing.T, s *redistest.Server) string {
	v, _ := s.Do("CLUSTER", "NODES")
	text, _ := v.(string)
	return text
}

// A cluster node under a URL for one server is an error that names the
// cluster URL form; a cluster that does not serve every slot is an error.
func TestDoctorClusterProblems(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 2, redistest.Config{})
	masters := cl.Masters()
	r := run(t, "doctor", "--nodes", masters[0].URL())
	expect(t, r, exitNoQuorum, "ERROR  role", "a Redis Cluster node under a URL for one server", "?cluster=true")

	// Both masters forget who serves the last slots.
	for _, m := range masters {
		m.MustDo(t, "CLUSTER", "DELSLOTSRANGE", "16000", "16383")
	}
	waitFor(t, 30*time.Second, "the cluster to see the slots unassigned", func() bool {
		for _, m := range masters {
			v, _ := m.Do("CLUSTER", "INFO")
			if s, _ := v.(string); !strings.Contains(s, "cluster_state:fail") {
				return false
			}
		}
		return true
	})
	r = run(t, "doctor", "--nodes", masters[0].URL()+"?cluster=true")
	expect(t, r, exitNoQuorum, "ERROR  cluster", "cluster_state fail: 16000 of 16384 slots assigned", "CLUSTERDOWN")
}

// A master's replicas are listed, and a server promoted from replica since
// it started is named: its slots sit out one quarantine at their first
// use, which --no-quarantine turns off (a warning).
func TestDoctorReplicasAndPromotion(t *testing.T) {
	t.Parallel()
	master := redistest.Start(t, redistest.Config{})
	replica := redistest.StartReplica(t, master, nil, redistest.Config{})
	waitFor(t, 30*time.Second, "the master to see its replica online", func() bool {
		v, _ := master.Do("INFO", "replication")
		s, _ := v.(string)
		return strings.Contains(s, "state=online")
	})
	r := run(t, "doctor", "--nodes", master.URL())
	expect(t, r, 0, "OK     role         a master with 1 replica(s)", "INFO   replicas", "1 replica(s): "+replica.Addr()+" (online)",
		"OK     failover     not promoted since its process started")
	rep := doctorJSON(t, 0, "--nodes", master.URL())
	if n := rep.Nodes[0]; len(n.ReplicaList) != 1 || n.ReplicaList[0].Addr != replica.Addr() || n.ReplicaList[0].State != "online" || n.Promoted {
		t.Fatalf("doctor --json: %+v", n)
	}
	expect(t, run(t, "doctor", "--no-quarantine", "--nodes", master.URL()), exitFailure, "WARN   replicas", "--no-quarantine turns off")

	if err := replica.Promote(); err != nil {
		t.Fatal(err)
	}
	r = run(t, "doctor", "--nodes", replica.URL())
	expect(t, r, 0, "INFO   failover     promoted from replica to master since its process started", "sits out one quarantine at its first use")
	if rep := doctorJSON(t, 0, "--nodes", replica.URL()); !rep.Nodes[0].Promoted {
		t.Fatalf("doctor --json: %+v", rep.Nodes[0])
	}
	expect(t, run(t, "doctor", "--no-quarantine", "--nodes", replica.URL()), exitFailure, "WARN   failover", "--no-quarantine lets it vote at once")
}
