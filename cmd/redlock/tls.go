package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/redlock/driver/tlsfiles"
	"github.com/quorumlock/redlock/goredisnode"
	"github.com/spf13/pflag"
)

// This file sets up TLS for rediss:// nodes from redis-cli's flags and
// their environment variables, and says what a TLS failure means.

// tlsHelp is the topic 'redlock help tls'.
const tlsHelp = `TLS: rediss:// URLs connect with TLS and verify each node's certificate
against the system's certificate authorities and the URL's host. For a
private CA, for nodes that ask for client certificates (Redis's default,
tls-auth-clients yes) and for other names, use redis-cli's flags, or their
environment variables; a flag wins over its variable:

  --cacert FILE    $REDLOCK_CACERT     CA certificates (PEM) that sign the nodes' certificates
  --cacertdir DIR  $REDLOCK_CACERTDIR  a directory of such files
  --cert FILE      $REDLOCK_CERT       the client certificate (PEM) to present
  --key FILE       $REDLOCK_CERT_KEY   its private key (PEM)
  --sni NAME       $REDLOCK_SNI        the server name to send and to verify, instead of the URL's host
  --insecure       $REDLOCK_INSECURE=1 do not verify the nodes' certificates (warned on every run)

The files are read again for each new connection when they have changed, so
certificates rotated on disk (cert-manager, Vault) are used without a
restart, by a long 'redlock run' too. A certificate that fails verification,
and a client certificate that the node asks for or refuses, end the command
at once with the reason and the flag to use (status 78 for run).

For example, mutual TLS with a private CA:

  export REDLOCK_NODES=rediss://10.0.0.1:6380,rediss://10.0.0.2:6380,rediss://10.0.0.3:6380
  redlock --cacert ca.crt --cert client.crt --key client.key doctor`

// Environment variables of the TLS flags.
const (
	envCACert    = "REDLOCK_CACERT"
	envCACertDir = "REDLOCK_CACERTDIR"
	envCert      = "REDLOCK_CERT"
	envKey       = "REDLOCK_CERT_KEY" // not REDLOCK_KEY, which 'redlock run' gives its command
	envSNI       = "REDLOCK_SNI"
	envInsecure  = "REDLOCK_INSECURE"
)

// tlsFlags are the flags, shared by every command, that set up TLS.
type tlsFlags struct {
	cacert, cacertdir, cert, key, sni string
	insecure                          givenBool
}

func (f *tlsFlags) register(pf *pflag.FlagSet) {
	pf.StringVar(&f.cacert, "cacert", "", "CA certificates (PEM) that sign the rediss:// nodes' certificates (default $"+envCACert+", else the system's)")
	pf.StringVar(&f.cacertdir, "cacertdir", "", "a directory of CA certificate files, as --cacert (default $"+envCACertDir+")")
	pf.StringVar(&f.cert, "cert", "", "client certificate (PEM) for rediss:// nodes that ask for one; read again when it changes (default $"+envCert+")")
	pf.StringVar(&f.key, "key", "", "the private key (PEM) of --cert (default $"+envKey+")")
	pf.StringVar(&f.sni, "sni", "", "server name to send and to verify the nodes' certificates against, instead of the URL's host (default $"+envSNI+")")
	pf.Var(&f.insecure, "insecure", "do not verify the rediss:// nodes' certificates: anyone on the path can pose as a node (default $"+envInsecure+")")
	pf.Lookup("insecure").NoOptDefVal = "true"
	for _, name := range []string{"cacert", "cert", "key"} {
		pf.SetAnnotation(name, "cobra_annotation_bash_completion_filename", []string{"pem", "crt", "key", "cer"})
	}
	pf.SetAnnotation("cacertdir", "cobra_annotation_bash_completion_subdirs_in_dir", nil)
}

// A givenBool is a boolean flag that knows whether it was given.
type givenBool struct{ value, given bool }

func (b *givenBool) String() string { return strconv.FormatBool(b.value) }
func (b *givenBool) Type() string   { return "bool" }
func (b *givenBool) IsBoolFlag() bool {
	return true
}

func (b *givenBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	b.value, b.given = v, true
	return nil
}

