package goredisnode

import (
	"errors"
	"testing"

	"github.com/quorumlock/redlock/driver/drivertest"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// adapter describes this package to the tests of package drivertest.
var adapter = drivertest.Adapter[*Node]{
	Pkg:     "goredisnode",
	Dial:    Dial,
	EvalLua: (*Node).eval,
	IsErrorReply: func(err error) bool {
		var rerr redis.Error
		return errors.As(err, &rerr)
	},
	// redis.ParseURL rejects query parameters it does not know.
	BadURLs:      []string{"redis://u:" + drivertest.ACLPassword + "@h:6379/0?bogus=1"},
	CheckDialled: checkDialled,
}

// checkDialled checks the options Dial gave its client: no retries of
// commands, one try per connection, context deadlines honoured, and TLS
// as the URL asks.
func checkDialled(t *testing.T, d drivertest.Dialled[*Node]) {
	t.Helper()
	o := d.Node.owned.Options()
	if o.MaxRetries > 0 || !o.ContextTimeoutEnabled || o.DialerRetries != 1 {
		t.Errorf("Dial(%q): MaxRetries %d, ContextTimeoutEnabled %v, DialerRetries %d",
			d.URL, o.MaxRetries, o.ContextTimeoutEnabled, o.DialerRetries)
	}
	if m := o.MaintNotificationsConfig; m == nil || m.Mode != maintnotifications.ModeDisabled || m.EndpointType == maintnotifications.EndpointTypeAuto {
		// Otherwise NewClient resolves the host name to classify it.
		t.Errorf("Dial(%q): maintenance notifications %+v, want disabled with a fixed endpoint type", d.URL, m)
	}
	d.CheckTLS(t, o.TLSConfig)
}

func TestAdapter(t *testing.T) {
	t.Parallel()
	drivertest.TestAdapter(t, adapter)
}

func BenchmarkEval(b *testing.B) { drivertest.BenchmarkEval(b, adapter) }
