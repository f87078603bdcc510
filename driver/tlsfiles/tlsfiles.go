// Package tlsfiles makes the TLS configuration of a Redis client from
// certificate files, named as redis-cli names them (--cacert, --cacertdir,
// --cert, --key), and keeps it up to date when the files are replaced.
//
// Client certificates that cert-manager, Vault or a similar agent issues
// live for hours and are replaced on disk before they expire; the CA
// bundle that a client trusts is replaced less often, but it is replaced.
// A [Source] reads its files when it is made, so that a missing or broken
// file is reported at once, and the configuration that [Source.Config]
// returns checks them again at every TLS handshake: when a file's size,
// modification time or identity (a rename or a symbolic link moved onto
// it) has changed, it is read again, and the new connection uses what it
// holds. Connections already open are left as they are: a rotation never
// breaks a connection, nor the lock held through it. A file that cannot be
// read or does not parse after a change, such as a certificate whose new
// key has not been written yet, leaves the last good one in use, and is
// tried again at the next handshake.
//
// The adapters' Dial functions (goredisnode, rueidisnode) take a [Files]
// as an option, and the redlock command builds one from its flags;
// [Options] holds every TLS option of such a Dial, and [Options.Apply]
// makes the client's configuration of them and of the URL. [Dial] makes
// the TLS connections of such a client.
//
// Package tlsfiles also tells apart the TLS alerts with which a server
// refuses a connection ([Alert]): a client certificate that is missing,
// expired or signed by an authority the server does not trust is reported
// by the server, not found by the client.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// Files names the files of a TLS client. The zero Files names none.
// Each file is read with [ReadFile]: it must be a regular file (or a
// symbolic link to one) of at most MaxFileSize bytes.
type Files struct {
	// CACert is a PEM file of the certificate authorities whose
	// certificates the client trusts to sign the server's certificate
	// (redis-cli --cacert). With neither CACert nor CACertDir, the
	// system's authorities are trusted.
	CACert string

	// CACertDir is a directory of PEM files of such authorities
	// (redis-cli --cacertdir). Every regular file in it (or symbolic link
	// to one) that holds PEM certificates is read, so a directory prepared
	// with OpenSSL's c_rehash works; other files are ignored. It may be
	// given together with CACert.
	CACertDir string

	// Cert is a PEM file of the client's certificate, followed by the
	// intermediate authorities' certificates if the server needs them
	// (redis-cli --cert). Key is a PEM file of its private key
	// (redis-cli --key). Both or neither must be given; they may name the
	// same file.
	Cert string
	Key  string
}

// IsZero reports whether f names no file.
func (f Files) IsZero() bool { return f == Files{} }

// A Source holds the certificates that a set of Files names, and reads
// them again when they change. It is safe for concurrent use.
type Source struct {
	files Files
	ca    *watched[*x509.CertPool]   // nil without CACert and CACertDir
	cert  *watched[*tls.Certificate] // nil without Cert and Key
}

