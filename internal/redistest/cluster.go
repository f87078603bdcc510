package redistest

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	// clusterSlots is the number of hash slots of a Redis Cluster.
	clusterSlots = 16384
	// clusterNodeTimeout is the cluster-node-timeout of cluster nodes: a
	// node that does not answer the others for this long is taken to be
	// failing, and once a majority of the masters agree, the cluster
	// stops serving until it is back.
	clusterNodeTimeout = 5 * time.Second
	// clusterSettleTimeout bounds WaitOK.
	clusterSettleTimeout = 30 * time.Second
	// migrateBatch is how many keys MoveSlot migrates with one MIGRATE.
	migrateBatch = 100
)

// A Cluster is a Redis Cluster of masters without replicas on loopback
// ports, which together serve all 16384 hash slots, each master an equal
// share of them in order. Each master is a [Server] started with
// --cluster-enabled yes, whose node configuration (nodes.conf) is kept in
// its data directory: a master that is killed and restarted comes back
// with its node ID and its slots, and rejoins the cluster, with its data
// gone unless Config.Persistence keeps it.
//
// The cluster is built with cluster commands (CLUSTER ADDSLOTSRANGE,
// CLUSTER MEET), without redis-cli. Its nodes take another to be failing
// after 5s without an answer (cluster-node-timeout), and then stop
// serving until it is back: a test that keeps a master down for longer
// has a cluster that is down, and takes a while to come back.
//
// The methods of a Cluster are safe for concurrent use, but a test that
// kills, restarts or moves slots between masters while calling WaitOK or
// MoveSlot gets the errors it asks for.
type Cluster struct {
	masters []*Server
	ids     []string // node IDs, in the order of masters

	moving sync.Mutex // held from BeginMove to Finish

	mu    sync.Mutex // guards owner
	owner []int      // for each slot, the index of the master that serves it
}

