package goredisnode

import (
	"slices"
	"testing"

	"github.com/quorumlock/redlock/driver/drivertest"
	"github.com/quorumlock/redlock/driver/nodeurl"
	"github.com/redis/go-redis/v9"
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
			opt, copt, err := parseURL(raw)
			switch {
			case err != nil:
				return "", "", "", err
			case copt != nil:
				return joinAddrs(slices.Clone(copt.Addrs)), "tcp", copt.Addrs[0], nil
			}
			return clientName(opt), opt.Network, opt.Addr, nil
		},
		// go-redis parses a cluster's URL with ParseClusterURL, which does
		// not know the cluster parameter.
		LibraryParse: func(raw string) error {
			cluster, rest, err := nodeurl.Cluster(raw)
			if err != nil || !cluster {
				_, err := redis.ParseURL(raw)
				return err
			}
			_, err = redis.ParseClusterURL(rest)
			return err
		},
	})
}