// Load reads the files that f names and returns a Source of their
// certificates. It fails if Cert or Key is given without the other, or if
// a file cannot be read or does not hold what it should: a CACert without
// a PEM certificate, a CACertDir without any, a Cert and Key that are not
// a certificate and its private key. Its errors name the file, and wrap
// the error of the os package when a file could not be read, so that
// errors.Is(err, fs.ErrNotExist) tells a missing file.
func Load(f Files) (*Source, error) {
	s := &Source{files: f}
	switch {
	case f.Cert != "" && f.Key == "":
		return nil, fmt.Errorf("tlsfiles: client certificate %s without its key", f.Cert)
	case f.Cert == "" && f.Key != "":
		return nil, fmt.Errorf("tlsfiles: client key %s without its certificate", f.Key)
	}
	if f.CACert != "" || f.CACertDir != "" {
		s.ca = &watched[*x509.CertPool]{paths: s.caPaths, load: s.loadPool}
		if err := s.ca.init(); err != nil {
			return nil, err
		}
	}
	if f.Cert != "" {
		paths := func() ([]string, error) { return []string{f.Cert, f.Key}, nil }
		s.cert = &watched[*tls.Certificate]{paths: paths, load: loadKeyPair}
		if err := s.cert.init(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Files returns the files that s was loaded from.
func (s *Source) Files() Files { return s.files }

// Config returns a TLS configuration for connections to the server that
// serverName names, made from base and the certificates of s. Each call
// returns a new configuration; base is not modified. A nil base stands
// for a configuration with TLS 1.2 as the least version.
//
// The configuration's ServerName is serverName, or base's if serverName
// is empty. It is sent to the server (SNI) and the server's certificate
// must be valid for it: a host name, or an IP address.
//
// With a client certificate, the configuration presents it whenever the
// server asks for one, through GetClientCertificate (Certificates is
// cleared): the certificate and key files as they are at that handshake.
//
// With CA files, and unless base skips verification (InsecureSkipVerify),
// the server's certificate must be signed by one of their authorities,
// through intermediates that the server sends, be valid at the time of
// the handshake (base.Time, if set, tells it) and be valid for the server
// name; the system's authorities are not used. These are the checks that
// crypto/tls makes, made by VerifyConnection against the CA files as they
// are at that handshake; InsecureSkipVerify is set so that crypto/tls
// does not make them first against a pool fixed at the start, and RootCAs
// is cleared. A VerifyConnection of base runs after them. A failed check
// is a *tls.CertificateVerificationError that wraps the x509 error, as
// crypto/tls returns it: errors.As finds an [x509.UnknownAuthorityError],
// an [x509.HostnameError] or an [x509.CertificateInvalidError]. Such a
// configuration therefore must not be the base of another: give each
// Config call the caller's own base.
func (s *Source) Config(base *tls.Config, serverName string) *tls.Config {
	var cfg *tls.Config
	if base != nil {
		cfg = base.Clone()
	} else {
		cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if serverName != "" {
		cfg.ServerName = serverName
	}
	if s.cert != nil {
		cfg.Certificates = nil
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			c, _ := s.cert.get()
			return c, nil
		}
	}
	if s.ca != nil && !cfg.InsecureSkipVerify {
		name, now, next := cfg.ServerName, cfg.Time, cfg.VerifyConnection
		cfg.InsecureSkipVerify = true // verified below, against the files as they are now
		cfg.RootCAs = nil
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if err := s.verify(cs.PeerCertificates, name, now); err != nil {
				return err
			}
			if next != nil {
				return next(cs)
			}
			return nil
		}
	}
	return cfg
}

// verify checks the server's certificate chain, leaf first, as crypto/tls
// does, against the CA files as they are now.
func (s *Source) verify(certs []*x509.Certificate, serverName string, now func() time.Time) error {
	if len(certs) == 0 {
		return errors.New("tls: the server sent no certificate")
	}
	if serverName == "" {
		return errors.New("tlsfiles: no server name to verify the server's certificate against")
	}
	pool, _ := s.ca.get()
	opts := x509.VerifyOptions{
		Roots:         pool,
		DNSName:       serverName,
		Intermediates: x509.NewCertPool(),
	}
	if now != nil {
		opts.CurrentTime = now()
	}
	for _, c := range certs[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := certs[0].Verify(opts); err != nil {
		return &tls.CertificateVerificationError{UnverifiedCertificates: certs, Err: err}
	}
	return nil
}

// ClientCertificate returns the client certificate that the next handshake
// presents, as the files hold it now, or nil if s has none. If the files
// changed but could not be read or did not parse, it returns the one still
// in use, with the error.
func (s *Source) ClientCertificate() (*x509.Certificate, error) {
	if s.cert == nil {
		return nil, nil
	}
	c, err := s.cert.get()
	return c.Leaf, err
}

// caPaths returns the CA files: CACert, then every regular file of
// CACertDir in name order.
func (s *Source) caPaths() ([]string, error) {
	var paths []string
	if s.files.CACert != "" {
		paths = append(paths, s.files.CACert)
	}
	if dir := s.files.CACertDir; dir != "" {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("tlsfiles: CA directory: %w", err)
		}
		for _, e := range entries {
			p := filepath.Join(dir, e.Name())
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
				paths = append(paths, p)
			}
		}
	}
	return paths, nil
}

// loadPool reads the CA files: the first is CACert if one was given, and
// must hold a certificate; of the directory's files, those without one are
// ignored, but at least one must have one.
func (s *Source) loadPool(paths []string, data [][]byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	fromDir := 0
	for i, p := range paths {
		ok := pool.AppendCertsFromPEM(data[i])
		switch {
		case i == 0 && s.files.CACert != "":
			if !ok {
				return nil, fmt.Errorf("tlsfiles: CA file %s holds no PEM certificate", p)
			}
		case ok:
			fromDir++
		}
	}
	if s.files.CACertDir != "" && fromDir == 0 {
		return nil, fmt.Errorf("tlsfiles: CA directory %s holds no file of PEM certificates", s.files.CACertDir)
	}
	return pool, nil
}

// loadKeyPair parses the client certificate and its key.
func loadKeyPair(paths []string, data [][]byte) (*tls.Certificate, error) {
	c, err := tls.X509KeyPair(data[0], data[1])
	if err != nil {
		if !hasPEM(data[0], "CERTIFICATE") {
			return nil, fmt.Errorf("tlsfiles: client certificate file %s holds no PEM certificate", paths[0])
		}
		return nil, fmt.Errorf("tlsfiles: client certificate %s and key %s: %w", paths[0], paths[1], err)
	}
	return &c, nil // X509KeyPair fills in Leaf
}

// hasPEM reports whether data holds a PEM block of the given type.
func hasPEM(data []byte, typ string) bool {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return false
		}
		if b.Type == typ {
			return true
		}
	}
}

