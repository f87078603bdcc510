package goredisnode

import (
	"context"
	"crypto/tls"
	"net"
	"time"

	"github.com/quorumlock/redlock/driver/tlsfiles"
)

// A DialOption sets how Dial connects beyond what its URL says: one of
// the TLS settings of [tlsfiles.Options], which says what each does and
// how they combine. A DialOption that sets something makes Dial fail for
// a URL that does not ask for TLS (rediss://).
type DialOption func(*tlsfiles.Options)

// WithTLSConfig makes Dial start from a clone of cfg for TLS, instead of
// the configuration that the URL implies (the Config of
// [tlsfiles.Options]). A nil cfg sets nothing.
func WithTLSConfig(cfg *tls.Config) DialOption { return func(o *tlsfiles.Options) { o.Config = cfg } }

// WithTLSFiles makes Dial read the certificate authorities and the client
// certificate from the files that f names, at once and again whenever
// they change (the Files of [tlsfiles.Options]). A zero f sets nothing.
func WithTLSFiles(f tlsfiles.Files) DialOption { return func(o *tlsfiles.Options) { o.Files = f } }

// WithServerName makes Dial verify the server's certificate against name,
// and send it to the server, instead of the URL's host (the ServerName of
// [tlsfiles.Options]). An empty name sets nothing.
func WithServerName(name string) DialOption { return func(o *tlsfiles.Options) { o.ServerName = name } }

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
