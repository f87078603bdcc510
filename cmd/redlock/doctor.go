package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quorumlock/redlock/admin"
	"github.com/quorumlock/redlock/observe"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
)

func newDoctorCmd(nf *nodeFlags) *cobra.Command {
	df := &reportFlags{}
	cmd := &cobra.Command{
		Use:   "doctor [flags]",
		Short: "Check whether the nodes are fit for Redlock",
		Long: `Doctor checks every node and says whether a quorum of healthy nodes exists.

For each node it reports whether it is reachable and its round-trip time,
or that it refuses the credentials in its URL (NOAUTH, WRONGPASS) or the
TLS handshake (with the flag that fixes it); over TLS, the TLS version, the
server's certificate (its subject, issuer and expiry: a warning under 14
days) and the expiry of the client certificate of --cert; the Redis
version; its role (a replica, which refuses every grant with READONLY, is
an error, and so is a Redis Cluster node named by a URL for one server,
which answers MOVED for most keys); its replicas, and whether it was
promoted from replica to master since its process started, after which each
hash slot sits out one quarantine at its first use (the failover
quarantine); persistence (appendonly and appendfsync, RDB snapshots), which
decides whether a restarted node may vote at once, and whether its last
save failed, after which it may refuse every write (MISCONF); the
maxmemory-policy (an allkeys-* policy can evict lock keys and is an error;
volatile-* can evict them too, as every lock key has an expiry) and
whether the node is full, so that it refuses new lock keys (OOM); its
clock offset against this machine and its uptime (both from the lock
client's probe of the node); whether it runs the lock scripts (NOPERM when
its ACL forbids them); whether it is in restart quarantine; and whether
any of its node markers (the lock client's record of each hash slot)
records a largest TTL above the maximum TTL, 1h: such a marker holds its
slot back longer than any lock can be held, now (an error) or after the
node's next restart or promotion (a warning); the message says how to
remove it, and so does docs/security.md. Nodes that
are, or share, the same server under two URLs are an error: that server
would vote twice.

A node that is a whole Redis Cluster (a URL with addr= or cluster=true) is
reported as the cluster: its state and whether every hash slot is served
(CLUSTER INFO), and then each master, with the slots it serves, its
replicas and their links (CLUSTER NODES), the checks of a server above,
whether it was promoted, and the lock client's records of one of its
slots: how long ago they saw the process start or the promotion, the
largest TTL used in the slot, and whether the slot is in quarantine or
will be at its first use. Doctor reads those records; it does not write
them.

A node is healthy when it is reachable, can vote and has no errors.

Exit status (see also 'redlock help exit-codes'):
  0       every node is healthy and nothing needs attention
  1       a quorum of healthy nodes exists, but something needs attention
  2       no quorum of healthy nodes exists
  64      usage error: bad flags, arguments or node URLs, or nodes that
          the lock client refuses (one server under two URLs): every
          lock on them fails, as 'redlock run' does with status 64`,
		Example: `  redlock doctor
  redlock doctor --nodes redis://a:6379,redis://b:6379,redis://c:6379
  redlock doctor --nodes 'redis://a:7000?addr=b:7000&addr=c:7000'   # one cluster
  redlock doctor --cacert ca.crt --cert client.crt --key client.key --nodes rediss://a:6380
  redlock doctor --json | jq '.nodes[] | {node, healthy}'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 0 {
				return usagef("doctor takes no arguments; name the nodes with --nodes")
			}
			return nil
		},
		ValidArgsFunction: noArgsCompletion,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDoctor(cmd.Context(), cmd.OutOrStdout(), nf, df)
		},
	}
	df.register(cmd)
	return cmd
}

// Finding levels, from good to bad.
const (
	levelOK    = "ok"
	levelInfo  = "info"
	levelWarn  = "warn"
	levelError = "error"
)

// A finding is the result of one check on one node.
type finding struct {
	Level   string `json:"level"` // ok, info, warn, error
	Check   string `json:"check"`
	Message string `json:"message"`
}

// A nodeReport is what doctor found on one node.
type nodeReport struct {
	Node             string     `json:"node"`
	URL              string     `json:"url"` // without user information
	Reachable        bool       `json:"reachable"`
	LatencyMicros    int64      `json:"latency_us,omitempty"`
	Version          string     `json:"version,omitempty"`
	Role             string     `json:"role,omitempty"`
	Master           string     `json:"master,omitempty"` // a replica's master
	Replicas         int        `json:"replicas"`
	AppendOnly       string     `json:"appendonly,omitempty"`
	AppendFsync      string     `json:"appendfsync,omitempty"`
	Save             *string    `json:"save,omitempty"`
	MaxmemoryPolicy  string     `json:"maxmemory_policy,omitempty"`
	Maxmemory        int64      `json:"maxmemory"`
	ClockOffsetMilli float64    `json:"clock_offset_ms"`
	UptimeSeconds    int64      `json:"uptime_s,omitempty"`
	RunID            string     `json:"run_id,omitempty"`
	State            string     `json:"state,omitempty"` // healthy, unfit, quarantined, unreachable, refusing; "" for a cluster's master
	QuarantinedUntil *time.Time `json:"quarantined_until,omitempty"`
	Healthy          bool       `json:"healthy"`

	ReplicaList []replicaReport `json:"replica_list,omitempty"` // a master's replicas
	Promoted    bool            `json:"promoted"`               // a master promoted from replica since its process started
	TLS         *tlsReport      `json:"tls,omitempty"`          // a node reached over TLS

	Cluster     *clusterReport `json:"cluster,omitempty"`      // a node that is a whole cluster: its state
	Masters     []nodeReport   `json:"masters,omitempty"`      // ... and each of its masters
	Slots       string         `json:"slots,omitempty"`        // a cluster's master: the slots it serves
	SlotRecords *slotRecords   `json:"slot_records,omitempty"` // ... and the lock records of one of them

	OversizedMarkers []markerReport `json:"oversized_markers,omitempty"` // markers that hold their slots back longer than the maximum TTL

	Findings []finding `json:"findings"`
}

// A doctorReport is the whole output of doctor.
type doctorReport struct {
	Nodes   []nodeReport `json:"nodes"`
	Quorum  int          `json:"quorum"`
	Healthy int          `json:"healthy"`
	Verdict string       `json:"verdict"` // healthy, degraded, failing, unusable
	Summary string       `json:"summary"`
}

func (n *nodeReport) add(level, check, format string, args ...any) {
	n.Findings = append(n.Findings, finding{Level: level, Check: check, Message: fmt.Sprintf(format, args...)})
}

// hasCheck reports whether n has a finding of the given check.
func (n *nodeReport) hasCheck(check string) bool {
	for _, f := range n.Findings {
		if f.Check == check {
			return true
		}
	}
	return false
}

// has reports whether n, or one of its masters if it is a cluster, has a
// finding of the given level.
func (n *nodeReport) has(level string) bool {
	for _, f := range n.Findings {
		if f.Level == level {
			return true
		}
	}
	for i := range n.Masters {
		if n.Masters[i].has(level) {
			return true
		}
	}
	return false
}

func runDoctor(ctx context.Context, w io.Writer, nf *nodeFlags, df *reportFlags) error {
	ns, c, err := df.connect(nf)
	if err != nil {
		return err
	}
	defer ns.close()

	rep := &doctorReport{Quorum: admin.New(c).Quorum(), Nodes: make([]nodeReport, len(ns.nodes))}
	states, _ := probeWhile(ctx, c, func() error {
		var wg sync.WaitGroup
		for i := range ns.nodes {
			n := &rep.Nodes[i]
			n.Node, n.URL = ns.names[i], shownURL(ns.urls[i])
			wg.Add(1)
			go func() {
				defer wg.Done()
				if cc, ok := ns.nodes[i].Client().(*redis.ClusterClient); ok {
					examineCluster(ctx, cc, df.timeout, nf.noQuarantine, n)
				} else {
					examine(ctx, ns.cmds[i], df.timeout, nf.noQuarantine, n)
				}
				checkTLS(ctx, ns, i, df.timeout, n)
			}()
		}
		wg.Wait()
		return nil
	})
	for i := range rep.Nodes {
		if n := &rep.Nodes[i]; n.Reachable && !n.hasCheck("access") {
			checkClock(n, states[i])
			checkUptime(n, states[i])
		}
	}
	judge(rep, states, time.Now())

	if err := df.write(w, rep, func() { printDoctor(w, rep) }); err != nil {
		return err
	}
	switch rep.Verdict {
	case "healthy":
		return nil
	case "degraded":
		return silentExit(exitFailure)
	case "unusable":
		return silentExit(exitUsage)
	}
	return silentExit(exitNoQuorum)
}

// examine runs the checks that need the node's own answers to commands
// other than the lock scripts: each command within timeout, all within
// three times that, but for the check of the node markers, which reads
// one record per hash slot and has a budget of its own (see
// checkMarkers). It stops after the reachability check if the node does
// not answer.
func examine(base context.Context, rc redis.Cmdable, timeout time.Duration, noQuarantine bool, n *nodeReport) {
	ctx, cancel := context.WithTimeout(base, 3*timeout)
	defer cancel()
	if !checkReachable(ctx, rc, timeout, n) {
		return
	}
	info := readInfo(ctx, rc, timeout, n)
	n.RunID = info["run_id"]
	checkVersion(n, info)
	checkRole(n, info)
	if info["cluster_enabled"] != "1" {
		checkReplication(n, info, noQuarantine)
	}
	checkPersistence(ctx, rc, timeout, n, info)
	checkEviction(n, info)
	if info["cluster_enabled"] != "1" {
		checkMarkers(base, rc, timeout, noQuarantine, n, nil)
	}
}

// checkReachable measures the round trip to the node, the best of three
// PINGs, and reports whether the node answered them.
func checkReachable(ctx context.Context, rc redis.Cmdable, timeout time.Duration, n *nodeReport) bool {
	var best time.Duration
	for i := range 3 {
		t0 := time.Now()
		if err := within(ctx, timeout, func(ctx context.Context) error { return rc.Ping(ctx).Err() }); err != nil {
			if code := errorCode(err); code != "" {
				// The node answered, or its TLS handshake failed: it is
				// there, and refuses.
				n.Reachable = code != "TLS"
				msg := fmt.Sprintf("refused: %v", err)
				if h := refusalHint(err); h != "" {
					msg += " (" + h + ")"
				}
				n.add(levelError, "access", "%s", msg)
				return false
			}
			n.add(levelError, "reachable", "unreachable: %v", err)
			return false
		}
		if d := time.Since(t0); i == 0 || d < best {
			best = d
		}
	}
	n.Reachable, n.LatencyMicros = true, best.Microseconds()
	if best > 100*time.Millisecond {
		n.add(levelWarn, "reachable", "reachable, but slow: round trip %v; each node has at most a tenth of the TTL (250ms at most) to answer", roundDur(best))
	} else {
		n.add(levelOK, "reachable", "round trip %v", best.Round(time.Microsecond))
	}
	return true
}

// readInfo returns the fields of the INFO sections that doctor reads. A
// section that the node does not return is a warning.
func readInfo(ctx context.Context, rc redis.Cmdable, timeout time.Duration, n *nodeReport) map[string]string {
	info := map[string]string{}
	for _, section := range []string{"server", "replication", "memory", "persistence", "cluster"} {
		var s string
		err := within(ctx, timeout, func(ctx context.Context) (err error) {
			s, err = rc.Info(ctx, section).Result()
			return err
		})
		if err != nil {
			n.add(levelWarn, "info", "INFO %s failed: %v", section, err)
			continue
		}
		maps.Copy(info, parseInfo(s))
	}
	return info
}

// checkVersion reports the Redis version: redlock is tested with 7 and
// later.
func checkVersion(n *nodeReport, info map[string]string) {
	n.Version = info["redis_version"]
	switch major, _, _ := strings.Cut(n.Version, "."); {
	case n.Version == "":
		n.add(levelWarn, "version", "the server did not say its version")
	case atoi(major) < 7:
		n.add(levelWarn, "version", "Redis %s: redlock is tested with Redis 7 and later", n.Version)
	default:
		n.add(levelOK, "version", "Redis %s", n.Version)
	}
}

// checkRole reports whether the node is a master that can vote: not a
// replica, and not one node of a cluster named by a URL for one server.
// Its replicas, if any, are reported by checkReplication.
func checkRole(n *nodeReport, info map[string]string) {
	n.Role = info["role"]
	n.Replicas = int(atoi(info["connected_slaves"]))
	switch {
	case info["cluster_enabled"] == "1":
		n.add(levelError, "role", "a Redis Cluster node under a URL for one server: it serves only its own slots and answers MOVED for the others; name the whole cluster as one node, with redis://HOST:PORT?cluster=true (or ?addr=HOST2:PORT2&addr=...)")
	case n.Role == "slave":
		n.Master = info["master_host"] + ":" + info["master_port"]
		n.add(levelError, "role", "a replica of %s: a replica is read-only and refuses every grant (READONLY); give redlock masters", n.Master)
	case n.Replicas > 0:
		n.add(levelOK, "role", "a master with %d replica(s)", n.Replicas)
	case n.Role == "master":
		n.add(levelOK, "role", "an independent master (no replicas)")
	default:
		n.add(levelWarn, "role", "unknown role %q", n.Role)
	}
}

// checkPersistence reports what a restart of the node keeps of its lock
// keys, which decides whether the node may ever skip restart quarantine.
func checkPersistence(ctx context.Context, rc redis.Cmdable, timeout time.Duration, n *nodeReport, info map[string]string) {
	n.AppendOnly = "no"
	if info["aof_enabled"] == "1" {
		n.AppendOnly = "yes"
	}
	cfg, cfgErr := configGet(ctx, rc, timeout, "appendfsync", "save")
	if cfgErr == nil {
		n.AppendFsync = cfg["appendfsync"]
		if save, ok := cfg["save"]; ok {
			n.Save = &save
		}
	}
	switch {
	case n.AppendOnly == "yes" && cfgErr != nil:
		n.add(levelInfo, "persistence", "appendonly yes; appendfsync unknown (CONFIG GET failed: %v): only appendfsync always keeps every grant across a crash", cfgErr)
	case n.AppendOnly == "yes" && n.AppendFsync == "always":
		n.add(levelOK, "persistence", "appendonly yes, appendfsync always: lock keys survive restarts (--no-quarantine is safe for this node)")
	case n.AppendOnly == "yes":
		n.add(levelWarn, "persistence", "appendonly yes, appendfsync %s: after a crash the node reloads its keys without the last grants; clients see the reload and keep the node in restart quarantine, so never use --no-quarantine with it (appendfsync always would make that safe)", n.AppendFsync)
	case cfgErr != nil:
		n.add(levelInfo, "persistence", "appendonly no; RDB snapshots unknown (CONFIG GET failed: %v)", cfgErr)
	case n.Save != nil && strings.TrimSpace(*n.Save) != "":
		n.add(levelWarn, "persistence", "appendonly no, RDB snapshots (save %q): after a crash the node reloads an old snapshot without the grants made since; clients see the reload and keep the node in restart quarantine, so never use --no-quarantine with it", *n.Save)
	default:
		n.add(levelOK, "persistence", "none: a restarted node comes back empty and sits out its restart quarantine (keep quarantine on)")
	}
	if info["rdb_last_bgsave_status"] == "err" {
		n.add(levelError, "persistence", "the last RDB save failed: with stop-writes-on-bgsave-error yes (the default) the node refuses every write, lock grants included (MISCONF), until a save succeeds; see the node's log")
	}
}

// checkEviction reports whether the node's maxmemory-policy can evict lock
// keys: allkeys-* can evict any key, volatile-* any key with an expiry,
// which every lock key has.
func checkEviction(n *nodeReport, info map[string]string) {
	n.MaxmemoryPolicy = info["maxmemory_policy"]
	n.Maxmemory = atoi(info["maxmemory"])
	limit := "maxmemory " + info["maxmemory_human"]
	if n.Maxmemory == 0 {
		limit = "no maxmemory set now, but one may be set at any time"
	}
	switch p := n.MaxmemoryPolicy; {
	case p == "":
		n.add(levelWarn, "eviction", "the server did not say its maxmemory-policy")
	case strings.HasPrefix(p, "allkeys-"):
		n.add(levelError, "eviction", "maxmemory-policy %s can evict lock keys, handing a held lock to another (%s): use noeviction", p, limit)
	case strings.HasPrefix(p, "volatile-"):
		n.add(levelWarn, "eviction", "maxmemory-policy %s can evict lock keys, which all have an expiry (%s): use noeviction", p, limit)
	default:
		n.add(levelOK, "eviction", "maxmemory-policy %s: lock keys are never evicted", p)
	}
	if used := atoi(info["used_memory"]); n.Maxmemory > 0 && used >= n.Maxmemory && n.MaxmemoryPolicy == "noeviction" {
		n.add(levelError, "memory", "full: used memory %s of maxmemory %s; the node refuses new lock keys (OOM) until memory is freed or maxmemory raised", info["used_memory_human"], info["maxmemory_human"])
	}
}

// probed reports whether the lock client's probe of a node was answered,
// so that s holds the node's age and clock offset.
func probed(s observe.NodeState) bool {
	return s.Health == observe.NodeHealthy || s.Health == observe.NodeQuarantined
}

// checkClock reports the node's clock offset against this machine, as
// the lock client's probe measured it: fences assume that node clocks
// agree to well within the TTL.
func checkClock(n *nodeReport, s observe.NodeState) {
	if !probed(s) {
		n.add(levelWarn, "clock", "clock offset unknown: the node did not run the lock client's probe")
		return
	}
	n.ClockOffsetMilli = float64(s.ClockOffset.Microseconds()) / 1000
	if max(s.ClockOffset, -s.ClockOffset) >= 500*time.Millisecond {
		n.add(levelWarn, "clock", "clock offset %+.0fms against this machine: fencing tokens assume node clocks agree to well within the TTL; check NTP", n.ClockOffsetMilli)
		return
	}
	n.add(levelOK, "clock", "clock offset %+.0fms against this machine (to the millisecond)", n.ClockOffsetMilli)
}

// checkUptime reports how long the node's redis-server process has run, as
// the lock client's probe measured it.
func checkUptime(n *nodeReport, s observe.NodeState) {
	if !probed(s) {
		n.add(levelInfo, "uptime", "uptime unknown: the node did not run the lock client's probe")
		return
	}
	n.UptimeSeconds = int64(s.Age / time.Second)
	n.add(levelInfo, "uptime", "up %v", (time.Duration(n.UptimeSeconds) * time.Second).String())
}

// judge adds the checks that need every node and the lock client's view,
// and gives the verdict.
func judge(rep *doctorReport, states []observe.NodeState, now time.Time) {
	checkIndependence(rep)
	for i := range rep.Nodes {
		n := &rep.Nodes[i]
		checkVoting(n, states[i], now)
		n.Healthy = n.Reachable && states[i].Health == observe.NodeHealthy && !n.has(levelError)
		if n.Healthy {
			rep.Healthy++
		} else if n.State == observe.NodeHealthy.String() {
			// The lock client lets it vote, but doctor found it unfit.
			n.State = stateUnfit
		}
	}
	verdict(rep)
}

// stateUnfit is the state of a node that the lock client lets vote but
// that has an error that makes it unfit for locks, such as an allkeys-*
// eviction policy.
const stateUnfit = "unfit"

// refusedChecks are the checks whose errors the lock client refuses to
// work with at all (every lock fails with redlock.ErrInvalid, and 'redlock
// run' exits 64), not only counts the node out: they make the verdict
// unusable.
var refusedChecks = []string{"independence"}

// checkIndependence reports nodes that are, or share, the same Redis
// server (the same run_id) under two URLs, a cluster's masters included:
// that server would vote twice.
func checkIndependence(rep *doctorReport) {
	seen := map[string]int{}
	for i := range rep.Nodes {
		n := &rep.Nodes[i]
		for _, id := range runIDs(n) {
			if j, dup := seen[id]; dup && j != i {
				n.add(levelError, "independence", "the same Redis server as %s (run_id %s): it would vote twice", rep.Nodes[j].Node, id)
				break
			}
			seen[id] = i
		}
	}
}

// checkVoting reports whether the lock client lets the node vote: whether
// it is out of restart quarantine, and whether it runs the lock scripts.
func checkVoting(n *nodeReport, s observe.NodeState, now time.Time) {
	n.State = s.Health.String()
	switch s.Health {
	case observe.NodeHealthy:
		n.add(levelOK, "quarantine", "votes: out of restart quarantine")
	case observe.NodeQuarantined:
		until := s.Until
		n.QuarantinedUntil = &until
		n.add(levelWarn, "quarantine", "quarantined until %s (%v more): its server started %v ago, and it does not vote until it has run longer than the longest lock it may have lost (largest TTL used on it: %v)",
			until.Format("15:04:05"), roundDur(until.Sub(now)), roundDur(s.Age), s.MaxTTL)
	case observe.NodeRefusing:
		if !n.hasCheck("access") {
			msg := fmt.Sprintf("refused the lock scripts: %s", describeErr(s.Err))
			if h := refusalHint(s.Err); h != "" {
				msg += " (" + h + ")"
			}
			n.add(levelError, "scripts", "%s", msg)
		}
	default:
		if n.Reachable {
			n.add(levelError, "scripts", "cannot run the lock scripts: %s", describeErr(s.Err))
		}
	}
}

// verdict sums the nodes up: failing without a quorum of healthy nodes,
// degraded when any node is unhealthy or has a warning, and healthy
// otherwise.
func verdict(rep *doctorReport) {
	attention := false
	var refused []string
	for _, n := range rep.Nodes {
		attention = attention || !n.Healthy || n.has(levelWarn)
		for _, f := range n.Findings {
			if f.Level == levelError && slices.Contains(refusedChecks, f.Check) {
				refused = append(refused, n.Node+": "+f.Message)
			}
		}
	}
	switch {
	case len(refused) > 0:
		rep.Verdict = "unusable"
		rep.Summary = fmt.Sprintf("UNUSABLE: the lock client refuses these nodes, and every lock on them fails (%s)", strings.Join(refused, "; "))
	case rep.Healthy < rep.Quorum:
		rep.Verdict = "failing"
		rep.Summary = fmt.Sprintf("NO QUORUM: %d of %d nodes healthy, %d needed; locks cannot be had safely", rep.Healthy, len(rep.Nodes), rep.Quorum)
	case attention:
		rep.Verdict = "degraded"
		rep.Summary = fmt.Sprintf("USABLE WITH WARNINGS: %d of %d nodes healthy, quorum %d; see the warnings and errors above", rep.Healthy, len(rep.Nodes), rep.Quorum)
	default:
		rep.Verdict = "healthy"
		rep.Summary = fmt.Sprintf("HEALTHY: %d of %d nodes healthy, quorum %d", rep.Healthy, len(rep.Nodes), rep.Quorum)
	}
	if rep.Verdict != "unusable" {
		rep.Summary += "; " + toleranceText(len(rep.Nodes), rep.Healthy, rep.Quorum)
	}
	if len(rep.Nodes)%2 == 0 {
		rep.Summary += fmt.Sprintf("; note: %d nodes survive as many failures as %d, use an odd number", len(rep.Nodes), len(rep.Nodes)-1)
	}
}

func printDoctor(w io.Writer, rep *doctorReport) {
	fmt.Fprintf(w, "redlock doctor: %d node(s), quorum %d\n", len(rep.Nodes), rep.Quorum)
	for _, n := range rep.Nodes {
		fmt.Fprintf(w, "\n%s  %s\n", printable(n.Node), printable(n.URL))
		for _, f := range n.Findings {
			fmt.Fprintf(w, "  %-5s  %-12s %s\n", strings.ToUpper(f.Level), f.Check, printable(f.Message))
		}
		for _, m := range n.Masters {
			fmt.Fprintf(w, "  %s\n", printable(masterText(m)))
			for _, f := range m.Findings {
				fmt.Fprintf(w, "    %-5s  %-12s %s\n", strings.ToUpper(f.Level), f.Check, printable(f.Message))
			}
		}
	}
	fmt.Fprintf(w, "\nverdict: %s\n", rep.Summary)
}

// parseInfo parses the reply of INFO into its fields.
func parseInfo(s string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = v
		}
	}
	return m
}

// configGet returns the values of CONFIG GET for the given parameters,
// each within timeout.
func configGet(ctx context.Context, rc redis.Cmdable, timeout time.Duration, params ...string) (map[string]string, error) {
	out := map[string]string{}
	for _, p := range params {
		var m map[string]string
		err := within(ctx, timeout, func(ctx context.Context) (err error) {
			m, err = rc.ConfigGet(ctx, p).Result()
			return err
		})
		if err != nil {
			return nil, err
		}
		maps.Copy(out, m)
	}
	return out, nil
}

// within calls f with a context that ends after timeout.
func within(ctx context.Context, timeout time.Duration, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return f(ctx)
}

func atoi(s string) int64 {
	n, _ := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	return n
}
