package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/quorumlock/redlock/driver/tlsfiles"
	"github.com/redis/go-redis/v9"
)

// certWarning is how long before its server certificate expires doctor
// warns about a node.
const certWarning = 14 * 24 * time.Hour

// A tlsReport is what doctor found of a node's TLS: the connection's
// version and cipher suite, the server's certificate, and the client
// certificate that redlock presents.
type tlsReport struct {
	Version       string     `json:"version,omitempty"` // "TLS 1.3"
	CipherSuite   string     `json:"cipher_suite,omitempty"`
	ServerName    string     `json:"server_name,omitempty"` // the name the certificate is verified against
	Verified      bool       `json:"verified"`              // false with --insecure, or when the handshake failed
	ServerSubject string     `json:"server_subject,omitempty"`
	ServerIssuer  string     `json:"server_issuer,omitempty"`
	ServerExpires *time.Time `json:"server_expires,omitempty"`
	ClientSubject string     `json:"client_subject,omitempty"`
	ClientIssuer  string     `json:"client_issuer,omitempty"`
	ClientExpires *time.Time `json:"client_expires,omitempty"`
}

// checkTLS reports the TLS of node i, if it is reached over TLS: for each
// server (the node's, or each master's of a cluster), a handshake of its
// own with the node's TLS configuration, which tells the TLS version and
// the server's certificate; and the client certificate of --cert.
func checkTLS(ctx context.Context, ns *nodeSet, i int, timeout time.Duration, n *nodeReport) {
	insecure := ns.tls != nil && ns.tls.insecure
	switch c := ns.nodes[i].Client().(type) {
	case *redis.Client:
		cfg := c.Options().TLSConfig
		if cfg == nil {
			return
		}
		probeTLS(ctx, cfg, c.Options().Addr, timeout, insecure, n)
	case *redis.ClusterClient:
		cfg := c.Options().TLSConfig
		if cfg == nil {
			return
		}
		if len(n.Masters) == 0 {
			probeTLS(ctx, cfg, c.Options().Addrs[0], timeout, insecure, n)
		}
		for j := range n.Masters {
			probeTLS(ctx, cfg, n.Masters[j].Node, timeout, insecure, &n.Masters[j])
		}
		if n.TLS == nil {
			n.TLS = &tlsReport{ServerName: cfg.ServerName, Verified: !insecure}
		}
	default:
		return
	}
	if ns.tls != nil && ns.tls.source != nil {
		checkClientCert(ns.tls, n)
	}
}

// probeTLS makes a TLS handshake with the server at addr and reports it
// on n.
func probeTLS(ctx context.Context, cfg *tls.Config, addr string, timeout time.Duration, insecure bool, n *nodeReport) {
	r := &tlsReport{ServerName: cfg.ServerName}
	n.TLS = r
	var certs []*x509.Certificate
	err := within(ctx, timeout, func(ctx context.Context) error {
		conn, err := tlsfiles.Dial(ctx, &net.Dialer{}, "tcp", addr, cfg)
		if err != nil {
			var verr *tls.CertificateVerificationError
			if errors.As(err, &verr) {
				certs = verr.UnverifiedCertificates
			}
			return err
		}
		defer conn.Close()
		st := conn.(interface{ ConnectionState() tls.ConnectionState }).ConnectionState()
		r.Version, r.CipherSuite = tls.VersionName(st.Version), tls.CipherSuiteName(st.CipherSuite)
		r.Verified = !insecure
		certs = st.PeerCertificates
		return nil
	})
	cert := ""
	if len(certs) > 0 {
		leaf := certs[0]
		exp := leaf.NotAfter
		r.ServerSubject, r.ServerIssuer, r.ServerExpires = leaf.Subject.String(), leaf.Issuer.String(), &exp
		cert = fmt.Sprintf("server certificate %q, issued by %q, valid until %s", r.ServerSubject, r.ServerIssuer, exp.UTC().Format(time.DateTime))
	}
	switch {
	case err != nil && cert != "":
		n.add(levelError, "tls", "handshake failed: %v; the %s", err, cert)
		return
	case err != nil:
		n.add(levelError, "tls", "handshake failed: %v", err)
		return
	case insecure:
		n.add(levelWarn, "tls", "%s, %s; %s, NOT verified (--insecure)", r.Version, r.CipherSuite, cert)
	default:
		n.add(levelOK, "tls", "%s, %s; %s, verified for %q", r.Version, r.CipherSuite, cert, r.ServerName)
	}
	if r.ServerExpires == nil {
		return
	}
	switch left := time.Until(*r.ServerExpires); {
	case left <= 0:
		n.add(levelError, "tls", "the server's certificate expired %s ago: verification fails; renew it on the server", humanDur(-left))
	case left < certWarning:
		n.add(levelWarn, "tls", "the server's certificate expires in %s: renew it on the server before then, or every new connection fails", humanDur(left))
	}
}

// checkClientCert reports the client certificate that redlock presents.
func checkClientCert(ts *tlsSetup, n *nodeReport) {
	leaf, err := ts.source.ClientCertificate()
	if leaf == nil {
		return
	}
	if n.TLS == nil {
		n.TLS = &tlsReport{}
	}
	exp := leaf.NotAfter
	n.TLS.ClientSubject, n.TLS.ClientIssuer, n.TLS.ClientExpires = leaf.Subject.String(), leaf.Issuer.String(), &exp
	desc := fmt.Sprintf("client certificate %q of %s, issued by %q, valid until %s", n.TLS.ClientSubject, ts.files.Cert, n.TLS.ClientIssuer, exp.UTC().Format(time.DateTime))
	switch now := time.Now(); {
	case err != nil:
		n.add(levelWarn, "client cert", "%s; the file changed but cannot be used (%v): the certificate read before is presented until it can", desc, err)
	case now.After(exp):
		n.add(levelError, "client cert", "%s: expired %s ago; a node that checks client certificates refuses it: renew it", desc, humanDur(now.Sub(exp)))
	case now.Before(leaf.NotBefore):
		n.add(levelError, "client cert", "%s: not valid until %s; check this machine's clock", desc, leaf.NotBefore.UTC().Format(time.DateTime))
	default:
		n.add(levelInfo, "client cert", "%s (%s left); read again for each new connection when the files change", desc, humanDur(exp.Sub(now)))
	}
}

// humanDur rounds a long duration for people: days above two days, hours
// and minutes above an hour.
func humanDur(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%d days", int(d/(24*time.Hour)))
	case d >= time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return roundDur(d).String()
}
