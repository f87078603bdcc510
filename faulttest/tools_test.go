package faulttest

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
)

// These tests check the fault tools themselves, so that a scenario that
// passes does not pass because a fault was never injected.

// linkTo starts a server and a link to it, both closed at the end of t.
func linkTo(t *testing.T) (*redistest.Server, *Link) {
	t.Helper()
	srv := redistest.Start(t, redistest.Config{})
	l, err := NewLink(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return srv, l
}

// send writes raw RESP commands to addr and returns the connection.
func send(t *testing.T, addr string, cmds ...string) *net.TCPConn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	for _, c := range cmds {
		if _, err := conn.Write([]byte(c)); err != nil {
			t.Fatal(err)
		}
	}
	return conn.(*net.TCPConn)
}

func resp(args ...string) string {
	s := "*" + itoa(len(args)) + "\r\n"
	for _, a := range args {
		s += "$" + itoa(len(a)) + "\r\n" + a + "\r\n"
	}
	return s
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

func TestLinkRelays(t *testing.T) {
	srv, l := linkTo(t)
	conn := send(t, l.Addr(), resp("SET", "k", "v"))
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 16)
	n, err := conn.Read(buf)
	if err != nil || string(buf[:n]) != "+OK\r\n" {
		t.Fatalf("reply %q, %v", buf[:n], err)
	}
	if v := srv.MustDo(t, "GET", "k"); v != "v" {
		t.Fatalf("GET k = %v", v)
	}
}

// TestLinkLatencyDeliversAfterClose: a command sent with latency reaches
// the node at its time even if the client closed its connection meanwhile,
// as a packet already on the wire would.
func TestLinkLatencyDeliversAfterClose(t *testing.T) {
	srv, l := linkTo(t)
	l.SetLatency(150 * time.Millisecond)
	start := time.Now()
	conn := send(t, l.Addr(), resp("SET", "late", "1"))
	time.Sleep(20 * time.Millisecond)
	conn.Close()
	if v := srv.MustDo(t, "GET", "late"); v != nil {
		t.Fatalf("the command arrived after %v, before its latency", time.Since(start))
	}
	for srv.MustDo(t, "GET", "late") == nil {
		if time.Since(start) > 5*time.Second {
			t.Fatal("a command sent before the client closed never arrived")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Fatalf("arrived after %v, before the latency of 150ms", d)
	}
}

func TestLinkBlackhole(t *testing.T) {
	srv, l := linkTo(t)
	l.SetBlackhole(true)
	conn := send(t, l.Addr(), resp("SET", "lost", "1"))
	conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, err := conn.Read(make([]byte, 16)); !isTimeout(err) {
		t.Fatalf("read through the blackhole: %d bytes, %v", n, err)
	}
	if v := srv.MustDo(t, "GET", "lost"); v != nil {
		t.Fatal("a command went through the blackhole")
	}
	l.SetBlackhole(false)
	// The connection that lost bytes is closed; a new one works.
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Read(make([]byte, 16)); err == nil {
		t.Fatal("the connection that lost a command is still open")
	}
	conn2 := send(t, l.Addr(), resp("PING"))
	conn2.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 16)
	if n, err := conn2.Read(buf); err != nil || string(buf[:n]) != "+PONG\r\n" {
		t.Fatalf("after the blackhole: %q, %v", buf[:n], err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestLinkReset(t *testing.T) {
	_, l := linkTo(t)
	conn := send(t, l.Addr(), resp("PING"))
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Read(make([]byte, 16)); err != nil {
		t.Fatal(err)
	}
	l.Reset()
	if _, err := conn.Read(make([]byte, 16)); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read after Reset: %v, want a connection reset", err)
	}
	l.SetRefuse(true)
	// The reset may come before the dial returns, or after.
	c2, err := net.Dial("tcp", l.Addr())
	if err == nil {
		defer c2.Close()
		c2.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = c2.Read(make([]byte, 16))
	}
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("a connection made while refusing: %v, want a connection reset", err)
	}
}

// TestClockShim: a node whose clock jumps forward by 20s expires a key
// with 10s to live at once, and a jump back keeps a key alive longer.
func TestClockShim(t *testing.T) {
	c := NewCluster(t, Config{Scenario: "clock-shim", N: 1, ClockShim: true})
	srv := c.Server(0)
	srv.MustDo(t, "SET", "k", "v", "PX", "10000")
	c.JumpClock(0, 20*time.Second)
	if v := srv.MustDo(t, "GET", "k"); v != nil {
		t.Fatal("a key with 10s to live survived a 20s jump of its node's clock")
	}
	off, err := c.NodeClockOffset(0)
	if err != nil || (off-20*time.Second).Abs() > 50*time.Millisecond {
		t.Fatalf("TIME is %v off, want 20s (%v)", off, err)
	}
	c.JumpClock(0, 0)
	srv.MustDo(t, "SET", "k2", "v", "PX", "1000")
	c.JumpClock(0, -5*time.Second)
	if ms := srv.MustDo(t, "PTTL", "k2").(int64); ms < 5000 {
		t.Fatalf("PTTL after a 5s jump back = %dms, want over 5000", ms)
	}
}

// TestClockShimRate: a node whose clock runs at rate 4 counts four seconds
// of TIME per real second and expires a key set to live 2s after half a
// second of real time; at rate 1/4 a key set to live 400ms outlives 800ms
// of real time. Key expiry follows the shim's wall clock, not the
// monotonic one. A change of rate does not step the clock.
func TestClockShimRate(t *testing.T) {
	c := NewCluster(t, Config{Scenario: "clock-shim-rate", N: 1, ClockShim: true})
	srv := c.Server(0)
	offset := func() time.Duration {
		t.Helper()
		off, err := c.NodeClockOffset(0)
		if err != nil {
			t.Fatal(err)
		}
		return off
	}

	c.SetClockRate(0, 4)
	before := offset()
	srv.MustDo(t, "SET", "fast", "v", "PX", "2000")
	time.Sleep(time.Second)
	if v := srv.MustDo(t, "GET", "fast"); v != nil {
		t.Fatal("a key set to live 2s on a node whose clock runs 4 times too fast is still there after 1s")
	}
	// Over a second or more the node's clock gains three seconds a second.
	read := time.Now()
	gained := offset() - before
	if gained < 2500*time.Millisecond {
		t.Fatalf("the node's clock gained %v on real time in over a second at rate 4", gained)
	}

	c.SetClockRate(0, 0.25)
	// Between the two readings the clock ran at rate 4 until the change
	// and at 1/4 after it: without a step it moved from -3/4 to +3 times
	// the real time that passed (SetClockRate waits until the node shows
	// the change, which takes longer on a loaded machine).
	moved := offset() - (before + gained)
	elapsed := time.Since(read)
	if lo, hi := -elapsed*3/4-100*time.Millisecond, 3*elapsed+100*time.Millisecond; moved < lo || moved > hi {
		t.Fatalf("changing the rate stepped the clock: it moved %v in %v, not within [%v, %v]", moved, elapsed, lo, hi)
	}
	srv.MustDo(t, "SET", "slow", "v", "PX", "400")
	time.Sleep(800 * time.Millisecond)
	if v := srv.MustDo(t, "GET", "slow"); v != "v" {
		t.Fatal("a key set to live 400ms on a node whose clock runs at a quarter of real speed expired within 800ms")
	}
	if ms := srv.MustDo(t, "PTTL", "slow").(int64); ms <= 0 || ms > 300 {
		t.Fatalf("after 800ms at rate 1/4 the key has %dms to live, want about 200ms", ms)
	}
}

// TestLinkRedirect: a redirected link resets its connections and leads
// new ones to the new target.
func TestLinkRedirect(t *testing.T) {
	_, l := linkTo(t)
	other := redistest.Start(t, redistest.Config{})
	other.MustDo(t, "SET", "where", "other")
	conn := send(t, l.Addr(), resp("PING"))
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Read(make([]byte, 16)); err != nil {
		t.Fatal(err)
	}
	l.Redirect(other.Addr())
	if _, err := conn.Read(make([]byte, 16)); err == nil {
		t.Fatal("a connection made before the redirect is still open")
	}
	conn2 := send(t, l.Addr(), resp("GET", "where"))
	conn2.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 32)
	if n, err := conn2.Read(buf); err != nil || string(buf[:n]) != "$5\r\nother\r\n" {
		t.Fatalf("GET through the redirected link: %q, %v", buf[:n], err)
	}
}

