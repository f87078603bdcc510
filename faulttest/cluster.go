package faulttest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/admin"
	"github.com/quorumlock/redlock/driver"
	"github.com/quorumlock/redlock/goredisnode"
	"github.com/quorumlock/redlock/internal/clientx"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/internal/wire"
	"github.com/quorumlock/redlock/observe"
	"github.com/redis/go-redis/v9"
)

// A Cluster is N independent nodes, the clients that lock on them through
// per-(client, node) links, and the History of what happens. A node is one
// redis-server process, or a master with a replica (Config.Replicated), or
// a Redis Cluster (Config.ClusterMasters). Its methods inject the process
// faults and record them; a Client's methods inject the link faults.
//
// A Cluster belongs to one test and is closed when the test ends.
type Cluster struct {
	t          testing.TB
	H          *History
	n          int
	persistent bool
	clocks     []*NodeClock // nil unless Config.ClockShim

	// Replicated only: node i's replica, until Failover promotes it, and
	// the proxy that carries its replication stream.
	replicas  []*redistest.Server
	replLinks []*redistest.Proxy
	// Sentinels only: the Sentinel that watches node i's master.
	sentinels []*redistest.Server
	// ClusterMasters only: node i's Redis Cluster.
	clusters []*redistest.Cluster

	mu sync.Mutex
	// servers holds node i's server: its process, or its master; nil for
	// a Redis Cluster. Failover changes it.
	servers []*redistest.Server
	admin   map[string]*redis.Client // ClusterMasters only: the test's connections to the masters, by address
	paused  []bool
	down    []bool
	clients []*Client
	keys    map[string]bool // every key locked, for the final sample
	maxTTL  time.Duration
	lastEnd time.Time // the latest moment a lock key may live until
	slowest float64   // the slowest rate any node's clock has run at: keys live TTL/slowest
	started time.Time // when every server had started
}

// Config says how to build a Cluster.
type Config struct {
	Scenario string
	N        int
	// ClockShim runs every node with the wall-clock shim, so that
	// JumpClock can move its clock.
	ClockShim bool
	// Persistence makes every node keep an append-only file synced on
	// every write, so that its keys survive Kill and Restart.
	Persistence bool
	// Replicated makes every node a master with a replica, which
	// replicates through a redistest.Proxy (see CutReplication) and which
	// Failover promotes. Clients reach the node's master through their
	// links, and after a failover the promoted replica through the same
	// links. Not with ClockShim.
	Replicated bool
	// Sentinels, with Replicated, has a Redis Sentinel of its own watch
	// every node's master (redistest.StartSentinel: a quorum of one, a
	// master down after a second without an answer), and clients reach
	// the node through a go-redis failover client that asks the Sentinel
	// for the master: there are no links, so no link faults, and
	// SentinelFailover, not Failover, promotes a replica.
	Sentinels bool
	// ClusterMasters, when not 0, makes every node a Redis Cluster of that
	// many masters (redistest.Cluster). Clients reach a cluster with
	// go-redis's cluster client, which follows the cluster's redirections
	// to the masters' own addresses: there are no links, so no link
	// faults. Node faults are made on the masters (KillMaster,
	// RestartMaster, BeginMove). Not with ClockShim, Persistence or
	// Replicated.
	ClusterMasters int
}

// NewCluster starts cfg.N servers and fails t if it cannot.
func NewCluster(t testing.TB, cfg Config) *Cluster {
	t.Helper()
	c := &Cluster{
		t:      t,
		H:      NewHistory(cfg.Scenario, cfg.N),
		n:      cfg.N,
		paused: make([]bool, cfg.N),
		down:   make([]bool, cfg.N),
		keys:   make(map[string]bool),

		slowest:    1,
		persistent: cfg.Persistence,
	}
	switch {
	case cfg.ClusterMasters > 0:
		if cfg.ClockShim || cfg.Persistence || cfg.Replicated {
			t.Fatal("faulttest: Redis Cluster nodes without the clock shim, persistence or replicas")
		}
		c.startClusters(cfg.ClusterMasters)
	case cfg.Replicated:
		if cfg.ClockShim {
			t.Fatal("faulttest: replicated nodes without the clock shim")
		}
		c.servers = redistest.StartN(t, cfg.N, redistest.Config{Persistence: cfg.Persistence})
		c.startReplicas(cfg.Persistence)
		if cfg.Sentinels {
			c.startSentinels()
		}
	case cfg.Sentinels:
		t.Fatal("faulttest: Sentinels without Replicated")
	case !cfg.ClockShim:
		c.servers = redistest.StartN(t, cfg.N, redistest.Config{Persistence: cfg.Persistence})
	default:
		shim, err := BuildClockShim()
		if err != nil {
			t.Fatal(err)
		}
		for range cfg.N {
			clk, err := NewNodeClock(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			c.clocks = append(c.clocks, clk)
			c.servers = append(c.servers, redistest.Start(t, redistest.Config{Persistence: cfg.Persistence, Env: clk.Env(shim)}))
		}
	}
	t.Cleanup(c.close)
	for i := range c.n {
		c.loadScripts(i)
	}
	c.started = time.Now()
	return c
}

// Aged waits until the servers started by NewCluster have run for longer
// than d by the count of the restart marker, which reads
// uptime_in_seconds (whole seconds) when a node is first asked. Clients
// with restart quarantine then let the nodes vote for locks with TTLs up
// to d. It must be called before any client is made.
//
// The masters of Redis Cluster nodes are asked for their uptime instead,
// since forming the clusters takes a while after their processes started:
// Aged waits until each reports more whole seconds than d has, so that
// the marker, which takes a second less, finds it at least d old.
func (c *Cluster) Aged(d time.Duration) {
	secs := time.Duration(math.Ceil(d.Seconds())) * time.Second
	if c.clusters != nil {
		c.awaitUptime(secs + time.Second)
		return
	}
	time.Sleep(time.Until(c.started.Add(secs + 20*time.Millisecond)))
}

// loadScripts loads the lock scripts into the script cache of node i's
// processes (its replica's and its cluster's masters' too), as they would
// be on a node in service, so that the first rounds of a scenario do not
// pay for the NOSCRIPT fallback against tight node timeouts.
func (c *Cluster) loadScripts(i int) {
	c.t.Helper()
	for _, s := range c.processes(i) {
		c.loadScriptsOn(i, s)
	}
}

func (c *Cluster) loadScriptsOn(i int, srv *redistest.Server) {
	c.t.Helper()
	for _, s := range wire.Scripts() {
		if _, err := srv.Do("SCRIPT", "LOAD", s.Source()); err != nil {
			c.t.Fatalf("faulttest: loading the %s script on node %d (%s): %v", s.Name(), i, srv.Addr(), err)
		}
	}
}

// N returns the number of nodes.
func (c *Cluster) N() int { return c.n }

// Server returns node i's server, for administrative commands: its
// process, or its master (after Failover, the promoted replica); nil for a
// Redis Cluster node.
func (c *Cluster) Server(i int) *redistest.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.servers[i]
}