// A tlsSetup is how this invocation connects to rediss:// nodes.
type tlsSetup struct {
	files    tlsfiles.Files
	sni      string
	insecure bool
	source   *tlsfiles.Source // of files; nil if they name none
}

// setting is one TLS setting and where it came from.
type setting struct {
	value string
	from  string // "--cacert" or "$REDLOCK_CACERT"; "" when not given
}

func pick(flag, name, env string) setting {
	if flag != "" {
		return setting{flag, "--" + name}
	}
	if v := os.Getenv(env); v != "" {
		return setting{v, "$" + env}
	}
	return setting{}
}

// resolve returns the TLS set-up that the flags and the environment ask
// for, for the nodes at urls, and reads the certificate files. With
// --insecure it warns on w. Settings that cannot work are usage errors:
// a certificate without its key, --insecure with a CA, TLS settings when
// no node asks for TLS, a node URL that turns verification off without
// --insecure, and files that are missing or do not hold what they should.
func (f *tlsFlags) resolve(urls []string, w io.Writer) (*tlsSetup, error) {
	cacert, cacertdir := pick(f.cacert, "cacert", envCACert), pick(f.cacertdir, "cacertdir", envCACertDir)
	cert, key := pick(f.cert, "cert", envCert), pick(f.key, "key", envKey)
	sni := pick(f.sni, "sni", envSNI)
	insecure := setting{}
	switch {
	case f.insecure.given:
		if f.insecure.value {
			insecure = setting{"true", "--insecure"}
		}
	case os.Getenv(envInsecure) != "":
		v, err := strconv.ParseBool(os.Getenv(envInsecure))
		if err != nil {
			return nil, usagef("$%s=%q: want 1, true, 0 or false", envInsecure, os.Getenv(envInsecure))
		}
		if v {
			insecure = setting{"true", "$" + envInsecure}
		}
	}
	var given []string
	for _, s := range []setting{cacert, cacertdir, cert, key, sni, insecure} {
		if s.from != "" {
			given = append(given, s.from)
		}
	}
	anyTLS := false
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil || u.Scheme != "rediss" {
			continue
		}
		anyTLS = true
		if v, err := strconv.ParseBool(u.Query().Get("skip_verify")); err == nil && v && insecure.from == "" {
			return nil, usagef("the node URL %s turns certificate verification off (skip_verify=true): give --insecure to confirm, or --cacert with the CA that signs its certificate", shownURL(raw))
		}
	}
	switch {
	case len(given) > 0 && !anyTLS:
		return nil, usagef("%s set up TLS, but no node URL asks for it: use rediss:// URLs for nodes that speak TLS", strings.Join(given, ", "))
	case cert.from != "" && key.from == "":
		return nil, usagef("%s needs the certificate's private key: give --key too", cert.from)
	case key.from != "" && cert.from == "":
		return nil, usagef("%s needs its certificate: give --cert too", key.from)
	case insecure.from != "" && (cacert.from != "" || cacertdir.from != ""):
		ca := cacert.from
		if ca == "" {
			ca = cacertdir.from
		}
		return nil, usagef("%s and %s contradict each other: %s turns off the verification that the CA is for", insecure.from, ca, insecure.from)
	}
	// Each file must be a regular file of at most 1 MiB (tlsfiles.ReadFile
	// reads it again, and again when it changes): not a device that
	// never ends, nor a named pipe that nobody writes to.
	for _, s := range []setting{cacert, cert, key} {
		if s.from == "" {
			continue
		}
		if _, err := tlsfiles.ReadFile(s.value); err != nil {
			return nil, usagef("%s: %v", s.from, err)
		}
	}
	if cacertdir.from != "" {
		if fi, err := os.Stat(cacertdir.value); err != nil {
			return nil, usagef("%s: %v", cacertdir.from, err)
		} else if !fi.IsDir() {
			return nil, usagef("%s: %s is not a directory", cacertdir.from, cacertdir.value)
		}
	}
	ts := &tlsSetup{
		files:    tlsfiles.Files{CACert: cacert.value, CACertDir: cacertdir.value, Cert: cert.value, Key: key.value},
		sni:      sni.value,
		insecure: insecure.from != "",
	}
	if !ts.files.IsZero() {
		src, err := tlsfiles.Load(ts.files)
		if err != nil {
			return nil, usagef("%s", strings.TrimPrefix(err.Error(), "tlsfiles: "))
		}
		ts.source = src
	}
	if ts.insecure && w != nil {
		fmt.Fprintf(w, "redlock: WARNING: %s: the TLS certificates of the nodes are not verified; anyone on the network path can pose as a node and read what is sent to it, passwords included\n", insecure.from)
	}
	return ts, nil
}

