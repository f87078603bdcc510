package tlsfiles

import (
	"crypto/tls"
	"errors"
	"net"
)

// TLS alerts (RFC 8446, section 6) with which a server refuses a
// connection for a reason that trying again cannot change. A server that
// checks client certificates sends one of the first four when the client
// sent none (AlertCertificateRequired under TLS 1.3, AlertHandshakeFailure
// under TLS 1.2) or one it does not accept.
const (
	AlertCertificateRequired    tls.AlertError = 116 // no client certificate, under TLS 1.3
	AlertHandshakeFailure       tls.AlertError = 40  // no acceptable parameters; no client certificate, under TLS 1.2
	AlertBadCertificate         tls.AlertError = 42  // the client certificate is corrupt or failed a check
	AlertUnknownCA              tls.AlertError = 48  // the client certificate's issuer is not trusted
	AlertUnsupportedCertificate tls.AlertError = 43
	AlertCertificateRevoked     tls.AlertError = 44
	AlertCertificateExpired     tls.AlertError = 45 // the client certificate has expired or is not yet valid
	AlertCertificateUnknown     tls.AlertError = 46
	AlertAccessDenied           tls.AlertError = 49
	AlertProtocolVersion        tls.AlertError = 70 // no TLS version that both sides accept
	AlertInsufficientSecurity   tls.AlertError = 71 // no cipher suite strong enough for the server
)

// Alert returns the TLS alert that err reports the peer to have sent.
//
// crypto/tls returns an alert received over TCP as a *net.OpError whose Op
// is "remote error" and whose Err is a value of an unexported type, with
// the text of the alert, such as "tls: certificate required"; Alert
// recognizes it by that text, which is the text of the tls.AlertError of
// the same number. An error that wraps a tls.AlertError, as the QUIC
// methods of crypto/tls return, is reported too. ok is false for any
// other error, alerts that this side sent included.
//
// Under TLS 1.3 a client finishes its handshake before the server has
// checked the client's certificate: the server's alert is the error of
// the first read on the connection, such as the reply to the first
// command, rather than of the handshake.
func Alert(err error) (alert tls.AlertError, ok bool) {
	if errors.As(err, &alert) {
		return alert, true
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "remote error" || op.Err == nil {
		return 0, false
	}
	text := op.Err.Error()
	for a := range 256 {
		if tls.AlertError(a).Error() == text {
			return tls.AlertError(a), true
		}
	}
	return 0, false
}

// Refusal reports whether a is an alert with which a server refuses a
// connection for good: one of the alerts listed above, which no second
// attempt with the same certificates and settings can change.
func Refusal(a tls.AlertError) bool {
	switch a {
	case AlertCertificateRequired, AlertHandshakeFailure, AlertBadCertificate, AlertUnknownCA,
		AlertUnsupportedCertificate, AlertCertificateRevoked, AlertCertificateExpired,
		AlertCertificateUnknown, AlertAccessDenied, AlertProtocolVersion, AlertInsufficientSecurity:
		return true
	}
	return false
}
