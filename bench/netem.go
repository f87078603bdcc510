package bench

import (
	"bufio"
	"bytes"
	"container/heap"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// This file is the simulated network of the realistic-network runs
// (lockbench -net realistic). On loopback every server answers in the same
// few microseconds, which hides what a quorum is for: here each server sits
// behind a proxy that holds what its clients send for the server's round
// trip plus a random jitter, and one server stalls now and then, as a
// server does while it forks for an RDB snapshot or waits on a slow fsync.
// A request and its reply see the whole round trip whichever way it is
// spent, so the proxy holds the requests only and relays the replies at
// once: that halves the timed deliveries, the proxies' main cost on a
// machine of two cores shared with the clients and the servers.
//
// The proxies run in a process of their own, the same executable started
// again (see StartNetwork and ServeNetworkIfChild), for two reasons. A Go
// process with idle processors wakes its timers through epoll_wait, whose
// timeout is in whole milliseconds: a 300µs sleep takes about a
// millisecond there, which would blur the round trips the proxies are to
// set. So one goroutine locked to its thread delivers every held segment,
// sleeping with nanosleep and a timer slack of 1ns in between; it needs a
// processor as soon as it wakes, which a process of its own has free and
// the benchmark's, busy with its clients, has not. And the proxies'
// allocations and garbage collections stay out of the allocations counted
// per lock+release.

// NetConfig describes the simulated network: a proxy in front of each
// server holds each segment of bytes that a client sends for a round trip,
// and one server stalls now and then.
type NetConfig struct {
	// MinRTT and MaxRTT are the base round trips of the first and the
	// last server; those of the servers between are spread evenly.
	MinRTT, MaxRTT time.Duration
	// Jitter is the mean of the random part of a round trip: each
	// segment a client sends is held its server's base round trip plus an
	// exponentially distributed extra of mean Jitter. A segment never
	// overtakes the one before it on its connection, as TCP delivers in
	// order, so it may be held longer than its own draw. Replies are
	// relayed as they come.
	Jitter time.Duration
	// StallNode is the server that stalls, counted from 1; 0 is none.
	StallNode int
	// StallMin and StallMax bound how long a stall lasts, drawn
	// uniformly. While a server stalls nothing reaches it: what its
	// clients send meanwhile is delivered when the stall ends, as a
	// server blocked in fork or fsync reads it only then. Its replies
	// already on their way still arrive.
	StallMin, StallMax time.Duration
	// StallEvery is the mean time from the end of one stall to the start
	// of the next; the gaps are exponentially distributed. 0 is no
	// stalls.
	StallEvery time.Duration
}

// DefaultNetConfig returns the network of lockbench -net realistic: round
// trips of 200µs to 1ms plus a jitter of mean 100µs, and the first server
// stalling for 5–20ms after gaps of one second on average. The first
// server has the shortest round trip, so it is in the quorum of nearly
// every round until it stalls.
func DefaultNetConfig() NetConfig {
	return NetConfig{
		MinRTT:     200 * time.Microsecond,
		MaxRTT:     time.Millisecond,
		Jitter:     100 * time.Microsecond,
		StallNode:  1,
		StallMin:   5 * time.Millisecond,
		StallMax:   20 * time.Millisecond,
		StallEvery: time.Second,
	}
}

// RTT returns the base round trip of server i (from 0) of n.
func (nc NetConfig) RTT(i, n int) time.Duration {
	if n <= 1 {
		return nc.MinRTT
	}
	return nc.MinRTT + (nc.MaxRTT-nc.MinRTT)*time.Duration(i)/time.Duration(n-1)
}

// validate checks nc for a network of n servers.
func (nc NetConfig) validate(n int) error {
	var errs []error
	if nc.MinRTT < 0 || nc.MaxRTT < nc.MinRTT {
		errs = append(errs, fmt.Errorf("bad round trips %v–%v", nc.MinRTT, nc.MaxRTT))
	}
	if nc.Jitter < 0 {
		errs = append(errs, fmt.Errorf("bad jitter %v", nc.Jitter))
	}
	if nc.StallNode < 0 || nc.StallNode > n {
		errs = append(errs, fmt.Errorf("no server %d to stall among %d", nc.StallNode, n))
	}
	if nc.StallEvery < 0 {
		errs = append(errs, fmt.Errorf("bad time between stalls %v", nc.StallEvery))
	}
	if nc.StallMin < 0 || nc.StallMax < nc.StallMin || nc.stalls() && nc.StallMin == 0 {
		errs = append(errs, fmt.Errorf("bad stall lengths %v–%v", nc.StallMin, nc.StallMax))
	}
	return errors.Join(errs...)
}

// stalls reports whether a server stalls.
func (nc NetConfig) stalls() bool { return nc.StallNode > 0 && nc.StallEvery > 0 }

// Describe says what the network of n servers is, for a report.
func (nc NetConfig) Describe(n int) string {
	rtts := make([]string, n)
	for i := range n {
		rtts[i] = fmtDur(nc.RTT(i, n))
	}
	s := fmt.Sprintf("each server behind a delay proxy (all in a process of its own) that holds what clients send for a round trip: "+
		"base round trips %s (servers 1 to %d), plus an exponentially distributed jitter of mean %s",
		strings.Join(rtts, ", "), n, fmtDur(nc.Jitter))
	if nc.stalls() {
		s += fmt.Sprintf("; server %d stalls for %s–%s (uniform) after gaps of mean %v (exponential)",
			nc.StallNode, fmtDur(nc.StallMin), fmtDur(nc.StallMax), nc.StallEvery)
	} else {
		s += "; no stalls"
	}
	return s
}

// NetStats is what the network counted over a stretch of time.
type NetStats struct {
	Stalls  int           // stalls begun
	Stalled time.Duration // their lengths, summed
	// Segments are the segments of bytes the clients sent that were
	// delivered, and Late how late past its due time each was: the
	// precision of the proxies' timing.
	Segments          uint64
	LateP50, LateP99  time.Duration
	LateP999, LateMax time.Duration
	Stretch           time.Duration // the stretch of time counted
	StallNode         int           // the server that stalls, from 1; 0 if none
}

// A CellNetStats is what the network counted while one cell ran.
type CellNetStats struct {
	Cell Cell
	NetStats
}

// stalledShare returns the share of s.Stretch that the server stalled.
func (s NetStats) stalledShare() float64 {
	if s.Stretch <= 0 {
		return 0
	}
	return float64(s.Stalled) / float64(s.Stretch)
}

// String sums up s.
func (s NetStats) String() string {
	out := fmt.Sprintf("%d segments delivered in %v, late past their due time by p50 %s, p99 %s, p999 %s, max %s",
		s.Segments, s.Stretch.Round(100*time.Millisecond), fmtDur(s.LateP50), fmtDur(s.LateP99), fmtDur(s.LateP999), fmtDur(s.LateMax))
	if s.StallNode > 0 {
		out += fmt.Sprintf("; server %d stalled %d times, %v in all (%.1f%% of the time)",
			s.StallNode, s.Stalls, s.Stalled.Round(time.Millisecond), 100*s.stalledShare())
	}
	return out
}

// netEnv is the environment variable that makes a process started by
// StartNetwork serve the network (see ServeNetworkIfChild).
const netEnv = "LOCKBENCH_NETWORK"

// netSpec is what StartNetwork passes to the network's process.
type netSpec struct {
	Targets []string
	Config  NetConfig
}

// netHello is the network process's first line: the proxies' addresses,
// or why it could not start them.
type netHello struct {
	Addrs []string `json:",omitempty"`
	Error string   `json:",omitempty"`
}

// A Network is the simulated network of a run: a process of its own that
// runs a delay proxy in front of each server.
type Network struct {
	cfg   NetConfig
	addrs []string
	cmd   *exec.Cmd

	mu  sync.Mutex // the line protocol on in and out
	in  io.WriteCloser
	out *bufio.Reader
}

// netStartTimeout bounds the wait for the network process's first line.
const netStartTimeout = 10 * time.Second

// StartNetwork starts the network's process, this program's executable
// started again, with a delay proxy in front of each of the servers at
// targets, and returns once the proxies listen. The program must call
// ServeNetworkIfChild first thing in main (and in TestMain), or the
// process started would run the program itself.
func StartNetwork(targets []string, cfg NetConfig) (*Network, error) {
	if err := cfg.validate(len(targets)); err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	spec, err := json.Marshal(netSpec{Targets: targets, Config: cfg})
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), netEnv+"="+string(spec))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("network process: %w", err)
	}
	n := &Network{cfg: cfg, cmd: cmd, in: in, out: bufio.NewReader(out)}
	// The process is the one that must answer: a kill on timeout, by its
	// pid, makes the read below fail.
	timer := time.AfterFunc(netStartTimeout, func() { cmd.Process.Kill() })
	var hello netHello
	err = n.readLine(&hello)
	timer.Stop()
	if err == nil && hello.Error != "" {
		err = errors.New(hello.Error)
	}
	if err == nil && len(hello.Addrs) != len(targets) {
		err = fmt.Errorf("%d proxies for %d servers", len(hello.Addrs), len(targets))
	}
	if err != nil {
		n.Close()
		return nil, fmt.Errorf("network process: %w", err)
	}
	n.addrs = hello.Addrs
	return n, nil
}

