package rueidisnode

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/driver/drivertest"
	"github.com/redis/rueidis"
)

// FuzzURL fuzzes the URL parsing of Dial with the shared fuzz target.
func FuzzURL(f *testing.F) {
	// Cluster URLs (see nodeurl.Cluster), beside the shared seeds.
	for _, rest := range []string{
		"127.0.0.1:7000?addr=127.0.0.1:7001&addr=127.0.0.1:7002",
		"127.0.0.1:7000?cluster=true",
		"127.0.0.1:7000/0?addr=[::1]:7001&dial_timeout=1s",
		"127.0.0.1:7000/2?addr=127.0.0.1:7001",
		"127.0.0.1:7000?addr=127.0.0.1:7001&cluster=false",
		"127.0.0.1:7000?cluster=maybe",
	} {
		f.Add("redis://", "u", "p", rest)
	}
	f.Add("unix://", "u", "p", "/run/redis.sock?cluster=1")
	drivertest.FuzzURL(f, adapter, drivertest.URLParser{
		Parse: func(raw string) (name, network, addr string, err error) {
			opt, cluster, err := parseURL(raw)
			if err != nil {
				return "", "", "", err
			}
			if cluster {
				return strings.Join(slices.Sorted(slices.Values(opt.InitAddress)), ","), "tcp", opt.InitAddress[0], nil
			}
			network = "tcp"
			if u, err := url.Parse(raw); err == nil && u.Scheme == "unix" {
				network = "unix"
			}
			addr = opt.InitAddress[0]
			return addr + "/" + strconv.Itoa(opt.SelectDB), network, addr, nil
		},
		// rueidis ignores the cluster parameter.
		LibraryParse: func(raw string) error {
			_, err := rueidis.ParseURL(raw)
			return err
		},
	})
}
