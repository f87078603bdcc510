package faulttest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/goredisnode"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// This file holds what a Cluster does with nodes that are more than one
// process: a master with a replica (Config.Replicated), and a Redis
// Cluster (Config.ClusterMasters).

// startReplicas gives every node's master a replica, which replicates
// through a proxy of its own so that CutReplication can cut the stream,
// and waits until each has synchronized.
func (c *Cluster) startReplicas(persistence bool) {
	c.t.Helper()
	for _, m := range c.servers {
		p := redistest.StartProxy(c.t, m)
		c.replLinks = append(c.replLinks, p)
		c.replicas = append(c.replicas, redistest.StartReplica(c.t, m, p, redistest.Config{Persistence: persistence}))
	}
}

// processes returns node i's processes: its server, its replica if it
// has one, or the running masters of its cluster.
func (c *Cluster) processes(i int) []*redistest.Server {
	if c.clusters != nil {
		var ms []*redistest.Server
		for _, m := range c.clusters[i].Masters() {
			if m.Running() {
				ms = append(ms, m)
			}
		}
		return ms
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	ps := []*redistest.Server{c.servers[i]}
	if c.replicas != nil && c.replicas[i] != nil {
		ps = append(ps, c.replicas[i])
	}
	return ps
}

// CutReplication cuts (or restores) the replication stream from node i's
// master to its replica: while it is cut, the replica receives none of the
// master's writes.
func (c *Cluster) CutReplication(i int, on bool) {
	c.t.Helper()
	if c.replLinks == nil {
		c.t.Fatal("faulttest: CutReplication on a cluster without Config.Replicated")
	}
	c.replLinks[i].SetBlackhole(on)
	c.H.AddFault(FaultReplication, i, "", map[bool]string{true: "replication stream cut", false: "replication stream restored"}[on])
}

// CaughtUp waits until node i's replica has applied everything its master
// had written when CaughtUp was called.
func (c *Cluster) CaughtUp(i int) {
	c.t.Helper()
	c.mu.Lock()
	m, r := c.servers[i], c.replicas[i]
	c.mu.Unlock()
	if r == nil {
		c.t.Fatalf("faulttest: node %d has no replica", i)
	}
	c.fatal(r.CaughtUp(m))
}

// Failover does what a failover does to node i: its master is killed
// with SIGKILL and its replica promoted (REPLICAOF NO ONE), with whatever
// its replication stream carried. From then on the replica is node i:
// every client's link to the node leads to it, and every connection the
// link had is reset, as a virtual address that moves to the new master
// would do.
func (c *Cluster) Failover(i int) {
	c.t.Helper()
	c.mu.Lock()
	r := c.replicas[i]
	c.mu.Unlock()
	if r == nil {
		c.t.Fatalf("faulttest: node %d has no replica to fail over to", i)
	}
	if c.sentinels != nil {
		c.t.Fatal("faulttest: Failover on nodes that Sentinels watch: use SentinelFailover")
	}
	c.Kill(i)
	c.fatal(r.Promote())
	c.mu.Lock()
	c.servers[i], c.replicas[i], c.down[i] = r, nil, false
	c.mu.Unlock()
	for _, cl := range c.Clients() {
		cl.failover(i)
	}
	c.H.AddFault(FaultPromote, i, "", "replica "+r.Addr()+" promoted to master; the clients' links lead to it")
}

// startSentinels has a Sentinel of its own watch every node's master,
// under the name "node<i>", and waits until each knows the master's
// replica: a Sentinel promotes only a replica it knows.
func (c *Cluster) startSentinels() {
	c.t.Helper()
	for i, m := range c.servers {
		c.sentinels = append(c.sentinels, redistest.StartSentinel(c.t, sentinelName(i), m, redistest.Config{}))
	}
	for i, s := range c.sentinels {
		c.await(fmt.Sprintf("the Sentinel of node %d to know its replica", i), func() bool {
			v, _ := s.Do("SENTINEL", "REPLICAS", sentinelName(i))
			rs, _ := v.([]any)
			return len(rs) == 1
		})
	}
}

func sentinelName(i int) string { return fmt.Sprintf("node%d", i) }

// sentinelNode returns a Node for node i over a go-redis failover client
// that asks the node's Sentinel for its master, and what closes both.
func (c *Cluster) sentinelNode(i int) (redlock.Node, interface{ Close() error }) {
	fc := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    sentinelName(i),
		SentinelAddrs: []string{c.sentinels[i].Addr()},
		// One try per call, bounded by the call's context, as Dial's
		// clients do: the redlock round decides what to retry.
		MaxRetries:            -1,
		ContextTimeoutEnabled: true,
	})
	n, err := goredisnode.New(fc, "")
	if err != nil {
		panic(err) // the options above are the ones New requires
	}
	return n, closers{n, fc}
}

