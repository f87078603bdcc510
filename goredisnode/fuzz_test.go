package goredisnode

import (
	"testing"

	"github.com/quorumlock/redlock/driver/drivertest"
	"github.com/redis/go-redis/v9"
)

// FuzzURL fuzzes the URL parsing of Dial with the shared fuzz target.
func FuzzURL(f *testing.F) {
	drivertest.FuzzURL(f, adapter, drivertest.URLParser{
		Parse: func(raw string) (name, network, addr string, err error) {
			opt, err := parseURL(raw)
			if err != nil {
				return "", "", "", err
			}
			return clientName(opt), opt.Network, opt.Addr, nil
		},
		LibraryParse: func(raw string) error {
			_, err := redis.ParseURL(raw)
			return err
		},
	})
}
