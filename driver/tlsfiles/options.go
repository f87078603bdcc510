package tlsfiles

import (
	"crypto/tls"
	"errors"
)

// Options are the TLS settings that an adapter's Dial takes beside its
// URL, as its options (goredisnode.WithTLSConfig, WithTLSFiles and
// WithServerName, and the same in rueidisnode) set them. The zero
// Options sets nothing.
type Options struct {
	// Config, if not nil, replaces the configuration that the URL
	// implies, but for the URL's host as the server name if Config has
	// none, and for the URL's request to skip verification
	// (skip_verify=true), which still holds.
	Config *tls.Config
	// Files, if not zero, name the certificate authorities and the
	// client certificate, which replace those of Config (see
	// Source.Config).
	Files Files
	// ServerName, if not empty, replaces the server name.
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
