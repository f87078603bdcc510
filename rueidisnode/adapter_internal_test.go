package rueidisnode

import (
	"errors"
	"testing"

	"github.com/quorumlock/redlock/driver/drivertest"
	"github.com/redis/rueidis"
)

// adapter describes this package to the tests of package drivertest.
var adapter = drivertest.Adapter[*Node]{
	Pkg:     "rueidisnode",
	Dial:    func(url string) (*Node, error) { return Dial(url) },
	EvalLua: (*Node).eval,
	IsErrorReply: func(err error) bool {
		var rerr *rueidis.RedisError
		return errors.As(err, &rerr)
	},
	// A node is one server or a cluster, which has only database 0; not
	// a Sentinel-managed set.
	BadURLs: []string{
		"redis://u:" + drivertest.ACLPassword + "@h:6379/1?addr=h2:6379",
		"redis://u:" + drivertest.ACLPassword + "@h:6379?addr=h2:6379&db=2",
		"redis://u:" + drivertest.ACLPassword + "@h:6379/0?master_set=m",
	},
	CheckDialled: checkDialled,
}

// checkDialled checks that the options Dial parsed from the URL ask for
// TLS as the URL does. (A rueidis client does not show its options.)
func checkDialled(t *testing.T, d drivertest.Dialled[*Node]) {
	t.Helper()
	opt, _, err := parseURL(d.URL)
	if err != nil {
		t.Errorf("parseURL(%q): %v", d.URL, err)
		return
	}
	d.CheckTLS(t, opt.TLSConfig)
}

func TestAdapter(t *testing.T) {
	t.Parallel()
	drivertest.TestAdapter(t, adapter)
}

func BenchmarkEval(b *testing.B) { drivertest.BenchmarkEval(b, adapter) }
