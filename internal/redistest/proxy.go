package redistest

import (
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// dialTimeout bounds the proxy's dial to its server for each client.
const dialTimeout = 5 * time.Second

// A Proxy relays client connections to one [Server] and injects faults into
// them. It listens on a loopback TCP port and, for each client, opens a
// connection of its own to the server, over TCP or a unix socket.
//
// The proxy reads the RESP2 or RESP3 commands and replies that it relays,
// so its faults hit whole commands, and it pairs each reply with its
// command, in order, as a connection may pipeline commands. RESP3 pushes
// are not replies and are relayed as they come. The pairing assumes one
// reply per command, which holds for everything but RESP2 pub/sub (whose
// messages are arrays, not pushes), MONITOR and CLIENT REPLY OFF or SKIP:
// do not use those with DropReplies.
//
// A replica may replicate through a proxy (see [Server.ReplicaOf]). Once a
// connection has relayed PSYNC or SYNC and its reply, it carries a
// replication stream, which is not made of commands and replies: from then
// on the proxy relays its bytes in both directions as they come. The
// blackhole cuts such a link (see SetBlackhole); delays and DropReplies do
// not apply to it.
//
// A Proxy is safe for concurrent use.
type Proxy struct {
	target *Server
	ln     net.Listener
	wg     sync.WaitGroup // the accept loop and every connection's goroutines

	delay   atomic.Int64 // a time.Duration to hold each command for
	holdFn  atomic.Pointer[func()]
	dropped atomic.Int64

	dropMu    sync.Mutex
	dropLeft  int                      // replies DropReplies has still to drop
	dropMatch func(args []string) bool // nil matches every command

	mu        sync.Mutex
	conns     map[*proxyConn]struct{}
	blackhole bool
	closed    bool
}

// A proxyConn is one client's connection and the proxy's connection to the
// server on its behalf.
type proxyConn struct {
	p         *Proxy
	client    net.Conn
	server    net.Conn
	done      chan struct{} // closed by close
	closeOnce sync.Once

	// swallowing is set, under p.mu, once the blackhole has swallowed one
	// of the client's commands: nothing more is relayed for it, as it could
	// no longer tell which reply answers which command.
	swallowing bool

	mu sync.Mutex
	// pending has an entry for each command relayed and not yet answered,
	// oldest first.
	pending []pendingCommand
}

// A pendingCommand is a command that the server has still to answer.
type pendingCommand struct {
	drop bool // drop its reply (DropReplies)
	sync bool // PSYNC or SYNC: a replication stream follows its reply
}

// NewProxy starts a proxy to target on a free loopback port.
func NewProxy(target *Server) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, ln: ln, conns: make(map[*proxyConn]struct{})}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// StartProxy is like NewProxy but fails t if the proxy does not start, and
// closes the proxy when t ends.
func StartProxy(t testing.TB, target *Server) *Proxy {
	t.Helper()
	p, err := NewProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// Addr returns the proxy's address, "127.0.0.1:PORT".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL returns the proxy's URL, "redis://127.0.0.1:PORT".
func (p *Proxy) URL() string { return "redis://" + p.Addr() }

// DropReplies makes the proxy drop the replies to the next n commands, on
// any connection, for which match returns true; a nil match matches every
// command. args[0] is the command's name as the client sent it, such as
// "EVALSHA" or "evalsha". The proxy relays such a command, reads the
// server's reply, throws it away and closes the client's connection: the
// command is applied, but the client never learns its outcome. Nothing that
// the client sent after the command is relayed.
//
// Each call replaces the previous one; n <= 0 stops dropping. match is
// called with a lock held and must not call DropReplies.
func (p *Proxy) DropReplies(n int, match func(args []string) bool) {
	p.dropMu.Lock()
	defer p.dropMu.Unlock()
	p.dropLeft, p.dropMatch = n, match
}

// Dropped returns how many replies the proxy has dropped so far.
func (p *Proxy) Dropped() int { return int(p.dropped.Load()) }

// SetDelay makes the proxy hold each command for d before relaying it; 0
// turns the delay off. Commands stay in order, so a pipeline of n commands
// is held for n times d.
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// SetHold makes the proxy call hold before it relays each command, in
// place of SetDelay's wait: the command is held until hold returns, so
// hold may compute and sleep any delay it likes. It is called from one
// goroutine per client connection, commands staying in order on each. nil
// removes it.
func (p *Proxy) SetHold(hold func()) { p.holdFn.Store(&hold) }

// SetBlackhole turns the blackhole on or off. While it is on, the proxy
// reads commands and neither relays nor answers them, so clients wait until
// their own timeouts. A connection that had a command swallowed relays
// nothing more; turning the blackhole off closes it.
//
// A replication link loses, while the blackhole is on, every byte either
// side sends: the replica receives none of its master's writes, and the
// master none of the replica's acknowledgements. Neither side sees the
// connection close. Turning the blackhole off closes the link, whose
// stream has a gap; the replica then connects again and resynchronizes.
func (p *Proxy) SetBlackhole(on bool) {
	p.mu.Lock()
	p.blackhole = on
	var swallowing []*proxyConn
	if !on {
		for c := range p.conns {
			if c.swallowing {
				swallowing = append(swallowing, c)
			}
		}
	}
	p.mu.Unlock()
	for _, c := range swallowing {
		c.close()
	}
}

// CutAll closes every open connection, both the clients' and the proxy's
// own to the server. The proxy goes on accepting new ones.
func (p *Proxy) CutAll() {
	p.mu.Lock()
	conns := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}

// Close stops the proxy: it stops listening, closes every connection and
// waits for its goroutines to end. Closing a closed proxy does nothing.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.CutAll()
	p.wg.Wait()
	return err
}