// dialOptions returns the options of goredisnode.Dial for the node URL
// raw: the TLS set-up for a rediss:// URL, nothing for another.
func (ts *tlsSetup) dialOptions(raw string) []goredisnode.DialOption {
	if ts == nil {
		return nil
	}
	if u, err := url.Parse(raw); err != nil || u.Scheme != "rediss" {
		return nil
	}
	opts := []goredisnode.DialOption{goredisnode.WithTLSFiles(ts.files), goredisnode.WithServerName(ts.sni)}
	if ts.insecure {
		opts = append(opts, goredisnode.WithTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: true}))
	}
	return opts
}

// tlsHint says what a TLS failure means and which flag would fix it; ""
// if it is not one.
func tlsHint(err error) string {
	if a, ok := tlsfiles.Alert(err); ok {
		switch a {
		case tlsfiles.AlertCertificateRequired, tlsfiles.AlertHandshakeFailure:
			return "the server asks for a client certificate: pass --cert and --key"
		case tlsfiles.AlertUnknownCA, tlsfiles.AlertBadCertificate, tlsfiles.AlertCertificateUnknown, tlsfiles.AlertUnsupportedCertificate:
			return "the server does not accept the client certificate of --cert: it must be signed by a CA in the server's tls-ca-cert-file, and be meant for TLS clients"
		case tlsfiles.AlertCertificateExpired:
			return "the server refuses the client certificate of --cert as expired or not yet valid: renew it (redlock reads the file again for each new connection)"
		case tlsfiles.AlertCertificateRevoked:
			return "the server refuses the client certificate of --cert as revoked: give another"
		case tlsfiles.AlertAccessDenied:
			return "the server denies access to the client certificate of --cert"
		case tlsfiles.AlertProtocolVersion, tlsfiles.AlertInsufficientSecurity:
			return "the server and redlock have no TLS version or cipher suite in common: redlock speaks TLS 1.2 and 1.3"
		}
		return ""
	}
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		header   tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &unknown):
		issuer := ""
		if unknown.Cert != nil {
			issuer = fmt.Sprintf(" (%s)", unknown.Cert.Issuer)
		}
		return "the node's certificate is signed by a CA" + issuer + " that this machine does not trust: pass --cacert with that CA's certificate (or --cacertdir)"
	case errors.As(err, &hostname):
		names := "no name"
		if hostname.Certificate != nil {
			names = strings.Join(certNames(hostname.Certificate), ", ")
		}
		return fmt.Sprintf("the node's certificate is not valid for %q, only for %s: connect with a name it holds, or pass --sni NAME", hostname.Host, names)
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		when := ""
		if invalid.Cert != nil {
			when = fmt.Sprintf(" (valid from %s to %s)", invalid.Cert.NotBefore.UTC().Format(time.DateTime), invalid.Cert.NotAfter.UTC().Format(time.DateTime))
		}
		return "the node's certificate has expired, or is not valid yet" + when + ": renew the server's certificate, and check this machine's clock"
	case errors.As(err, &invalid):
		return "the node's certificate cannot serve TLS: " + invalid.Error()
	case errors.As(err, &header):
		return "the node does not speak TLS on this port: use redis:// for it, or the port of its tls-port"
	}
	return "TLS failed: check the node's certificate, the CA (--cacert), the client certificate (--cert, --key) and the server name (--sni)"
}

// certNames returns the names a certificate is valid for.
func certNames(c *x509.Certificate) []string {
	names := append([]string(nil), c.DNSNames...)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	if len(names) == 0 {
		return []string{"no name"}
	}
	return names
}
