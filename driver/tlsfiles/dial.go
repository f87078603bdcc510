package tlsfiles

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"syscall"
	"time"
)

// Dial connects to addr on the named network with d and makes a TLS
// handshake with cfg, within the deadline of ctx and of d. It is for the
// dialers of client libraries, in place of a tls.Dialer.
//
// The connection it returns tells why the server closed it when the
// server's reason is a TLS alert. Under TLS 1.3 a server that does not
// accept the client's certificate (or the lack of one) says so with an
// alert after the client's handshake is over, and closes the connection:
// a write of the client's first command may then fail with "connection
// reset by peer", while the alert, which explains it, waits unread. When a
// write fails because the server reset or closed the connection, the
// connection reads what the server sent last, at most for a second, and
// returns its alert, if it finds one, instead of the write's error.
func Dial(ctx context.Context, d *net.Dialer, network, addr string, cfg *tls.Config) (net.Conn, error) {
	td := tls.Dialer{NetDialer: d, Config: cfg}
	c, err := td.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &alertConn{Conn: c.(*tls.Conn)}, nil
}

// alertLinger bounds the read of an alertConn after a failed write. The
// alert, if any, came before the reset and is already there to be read:
// the bound only matters for a connection that stopped answering.
const alertLinger = time.Second

// An alertConn is a TLS client connection whose failed writes report the
// alert with which the server closed it.
type alertConn struct {
	*tls.Conn
}

func (c *alertConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err == nil || !(errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)) {
		return n, err
	}
	if c.Conn.SetReadDeadline(time.Now().Add(alertLinger)) != nil {
		return n, err
	}
	var b [64]byte
	for {
		_, rerr := c.Conn.Read(b[:])
		if _, ok := Alert(rerr); ok {
			return n, rerr
		}
		if rerr != nil {
			return n, err
		}
	}
}

// NetConn returns the underlying connection of the TLS connection, as
// tls.Conn.NetConn does.
func (c *alertConn) NetConn() net.Conn { return c.Conn.NetConn() }