// readLine reads one JSON line from the network process into v.
func (n *Network) readLine(v any) error {
	line, err := n.out.ReadBytes('\n')
	if err != nil {
		return err
	}
	return json.Unmarshal(line, v)
}

// Addrs returns the proxies' addresses, in the order of the servers.
func (n *Network) Addrs() []string { return n.addrs }

// Describe says what the network is, for a report.
func (n *Network) Describe() string { return n.cfg.Describe(len(n.addrs)) }

// Stats returns what the network counted since the last call to Stats, or
// since it started, and starts counting afresh.
func (n *Network) Stats() (NetStats, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, err := io.WriteString(n.in, "stats\n"); err != nil {
		return NetStats{}, err
	}
	var s NetStats
	err := n.readLine(&s)
	return s, err
}

// netStopTimeout bounds the wait for the network process to exit once its
// standard input is closed; it is killed, by its pid, after that.
const netStopTimeout = 5 * time.Second

// Close stops the network's process: it closes the process's standard
// input, on which it exits, and waits for it.
func (n *Network) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.in.Close()
	timer := time.AfterFunc(netStopTimeout, func() { n.cmd.Process.Kill() })
	defer timer.Stop()
	return n.cmd.Wait()
}

// ServeNetworkIfChild returns at once unless this process was started by
// StartNetwork. If it was, it runs the network's proxies until its
// standard input is closed, answering "stats" lines meanwhile, and exits.
// A program that calls StartNetwork calls it first thing in main.
//
// The process ignores SIGINT and SIGTERM, which a terminal's Ctrl-C sends
// to its parent's whole process group: it ends when its parent closes its
// standard input, or exits, so that the parent stops its cells cleanly.
func ServeNetworkIfChild() {
	spec, ok := os.LookupEnv(netEnv)
	if !ok {
		return
	}
	signal.Ignore(os.Interrupt, syscall.SIGTERM)
	os.Exit(serveNetwork(spec, os.Stdin, os.Stdout))
}

