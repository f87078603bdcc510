package redistest

import (
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestProxyPassesThrough(t *testing.T) {
	t.Parallel()
	for _, unix := range []bool{false, true} {
		s := Start(t, Config{Unix: unix})
		p := StartProxy(t, s)
		if !strings.HasPrefix(p.Addr(), "127.0.0.1:") || p.URL() != "redis://"+p.Addr() {
			t.Errorf("Addr %q, URL %q", p.Addr(), p.URL())
		}
		c := dialTest(t, "tcp", p.Addr())
		c.send(cmd("SET", "k", "v"))
		c.expect("OK")
		c.send(cmd("GET", "k"))
		c.expect("v")
		// Inline commands, as typed into telnet.
		c.sendRaw("PING\r\n")
		c.expect("PONG")
		expectDo(t, s, "v", "GET", "k")
	}
}

func TestProxyDropReplies(t *testing.T) {
	t.Parallel()
	s := Start(t, Config{})
	p := StartProxy(t, s)
	p.DropReplies(1, func(args []string) bool {
		return strings.EqualFold(args[0], "SET") && args[1] == "drop"
	})

	c := dialTest(t, "tcp", p.Addr())
	c.send(cmd("SET", "keep", "1"))
	c.expect("OK")
	c.send(cmd("set", "drop", "1"))
	if v, err := c.readWithin(5 * time.Second); err != io.EOF {
		t.Fatalf("after the dropped reply: (%q, %v), want io.EOF", v.raw, err)
	}
	if p.Dropped() != 1 {
		t.Errorf("Dropped %d, want 1", p.Dropped())
	}
	// The command was applied all the same.
	expectDo(t, s, "1", "GET", "drop")

	// The rule is used up.
	c = dialTest(t, "tcp", p.Addr())
	c.send(cmd("SET", "drop", "2"))
	c.expect("OK")
	if p.Dropped() != 1 {
		t.Errorf("Dropped %d, want 1", p.Dropped())
	}
}

// TestProxyDropPipelined drops the reply to the last of pipelined
// commands: the replies before it arrive in order, and all are applied.
func TestProxyDropPipelined(t *testing.T) {
	t.Parallel()
	s := Start(t, Config{})
	p := StartProxy(t, s)
	p.DropReplies(1, func(args []string) bool { return args[0] == "EVAL" })

	c := dialTest(t, "tcp", p.Addr())
	c.send(
		cmd("INCR", "n"),
		cmd("INCR", "n"),
		cmd("EVAL", "return redis.call('INCRBY', KEYS[1], 10)", "1", "n"),
	)
	c.expect(int64(1))
	c.expect(int64(2))
	c.expectClosed()
	expectDo(t, s, "12", "GET", "n")
	if p.Dropped() != 1 {
		t.Errorf("Dropped %d, want 1", p.Dropped())
	}
}

// TestProxyDropStopsRelaying checks that nothing sent after the command
// whose reply is dropped reaches the server.
func TestProxyDropStopsRelaying(t *testing.T) {
	t.Parallel()
	s := Start(t, Config{})
	p := StartProxy(t, s)
	p.DropReplies(1, nil)

	c := dialTest(t, "tcp", p.Addr())
	c.send(cmd("SET", "first", "1"), cmd("SET", "second", "1"))
	c.expectClosed()
	expectDo(t, s, "1", "GET", "first")
	expectDo(t, s, nil, "GET", "second")
}

func TestProxyPipelineOrder(t *testing.T) {
	t.Parallel()
	s := Start(t, Config{Unix: true})
	p := StartProxy(t, s)
	c := dialTest(t, "tcp", p.Addr())
	const n = 200
	var cmds [][]string
	for i := range n {
		cmds = append(cmds, cmd("ECHO", strconv.Itoa(i)), cmd("INCR", "n"))
	}
	c.send(cmds...)
	for i := range n {
		c.expect(strconv.Itoa(i))
		c.expect(int64(i + 1))
	}
}

func TestProxyDelay(t *testing.T) {
	t.Parallel()
	s := Start(t, Config{})
	p := StartProxy(t, s)
	p.SetDelay(10 * time.Millisecond)
	c := dialTest(t, "tcp", p.Addr())
	c.send(cmd("ECHO", "a"), cmd("SET", "k", "v"), cmd("GET", "k"), cmd("ECHO", "b"))
	c.expect("a")
	c.expect("OK")
	c.expect("v")
	c.expect("b")
	p.SetDelay(0)
	c.send(cmd("PING"))
	c.expect("PONG")
}

func TestProxyBlackhole(t *testing.T) {
	t.Parallel()
	s := Start(t, Config{})
	p := StartProxy(t, s)
	before := dialTest(t, "tcp", p.Addr())
	before.send(cmd("PING"))
	before.expect("PONG")

	p.SetBlackhole(true)
	during := dialTest(t, "tcp", p.Addr())
	for _, c := range []*testConn{before, during} {
		c.send(cmd("SET", "k", "v"))
		c.expectTimeout(200 * time.Millisecond)
	}
	expectDo(t, s, nil, "GET", "k") // swallowed, not applied

	p.SetBlackhole(false)
	// The connections that had a command swallowed are closed; new ones
	// work.
	before.expectClosed()
	during.expectClosed()
	after := dialTest(t, "tcp", p.Addr())
	after.send(cmd("PING"))
	after.expect("PONG")
}

func TestProxyCutAll(t *testing.T) {
	t.Parallel()
	s := Start(t, Config{})
	p := StartProxy(t, s)
	var conns []*testConn
	for range 3 {
		c := dialTest(t, "tcp", p.Addr())
		c.send(cmd("PING"))
		c.expect("PONG")
		conns = append(conns, c)
	}
	p.CutAll()
	for _, c := range conns {
		c.expectClosed()
	}
	c := dialTest(t, "tcp", p.Addr())
	c.send(cmd("PING"))
	c.expect("PONG")
}

func TestProxyClose(t *testing.T) {
	t.Parallel()
	s := Start(t, Config{})
	p, err := NewProxy(s)
	if err != nil {
		t.Fatal(err)
	}
	c := dialTest(t, "tcp", p.Addr())
	c.send(cmd("PING"))
	c.expect("PONG")
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	c.expectClosed()
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestProxyHalfClose checks that a client that shuts down its sending side
// still gets its replies.
func TestProxyHalfClose(t *testing.T) {
	t.Parallel()
	s := Start(t, Config{})
	p := StartProxy(t, s)
	c := dialTest(t, "tcp", p.Addr())
	c.send(cmd("ECHO", "a"), cmd("ECHO", "b"))
	if err := c.conn.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	c.expect("a")
	c.expect("b")
	c.expectClosed()
}

// resp3Tracking opens a RESP3 connection through p with client-side caching
// on, and reads key so that the server tracks it for that connection.
func resp3Tracking(t *testing.T, p *Proxy, key string) *testConn {
	t.Helper()
	c := dialTest(t, "tcp", p.Addr())
	c.send(cmd("HELLO", "3"), cmd("CLIENT", "TRACKING", "on"), cmd("GET", key))
	if v := c.read(); v.kind != '%' {
		t.Fatalf("HELLO 3 answered %q, want a map", v.raw)
	}
	c.expect("OK")
	if v := c.read(); v.kind != '_' {
		t.Fatalf("GET answered %q, want a RESP3 null", v.raw)
	}
	return c
}

// expectInvalidate reads a RESP3 push that invalidates key.
func expectInvalidate(t *testing.T, c *testConn, key string) {
	t.Helper()
	v := c.read()
	if v.kind != '>' {
		t.Fatalf("got %q, want an invalidation push", v.raw)
	}
	if got, want := v.decode(), []any{"invalidate", []any{key}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("push %#v, want %#v", got, want)
	}
}

func TestProxyRelaysPushes(t *testing.T) {
	t.Parallel()
	s := Start(t, Config{})
	p := StartProxy(t, s)
	c := resp3Tracking(t, p, "k")
	expectDo(t, s, "OK", "SET", "k", "v")
	expectInvalidate(t, c, "k")
	c.send(cmd("PING"))
	c.expect("PONG")
}

// TestProxyPushIsNotAReply has a push arrive while a command whose reply
// is to be dropped waits for it: the push reaches the client, and the
// reply is the one dropped.
func TestProxyPushIsNotAReply(t *testing.T) {
	t.Parallel()
	s := Start(t, Config{})
	p := StartProxy(t, s)
	c := resp3Tracking(t, p, "k")
	p.DropReplies(1, func(args []string) bool { return args[0] == "BLPOP" })
	c.send(cmd("BLPOP", "list", "10"))
	waitBlocked(t, s)
	expectDo(t, s, "OK", "SET", "k", "v")
	expectDo(t, s, int64(1), "RPUSH", "list", "x")
	expectInvalidate(t, c, "k")
	c.expectClosed()
	if p.Dropped() != 1 {
		t.Errorf("Dropped %d, want 1", p.Dropped())
	}
	expectDo(t, s, int64(0), "LLEN", "list") // BLPOP took it
}

// waitBlocked waits until a client of s is blocked in a command.
func waitBlocked(t *testing.T, s *Server) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, ok := s.MustDo(t, "INFO", "clients").(string)
		if ok && strings.Contains(info, "\r\nblocked_clients:1\r\n") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no client blocked: %q", info)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestProxyTargetDown(t *testing.T) {
	t.Parallel()
	s := Start(t, Config{})
	p := StartProxy(t, s)
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	c := dialTest(t, "tcp", p.Addr())
	c.expectClosed()
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	c = dialTest(t, "tcp", p.Addr())
	c.send(cmd("PING"))
	c.expect("PONG")
}