// proc returns node i's server for a process fault, and fails the test
// for a Redis Cluster node, whose faults are made on its masters.
func (c *Cluster) proc(i int) *redistest.Server {
	c.t.Helper()
	s := c.Server(i)
	if s == nil {
		c.t.Fatalf("faulttest: node %d is a Redis Cluster: fault its masters (KillMaster, RestartMaster)", i)
	}
	return s
}

// Clients returns the clients made so far.
func (c *Cluster) Clients() []*Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Client(nil), c.clients...)
}

func (c *Cluster) close() {
	for _, cl := range c.Clients() {
		cl.close()
	}
	for i := range c.n {
		if c.isPaused(i) {
			c.Server(i).Resume()
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range c.admin {
		a.Close()
	}
}

func (c *Cluster) fatal(err error) {
	c.t.Helper()
	if err != nil {
		c.t.Fatal(err)
	}
}

// Kill kills node i with SIGKILL.
func (c *Cluster) Kill(i int) {
	c.t.Helper()
	c.fatal(c.proc(i).Kill())
	c.mu.Lock()
	c.down[i], c.paused[i] = true, false
	c.mu.Unlock()
	c.H.AddFault(FaultKill, i, "", "SIGKILL")
}

// Restart starts node i again, stopping it first if it runs. Without
// persistence it comes back empty.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	c.restart(i)
}

// restart is Restart at once.
func (c *Cluster) restart(i int) {
	c.t.Helper()
	if c.isPaused(i) {
		c.Resume(i)
	}
	c.fatal(c.proc(i).Restart())
	c.mu.Lock()
	c.down[i] = false
	c.mu.Unlock()
	c.loadScripts(i)
	c.H.AddFault(FaultRestart, i, "", map[bool]string{true: "started again from its AOF", false: "started again, empty"}[c.persistent])
}

// Pause stops node i with SIGSTOP.
func (c *Cluster) Pause(i int) {
	c.t.Helper()
	c.fatal(c.proc(i).Pause())
	c.mu.Lock()
	c.paused[i] = true
	c.mu.Unlock()
	c.H.AddFault(FaultPause, i, "", "SIGSTOP")
}

// Resume lets a paused node i run again with SIGCONT.
func (c *Cluster) Resume(i int) {
	c.t.Helper()
	c.fatal(c.proc(i).Resume())
	c.mu.Lock()
	c.paused[i] = false
	ttl := c.maxTTL
	c.mu.Unlock()
	// Commands that waited in the node's socket run now, and the keys
	// they set live a TTL from now.
	c.noteLock("", ttl)
	c.H.AddFault(FaultResume, i, "", "SIGCONT")
}

func (c *Cluster) isPaused(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.paused[i]
}

// JumpClock steps node i's wall clock to offset from the real one, keeping
// its rate, and waits until the node's TIME shows it. The cluster must
// have the clock shim.
func (c *Cluster) JumpClock(i int, offset time.Duration) {
	c.t.Helper()
	clk := c.clock(i)
	c.fatal(clk.Set(offset))
	c.awaitClock(i)
	detail := fmt.Sprintf("wall clock %+v from real time", offset)
	if r := clk.Rate(); r != 1 {
		detail += fmt.Sprintf(", running at rate %v", r)
	}
	c.H.AddFault(FaultClock, i, "", detail)
}

// SetClockRate makes node i's wall clock run at rate seconds per real
// second from now on, without a step. A rate above 1 is a fast clock: the
// node's keys expire after TTL/rate of real time. The cluster must have
// the clock shim.
func (c *Cluster) SetClockRate(i int, rate float64) {
	c.t.Helper()
	clk := c.clock(i)
	c.fatal(clk.SetRate(rate))
	c.mu.Lock()
	c.slowest = min(c.slowest, rate)
	c.mu.Unlock()
	c.awaitClock(i)
	c.H.AddFault(FaultClock, i, "", fmt.Sprintf("wall clock runs at rate %v (%+.2f%%) from now, %+v from real time",
		rate, (rate-1)*100, clk.OffsetAt(time.Now()).Round(time.Millisecond)))
}

func (c *Cluster) clock(i int) *NodeClock {
	c.t.Helper()
	if c.clocks == nil {
		c.t.Fatal("faulttest: a clock fault on a cluster without Config.ClockShim")
	}
	return c.clocks[i]
}

// awaitClock waits until node i's TIME shows the offset its clock should
// have, which it does within a millisecond of a change if the shim is
// loaded.
func (c *Cluster) awaitClock(i int) {
	c.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		shown, err := c.NodeClockOffset(i)
		c.fatal(err)
		want := c.clocks[i].OffsetAt(time.Now())
		if (shown - want).Abs() < 50*time.Millisecond {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("faulttest: node %d's clock is %v off, not %v: is the shim loaded?", i, shown, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// NodeClockOffset returns node i's wall clock (TIME) minus this process's.
func (c *Cluster) NodeClockOffset(i int) (time.Duration, error) {
	before := time.Now()
	v, err := c.proc(i).Do("TIME")
	after := time.Now()
	if err != nil {
		return 0, err
	}
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		return 0, fmt.Errorf("faulttest: TIME answered %#v", v)
	}
	sec, us := atoi(a[0]), atoi(a[1])
	node := time.Unix(sec, us*1000)
	mid := before.Add(after.Sub(before) / 2)
	return node.Sub(mid.Round(0)), nil
}

func atoi(v any) int64 {
	var n int64
	switch v := v.(type) {
	case int64:
		return v
	case string:
		fmt.Sscan(v, &n)
	}
	return n
}

// probeScript reads a key's value, its absolute expiry and the node's
// clock in one atomic step.
// A sorted set (a read-write lock's readers or intents, read once the run
// is over) shows its first member as the value.
const probeScript = `local v
if redis.call('TYPE', KEYS[1])['ok'] == 'zset' then
	v = redis.call('ZRANGE', KEYS[1], 0, 0)[1]
else
	v = redis.call('GET', KEYS[1])
end
local t = redis.call('TIME')
return {v, redis.call('PEXPIRETIME', KEYS[1]), tonumber(t[1]), tonumber(t[2])}`

// Sample reads key on every node at once over the test's admin
// connections. Nodes that are paused or down are not asked.
func (c *Cluster) Sample(key string) Sample {
	s := Sample{Key: key, Nodes: make([]NodeSample, c.N())}
	var wg sync.WaitGroup
	for i := range c.n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Nodes[i] = c.sampleNode(i, key)
		}()
	}
	wg.Wait()
	return s
}

func (c *Cluster) sampleNode(i int, key string) NodeSample {
	if c.clusters != nil {
		return c.sampleCluster(i, key)
	}
	ns := NodeSample{Node: i}
	c.mu.Lock()
	srv, paused, down := c.servers[i], c.paused[i], c.down[i]
	c.mu.Unlock()
	switch {
	case paused:
		ns.Err = "paused"
	case down:
		ns.Err = "down"
	}
	if ns.Err != "" {
		ns.At = c.H.Now()
		return ns
	}
	v, err := srv.Do("EVAL", probeScript, "1", key)
	ns.At = c.H.Now()
	readProbe(&ns, v, err)
	return ns
}

// readProbe fills ns from the reply of probeScript, whose answer arrived
// at ns.At.
func readProbe(ns *NodeSample, v any, err error) {
	if err != nil {
		ns.Err = err.Error()
		return
	}
	a, ok := v.([]any)
	if !ok || len(a) != 4 {
		ns.Err = fmt.Sprintf("probe answered %#v", v)
		return
	}
	ns.Reached = true
	ns.Value, _ = a[0].(string)
	ns.Value = wire.Token(ns.Value) // a lock's token, without the owner label beside it
	if pexp := atoi(a[1]); pexp >= 0 && ns.Value != "" {
		nodeNowUs := atoi(a[2])*1_000_000 + atoi(a[3])
		ns.Expires = ns.At + Mono(time.Duration(pexp*1000-nodeNowUs)*time.Microsecond)
	}
}

// probeAllScript is probeScript for several keys: each key's value and
// absolute expiry, then the node's clock.
const probeAllScript = `local t = redis.call('TIME')
local out = {}
for _, k in ipairs(KEYS) do
	out[#out + 1] = redis.call('GET', k)
	out[#out + 1] = redis.call('PEXPIRETIME', k)
end
out[#out + 1] = tonumber(t[1])
out[#out + 1] = tonumber(t[2])
return out`

// SampleAll reads keys on every node at once, each node all of them in
// one script, so that the samples, one per key, show what each node held
// at one instant; they share a Sample.Batch. A Redis Cluster node's
// masters are read key by key instead, and those samples have no batch.
func (c *Cluster) SampleAll(keys []string) []Sample {
	if len(keys) == 1 || c.clusters != nil {
		out := make([]Sample, len(keys))
		for i, k := range keys {
			out[i] = c.Sample(k)
		}
		return out
	}
	b := c.H.NextBatch()
	out := make([]Sample, len(keys))
	for j, k := range keys {
		out[j] = Sample{Key: k, Nodes: make([]NodeSample, c.N()), Batch: b}
	}
	var wg sync.WaitGroup
	for i := range c.n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j, ns := range c.sampleNodeAll(i, keys) {
				out[j].Nodes[i] = ns
			}
		}()
	}
	wg.Wait()
	return out
}

