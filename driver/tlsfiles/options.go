package tlsfiles

import (
	"crypto/tls"
	"errors"
)

// Options are the TLS settings that an adapter's Dial takes beside its
// URL, as its options (goredisnode.WithTLSConfig, WithTLSFiles and
// WithServerName, and the same in rueidisnode) set them. They apply to a
// URL that asks for TLS (rediss://), for one server and for a cluster
// alike: every node of a cluster is reached with the same settings.
// Given with a URL that does not ask for TLS, they make Dial fail rather
// than connect in the clear (see [ErrNotTLS]). The zero Options sets
// nothing.
type Options struct {
	// Config, if not nil, replaces the configuration that the URL
	// implies (TLS 1.2 at least, the system's certificate authorities,
	// the URL's host as the server name): Dial starts from a clone of
	// it. The URL's host is still the server name if Config has none,
	// and the URL's request to skip verification (skip_verify=true)
	// still holds. Files and ServerName apply on top of Config. Config
	// is not modified and may be shared.
	Config *tls.Config
	// Files, if not zero, name the certificate authorities that sign the
	// server's certificate, and the client certificate and its key (see
	// [Files]). Dial reads them at once and fails if one is missing or
	// broken. Each new connection reads them again if they have changed
	// since, so that certificates rotated on disk are used without a
	// restart; connections already open, and the locks held through
	// them, are not disturbed. The authorities of Files, if any, replace
	// the system's and those of Config; its client certificate replaces
	// Config's (see [Source.Config]).
	Files Files
	// ServerName, if not empty, is the name that Dial sends to the
	// server (SNI) and verifies the server's certificate against,
	// instead of the URL's host: for a server reached through an address
	// that its certificate does not name, such as an IP address or a
	// tunnel. For a cluster, every node's certificate must be valid for
	// it.
	ServerName string
}

// ErrNotTLS is the error of Options.Apply for a URL that does not ask for
// TLS.
var ErrNotTLS = errors.New("tlsfiles: TLS options for a URL without TLS: use rediss://")

// Apply returns the TLS configuration of a client whose URL implies
// urlCfg, a configuration that the client library's URL parser made for
// a rediss:// URL (nil for a URL without TLS), with the options. It
// reads the files, if any (see Load). It returns urlCfg itself if o is
// zero, and ErrNotTLS if urlCfg is nil and o is not zero: TLS options
// for a URL that does not ask for TLS would otherwise be dropped, and the
// password sent in the clear. Neither urlCfg nor o.Config is modified.
func (o Options) Apply(urlCfg *tls.Config) (*tls.Config, error) {
	if o.Config == nil && o.Files.IsZero() && o.ServerName == "" {
		return urlCfg, nil
	}
	if urlCfg == nil {
		return nil, ErrNotTLS
	}
	cfg := urlCfg.Clone()
	if o.Config != nil {
		cfg = o.Config.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName = urlCfg.ServerName
		}
		cfg.InsecureSkipVerify = cfg.InsecureSkipVerify || urlCfg.InsecureSkipVerify
	}
	if o.ServerName != "" {
		cfg.ServerName = o.ServerName
	}
	if o.Files.IsZero() {
		return cfg, nil
	}
	src, err := Load(o.Files)
	if err != nil {
		return nil, err
	}
	return src.Config(cfg, ""), nil
}