// closers closes each of its elements, in order.
type closers []interface{ Close() error }

func (cs closers) Close() error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// SentinelFailover kills the masters of nodes with SIGKILL, all at once,
// and waits until each node's Sentinel has promoted the node's replica
// (with whatever its replication stream carried) and names it as the
// master, so that clients, which ask the Sentinel, reach it. It returns
// when the last promotion was seen; the History has each promotion at
// the moment it was seen (polled every 10ms).
func (c *Cluster) SentinelFailover(nodes ...int) {
	c.t.Helper()
	if c.sentinels == nil {
		c.t.Fatal("faulttest: SentinelFailover without Config.Sentinels")
	}
	for _, i := range nodes {
		c.Kill(i)
	}
	for _, i := range nodes {
		c.mu.Lock()
		r := c.replicas[i]
		c.mu.Unlock()
		if r == nil {
			c.t.Fatalf("faulttest: node %d has no replica to fail over to", i)
		}
		c.await(fmt.Sprintf("the Sentinel of node %d to promote its replica", i), func() bool {
			v, _ := c.sentinels[i].Do("SENTINEL", "GET-MASTER-ADDR-BY-NAME", sentinelName(i))
			hp, _ := v.([]any)
			if len(hp) != 2 {
				return false
			}
			host, _ := hp[0].(string)
			port, _ := hp[1].(string)
			role, _ := r.Do("ROLE")
			rs, _ := role.([]any)
			return net.JoinHostPort(host, port) == r.Addr() && len(rs) > 0 && rs[0] == "master"
		})
		c.mu.Lock()
		c.servers[i], c.replicas[i], c.down[i] = r, nil, false
		c.mu.Unlock()
		c.H.AddFault(FaultPromote, i, "", "the Sentinel promoted replica "+r.Addr()+" to master; clients that ask it reach the replica")
	}
}

// await polls cond every 10ms until it holds, and fails the test after
// 30s.
func (c *Cluster) await(what string, cond func() bool) {
	c.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			c.t.Fatalf("faulttest: gave up waiting for %s after 30s", what)
		}
	}
}

// failover points the client's link to node i at its proxy to the node's
// replica.
func (cl *Client) failover(i int) {
	cl.mu.Lock()
	p := cl.spare[i]
	cl.retired = append(cl.retired, cl.resp[i])
	cl.resp[i], cl.spare[i] = p, nil
	cl.mu.Unlock()
	cl.links[i].Redirect(p.Addr())
}

// startClusters starts a Redis Cluster of masters masters for every node,
// at once.
func (c *Cluster) startClusters(masters int) {
	c.t.Helper()
	c.servers = make([]*redistest.Server, c.n)
	c.clusters = make([]*redistest.Cluster, c.n)
	c.admin = make(map[string]*redis.Client)
	errs := make([]error, c.n)
	var wg sync.WaitGroup
	for i := range c.n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.clusters[i], errs[i] = redistest.NewCluster(masters, redistest.Config{})
		}()
	}
	wg.Wait()
	for _, cl := range c.clusters {
		if cl != nil {
			c.t.Cleanup(func() {
				if err := cl.Close(); err != nil {
					c.t.Error(err)
				}
			})
		}
	}
	c.fatal(errors.Join(errs...))
}

// RedisCluster returns node i's Redis Cluster.
func (c *Cluster) RedisCluster(i int) *redistest.Cluster {
	c.t.Helper()
	if c.clusters == nil {
		c.t.Fatal("faulttest: RedisCluster on a cluster without Config.ClusterMasters")
	}
	return c.clusters[i]
}

// MasterOf returns the master of node i's cluster that serves key's slot.
func (c *Cluster) MasterOf(i int, key string) *redistest.Server {
	c.t.Helper()
	m, err := c.RedisCluster(i).MasterOf(key)
	c.fatal(err)
	return m
}

