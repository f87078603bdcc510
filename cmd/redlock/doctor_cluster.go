package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quorumlock/redlock/internal/wire"
	"github.com/redis/go-redis/v9"
)

// This file holds the checks of doctor that concern replication and Redis
// Cluster: a node's replicas, whether it was promoted from replica to
// master (the failover quarantine), and for a node that is a whole
// cluster, the cluster's state and each of its masters.

// A clusterReport is the state of a Redis Cluster that is one node, as
// CLUSTER INFO tells it.
type clusterReport struct {
	State         string `json:"state"` // cluster_state: ok or fail
	SlotsAssigned int    `json:"slots_assigned"`
	SlotsOK       int    `json:"slots_ok"`
	SlotsPFail    int    `json:"slots_pfail"`
	SlotsFail     int    `json:"slots_fail"`
	KnownNodes    int    `json:"known_nodes"`
	Size          int    `json:"size"` // masters serving slots
}

// A replicaReport is one replica of a master.
type replicaReport struct {
	Addr  string `json:"addr"`
	State string `json:"state"`           // INFO replication's state (online, ...), or a cluster node's link state
	Lag   int64  `json:"lag_s"`           // seconds since its last acknowledgement (plain nodes)
	Flags string `json:"flags,omitempty"` // a cluster replica's flags (fail, pfail, ...)
}

// A slotRecords is what a master holds in the lock client's records of
// one hash slot (see wire.MarkerKey): when the slot's records saw the
// process start or the promotion, how long a lock granted in the slot may
// still be held, and the replication ID they last saw.
type slotRecords struct {
	Slot       int    `json:"slot"`
	Key        string `json:"key"`              // a key of the slot, whose records were read
	Present    bool   `json:"present"`          // the slot has records
	AgeSeconds int64  `json:"age_s,omitempty"`  // since the records' start
	HeldMs     int64  `json:"held_ms"`          // how long a lock granted in the slot may still be held: what a restart or a promotion now would make it sit out
	TTL2Ms     int64  `json:"ttl2_ms"`          // the largest TTL of the slot's recent grants (the records' ttl2), but for its longest
	ReplID     string `json:"replid,omitempty"` // the replication ID the records last saw
	Stale      bool   `json:"stale"`            // they saw another ID, on a promoted master: the slot quarantines at its first use
	Remaining  int64  `json:"quarantine_ms"`    // how long the slot is still in quarantine, by its own records (their quiet)
}

// replicasOf returns the replicas that a master's INFO replication lists
// (slave0:ip=...,port=...,state=online,offset=...,lag=...).
func replicasOf(info map[string]string) []replicaReport {
	var out []replicaReport
	for i := 0; ; i++ {
		v, ok := info["slave"+strconv.Itoa(i)]
		if !ok {
			return out
		}
		f := map[string]string{}
		for _, kv := range strings.Split(v, ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				f[k] = v
			}
		}
		out = append(out, replicaReport{Addr: f["ip"] + ":" + f["port"], State: f["state"], Lag: atoi(f["lag"])})
	}
}

// replicaText lists replicas for people.
func replicaText(rs []replicaReport) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.Addr + " (" + r.State
		if r.Flags != "" {
			parts[i] += ", " + r.Flags
		}
		parts[i] += ")"
	}
	return strings.Join(parts, ", ")
}

// checkReplication reports a master's replicas and whether it was
// promoted from replica to master since its process started, which the
// lock client answers with a quarantine of each slot at its first use
// (the failover quarantine), unless quarantine is off.
func checkReplication(n *nodeReport, info map[string]string, noQuarantine bool) {
	if n.Role != "master" {
		return
	}
	if n.ReplicaList == nil {
		n.ReplicaList = replicasOf(info)
	}
	if len(n.ReplicaList) > 0 {
		if noQuarantine {
			n.add(levelWarn, "replicas", "%d replica(s): %s; a failover to one may promote a replica that missed the latest grants, and --no-quarantine turns off the quarantine that keeps it from granting them again",
				len(n.ReplicaList), replicaText(n.ReplicaList))
		} else {
			n.add(levelInfo, "replicas", "%d replica(s): %s; a replica promoted by a failover sees its new replication ID and sits out one quarantine per slot before it votes (a switch to a server that never replicated this one goes unseen)",
				len(n.ReplicaList), replicaText(n.ReplicaList))
		}
	}
	second := strings.TrimSpace(info["second_repl_offset"])
	n.Promoted = second != "" && second != "-1"
	switch {
	case second == "":
		n.add(levelInfo, "failover", "the server does not say whether it was promoted (no second_repl_offset in INFO replication)")
	case !n.Promoted:
		n.add(levelOK, "failover", "not promoted since its process started")
	case noQuarantine:
		n.add(levelWarn, "failover", "promoted from replica to master since its process started (replication ID %s): it may lack grants its old master made, and --no-quarantine lets it vote at once", info["master_replid"])
	default:
		n.add(levelInfo, "failover", "promoted from replica to master since its process started (replication ID %s): each hash slot whose records saw another ID sits out one quarantine at its first use, as after a restart", info["master_replid"])
	}
}