func (c *Cluster) sampleNodeAll(i int, keys []string) []NodeSample {
	out := make([]NodeSample, len(keys))
	c.mu.Lock()
	srv, paused, down := c.servers[i], c.paused[i], c.down[i]
	c.mu.Unlock()
	var v any
	var err error
	switch {
	case paused:
		err = errors.New("paused")
	case down:
		err = errors.New("down")
	default:
		v, err = srv.Do(append([]string{"EVAL", probeAllScript, strconv.Itoa(len(keys))}, keys...)...)
	}
	at := c.H.Now()
	a, ok := v.([]any)
	if err == nil && (!ok || len(a) != 2*len(keys)+2) {
		err = fmt.Errorf("probe answered %#v", v)
	}
	for j := range keys {
		out[j] = NodeSample{Node: i, At: at}
		if err != nil {
			out[j].Err = err.Error()
			continue
		}
		readProbe(&out[j], []any{a[2*j], a[2*j+1], a[len(a)-2], a[len(a)-1]}, nil)
	}
	return out
}

// noteLock remembers a key, and that a lock key may live until ttl from
// now, by the clock of the slowest node, for Quiesce.
func (c *Cluster) noteLock(key string, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if key != "" {
		c.keys[key] = true
	}
	c.maxTTL = max(c.maxTTL, ttl)
	if end := time.Now().Add(time.Duration(float64(ttl) / c.slowest)); end.After(c.lastEnd) {
		c.lastEnd = end
	}
}