// KillMaster kills m, a master of node i's cluster, with SIGKILL.
func (c *Cluster) KillMaster(i int, m *redistest.Server) {
	c.t.Helper()
	c.fatal(m.Kill())
	c.H.AddFault(FaultKill, i, "", "SIGKILL of master "+m.Addr())
}

// RestartMaster starts m, a master of node i's cluster, again, empty. It
// comes back with its node configuration and serves its slots again once
// it has rejoined the cluster; KillMaster and RestartMaster do not wait
// for that.
func (c *Cluster) RestartMaster(i int, m *redistest.Server) {
	c.t.Helper()
	c.fatal(m.Restart())
	c.loadScriptsOn(i, m)
	c.H.AddFault(FaultRestart, i, "", "master "+m.Addr()+" started again, empty")
}

// BeginMove begins to move the hash slot of key in node i's cluster to
// the master to, as a reshard does (redistest.Cluster.BeginMove), and
// records it; FinishMove ends it. It returns nil if to serves the slot
// already.
func (c *Cluster) BeginMove(i int, key string, to *redistest.Server) *redistest.SlotMove {
	c.t.Helper()
	cl := c.RedisCluster(i)
	slot, err := cl.Slot(key)
	c.fatal(err)
	from := cl.Owner(slot)
	m, err := cl.BeginMove(slot, to)
	c.fatal(err)
	if m != nil {
		c.H.AddFault(FaultMove, i, "", fmt.Sprintf("slot %d begins to move from %s to %s", slot, from.Addr(), to.Addr()))
	}
	return m
}

// FinishMove migrates the keys of a slot move that BeginMove began on node
// i, ends the move and waits until the cluster is ok again.
func (c *Cluster) FinishMove(i int, m *redistest.SlotMove) {
	c.t.Helper()
	c.fatal(m.Finish())
	c.H.AddFault(FaultMove, i, "", "slot move finished")
}

// awaitUptime waits until every master of every cluster reports an
// uptime_in_seconds of at least d.
func (c *Cluster) awaitUptime(d time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(d + 30*time.Second)
	for i := range c.n {
		for _, m := range c.clusters[i].Masters() {
			for {
				v, err := m.Do("INFO", "server")
				c.fatal(err)
				text, _ := v.(string)
				_, rest, _ := strings.Cut(text, "uptime_in_seconds:")
				up, _, _ := strings.Cut(rest, "\r\n")
				secs, err := strconv.Atoi(up)
				c.fatal(err)
				if time.Duration(secs)*time.Second >= d {
					break
				}
				if time.Now().After(deadline) {
					c.t.Fatalf("faulttest: master %s has run for %ds only", m.Addr(), secs)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
}

// adminClient returns the test's own connection to a cluster master.
func (c *Cluster) adminClient(m *redistest.Server) *redis.Client {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.admin[m.Addr()]
	if a == nil {
		a = redis.NewClient(&redis.Options{Addr: m.Addr(), MaxRetries: -1, DialTimeout: time.Second,
			ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second, PoolSize: 4})
		c.admin[m.Addr()] = a
	}
	return a
}

// sampleCluster reads key on every master of node i's cluster at once. The
// master that serves the key's slot answers; while the slot moves, its old
// owner answers for the keys it still has and redirects (ASK) for the
// others, and its new owner, asked with ASKING first, answers for the keys
// it has received. Masters that do not serve the slot answer MOVED. The
// node holds what a master that answered holds.
func (c *Cluster) sampleCluster(i int, key string) NodeSample {
	masters := c.clusters[i].Masters()
	answers := make([]NodeSample, len(masters))
	var wg sync.WaitGroup
	for j, m := range masters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			pipe := c.adminClient(m).Pipeline()
			pipe.Do(ctx, "ASKING")
			probe := pipe.Eval(ctx, probeScript, []string{key})
			pipe.Exec(ctx)
			answers[j] = NodeSample{Node: i, At: c.H.Now()}
			readProbe(&answers[j], probe.Val(), probe.Err())
		}()
	}
	wg.Wait()
	ns := NodeSample{Node: i}
	var errs []string
	for j, a := range answers {
		ns.At = max(ns.At, a.At)
		switch {
		case !a.Reached:
			errs = append(errs, masters[j].Addr()+": "+a.Err)
		case !ns.Reached || ns.Value == "" && a.Value != "":
			ns.Reached, ns.Value, ns.Expires = true, a.Value, a.Expires
		}
	}
	if !ns.Reached {
		ns.Err = strings.Join(errs, "; ")
	}
	return ns
}
