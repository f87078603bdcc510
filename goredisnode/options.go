package goredisnode

import (
	"context"
	"crypto/tls"
	"net"
	"time"

	"github.com/quorumlock/redlock/driver/tlsfiles"
)

// A DialOption sets how Dial connects beyond what its URL says. The
// options concern TLS only, and apply to URLs that ask for it
// (rediss://), for one server and for a cluster alike: every node of a
// cluster is reached with the same settings. Given with a URL that does
// not ask for TLS, they make Dial fail rather than connect in the clear.
type DialOption func(*tlsfiles.Options)

// WithTLSConfig makes Dial start from a clone of cfg for TLS, instead of
// the configuration that the URL implies (TLS 1.2 at least, the system's
// certificate authorities, the URL's host as the server name). The URL's
// host is still the server name if cfg has none, and skip_verify=true in
// the URL still turns verification off. WithTLSFiles and WithServerName,
// if given too, apply on top of cfg. cfg is not modified and may be
// shared. A nil cfg sets nothing.
func WithTLSConfig(cfg *tls.Config) DialOption {
	return func(o *tlsfiles.Options) { o.Config = cfg }
}

// WithTLSFiles makes Dial read the certificate authorities that sign the
// server's certificate, and the client certificate and its key, from the
// files that f names (see [tlsfiles.Files]). Dial reads them at once and
// fails if one is missing or broken. Each new connection reads them again
// if they have changed since, so that certificates rotated on disk are
// used without a restart; connections already open, and the locks held
// through them, are not disturbed (see package [tlsfiles]). The
// authorities of f, if any, replace the system's and those of
// WithTLSConfig; its client certificate replaces WithTLSConfig's. A zero
// f sets nothing.
func WithTLSFiles(f tlsfiles.Files) DialOption {
	return func(o *tlsfiles.Options) { o.Files = f }
}

// WithServerName makes Dial send name to the server (SNI) and verify the
// server's certificate against it, instead of the URL's host: for a
// server reached through an address that its certificate does not name,
// such as an IP address or a tunnel. For a cluster, every node's
// certificate must be valid for name. An empty name sets nothing.
func WithServerName(name string) DialOption {
	return func(o *tlsfiles.Options) { o.ServerName = name }
}

// tlsDialer returns the dialer of a client with the TLS configuration
// cfg: go-redis's own, but for the TLS alerts with which a server refuses
// a client certificate after the handshake, which it reports rather than
// the reset connection that follows them (see [tlsfiles.Dial]), and for
// the deadline of the context, which it honours during the handshake too.
// The context carries go-redis's dial timeout.
func tlsDialer(cfg *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 30 * time.Second, Interval: 5 * time.Second, Count: 3}}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return tlsfiles.Dial(ctx, d, network, addr, cfg)
	}
}