// Quiesce heals every link fault and resumes paused nodes, waits until
// every lock key the run may have written has expired, and samples every
// lock key on every node that is up into the history (History.Final).
// Clients must be done with their work. Node clocks are left as they are:
// a key expires at its TTL by its node's clock as long as the clock does
// not move, and a scenario that moves a clock back puts it right itself.
func (c *Cluster) Quiesce() {
	c.t.Helper()
	var latency time.Duration
	for _, cl := range c.Clients() {
		latency = max(latency, cl.heal())
	}
	for i := range c.n {
		if c.isPaused(i) {
			c.Resume(i)
		}
	}
	c.AwaitExpiry(latency)
	c.mu.Lock()
	keys := make([]string, 0, len(c.keys))
	for k := range c.keys {
		keys = append(keys, k)
	}
	c.mu.Unlock()
	for _, k := range keys {
		c.H.Final = append(c.H.Final, c.Sample(k))
	}
}

// AwaitExpiry waits until every lock key written so far has expired,
// allowing for commands that may still be on their way for up to latency.
func (c *Cluster) AwaitExpiry(latency time.Duration) {
	c.mu.Lock()
	wait := time.Until(c.lastEnd) + latency + 20*time.Millisecond
	c.mu.Unlock()
	time.Sleep(wait)
}

// A Client is one lock client of a scenario: a redlock.Client whose node
// for node i is a go-redis connection through the client's own Link to a
// RESP proxy (redistest.Proxy) in front of the server. The Link carries
// the TCP faults, the proxy the loss of exactly chosen replies. For a
// Redis Cluster node it is a go-redis cluster client, without a link.
//
// A Client records every acquisition it makes in the cluster's history,
// and what became of the lock: the extensions made with Held.Extend and
// those Lock.AutoExtend makes in the background (its Observer sees them;
// a leadership's renewals too), and the release. Its acquisition calls
// (Lock, TryLock, LockAll, TryLockAll, Acquire, TryAcquire, Campaign) run
// one at a time, and it holds at most one lock per key, one permit per
// semaphore and one leadership per election at a time.
type Client struct {
	Name string
	RL   *redlock.Client
	c    *Cluster

	// Rate is the rate of the client's clock relative to real time; see
	// SAFETY.md. 1 is a perfect clock.
	Rate float64

	// WaitBound, if set, is recorded with every writer's call of the
	// client (Op.WaitBoundMs), for the check of its wait (Starved): what
	// a round, its clean-up and the pause before the next may take, with
	// slack for a loaded machine. Set it before the calls.
	WaitBound time.Duration

	links []*Link // none for Redis Cluster nodes
	nodes []*tapNode

	call sync.Mutex // one acquisition call at a time

	mu sync.Mutex
	// resp holds the RESP proxy each link leads to; spare, for replicated
	// nodes, the proxy to the node's replica, which Failover puts in
	// resp's place; retired, the proxies to masters that failed over.
	resp    []*redistest.Proxy
	spare   []*redistest.Proxy
	retired []*redistest.Proxy
	tokens  []string               // the rounds of the current call, in order
	rounds  map[string]*roundTrace // by token
	past    map[string]bool        // the tokens of earlier calls' rounds
	holding map[string]*Held       // by key: the client's latest lock, until it is released
}

// A roundTrace is what a client's nodes saw of one acquisition round.
type roundTrace struct {
	first   Mono   // when the round sent its first request
	settled []bool // by node: the request ended with an answer before its deadline, or with an error that is not a timeout
}

// NewClient makes a client with its own links to every node, with opts.
func (c *Cluster) NewClient(name string, opts redlock.Options) *Client {
	c.t.Helper()
	cl := &Client{Name: name, c: c, Rate: 1, rounds: make(map[string]*roundTrace), past: make(map[string]bool), holding: make(map[string]*Held)}
	nodes := make([]redlock.Node, c.N())
	for i := range c.n {
		if c.sentinels != nil {
			n, closer := c.sentinelNode(i)
			tn := &tapNode{Node: n, closer: closer, cl: cl, i: i, name: fmt.Sprintf("node%d", i)}
			cl.nodes = append(cl.nodes, tn)
			nodes[i] = tn
			continue
		}
		url := ""
		if c.clusters != nil {
			url = c.clusters[i].URL()
		} else {
			p, err := redistest.NewProxy(c.Server(i))
			c.fatal(err)
			cl.resp = append(cl.resp, p)
			if c.replicas != nil {
				c.mu.Lock()
				r := c.replicas[i]
				c.mu.Unlock()
				var spare *redistest.Proxy
				if r != nil {
					spare, err = redistest.NewProxy(r)
					c.fatal(err)
				}
				cl.spare = append(cl.spare, spare)
			}
			l, err := NewLink(p.Addr())
			c.fatal(err)
			cl.links = append(cl.links, l)
			url = l.URL()
		}
		n, err := goredisnode.Dial(url)
		c.fatal(err)
		tn := &tapNode{Node: n, closer: n, cl: cl, i: i, name: fmt.Sprintf("node%d", i)}
		cl.nodes = append(cl.nodes, tn)
		nodes[i] = tn
	}
	opts.Observer = recorder{cl: cl, next: opts.Observer}
	rl, err := redlock.New(nodes, &opts)
	c.fatal(err)
	cl.RL = rl
	// Open a connection to every node now: dialing is not what the
	// scenarios test, and a first round would pay for it against its
	// node timeout.
	admin.New(rl).Probe(context.Background())
	c.mu.Lock()
	c.clients = append(c.clients, cl)
	c.mu.Unlock()
	return cl
}

func (cl *Client) close() {
	for _, n := range cl.nodes {
		n.closer.Close()
	}
	for _, l := range cl.links {
		l.Close()
	}
	for _, p := range cl.proxies() {
		p.Close()
	}
}

// proxies returns every RESP proxy of the client.
func (cl *Client) proxies() []*redistest.Proxy {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	var ps []*redistest.Proxy
	for _, p := range slices.Concat(cl.resp, cl.spare, cl.retired) {
		if p != nil {
			ps = append(ps, p)
		}
	}
	return ps
}

// proxy returns the RESP proxy that the client's link to node i leads to.
func (cl *Client) proxy(i int) *redistest.Proxy {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.resp[i]
}

// link returns the client's link to node i, and fails the test for a
// Redis Cluster node, which the client reaches without links.
func (cl *Client) link(i int) *Link {
	if cl.links == nil {
		cl.c.t.Fatalf("faulttest: %s reaches the Redis Cluster nodes without links: no link faults", cl.Name)
	}
	return cl.links[i]
}