// serveNetwork is the network process: it starts the proxies spec asks for,
// writes their addresses to out, answers each "stats" line read from in
// with the NetStats since the last one, and stops the proxies when in
// ends. It returns the process's exit status.
func serveNetwork(spec string, in io.Reader, out io.Writer) int {
	enc := json.NewEncoder(out)
	var s netSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		enc.Encode(netHello{Error: "bad spec: " + err.Error()})
		return 1
	}
	e, err := startEmulator(s.Targets, s.Config)
	if err != nil {
		enc.Encode(netHello{Error: err.Error()})
		return 1
	}
	defer e.close()
	if err := enc.Encode(netHello{Addrs: e.addrs()}); err != nil {
		return 1
	}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "stats" {
			if err := enc.Encode(e.stats()); err != nil {
				return 1
			}
		}
	}
	return 0
}

// --- the proxies ---------------------------------------------------------------

// An emulator runs the proxies of a network in this process: each proxy's
// goroutines read what clients send and queue it, due at the time its
// delay ends, and one goroutine, locked to its thread, delivers what is
// due; the replies are relayed at once.
type emulator struct {
	cfg     NetConfig
	epoch   time.Time // times are nanoseconds since epoch, on the monotonic clock
	poll    time.Duration
	proxies []*delayProxy
	wg      sync.WaitGroup
	quit    chan struct{}
	wake    chan struct{} // cap 1: the queue is no longer empty

	mu    sync.Mutex
	queue segHeap
	seq   uint64

	statsMu   sync.Mutex
	late      hist
	segments  uint64
	statsFrom int64
}

// A delayProxy relays the connections of one server.
type delayProxy struct {
	e      *emulator
	target string
	ln     net.Listener
	rtt    time.Duration // the base round trip
	jitter float64       // the mean extra, in nanoseconds

	stallUntil atomic.Int64 // nothing reaches the server before this time
	stalls     atomic.Int64 // stalls begun, since the last stats
	stalled    atomic.Int64 // their lengths, in nanoseconds

	mu     sync.Mutex
	conns  map[*proxyPair]struct{}
	closed bool
}