// examineCluster runs doctor's checks on a node that is a whole Redis
// Cluster: the cluster's state and slot coverage (CLUSTER INFO), its
// masters and their replicas (CLUSTER NODES), and on each master the
// checks of a server (version, persistence, eviction, replication,
// promotion) and the lock client's records of one of its slots.
func examineCluster(base context.Context, cc *redis.ClusterClient, timeout time.Duration, noQuarantine bool, n *nodeReport) {
	ctx, cancel := context.WithTimeout(base, 6*timeout)
	defer cancel()
	n.Role = "cluster"
	if !checkReachable(ctx, cc, timeout, n) {
		return
	}
	var infoText string
	err := within(ctx, timeout, func(ctx context.Context) (err error) {
		infoText, err = cc.ClusterInfo(ctx).Result()
		return err
	})
	if err != nil {
		n.add(levelError, "cluster", "CLUSTER INFO failed: %v", err)
		return
	}
	checkClusterState(n, parseInfo(infoText))

	var mu sync.Mutex
	err = cc.ForEachMaster(ctx, func(ctx context.Context, mc *redis.Client) error {
		m := nodeReport{Node: mc.Options().Addr}
		examineMaster(ctx, base, mc, timeout, noQuarantine, &m)
		mu.Lock()
		n.Masters = append(n.Masters, m)
		mu.Unlock()
		return nil
	})
	if err != nil {
		n.add(levelError, "masters", "cannot reach the cluster's masters: %v", err)
	}
	slices.SortFunc(n.Masters, func(a, b nodeReport) int { return firstSlot(a.Slots) - firstSlot(b.Slots) })
	for _, m := range n.Masters {
		n.Replicas += len(m.ReplicaList)
		if m.Version != "" && (n.Version == "" || m.Version < n.Version) {
			n.Version = m.Version
		}
		n.Promoted = n.Promoted || m.Promoted
	}
	n.add(levelInfo, "masters", "%d master(s) with %d replica(s) in all; each is checked below", len(n.Masters), n.Replicas)
}

// checkClusterState reports CLUSTER INFO: whether the cluster serves
// every slot. A lock whose key is in a slot that no master serves fails
// with CLUSTERDOWN until one does.
func checkClusterState(n *nodeReport, info map[string]string) {
	c := &clusterReport{
		State:         info["cluster_state"],
		SlotsAssigned: int(atoi(info["cluster_slots_assigned"])),
		SlotsOK:       int(atoi(info["cluster_slots_ok"])),
		SlotsPFail:    int(atoi(info["cluster_slots_pfail"])),
		SlotsFail:     int(atoi(info["cluster_slots_fail"])),
		KnownNodes:    int(atoi(info["cluster_known_nodes"])),
		Size:          int(atoi(info["cluster_size"])),
	}
	n.Cluster = c
	switch {
	case c.State != "ok":
		n.add(levelError, "cluster", "cluster_state %s: %d of 16384 slots assigned, %d served, %d failing; locks in the slots not served fail with CLUSTERDOWN until the cluster recovers",
			c.State, c.SlotsAssigned, c.SlotsOK, c.SlotsFail+c.SlotsPFail)
	case c.SlotsOK < 16384:
		n.add(levelError, "cluster", "cluster_state ok, but only %d of 16384 slots served (%d assigned, %d possibly failing): locks in the others fail with CLUSTERDOWN",
			c.SlotsOK, c.SlotsAssigned, c.SlotsPFail)
	case c.SlotsPFail > 0:
		n.add(levelWarn, "cluster", "cluster_state ok, all 16384 slots served, but %d of them by masters that others suspect of failing", c.SlotsPFail)
	default:
		n.add(levelOK, "cluster", "cluster_state ok: all 16384 slots served by %d master(s), %d node(s) known", c.Size, c.KnownNodes)
	}
}

// A clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, addr, flags, master, link string
	slots                         []string // ranges such as "0-5460"; importing and migrating slots are left out
}

