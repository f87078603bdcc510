package goredisnode

import (
	"crypto/tls"
	"errors"
	"testing"

	"github.com/quorumlock/redlock/driver/drivertest"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// adapter describes this package to the tests of package drivertest.
var adapter = drivertest.Adapter[*Node]{
	Pkg:     "goredisnode",
	Dial:    func(url string) (*Node, error) { return Dial(url) },
	EvalLua: (*Node).eval,
	IsErrorReply: func(err error) bool {
		var rerr redis.Error
		return errors.As(err, &rerr)
	},
	// redis.ParseURL rejects query parameters it does not know.
	BadURLs:      []string{"redis://u:" + drivertest.ACLPassword + "@h:6379/0?bogus=1"},
	CheckDialled: checkDialled,
}

// checkDialled checks the options Dial gave its client, for one server or
// a cluster: no retries of commands, one try per connection, context
// deadlines honoured, and TLS as the URL asks.
func checkDialled(t *testing.T, d drivertest.Dialled[*Node]) {
	t.Helper()
	var (
		retries, dialerRetries int
		ctxTimeout             bool
		maint                  *maintnotifications.Config
		tlsConfig              *tls.Config
	)
	switch c := d.Node.owned.(type) {
	case *redis.Client:
		o := c.Options()
		retries, dialerRetries, ctxTimeout, maint, tlsConfig = o.MaxRetries, o.DialerRetries, o.ContextTimeoutEnabled, o.MaintNotificationsConfig, o.TLSConfig
	case *redis.ClusterClient:
		o := c.Options()
		retries, dialerRetries, ctxTimeout, maint, tlsConfig = o.MaxRetries, o.DialerRetries, o.ContextTimeoutEnabled, o.MaintNotificationsConfig, o.TLSConfig
	default:
		t.Fatalf("Dial(%q) made a %T", d.URL, c)
	}
	if retries > 0 || !ctxTimeout || dialerRetries != 1 {
		t.Errorf("Dial(%q): MaxRetries %d, ContextTimeoutEnabled %v, DialerRetries %d",
			d.URL, retries, ctxTimeout, dialerRetries)
	}
	if m := maint; m == nil || m.Mode != maintnotifications.ModeDisabled || m.EndpointType == maintnotifications.EndpointTypeAuto {
		// Otherwise NewClient resolves the host name to classify it.
		t.Errorf("Dial(%q): maintenance notifications %+v, want disabled with a fixed endpoint type", d.URL, m)
	}
	d.CheckTLS(t, tlsConfig)
}

func TestAdapter(t *testing.T) {
	t.Parallel()
	drivertest.TestAdapter(t, adapter)
}

func BenchmarkEval(b *testing.B) { drivertest.BenchmarkEval(b, adapter) }