// A proxyPair is a client's connection to a proxy and the proxy's own
// connection to the server on its behalf.
type proxyPair struct {
	p              *delayProxy
	client, server net.Conn
	once           sync.Once
}

// close closes both connections and forgets the pair.
func (pp *proxyPair) close() {
	pp.once.Do(func() {
		pp.client.Close()
		pp.server.Close()
		pp.p.mu.Lock()
		delete(pp.p.conns, pp)
		pp.p.mu.Unlock()
	})
}

// A segment is what one read of a client's connection returned, held
// until due.
type segment struct {
	due  int64 // nanoseconds since the epoch
	seq  uint64
	pair *proxyPair
	data []byte
}

// segHeap orders segments by due time, then by the order they were read.
type segHeap []*segment

func (h segHeap) Len() int { return len(h) }
func (h segHeap) Less(i, j int) bool {
	if h[i].due != h[j].due {
		return h[i].due < h[j].due
	}
	return h[i].seq < h[j].seq
}
func (h segHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *segHeap) Push(x any)   { *h = append(*h, x.(*segment)) }
func (h *segHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return s
}

// minPoll is the shortest the delivering goroutine sleeps while segments
// are queued (see run).
const minPoll = 20 * time.Microsecond

// startEmulator starts a proxy on a loopback port for each of targets.
func startEmulator(targets []string, cfg NetConfig) (*emulator, error) {
	if err := cfg.validate(len(targets)); err != nil {
		return nil, err
	}
	e := &emulator{cfg: cfg, epoch: time.Now(), quit: make(chan struct{}), wake: make(chan struct{}, 1)}
	// A segment queued now is due no sooner than the shortest round
	// trip from now: the goroutine that delivers never sleeps longer
	// than that, so it need not be woken for a segment due earlier than
	// those it knows of.
	e.poll = max(cfg.RTT(0, len(targets)), minPoll)
	for i, t := range targets {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			e.close()
			return nil, err
		}
		p := &delayProxy{e: e, target: t, ln: ln, rtt: cfg.RTT(i, len(targets)),
			jitter: float64(cfg.Jitter), conns: make(map[*proxyPair]struct{})}
		e.proxies = append(e.proxies, p)
		e.wg.Add(1)
		go p.serve()
		if cfg.stalls() && i == cfg.StallNode-1 {
			e.wg.Add(1)
			go p.stallLoop()
		}
	}
	e.wg.Add(1)
	go e.run()
	return e, nil
}

// now returns the time since the epoch, in nanoseconds.
func (e *emulator) now() int64 { return int64(time.Since(e.epoch)) }

func (e *emulator) addrs() []string {
	out := make([]string, len(e.proxies))
	for i, p := range e.proxies {
		out[i] = p.ln.Addr().String()
	}
	return out
}

// stats returns what the emulator counted since the last call, and
// starts counting afresh.
func (e *emulator) stats() NetStats {
	now := e.now()
	e.statsMu.Lock()
	s := NetStats{
		Segments: e.segments,
		LateP50:  e.late.quantile(0.50), LateP99: e.late.quantile(0.99),
		LateP999: e.late.quantile(0.999), LateMax: e.late.max,
		Stretch: time.Duration(now - e.statsFrom),
	}
	e.late, e.segments, e.statsFrom = hist{}, 0, now
	e.statsMu.Unlock()
	if e.cfg.StallNode > 0 {
		p := e.proxies[e.cfg.StallNode-1]
		s.StallNode = e.cfg.StallNode
		s.Stalls = int(p.stalls.Swap(0))
		s.Stalled = time.Duration(p.stalled.Swap(0))
	}
	return s
}

// close stops the proxies, closes every connection and waits for the
// emulator's goroutines to end.
func (e *emulator) close() {
	close(e.quit)
	for _, p := range e.proxies {
		p.close()
	}
	e.wg.Wait()
}

// push queues s for delivery.
func (e *emulator) push(s *segment) {
	e.mu.Lock()
	s.seq = e.seq
	e.seq++
	heap.Push(&e.queue, s)
	first := len(e.queue) == 1
	e.mu.Unlock()
	if first {
		select {
		case e.wake <- struct{}{}:
		default:
		}
	}
}