// parseClusterNodes parses the reply of CLUSTER NODES:
// "<id> <ip:port@cport[,hostname]> <flags> <master> <ping> <pong> <epoch> <link> <slot> ...".
func parseClusterNodes(s string) map[string]*clusterNode {
	out := map[string]*clusterNode{}
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		n := &clusterNode{id: f[0], addr: addr, flags: f[2], master: f[3], link: f[7]}
		for _, s := range f[8:] {
			if !strings.HasPrefix(s, "[") {
				n.slots = append(n.slots, s)
			}
		}
		out[n.id] = n
	}
	return out
}

// inSlots reports whether slot is in one of the ranges.
func inSlots(slot int, ranges []string) bool {
	for _, r := range ranges {
		lo, hi, ok := strings.Cut(r, "-")
		if !ok {
			hi = lo
		}
		if a, b := int(atoi(lo)), int(atoi(hi)); a <= slot && slot <= b {
			return true
		}
	}
	return false
}

// firstSlot returns the first slot of "a-b c d-e", or a large number for
// none.
func firstSlot(s string) int {
	f, _, _ := strings.Cut(s, " ")
	f, _, _ = strings.Cut(f, "-")
	if f == "" {
		return 1 << 30
	}
	return int(atoi(f))
}

// examineMaster runs the checks of one server on a master of a cluster:
// its slots and replicas as it sees them (CLUSTER NODES), the lock
// records of one of its slots, all under ctx; and the node markers of its
// slots under base (see checkMarkers).
func examineMaster(ctx, base context.Context, mc *redis.Client, timeout time.Duration, noQuarantine bool, m *nodeReport) {
	if !checkReachable(ctx, mc, timeout, m) {
		return
	}
	info := readInfo(ctx, mc, timeout, m)
	m.RunID = info["run_id"]
	checkVersion(m, info)
	m.Role = info["role"]
	var text string
	err := within(ctx, timeout, func(ctx context.Context) (err error) {
		text, err = mc.ClusterNodes(ctx).Result()
		return err
	})
	var me *clusterNode
	nodes := parseClusterNodes(text)
	for _, c := range nodes {
		if slices.Contains(strings.Split(c.flags, ","), "myself") {
			me = c
		}
	}
	switch {
	case err != nil:
		m.add(levelWarn, "role", "CLUSTER NODES failed: %v", err)
	case me == nil:
		m.add(levelWarn, "role", "CLUSTER NODES does not say which node this is")
	default:
		m.Slots = strings.Join(me.slots, " ")
		// The replicas that replicate from it now (INFO replication),
		// with the flags the cluster gives them, and those the cluster
		// counts as its replicas that are not connected.
		m.ReplicaList = replicasOf(info)
		for _, r := range nodes {
			if r.master != me.id {
				continue
			}
			var flags []string
			for _, f := range strings.Split(r.flags, ",") {
				if f != "slave" {
					flags = append(flags, f)
				}
			}
			i := slices.IndexFunc(m.ReplicaList, func(x replicaReport) bool { return x.Addr == r.addr })
			if i < 0 {
				m.ReplicaList = append(m.ReplicaList, replicaReport{Addr: r.addr, State: "not replicating, link " + r.link})
				i = len(m.ReplicaList) - 1
			}
			m.ReplicaList[i].Flags = strings.Join(flags, ",")
		}
		slices.SortFunc(m.ReplicaList, func(a, b replicaReport) int { return strings.Compare(a.Addr, b.Addr) })
		m.add(levelOK, "role", "a master of the cluster, serving slots %s", m.Slots)
		for _, r := range m.ReplicaList {
			if strings.Contains(r.Flags, "fail") || r.State != "online" {
				m.add(levelWarn, "replicas", "replica %s is failing or not replicating (%s): the slots have no failover to it while it is", r.Addr, replicaText([]replicaReport{r}))
			}
		}
	}
	m.Replicas = len(m.ReplicaList)
	checkReplication(m, info, noQuarantine)
	checkPersistence(ctx, mc, timeout, m, info)
	checkEviction(m, info)
	if me != nil {
		checkSlotRecords(ctx, mc, timeout, m, me.slots, info["master_replid"])
		checkMarkers(base, mc, timeout, noQuarantine, m, me.slots)
	}
}

// slotProbeKeys is how many candidate keys checkSlotRecords asks the slot
// of at once (CLUSTER KEYSLOT), in one pipeline, to find one in a
// master's slots.
const slotProbeKeys = 1024

