package faulttest

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// queueChunks bounds the chunks a connection holds back for latency before
// it stops reading from the client.
const queueChunks = 1024

// A Link is a TCP proxy for one (client, node) pair: the client dials the
// link instead of the node, and the test injects network faults on the
// link without touching the node or the client's other links.
//
// Faults:
//   - latency: every byte the client sends reaches the node the given time
//     after the link read it, in order, as on a slow network. Bytes already
//     on their way keep their delivery time when the latency changes, and
//     are delivered even after the client has closed its connection, as a
//     real network delivers packets already sent.
//   - blackhole: bytes in both directions are thrown away while it is on;
//     connections stay open, so the client waits for its own timeouts. A
//     connection that lost bytes is closed when the blackhole ends, since
//     neither side could tell which reply answers which command.
//   - reset: Reset ends every open connection with a TCP reset (RST), and
//     while SetRefuse is on every new connection is reset at once.
//
// A Link is safe for concurrent use.
type Link struct {
	ln net.Listener
	wg sync.WaitGroup

	latency atomic.Int64 // a time.Duration

	mu        sync.Mutex
	target    string
	conns     map[*linkConn]struct{}
	blackhole bool
	refuse    bool
	closed    bool
}

// A linkConn is one client connection and the link's connection to the
// node on its behalf.
type linkConn struct {
	l      *Link
	client *net.TCPConn
	server *net.TCPConn

	swallowed bool // guarded by l.mu: the blackhole dropped some of its bytes
	closeOnce sync.Once
}

// A chunk is bytes read from the client and when to deliver them.
type chunk struct {
	data []byte
	due  time.Time
}

// NewLink starts a link to the TCP address target on a free loopback port.
func NewLink(target string) (*Link, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &Link{target: target, ln: ln, conns: make(map[*linkConn]struct{})}
	l.wg.Add(1)
	go l.serve()
	return l, nil
}

// Addr returns the link's address, "127.0.0.1:PORT".
func (l *Link) Addr() string { return l.ln.Addr().String() }

// URL returns the link's address as a redis:// URL.
func (l *Link) URL() string { return "redis://" + l.Addr() }

// SetLatency delays the bytes the client sends from now on by d; 0 ends
// the delay.
func (l *Link) SetLatency(d time.Duration) { l.latency.Store(int64(d)) }

// Latency returns the latency last set.
func (l *Link) Latency() time.Duration { return time.Duration(l.latency.Load()) }

// SetBlackhole turns the blackhole on or off.
func (l *Link) SetBlackhole(on bool) {
	l.mu.Lock()
	l.blackhole = on
	var broken []*linkConn
	if !on {
		for c := range l.conns {
			if c.swallowed {
				broken = append(broken, c)
			}
		}
	}
	l.mu.Unlock()
	for _, c := range broken {
		c.close(false)
	}
}

// Blackholed reports whether the blackhole is on.
func (l *Link) Blackholed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.blackhole
}

// SetRefuse makes the link reset every new connection at once while on.
func (l *Link) SetRefuse(on bool) {
	l.mu.Lock()
	l.refuse = on
	l.mu.Unlock()
}

// Redirect makes the link connect its new connections to target, and
// resets those it has, as a virtual address that moves to another server
// would.
func (l *Link) Redirect(target string) {
	l.mu.Lock()
	l.target = target
	l.mu.Unlock()
	l.Reset()
}

// Reset ends every open connection with a TCP reset, on the client's side
// and on the node's. Bytes held back for latency are lost.
func (l *Link) Reset() {
	for _, c := range l.snapshot() {
		c.close(true)
	}
}

// Close stops the link: it stops listening, resets every connection and
// waits for its goroutines. Closing a closed link does nothing.
func (l *Link) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	err := l.ln.Close()
	l.Reset()
	l.wg.Wait()
	return err
}

func (l *Link) snapshot() []*linkConn {
	l.mu.Lock()
	defer l.mu.Unlock()
	conns := make([]*linkConn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	return conns
}

func (l *Link) serve() {
	defer l.wg.Done()
	for {
		conn, err := l.ln.Accept()
		if err != nil {
			return
		}
		l.wg.Add(1)
		go l.handle(conn.(*net.TCPConn))
	}
}

// handle relays between one client and the node until both directions
// have ended.
func (l *Link) handle(client *net.TCPConn) {
	defer l.wg.Done()
	l.mu.Lock()
	refuse, closed, target := l.refuse, l.closed, l.target
	l.mu.Unlock()
	if refuse || closed {
		resetConn(client)
		return
	}
	conn, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		resetConn(client)
		return
	}
	c := &linkConn{l: l, client: client, server: conn.(*net.TCPConn)}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		c.close(true)
		return
	}
	l.conns[c] = struct{}{}
	l.mu.Unlock()

	queue := make(chan chunk, queueChunks)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); c.deliver(queue) }()
	go func() { defer wg.Done(); c.relayReplies() }()
	c.readClient(queue)
	wg.Wait()
	c.close(false)
}

// readClient reads what the client sends and queues it for delivery, until
// the client closes its side or the connection breaks.
func (c *linkConn) readClient(queue chan<- chunk) {
	defer close(queue)
	buf := make([]byte, 32<<10)
	for {
		n, err := c.client.Read(buf)
		if n > 0 && !c.swallow() {
			due := time.Now().Add(time.Duration(c.l.latency.Load()))
			queue <- chunk{data: append([]byte(nil), buf[:n]...), due: due}
		}
		if err != nil {
			return
		}
	}
}

// deliver writes the queued chunks to the node, each at its due time, and
// half-closes the node's connection once the client has closed and the
// queue is empty.
func (c *linkConn) deliver(queue <-chan chunk) {
	for ch := range queue {
		if d := time.Until(ch.due); d > 0 {
			time.Sleep(d)
		}
		if _, err := c.server.Write(ch.data); err != nil {
			for range queue { // let readClient finish
			}
			return
		}
	}
	c.server.CloseWrite()
}

// relayReplies relays what the node sends to the client until the node
// closes, and then closes the connection. When the client has gone,
// replies are read and thrown away, so that commands still held back for
// latency reach the node.
func (c *linkConn) relayReplies() {
	defer c.close(false)
	buf := make([]byte, 32<<10)
	clientGone := false
	for {
		n, err := c.server.Read(buf)
		if n > 0 && !clientGone && !c.swallow() {
			if _, werr := c.client.Write(buf[:n]); werr != nil {
				clientGone = true
			}
		}
		if err != nil {
			return
		}
	}
}

// swallow reports whether the blackhole drops the bytes just read.
func (c *linkConn) swallow() bool {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if c.l.blackhole {
		c.swallowed = true
	}
	return c.l.blackhole
}

// close closes both connections, with a TCP reset if rst; it may be called
// any number of times.
func (c *linkConn) close(rst bool) {
	c.closeOnce.Do(func() {
		if rst {
			resetConn(c.client)
			resetConn(c.server)
		} else {
			c.client.Close()
			c.server.Close()
		}
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
}

// resetConn closes conn with a TCP reset rather than an orderly shutdown.
func resetConn(conn *net.TCPConn) {
	conn.SetLinger(0)
	conn.Close()
}