// run delivers the queued segments as they fall due, until quit. It keeps
// its thread, whose timer slack it lowers, and sleeps with nanosleep (see
// the top of this file). A segment for a server that stalls is held until
// the stall ends.
func (e *emulator) run() {
	defer e.wg.Done()
	lockThreadForTimers()
	var due []*segment
	for {
		select {
		case <-e.quit:
			return
		default:
		}
		e.mu.Lock()
		if len(e.queue) == 0 {
			e.mu.Unlock()
			select {
			case <-e.wake:
			case <-e.quit:
				return
			}
			continue
		}
		now := e.now()
		due = due[:0]
		for len(e.queue) > 0 && e.queue[0].due <= now {
			s := heap.Pop(&e.queue).(*segment)
			if until := s.pair.p.stallUntil.Load(); until > now {
				// Held until the stall ends, behind the segments held
				// before it.
				s.due = until
				heap.Push(&e.queue, s)
				continue
			}
			due = append(due, s)
		}
		next := int64(-1)
		if len(e.queue) > 0 {
			next = e.queue[0].due
		}
		e.mu.Unlock()
		if len(due) > 0 {
			e.deliver(due)
			continue
		}
		if next >= 0 {
			preciseSleep(min(time.Duration(next-now), e.poll))
		}
	}
}

// deliver writes each segment to its connection and records how late it
// was. A write that fails closes the pair; the pair's readers then end.
func (e *emulator) deliver(segs []*segment) {
	e.statsMu.Lock()
	now := e.now()
	for _, s := range segs {
		e.late.record(time.Duration(now - s.due))
	}
	e.segments += uint64(len(segs))
	e.statsMu.Unlock()
	for i, s := range segs {
		if _, err := s.pair.server.Write(s.data); err != nil {
			s.pair.close()
		}
		segs[i] = nil
	}
}

// serve accepts clients until the listener is closed.
func (p *delayProxy) serve() {
	defer p.e.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.DialTimeout("tcp", p.target, dialTimeout)
		if err != nil {
			client.Close()
			continue
		}
		pp := &proxyPair{p: p, client: client, server: server}
		p.mu.Lock()
		closed := p.closed
		if !closed {
			p.conns[pp] = struct{}{}
		}
		p.mu.Unlock()
		if closed {
			pp.close()
			return
		}
		p.e.wg.Add(2)
		go p.hold(pp)
		go p.relayReplies(pp)
	}
}

// dialTimeout bounds a proxy's dial to its server.
const dialTimeout = 5 * time.Second

// hold reads what the client sends and queues it, due after a round
// trip and its jitter but never before what it read earlier.
func (p *delayProxy) hold(pp *proxyPair) {
	defer p.e.wg.Done()
	defer pp.close()
	buf := make([]byte, 64<<10)
	var last int64
	for {
		n, err := pp.client.Read(buf)
		if n > 0 {
			due := p.e.now() + int64(p.rtt) + int64(rand.ExpFloat64()*p.jitter)
			due = max(due, last)
			last = due
			p.e.push(&segment{due: due, pair: pp, data: bytes.Clone(buf[:n])})
		}
		if err != nil {
			return
		}
	}
}

// relayReplies relays what the server sends to the client as it comes.
func (p *delayProxy) relayReplies(pp *proxyPair) {
	defer p.e.wg.Done()
	defer pp.close()
	io.Copy(pp.client, pp.server)
}

// stallLoop stalls the server now and then, until quit: it waits a gap
// of mean cfg.StallEvery, stalls for StallMin to StallMax, and again.
func (p *delayProxy) stallLoop() {
	defer p.e.wg.Done()
	cfg := p.e.cfg
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	wait := func(d time.Duration) bool {
		t.Reset(d)
		select {
		case <-t.C:
			return true
		case <-p.e.quit:
			return false
		}
	}
	for {
		if !wait(time.Duration(rand.ExpFloat64() * float64(cfg.StallEvery))) {
			return
		}
		d := cfg.StallMin + rand.N(cfg.StallMax-cfg.StallMin+1)
		p.stall(d)
		if !wait(d) {
			return
		}
	}
}

// stall makes the server stall for d from now.
func (p *delayProxy) stall(d time.Duration) {
	p.stallUntil.Store(p.e.now() + int64(d))
	p.stalls.Add(1)
	p.stalled.Add(int64(d))
}

// close stops accepting and closes every connection.
func (p *delayProxy) close() {
	p.mu.Lock()
	p.closed = true
	pairs := make([]*proxyPair, 0, len(p.conns))
	for pp := range p.conns {
		pairs = append(pairs, pp)
	}
	p.mu.Unlock()
	p.ln.Close()
	for _, pp := range pairs {
		pp.close()
	}
}