// NewCluster starts a cluster of n masters with cfg, and waits until
// every master reports cluster_state:ok and agrees on which master serves
// each slot. Config.Unix is not supported: cluster nodes talk over TCP.
// Config.Args come after the arguments that make a server a cluster node,
// so they can override them, such as --cluster-node-timeout.
func NewCluster(n int, cfg Config) (*Cluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("redistest: a cluster of %d masters", n)
	}
	c := &Cluster{masters: make([]*Server, n), ids: make([]string, n), owner: make([]int, clusterSlots)}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.masters[i], errs[i] = newServer(cfg, cluster, "")
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.form(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// StartCluster is like NewCluster but fails t if the cluster does not
// form, and closes it when t ends.
func StartCluster(t testing.TB, n int, cfg Config) *Cluster {
	t.Helper()
	c, err := NewCluster(n, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// form assigns the slots, introduces the masters to each other and waits
// until the cluster is ok.
func (c *Cluster) form() error {
	n := len(c.masters)
	for i, m := range c.masters {
		id, err := m.Do("CLUSTER", "MYID")
		if err != nil {
			return fmt.Errorf("redistest: CLUSTER MYID: %w", err)
		}
		c.ids[i], _ = id.(string)
		lo, hi := i*clusterSlots/n, (i+1)*clusterSlots/n-1
		for s := lo; s <= hi; s++ {
			c.owner[s] = i
		}
		// Distinct configuration epochs, as redis-cli gives a new cluster,
		// spare the masters the collisions they would otherwise resolve
		// one at a time.
		if _, err := m.Do("CLUSTER", "SET-CONFIG-EPOCH", strconv.Itoa(i+1)); err != nil {
			return fmt.Errorf("redistest: CLUSTER SET-CONFIG-EPOCH: %w", err)
		}
		if _, err := m.Do("CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi)); err != nil {
			return fmt.Errorf("redistest: CLUSTER ADDSLOTSRANGE: %w", err)
		}
	}
	// Each master meets every other at once, rather than waiting to hear
	// of them in gossip, which takes seconds.
	for i, a := range c.masters {
		for _, b := range c.masters[i+1:] {
			host, port, _ := net.SplitHostPort(b.Addr())
			if _, err := a.Do("CLUSTER", "MEET", host, port, b.busPort); err != nil {
				return fmt.Errorf("redistest: CLUSTER MEET: %w", err)
			}
		}
	}
	return c.WaitOK()
}

// Masters returns the cluster's masters, in the order of the slots they
// were given: the first serves slot 0. A test may Kill, Pause or Restart
// them; KillAndRestart also waits until the cluster is ok again.
func (c *Cluster) Masters() []*Server { return slices.Clone(c.masters) }

// Addrs returns the masters' addresses, "127.0.0.1:PORT", in order.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.masters))
	for i, m := range c.masters {
		addrs[i] = m.Addr()
	}
	return addrs
}

// URL returns the cluster's URL as go-redis's ParseClusterURL reads it:
// the first master's address, and the others' in addr parameters, as in
// "redis://127.0.0.1:7000?addr=127.0.0.1:7001&addr=127.0.0.1:7002".
func (c *Cluster) URL() string {
	var b strings.Builder
	b.WriteString("redis://" + c.masters[0].Addr())
	for i, m := range c.masters[1:] {
		if i == 0 {
			b.WriteString("?")
		} else {
			b.WriteString("&")
		}
		b.WriteString("addr=" + m.Addr())
	}
	return b.String()
}

// Slot returns the hash slot of key, as a running master computes it
// (CLUSTER KEYSLOT).
func (c *Cluster) Slot(key string) (int, error) {
	var err error
	for _, m := range c.masters {
		if !m.Running() {
			continue
		}
		var v any
		if v, err = m.Do("CLUSTER", "KEYSLOT", key); err == nil {
			slot, ok := v.(int64)
			if !ok {
				return 0, fmt.Errorf("redistest: CLUSTER KEYSLOT answered %#v", v)
			}
			return int(slot), nil
		}
	}
	if err == nil {
		err = errors.New("no master is running")
	}
	return 0, fmt.Errorf("redistest: CLUSTER KEYSLOT: %w", err)
}

// Owner returns the master that serves slot: the one the cluster was
// formed with, or the one MoveSlot moved it to.
func (c *Cluster) Owner(slot int) *Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.masters[c.owner[slot]]
}

// MasterOf returns the master that serves key's slot.
func (c *Cluster) MasterOf(key string) (*Server, error) {
	slot, err := c.Slot(key)
	if err != nil {
		return nil, err
	}
	return c.Owner(slot), nil
}

// KillAndRestart kills m, one of the cluster's masters, with SIGKILL,
// starts it again on the same address, and waits until the cluster is ok.
// m comes back with its node configuration and its slots, and without its
// data unless Config.Persistence keeps it. A restarted master does not
// serve (it answers CLUSTERDOWN) for its first two seconds, as every
// Redis Cluster master does.
func (c *Cluster) KillAndRestart(m *Server) error {
	if !slices.Contains(c.masters, m) {
		return errors.New("redistest: KillAndRestart of a server that is not one of the cluster's masters")
	}
	if err := m.Kill(); err != nil {
		return err
	}
	if err := m.Restart(); err != nil {
		return err
	}
	return c.WaitOK()
}

// WaitOK waits until every master is running, reports cluster_state:ok,
// knows every other master as a connected master without failure flags,
// and serves the slots that Owner says. It gives up after 30s, with an
// error that says what was still missing.
func (c *Cluster) WaitOK() error {
	deadline := time.Now().Add(clusterSettleTimeout)
	for {
		err := c.checkOK()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: the cluster is not ok after %v: %w", clusterSettleTimeout, err)
		}
		time.Sleep(pollInterval)
	}
}

// checkOK says why the cluster is not ok, or returns nil.
func (c *Cluster) checkOK() error {
	c.mu.Lock()
	want := c.ranges()
	c.mu.Unlock()
	for i, m := range c.masters {
		if !m.Running() {
			return fmt.Errorf("master %d (%s) is not running", i, m.Addr())
		}
		info, err := m.Do("CLUSTER", "INFO")
		if err != nil {
			return fmt.Errorf("master %d: CLUSTER INFO: %w", i, err)
		}
		if s, _ := info.(string); !strings.Contains(s, "cluster_state:ok\r\n") {
			return fmt.Errorf("master %d: cluster_state is not ok", i)
		}
		if err := c.checkNodes(m); err != nil {
			return fmt.Errorf("master %d: %w", i, err)
		}
		got, err := c.servedSlots(m)
		if err != nil {
			return fmt.Errorf("master %d: CLUSTER SLOTS: %w", i, err)
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("master %d: CLUSTER SLOTS has %v, want %v", i, got, want)
		}
	}
	return nil
}