// checkSlotRecords finds a key in one of the master's slots and reads the
// lock client's records of that slot, without writing them: how long ago
// they saw the process start or the promotion, how long a lock granted in
// the slot may still be held, how long the quarantine of the last start
// lasts, and whether they saw the master's replication ID. Records of
// another ID on a promoted master make the slot quarantine at its first
// use. (The lock client's probe, which doctor also runs, writes the
// records of the slot of the empty key, wherever it is.)
func checkSlotRecords(ctx context.Context, mc *redis.Client, timeout time.Duration, m *nodeReport, slots []string, replid string) {
	var rec *slotRecords
	for base := 0; base < 16*slotProbeKeys && rec == nil; base += slotProbeKeys {
		cmds := make([]*redis.IntCmd, slotProbeKeys)
		err := within(ctx, timeout, func(ctx context.Context) error {
			pipe := mc.Pipeline()
			for i := range cmds {
				cmds[i] = pipe.ClusterKeySlot(ctx, "doctor:"+strconv.Itoa(base+i))
			}
			_, err := pipe.Exec(ctx)
			return err
		})
		if err != nil {
			m.add(levelWarn, "slot records", "CLUSTER KEYSLOT failed: %v", err)
			return
		}
		for i, c := range cmds {
			if slot := int(c.Val()); inSlots(slot, slots) {
				rec = &slotRecords{Slot: slot, Key: "doctor:" + strconv.Itoa(base+i)}
				break
			}
		}
	}
	if rec == nil {
		m.add(levelInfo, "slot records", "no key of its slots found to read the records of")
		return
	}
	m.SlotRecords = rec
	var vals []any
	var now time.Time
	err := within(ctx, timeout, func(ctx context.Context) (err error) {
		if vals, err = mc.HMGet(ctx, wire.MarkerKey(rec.Key), wire.MarkerStart, wire.MarkerUntil, wire.MarkerReplID, wire.MarkerQuiet, markerUntil2, markerTTL2).Result(); err != nil {
			return err
		}
		now, err = mc.Time(ctx).Result()
		return err
	})
	if err != nil {
		m.add(levelWarn, "slot records", "reading the records of slot %d failed: %v", rec.Slot, err)
		return
	}
	str := func(v any) string { s, _ := v.(string); return s }
	nowUs := float64(now.UnixMicro())
	start := atoi(str(vals[0]))
	rec.ReplID = str(vals[2])
	rec.Present = str(vals[0]) != ""
	if !rec.Present {
		msg := "slot %d has no lock records yet: the first lock in it writes them"
		if m.Promoted {
			msg += ", and sits out one quarantine as the master was promoted"
		}
		m.add(levelInfo, "slot records", msg, rec.Slot)
		return
	}
	age := now.Sub(time.UnixMicro(start))
	ttl2 := number(str(vals[5]))
	byUntil, byUntil2 := held(number(str(vals[1])), number(str(vals[4])), ttl2, nowUs)
	rec.AgeSeconds = int64(age / time.Second)
	rec.HeldMs, rec.TTL2Ms = msInt(max(byUntil, byUntil2, 0)), msInt(max(ttl2, 0))
	rec.Remaining = msInt(max(math.Ceil((number(str(vals[3]))-nowUs)/1000), 0))
	rec.Stale = m.Promoted && rec.ReplID != replid
	heldText := fmt.Sprintf("a lock granted in it may still be held for %s; largest recent TTL %s",
		msText(float64(rec.HeldMs)), msText(float64(rec.TTL2Ms)))
	switch {
	case rec.Stale:
		m.add(levelInfo, "slot records", "slot %d's records predate the promotion (they saw replication ID %s): the slot sits out one quarantine at its first use (%s)",
			rec.Slot, rec.ReplID, heldText)
	case rec.Remaining > 0:
		m.add(levelInfo, "slot records", "slot %d's records started %v ago: the slot is in quarantine for %s more, until the locks granted before the start have ended (%s)",
			rec.Slot, roundDur(age), msText(float64(rec.Remaining)), heldText)
	default:
		m.add(levelOK, "slot records", "slot %d's records started %v ago, out of quarantine: the slot votes (%s)",
			rec.Slot, roundDur(age), heldText)
	}
}

// A runIDs is the redis-server processes behind a node: its own, or a
// cluster's masters'.
func runIDs(n *nodeReport) []string {
	if n.RunID != "" {
		return []string{n.RunID}
	}
	var ids []string
	for _, m := range n.Masters {
		if m.RunID != "" {
			ids = append(ids, m.RunID)
		}
	}
	return ids
}

// masterText names a master of a cluster node in doctor's text report.
func masterText(m nodeReport) string {
	s := "master " + m.Node
	if m.Slots != "" {
		s += fmt.Sprintf(" (slots %s)", m.Slots)
	}
	return s
}
