package redistest

import (
	"errors"
	"net"
	"reflect"
	"testing"
	"time"
)

// A testConn is a minimal RESP client for the tests: it sends commands and
// reads values one at a time, so tests can pipeline and see every frame.
type testConn struct {
	t    testing.TB
	conn net.Conn
	r    *respReader
}

// dialTest connects to addr and closes the connection when t ends.
func dialTest(t testing.TB, network, addr string) *testConn {
	t.Helper()
	conn, err := net.DialTimeout(network, addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &testConn{t: t, conn: conn, r: newRESPReader(conn)}
}

// send writes commands, pipelined in one write.
func (c *testConn) send(cmds ...[]string) {
	c.t.Helper()
	var b []byte
	for _, args := range cmds {
		b = appendCommand(b, args...)
	}
	c.sendRaw(string(b))
}

// sendRaw writes s as it is.
func (c *testConn) sendRaw(s string) {
	c.t.Helper()
	if _, err := c.conn.Write([]byte(s)); err != nil {
		c.t.Fatal(err)
	}
}

// readWithin reads one value, giving up after d.
func (c *testConn) readWithin(d time.Duration) (value, error) {
	c.t.Helper()
	if err := c.conn.SetReadDeadline(time.Now().Add(d)); err != nil {
		c.t.Fatal(err)
	}
	return c.r.readValue()
}

// read reads one value and fails the test if there is none within 5s.
func (c *testConn) read() value {
	c.t.Helper()
	v, err := c.readWithin(5 * time.Second)
	if err != nil {
		c.t.Fatalf("reading a reply: %v", err)
	}
	return v
}

// expect reads one value and fails the test unless it decodes to want.
func (c *testConn) expect(want any) {
	c.t.Helper()
	if got := c.read().decode(); !reflect.DeepEqual(got, want) {
		c.t.Fatalf("got %#v, want %#v", got, want)
	}
}

// expectClosed fails the test unless the connection has been closed by the
// other side: the read fails at once, and not with a timeout.
func (c *testConn) expectClosed() {
	c.t.Helper()
	v, err := c.readWithin(5 * time.Second)
	var ne net.Error
	switch {
	case err == nil:
		c.t.Fatalf("read %q, want the connection closed", v.raw)
	case errors.As(err, &ne) && ne.Timeout():
		c.t.Fatalf("read timed out, want the connection closed")
	}
}

// expectTimeout fails the test unless nothing arrives within d.
func (c *testConn) expectTimeout(d time.Duration) {
	c.t.Helper()
	v, err := c.readWithin(d)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		c.t.Fatalf("read (%q, %v), want a timeout", v.raw, err)
	}
}

// cmd spells a command for send.
func cmd(args ...string) []string { return args }

// expectDo fails t unless s.Do(args...) returns want and no error.
func expectDo(t testing.TB, s *Server, want any, args ...string) {
	t.Helper()
	if got := s.MustDo(t, args...); !reflect.DeepEqual(got, want) {
		t.Fatalf("%v: got %#v, want %#v", args, got, want)
	}
}