// serve accepts clients until the listener is closed.
func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.handle(client)
	}
}

// handle connects client to the server and relays between them until
// either side closes.
func (p *Proxy) handle(client net.Conn) {
	defer p.wg.Done()
	server, err := net.DialTimeout(p.target.Network(), p.target.Addr(), dialTimeout)
	if err != nil {
		client.Close()
		return
	}
	c := &proxyConn{p: p, client: client, server: server, done: make(chan struct{})}
	p.mu.Lock()
	closed := p.closed
	if !closed {
		p.conns[c] = struct{}{}
	}
	p.mu.Unlock()
	if closed {
		c.close()
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		c.relayReplies()
	}()
	c.relayCommands()
}

// takeDrop reports whether the reply to args is to be dropped, and counts
// it against DropReplies if so.
func (p *Proxy) takeDrop(args []string) bool {
	p.dropMu.Lock()
	defer p.dropMu.Unlock()
	if p.dropLeft <= 0 || (p.dropMatch != nil && !p.dropMatch(args)) {
		return false
	}
	p.dropLeft--
	return true
}

// relayCommands relays the client's commands to the server, through the
// blackhole, the delay and DropReplies.
func (c *proxyConn) relayCommands() {
	r := newRESPReader(c.client)
	for {
		raw, args, err := r.readCommand()
		if err == io.EOF {
			// The client has shut down its sending side: pass that on, and
			// let the replies it still waits for come back.
			if cw, ok := c.server.(interface{ CloseWrite() error }); !ok || cw.CloseWrite() != nil {
				c.close()
			}
			return
		}
		if err != nil {
			c.close()
			return
		}
		if c.swallow() {
			continue
		}
		if !c.hold() {
			return
		}
		var cmd pendingCommand
		// The server does not answer a command without arguments.
		if len(args) > 0 {
			cmd.sync = strings.EqualFold(args[0], "PSYNC") || strings.EqualFold(args[0], "SYNC")
			cmd.drop = !cmd.sync && c.p.takeDrop(args)
			c.mu.Lock()
			c.pending = append(c.pending, cmd)
			c.mu.Unlock()
		}
		if _, err := c.server.Write(raw); err != nil {
			c.close()
			return
		}
		if cmd.drop {
			// The connection ends once the reply is in; relay nothing more.
			<-c.done
			return
		}
		if cmd.sync {
			// What the replica sends from now on, acknowledgements of
			// the stream, is relayed as it comes.
			c.relayStream(c.server, r.br)
			return
		}
	}
}

// relayStream copies a replication stream from src to dst until either
// side closes, losing what the blackhole swallows.
func (c *proxyConn) relayStream(dst io.Writer, src io.Reader) {
	defer c.close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !c.swallow() {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// relayReplies relays the server's replies and pushes to the client,
// dropping the replies that DropReplies asked for.
func (c *proxyConn) relayReplies() {
	defer c.close()
	r := newRESPReader(c.server)
	for {
		v, err := r.readValue()
		if err != nil {
			return
		}
		var cmd pendingCommand
		if v.kind != '>' {
			cmd = c.answered()
		}
		if cmd.drop {
			c.p.dropped.Add(1)
			return
		}
		if _, err := c.client.Write(v.raw); err != nil {
			return
		}
		if cmd.sync {
			// The reply to PSYNC or SYNC is followed by the master's data
			// and then its stream of writes.
			c.relayStream(c.client, r.br)
			return
		}
	}
}

// answered takes the oldest pending command off the queue, as the server
// has answered it, and returns it. A reply while no command is pending,
// which only the commands that Proxy warns about cause, is relayed: it is
// answered as if to a zero pendingCommand.
func (c *proxyConn) answered() pendingCommand {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) == 0 {
		return pendingCommand{}
	}
	cmd := c.pending[0]
	c.pending = c.pending[1:]
	return cmd
}

// swallow reports whether the blackhole swallows the client's command that
// was just read.
func (c *proxyConn) swallow() bool {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	if c.p.blackhole {
		c.swallowing = true
	}
	return c.swallowing
}

// hold waits for the proxy's delay, if any. It reports false if the
// connection was closed meanwhile.
func (c *proxyConn) hold() bool {
	if f := c.p.holdFn.Load(); f != nil && *f != nil {
		(*f)()
		return true
	}
	d := time.Duration(c.p.delay.Load())
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.done:
		return false
	}
}

// close closes both connections and forgets c; it may be called any number
// of times.
func (c *proxyConn) close() {
	c.closeOnce.Do(func() {
		close(c.done)
		c.client.Close()
		c.server.Close()
		c.p.mu.Lock()
		delete(c.p.conns, c)
		c.p.mu.Unlock()
	})
}