// checkNodes checks that m knows exactly the cluster's masters (CLUSTER
// NODES), each connected and without flags other than "myself".
func (c *Cluster) checkNodes(m *Server) error {
	v, err := m.Do("CLUSTER", "NODES")
	if err != nil {
		return fmt.Errorf("CLUSTER NODES: %w", err)
	}
	text, _ := v.(string)
	var seen []string
	for line := range strings.Lines(text) {
		// <id> <ip:port@bus> <flags> <master> <ping> <pong> <epoch> <link> <slots>...
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		flags := strings.Split(f[2], ",")
		flags = slices.DeleteFunc(flags, func(s string) bool { return s == "myself" })
		if !slices.Equal(flags, []string{"master"}) || f[7] != "connected" {
			return fmt.Errorf("node %s (%s) is %s, %s", f[0], f[1], f[2], f[7])
		}
		seen = append(seen, f[0])
	}
	slices.Sort(seen)
	ids := slices.Sorted(slices.Values(c.ids))
	if !slices.Equal(seen, ids) {
		return fmt.Errorf("knows the nodes %v, want %v", seen, ids)
	}
	return nil
}

// A slotRange is a range of slots and the port of the master that serves
// them, as CLUSTER SLOTS lists them.
type slotRange struct {
	lo, hi int
	port   string
}

func (r slotRange) String() string { return fmt.Sprintf("%d-%d@%s", r.lo, r.hi, r.port) }

// ranges returns the slot ranges that owner says, in order. c.mu must be
// held.
func (c *Cluster) ranges() []slotRange {
	var rs []slotRange
	for s, i := range c.owner {
		_, port, _ := net.SplitHostPort(c.masters[i].Addr())
		if n := len(rs); n > 0 && rs[n-1].port == port && rs[n-1].hi == s-1 {
			rs[n-1].hi = s
			continue
		}
		rs = append(rs, slotRange{s, s, port})
	}
	return rs
}

// servedSlots returns the slot ranges that m says the masters serve
// (CLUSTER SLOTS), in order.
func (c *Cluster) servedSlots(m *Server) ([]slotRange, error) {
	v, err := m.Do("CLUSTER", "SLOTS")
	if err != nil {
		return nil, err
	}
	entries, _ := v.([]any)
	var rs []slotRange
	for _, e := range entries {
		f, _ := e.([]any)
		if len(f) < 3 {
			return nil, fmt.Errorf("unexpected entry %#v", e)
		}
		lo, ok1 := f[0].(int64)
		hi, ok2 := f[1].(int64)
		node, _ := f[2].([]any)
		if !ok1 || !ok2 || len(node) < 2 {
			return nil, fmt.Errorf("unexpected entry %#v", e)
		}
		port, ok := node[1].(int64)
		if !ok {
			return nil, fmt.Errorf("unexpected entry %#v", e)
		}
		rs = append(rs, slotRange{int(lo), int(hi), strconv.FormatInt(port, 10)})
	}
	slices.SortFunc(rs, func(a, b slotRange) int { return a.lo - b.lo })
	// Adjacent ranges of one master may be listed apart.
	var merged []slotRange
	for _, r := range rs {
		if n := len(merged); n > 0 && merged[n-1].port == r.port && merged[n-1].hi == r.lo-1 {
			merged[n-1].hi = r.hi
			continue
		}
		merged = append(merged, r)
	}
	return merged, nil
}

// MoveSlot moves slot, with its keys, to the master to, as a reshard
// does; it is BeginMove and then Finish. It returns once the cluster is ok
// again (see WaitOK). Moving a slot to its owner does nothing.
func (c *Cluster) MoveSlot(slot int, to *Server) error {
	m, err := c.BeginMove(slot, to)
	if err != nil || m == nil {
		return err
	}
	return m.Finish()
}

// A SlotMove is the move of one slot from one master to another, begun by
// BeginMove and not yet finished.
type SlotMove struct {
	c        *Cluster
	slot     string
	src, dst int
	done     bool
}