// heal ends every link fault of the client and returns the largest
// latency that was set, which commands already sent may still suffer.
func (cl *Client) heal() time.Duration {
	var latency time.Duration
	for i, l := range cl.links {
		latency = max(latency, l.Latency())
		if l.Latency() != 0 {
			cl.SetLatency(i, 0)
		}
		if l.Blackholed() {
			cl.Cut(false, i)
		}
		l.SetRefuse(false)
		cl.proxy(i).DropReplies(0, nil)
	}
	return latency
}

// SetLatency sets the latency of the client's link to node i.
func (cl *Client) SetLatency(i int, d time.Duration) {
	cl.link(i).SetLatency(d)
	cl.c.H.AddFault(FaultLatency, i, cl.Name, d.String())
}

// Cut turns the blackhole on (or off) on the client's links to the given
// nodes, all of them when none is given: the client is cut off from them.
func (cl *Client) Cut(on bool, nodes ...int) {
	if len(nodes) == 0 {
		for i := range cl.c.N() {
			nodes = append(nodes, i)
		}
	}
	for _, i := range nodes {
		cl.link(i).SetBlackhole(on)
		cl.c.H.AddFault(FaultBlackhole, i, cl.Name, map[bool]string{true: "on", false: "off"}[on])
	}
}

// ResetConns resets every connection of the client to node i.
func (cl *Client) ResetConns(i int) {
	cl.link(i).Reset()
	cl.c.H.AddFault(FaultReset, i, cl.Name, "RST on every connection")
}

// DropReplies makes the proxy in front of node i apply the next n of the
// client's commands that run the named script and lose their replies.
func (cl *Client) DropReplies(i, n int, script string) {
	cl.link(i)
	cl.proxy(i).DropReplies(n, runs(script))
	cl.c.H.AddFault(FaultDropReply, i, cl.Name, fmt.Sprintf("next %d %s replies", n, script))
}

// Refuse makes the client's link to node i reset every new connection at
// once while on.
func (cl *Client) Refuse(i int, on bool) {
	cl.link(i).SetRefuse(on)
	cl.c.H.AddFault(FaultReset, i, cl.Name, map[bool]string{true: "refusing connections", false: "accepting connections"}[on])
}

// Dropped returns how many replies the proxies of the client dropped.
func (cl *Client) Dropped() int {
	n := 0
	for _, p := range cl.proxies() {
		n += p.Dropped()
	}
	return n
}

// InFlight returns how many requests to node i the client has sent and
// not yet seen end.
func (cl *Client) InFlight(i int) int {
	cl.nodes[i].mu.Lock()
	defer cl.nodes[i].mu.Unlock()
	return cl.nodes[i].inFlight
}

// runs returns a proxy matcher for the commands that run the named script.
func runs(name string) func(args []string) bool {
	var sc *driver.Script
	for _, s := range wire.Scripts() {
		if s.Name() == name {
			sc = s
		}
	}
	if sc == nil {
		panic("faulttest: no script named " + name)
	}
	return func(args []string) bool {
		return len(args) > 1 &&
			(strings.EqualFold(args[0], "EVALSHA") && args[1] == sc.SHA1() ||
				strings.EqualFold(args[0], "EVAL") && args[1] == sc.Source())
	}
}

// A tapNode is a client's redlock.Node for one node: it notes the token of
// every acquisition round and whether each request of the round was
// answered, and counts the requests in flight.
type tapNode struct {
	redlock.Node
	closer interface{ Close() error }
	cl     *Client
	i      int
	name   string

	mu       sync.Mutex
	inFlight int
}

// Name returns a name that is unique among the client's nodes; every link
// has its own address, so the adapter's name would do too, but this one
// reads better in errors.
func (n *tapNode) Name() string { return n.name }

// Eval is a batch of one call.
func (n *tapNode) Eval(ctx context.Context, s *driver.Script, keys, args []string) (any, error) {
	calls := []driver.Call{{Script: s, Keys: keys, Args: args}}
	n.EvalBatch(ctx, calls)
	return calls[0].Reply, calls[0].Err
}

// EvalBatch makes the tapNode a driver.Batcher, so that the suite runs
// the client's batching path: it notes each acquisition's round and, once
// answered, that the node settled it, and hands the batch to the adapter.
func (n *tapNode) EvalBatch(ctx context.Context, calls []driver.Call) {
	for _, c := range calls {
		if acquires(c.Script) && len(c.Args) > 0 {
			n.cl.noteRound(wire.Token(c.Args[0]))
		}
	}
	n.mu.Lock()
	n.inFlight += len(calls)
	n.mu.Unlock()
	deadline, bounded := ctx.Deadline()
	if b, ok := n.Node.(driver.Batcher); ok {
		b.EvalBatch(ctx, calls)
	} else {
		for i := range calls {
			c := &calls[i]
			c.Reply, c.Err = n.Node.Eval(ctx, c.Script, c.Keys, c.Args)
		}
	}
	n.mu.Lock()
	n.inFlight -= len(calls)
	n.mu.Unlock()
	// An answer that comes after the deadline reaches no round: the round
	// has given up on the node by then, and its clean-up may have passed
	// the node before the grant (a stalled machine can hand a reply read
	// in time to the caller late). The deadline of a batch is the earliest
	// of its rounds'; an answer after it counts as unsettled for the
	// batch's later rounds too, which errs on the lenient side for them.
	late := bounded && time.Now().After(deadline)
	for _, c := range calls {
		if acquires(c.Script) && len(c.Args) > 0 && !timedOut(c.Err) && !late {
			n.cl.noteSettled(wire.Token(c.Args[0]), n.i)
		}
	}
}

// acquires reports whether s is an acquisition round's script: of a lock,
// of a lock on several keys, of a semaphore's permit, or of a read-write
// lock's reader or writer. Each takes the
// round's token as its first argument.
func acquires(s *driver.Script) bool {
	switch s.Name() {
	case "acquire", "acquire_permit", "rw_read", "rw_write":
		return true
	}
	return false
}