// A watched is a value read from files, read again when they change.
type watched[T any] struct {
	paths func() ([]string, error)                       // the files, listed anew at each check
	load  func(paths []string, data [][]byte) (T, error) // makes the value of their contents

	mu    sync.Mutex
	val   T
	stamp []stamp // of the files val was read from
}

// A stamp is what tells whether a file has changed.
type stamp struct {
	path string
	info fs.FileInfo
}

// same reports whether the files a and b were stamped from are unchanged.
func same(a, b []stamp) bool {
	return slices.EqualFunc(a, b, func(x, y stamp) bool {
		return x.path == y.path && os.SameFile(x.info, y.info) &&
			x.info.Size() == y.info.Size() && x.info.ModTime().Equal(y.info.ModTime())
	})
}

// init reads the files for the first time.
func (w *watched[T]) init() error {
	_, err := w.get()
	return err
}

// get returns the value, reading the files again if they changed since
// they were last read with success. If they cannot be read, or the value
// cannot be made of them, it returns the last value with the error.
func (w *watched[T]) get() (T, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	paths, err := w.paths()
	if err != nil {
		return w.val, err
	}
	// The files are stamped before they are read: a change during the
	// read is seen at the next check, which reads them again.
	stamps := make([]stamp, len(paths))
	for i, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return w.val, fmt.Errorf("tlsfiles: %w", err)
		}
		stamps[i] = stamp{p, fi}
	}
	if w.stamp != nil && same(stamps, w.stamp) {
		return w.val, nil
	}
	data := make([][]byte, len(paths))
	for i, p := range paths {
		if data[i], err = ReadFile(p); err != nil {
			return w.val, fmt.Errorf("tlsfiles: %w", err)
		}
	}
	v, err := w.load(paths, data)
	if err != nil {
		return w.val, err
	}
	w.val, w.stamp = v, stamps
	return v, nil
}