// BeginMove begins to move slot to the master to, as a reshard does: to
// imports the slot (CLUSTER SETSLOT IMPORTING) while its owner migrates it
// (CLUSTER SETSLOT MIGRATING). Until the move is finished, the old owner
// serves commands whose keys it has; it redirects those whose keys it has
// none of to the new owner with ASK, and answers those whose keys it has
// only some of with TRYAGAIN. Migrate moves keys, and Finish ends the
// move. Moves are made one at a time: BeginMove waits for a move under way
// to finish. It returns a nil SlotMove for a slot that to already serves.
func (c *Cluster) BeginMove(slot int, to *Server) (*SlotMove, error) {
	if slot < 0 || slot >= clusterSlots {
		return nil, fmt.Errorf("redistest: a move of slot %d", slot)
	}
	dst := slices.Index(c.masters, to)
	if dst < 0 {
		return nil, errors.New("redistest: a move to a server that is not one of the cluster's masters")
	}
	c.moving.Lock()
	c.mu.Lock()
	src := c.owner[slot]
	c.mu.Unlock()
	if src == dst {
		c.moving.Unlock()
		return nil, nil
	}
	m := &SlotMove{c: c, slot: strconv.Itoa(slot), src: src, dst: dst}
	if _, err := to.Do("CLUSTER", "SETSLOT", m.slot, "IMPORTING", c.ids[src]); err != nil {
		c.moving.Unlock()
		return nil, fmt.Errorf("redistest: CLUSTER SETSLOT IMPORTING: %w", err)
	}
	if _, err := c.masters[src].Do("CLUSTER", "SETSLOT", m.slot, "MIGRATING", c.ids[dst]); err != nil {
		c.moving.Unlock()
		return nil, fmt.Errorf("redistest: CLUSTER SETSLOT MIGRATING: %w", err)
	}
	return m, nil
}

// Migrate moves up to n of the slot's keys that are still on the old
// owner to the new one, with one MIGRATE, which keeps their time to live,
// and returns how many it moved: 0 once none are left.
func (m *SlotMove) Migrate(n int) (int, error) {
	if m.done {
		return 0, errors.New("redistest: Migrate of a finished move")
	}
	return m.migrate(n)
}

// migrate is Migrate.
func (m *SlotMove) migrate(n int) (int, error) {
	from, to := m.c.masters[m.src], m.c.masters[m.dst]
	v, err := from.Do("CLUSTER", "GETKEYSINSLOT", m.slot, strconv.Itoa(n))
	if err != nil {
		return 0, fmt.Errorf("redistest: CLUSTER GETKEYSINSLOT: %w", err)
	}
	keys, _ := v.([]any)
	if len(keys) == 0 {
		return 0, nil
	}
	host, port, _ := net.SplitHostPort(to.Addr())
	timeout := strconv.Itoa(int(doTimeout / 2 / time.Millisecond))
	args := []string{"MIGRATE", host, port, "", "0", timeout, "KEYS"}
	for _, k := range keys {
		args = append(args, k.(string))
	}
	if _, err := from.Do(args...); err != nil {
		return 0, fmt.Errorf("redistest: MIGRATE: %w", err)
	}
	return len(keys), nil
}

// Finish moves the slot's remaining keys, a hundred at a time, and then
// tells every master that the new owner serves the slot (CLUSTER SETSLOT
// NODE), the new owner first, as redis-cli does, so that the slot is never
// left without a master that serves it. It returns once the cluster is ok
// again (see WaitOK). A move that failed is left as it is.
func (m *SlotMove) Finish() error {
	if m.done {
		return errors.New("redistest: Finish of a finished move")
	}
	m.done = true
	defer m.c.moving.Unlock()
	for {
		n, err := m.migrate(migrateBatch)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
	}
	c := m.c
	order := []int{m.dst, m.src}
	for i := range c.masters {
		if i != m.dst && i != m.src {
			order = append(order, i)
		}
	}
	for _, i := range order {
		if _, err := c.masters[i].Do("CLUSTER", "SETSLOT", m.slot, "NODE", c.ids[m.dst]); err != nil {
			return fmt.Errorf("redistest: CLUSTER SETSLOT NODE on master %d: %w", i, err)
		}
	}
	slot, _ := strconv.Atoi(m.slot)
	c.mu.Lock()
	c.owner[slot] = m.dst
	c.mu.Unlock()
	return c.WaitOK()
}

// Close closes every master (see Server.Close).
func (c *Cluster) Close() error {
	var errs []error
	for _, m := range c.masters {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	return errors.Join(errs...)
}