// timedOut reports whether a request ended without learning whether the
// node ran it: it timed out, or the caller's context ended it. A command
// already sent may then still reach the node. Other errors come after the
// node answered (a lost reply closes the connection once the command ran)
// or before anything was sent.
func timedOut(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, os.ErrDeadlineExceeded)
}

// noteRound notes that a request of the round with token was sent. A
// round of an earlier call is not the current call's: its request to a
// slow node may go out after the call returned, while the round's
// deadline has not passed.
func (cl *Client) noteRound(token string) {
	now := cl.c.H.Now()
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if _, seen := cl.rounds[token]; !seen && !cl.past[token] {
		cl.rounds[token] = &roundTrace{first: now, settled: make([]bool, len(cl.nodes))}
		cl.tokens = append(cl.tokens, token)
	}
}

func (cl *Client) noteSettled(token string, node int) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if r := cl.rounds[token]; r != nil {
		r.settled[node] = true
	}
}

// takeRounds returns the current call's rounds and forgets them.
func (cl *Client) takeRounds() ([]string, map[string]*roundTrace) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	tokens, rounds := cl.tokens, cl.rounds
	cl.tokens, cl.rounds = nil, make(map[string]*roundTrace)
	for _, t := range tokens {
		cl.past[t] = true
	}
	return tokens, rounds
}

// claim converts a deadline the client computed from a moment start into
// the end of validity the client claims, by the client's clock: a client
// whose clock runs at rate r sees Lock.Until − start pass after
// (Lock.Until − start)/r of real time.
func (cl *Client) claim(start Mono, until time.Time) Mono {
	u := cl.c.H.At(until)
	if cl.Rate == 1 {
		return u
	}
	return start + Mono(math.Round(float64(u-start)/cl.Rate))
}

// A Held is what a Client obtained, with its record in the history: a
// lock (L, from Lock, TryLock, LockAll or TryLockAll), a permit (P, from
// Acquire or TryAcquire) or a leadership (E, from Campaign).
type Held struct {
	L  *redlock.Lock
	P  *redlock.Permit
	E  *redlock.Lock
	Op *Op
	cl *Client
	// name is what the client's events call it (observe.OpEvent.Key): the
	// lock's key, a LockAll's keys joined by commas, the semaphore's or
	// the election's key.
	name string
}

// TryLock makes one attempt with Client.TryLock and records it.
func (cl *Client) TryLock(ctx context.Context, key string, ttl time.Duration) (*Held, error) {
	return cl.acquire(acquisition{kind: OpLock, key: key, ttl: ttl}, func(hl *Held) (err error) {
		hl.L, err = cl.RL.TryLock(ctx, key, ttl)
		return err
	})
}

// Lock waits for the lock with Client.Lock and records the call.
func (cl *Client) Lock(ctx context.Context, key string, ttl time.Duration) (*Held, error) {
	return cl.acquire(acquisition{kind: OpLock, key: key, ttl: ttl}, func(hl *Held) (err error) {
		hl.L, err = cl.RL.Lock(ctx, key, ttl)
		return err
	})
}

// LockAll waits for the lock on all of keys with Client.LockAll and
// records the call.
func (cl *Client) LockAll(ctx context.Context, keys []string, ttl time.Duration) (*Held, error) {
	return cl.acquire(allOf(keys, ttl), func(hl *Held) (err error) {
		hl.L, err = cl.RL.LockAll(ctx, keys, ttl)
		return err
	})
}

// TryLockAll makes one attempt with Client.TryLockAll and records it.
func (cl *Client) TryLockAll(ctx context.Context, keys []string, ttl time.Duration) (*Held, error) {
	return cl.acquire(allOf(keys, ttl), func(hl *Held) (err error) {
		hl.L, err = cl.RL.TryLockAll(ctx, keys, ttl)
		return err
	})
}

// allOf describes a LockAll of keys: sorted, without repeats, as the
// client takes them.
func allOf(keys []string, ttl time.Duration) acquisition {
	keys = slices.Clone(keys)
	slices.Sort(keys)
	keys = slices.Compact(keys)
	return acquisition{kind: OpAll, key: strings.Join(keys, ","), keys: keys, ttl: ttl}
}

// Acquire waits for a permit of the semaphore on key with n permits
// (Semaphore.Acquire) and records the call. A client holds at most one
// permit of a semaphore at a time.
func (cl *Client) Acquire(ctx context.Context, key string, n int, ttl time.Duration) (*Held, error) {
	return cl.acquire(permitOf(key, n, ttl), func(hl *Held) (err error) {
		hl.P, err = cl.RL.Semaphore(key, n).Acquire(ctx, ttl)
		return err
	})
}

// TryAcquire makes one attempt at a permit (Semaphore.TryAcquire) and
// records it.
func (cl *Client) TryAcquire(ctx context.Context, key string, n int, ttl time.Duration) (*Held, error) {
	return cl.acquire(permitOf(key, n, ttl), func(hl *Held) (err error) {
		hl.P, err = cl.RL.Semaphore(key, n).TryAcquire(ctx, ttl)
		return err
	})
}

// permitOf describes an acquisition of a permit: its rounds may be granted
// any of the n slots.
func permitOf(key string, n int, ttl time.Duration) acquisition {
	a := acquisition{kind: OpPermit, key: key, permits: n, ttl: ttl}
	for i := range n {
		a.keys = append(a.keys, wire.PermitKey(key, i))
	}
	return a
}

// Campaign campaigns in the election on key, whose leaders hold for ttl
// (Client.Election, Election.Campaign), until this client leads or ctx
// is done, and records the call. The leadership renews itself
// (Lock.AutoExtend), and the recorder records each renewal: from before
// the call, since the first may come before Campaign has returned.
func (cl *Client) Campaign(ctx context.Context, key string, ttl time.Duration, value string) (*Held, error) {
	return cl.acquire(acquisition{kind: OpLeader, key: key, ttl: ttl}, func(hl *Held) (err error) {
		hl.E, err = cl.RL.Election(key, ttl).Campaign(ctx, value)
		return err
	})
}

// An acquisition says what a call takes.
type acquisition struct {
	kind    OpKind
	key     string   // Op.Key, and what the client's events call it
	keys    []string // the lock keys its rounds may take, if not key
	permits int
	ttl     time.Duration
}