// TestClusterSampleDuringMove: a node that is a Redis Cluster is read on
// the master that has the key, before, while and after its slot moves.
func TestClusterSampleDuringMove(t *testing.T) {
	c := NewCluster(t, Config{Scenario: "cluster-sample", N: 1, ClusterMasters: 3})
	const key = "ft:sample"
	from := c.MasterOf(0, key)
	from.MustDo(t, "SET", key, "v", "PX", "60000")
	expect := func(when string) {
		t.Helper()
		n := c.Sample(key).Nodes[0]
		if !n.Reached || n.Value != "v" || n.Expires == 0 {
			t.Fatalf("%s: the sample found %+v, want the key with its expiry", when, n)
		}
	}
	expect("before the move")
	var to *redistest.Server
	for _, m := range c.RedisCluster(0).Masters() {
		if m != from {
			to = m
		}
	}
	m := c.BeginMove(0, key, to)
	expect("with the key on the old owner")
	if n, err := m.Migrate(10); err != nil || n != 1 {
		t.Fatalf("Migrate: %d keys, %v", n, err)
	}
	// The old owner redirects (ASK) for a key it no longer has.
	if v, err := from.Do("EXISTS", key); v == int64(1) || err == nil && v != int64(0) {
		t.Fatalf("the key is still on the old owner: EXISTS %v, %v", v, err)
	}
	expect("with the key on the new owner, the slot still moving")
	c.FinishMove(0, m)
	expect("after the move")
	c.H.Mu.Lock()
	defer c.H.Mu.Unlock()
	if len(c.H.Faults) != 2 || c.H.Faults[0].Kind != FaultMove {
		t.Fatalf("faults recorded: %+v", c.H.Faults)
	}
}