// candidates returns the lock keys the acquisition's rounds may take.
func (a acquisition) candidates() []string {
	if a.keys != nil {
		return a.keys
	}
	return []string{a.key}
}

func (cl *Client) acquire(a acquisition, call func(hl *Held) error) (*Held, error) {
	cl.call.Lock()
	defer cl.call.Unlock()
	h := cl.c.H
	for _, k := range a.candidates() {
		cl.c.noteLock(k, a.ttl)
	}
	if a.kind == OpRead || a.kind == OpWrite {
		cl.c.noteRW(a.key, a.ttl, clientx.Of(cl.RL).IntentTTL(a.ttl))
	}
	op := &Op{ID: h.NextID(), Client: cl.Name, Kind: a.kind, Key: a.key, Permits: a.permits, TTLms: a.ttl.Milliseconds(), Start: h.Now()}
	if a.kind == OpAll {
		op.Keys = a.keys
	}
	if a.kind == OpWrite {
		op.WaitBoundMs = cl.WaitBound.Milliseconds()
	}
	hl := &Held{Op: op, cl: cl, name: a.key}
	if a.kind == OpLeader {
		// A leadership renews itself from inside Campaign on.
		cl.mu.Lock()
		cl.holding[hl.name] = hl
		cl.mu.Unlock()
	}
	err := call(hl)
	ret := h.Now()
	for _, k := range a.candidates() {
		cl.c.noteLock(k, a.ttl)
	}
	tokens, rounds := cl.takeRounds()
	var unsettled []RoundNode
	for _, t := range tokens {
		for i, ok := range rounds[t].settled {
			if !ok {
				unsettled = append(unsettled, RoundNode{Token: t, Node: i})
			}
		}
	}
	// The recorder may be recording a leadership's renewal meanwhile.
	h.Mu.Lock()
	op.Return, op.Tokens, op.Unsettled = ret, tokens, unsettled
	h.Mu.Unlock()
	defer h.AddOp(op)
	leftover := func(winner string) {
		var ss []Sample
		if a.kind == OpRead {
			// A reader's rounds are members of the readers: each
			// failed round's token is looked for there.
			ss = cl.c.SampleReaders(a.key, slices.DeleteFunc(slices.Clone(tokens), func(t string) bool { return t == winner }))
		} else {
			ss = cl.c.SampleAll(a.candidates())
		}
		h.Mu.Lock()
		defer h.Mu.Unlock()
		if len(ss) == 1 {
			op.Leftover = &ss[0]
		} else {
			op.Leftovers = ss
		}
	}
	if err != nil {
		if a.kind == OpLeader {
			cl.mu.Lock()
			delete(cl.holding, hl.name)
			cl.mu.Unlock()
		}
		e := &Op{Err: err.Error(), Reason: reason(err)}
		var oe *redlock.OpError
		if errors.As(err, &oe) {
			for _, n := range oe.Nodes {
				e.Outcomes = append(e.Outcomes, n.Outcome.String())
			}
		}
		h.Mu.Lock()
		op.Err, op.Reason, op.Outcomes = e.Err, e.Reason, e.Outcomes
		h.Mu.Unlock()
		if len(tokens) > 0 {
			leftover("")
		}
		return nil, err
	}
	var token, holder string
	var fence int64
	var until time.Time
	switch {
	case hl.L != nil:
		token, holder, fence, until = wire.HandoverToken(hl.L.Token()), hl.L.ID(), hl.L.Fence(), hl.L.Until()
	case hl.P != nil:
		token, holder, fence, until = wire.HandoverToken(hl.P.Token()), hl.P.ID(), hl.P.Fence(), hl.P.Until()
	default:
		// A Leadership does not show its token: it is that of the call's
		// last round, which won (rounds run in turn).
		token, holder, fence, until = tokens[len(tokens)-1], hl.E.ID(), hl.E.Fence(), hl.E.Until()
	}
	var first Mono
	if r := rounds[token]; r != nil {
		first = r.first
	} else {
		cl.c.t.Errorf("faulttest: %s's acquisition has no round of its token", cl.Name)
	}
	h.Mu.Lock()
	op.OK, op.Token, op.Holder, op.Fence = true, token, holder, fence
	op.RoundStart = first
	op.Until = cl.claim(first, until)
	if hl.P != nil {
		op.Slot = hl.P.Slot
		op.Keys = []string{wire.PermitKey(a.key, op.Slot)}
	}
	h.Mu.Unlock()
	hl.Probe()
	if len(tokens) > 1 {
		leftover(token)
	}
	if a.kind != OpLeader {
		cl.mu.Lock()
		cl.holding[hl.name] = hl
		cl.mu.Unlock()
	}
	return hl, nil
}

// reason names the sentinel error err wraps: "taken", "no quorum",
// "refused", "expired", "lost", "context" (the caller's context ended the
// call) or "other".
func reason(err error) string {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "context"
	case errors.Is(err, redlock.ErrTaken):
		return "taken"
	case errors.Is(err, redlock.ErrNoQuorum):
		return "no quorum"
	case errors.Is(err, redlock.ErrRefused):
		return "refused"
	case errors.Is(err, redlock.ErrExpired):
		return "expired"
	case errors.Is(err, redlock.ErrLockLost):
		return "lost"
	}
	return "other"
}

// Probe samples the lock's keys on every node into the lock's record, for
// the quorum check: a LockAll's keys, or a semaphore's slots, read together
// on each node; a reader's token among the readers (SampleReaders).
func (hl *Held) Probe() {
	h := hl.cl.c.H
	h.Mu.Lock()
	keys, shared, token := hl.Op.LockKeys(), hl.Op.Shared(), hl.Op.Token
	h.Mu.Unlock()
	var ss []Sample
	if shared {
		ss = hl.cl.c.SampleReaders(keys[0], []string{token})
	} else {
		ss = hl.cl.c.SampleAll(keys)
	}
	h.Mu.Lock()
	defer h.Mu.Unlock()
	hl.Op.Probes = append(hl.Op.Probes, ss...)
}

// Context returns the context of what hl holds; see Lock.Context.
func (hl *Held) Context() context.Context {
	switch {
	case hl.P != nil:
		return hl.P.Context()
	case hl.E != nil:
		return hl.E.Context()
	}
	return hl.L.Context()
}

// Valid reports whether what hl holds is within its validity, and not
// lost nor released.
func (hl *Held) Valid() bool {
	switch {
	case hl.P != nil:
		return hl.P.Context().Err() == nil && time.Now().Before(hl.P.Until())
	case hl.E != nil:
		return hl.E.Context().Err() == nil && time.Now().Before(hl.E.Until())
	}
	return hl.L.Context().Err() == nil && time.Now().Before(hl.L.Until())
}

// Extend extends the lock or the permit with Lock.Extend or Permit.Extend
// and records the call. A leadership renews itself and is not extended.
func (hl *Held) Extend(ctx context.Context, ttl time.Duration) error {
	if hl.E != nil {
		return errors.New("faulttest: a leadership renews itself")
	}
	hl.note(ttl)
	start := hl.cl.c.H.Now()
	ctx = context.WithValue(ctx, recordedBy{}, "Held.Extend")
	var err error
	var until time.Time
	if hl.P != nil {
		if err = hl.P.Extend(ctx, ttl); err == nil {
			until = hl.P.Until()
		}
	} else if err = hl.L.Extend(ctx, ttl); err == nil {
		until = hl.L.Until()
	}
	hl.record(start, ttl, err, until, false)
	return err
}

// note notes that the keys of hl may live until ttl from now.
func (hl *Held) note(ttl time.Duration) {
	h := hl.cl.c.H
	h.Mu.Lock()
	keys := hl.Op.LockKeys()
	h.Mu.Unlock()
	for _, k := range keys {
		hl.cl.c.noteLock(k, ttl)
	}
}

// record records an extension that started at start and has just
// returned err, and samples the lock's key after a successful one. until
// is the end of validity the lock claims after a successful extension;
// auto tells an extension of AutoExtend, which the Observer reports with
// its deadline (OpEvent.Until), from one of Held.Extend.
func (hl *Held) record(start Mono, ttl time.Duration, err error, until time.Time, auto bool) {
	h := hl.cl.c.H
	e := Extend{Start: start, Return: h.Now(), TTLms: ttl.Milliseconds(), Auto: auto}
	if err == nil {
		e.OK, e.Until = true, hl.cl.claim(e.Start, until)
	} else {
		e.Err, e.Lost = err.Error(), errors.Is(err, redlock.ErrLockLost)
	}
	hl.note(ttl)
	h.Mu.Lock()
	hl.Op.Extends = append(hl.Op.Extends, e)
	h.Mu.Unlock()
	if err == nil {
		hl.Probe()
	}
}

// Release releases the lock or the permit with Lock.Release or
// Permit.Release, or resigns the leadership with Leadership.Resign, and
// records the call.
func (hl *Held) Release(ctx context.Context) error {
	h := hl.cl.c.H
	r := &Release{Call: h.Now()}
	var err error
	switch {
	case hl.P != nil:
		err = hl.P.Release(ctx)
	case hl.E != nil:
		err = hl.E.Release(ctx)
	default:
		err = hl.L.Release(ctx)
	}
	r.Return = h.Now()
	if err != nil {
		r.Err = err.Error()
	}
	h.Mu.Lock()
	hl.Op.Release = r
	h.Mu.Unlock()
	hl.cl.mu.Lock()
	if hl.cl.holding[hl.name] == hl {
		delete(hl.cl.holding, hl.name)
	}
	hl.cl.mu.Unlock()
	return err
}

// recordedBy is the context key that marks an extension recorded by its
// caller, not by the recorder.
type recordedBy struct{}

// extendStart is the context key under which the recorder keeps the start
// of an extension it records.
type extendStart struct{}

// A recorder is every Client's observe.Observer. It records in the
// history the extensions that Held.Extend does not record itself: those of
// Lock.AutoExtend, which calls Lock.Extend on a goroutine of its own. An
// extension is the client's lock on its key, since a client holds one lock
// per key at a time. Other events go to next, if any.
//
// Once an automatic extension has succeeded, the recorder takes the new
// deadline from the event (OpEvent.Until) and samples the key on every
// node before it returns, on AutoExtend's goroutine: about a millisecond,
// which the next extension, a third of a TTL away, can spare.
type recorder struct {
	cl   *Client
	next observe.Observer
}

func (rec recorder) Start(ctx context.Context, op, key string) context.Context {
	if rec.next != nil {
		ctx = rec.next.Start(ctx, op, key)
	}
	if op != "extend" || ctx.Value(recordedBy{}) != nil {
		return ctx
	}
	return context.WithValue(ctx, extendStart{}, rec.cl.c.H.Now())
}

func (rec recorder) Observe(ctx context.Context, e observe.Event) {
	if rec.next != nil {
		rec.next.Observe(ctx, e)
	}
	ev, ok := e.(observe.OpEvent)
	start, auto := ctx.Value(extendStart{}).(Mono)
	if !ok || ev.Op != "extend" || !auto {
		return
	}
	rec.cl.mu.Lock()
	hl := rec.cl.holding[ev.Key]
	rec.cl.mu.Unlock()
	if hl == nil {
		rec.cl.c.t.Errorf("faulttest: %s extended %q, which it does not hold (err %v)", rec.cl.Name, ev.Key, ev.Err)
		return
	}
	hl.record(start, ev.TTL, ev.Err, ev.Until, true)
}

// ClaimedUntil returns the end of validity the lock's client claims now.
func (hl *Held) ClaimedUntil() time.Time {
	op := hl.snapshot()
	until := op.Until
	for _, e := range op.Extends {
		if e.OK {
			until = e.Until
		}
	}
	return hl.cl.c.H.Time(until)
}

func (hl *Held) snapshot() *Op {
	h := hl.cl.c.H
	h.Mu.Lock()
	defer h.Mu.Unlock()
	op := *hl.Op
	op.Extends = append([]Extend(nil), op.Extends...)
	return &op
}
