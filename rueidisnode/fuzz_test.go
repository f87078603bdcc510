package rueidisnode

import (
	"net/url"
	"strconv"
	"testing"

	"github.com/quorumlock/redlock/driver/drivertest"
	"github.com/redis/rueidis"
)

// FuzzURL fuzzes the URL parsing of Dial with the shared fuzz target.
func FuzzURL(f *testing.F) {
	drivertest.FuzzURL(f, adapter, drivertest.URLParser{
		Parse: func(raw string) (name, network, addr string, err error) {
			opt, err := parseURL(raw)
			if err != nil {
				return "", "", "", err
			}
			network = "tcp"
			if u, err := url.Parse(raw); err == nil && u.Scheme == "unix" {
				network = "unix"
			}
			addr = opt.InitAddress[0]
			return addr + "/" + strconv.Itoa(opt.SelectDB), network, addr, nil
		},
		LibraryParse: func(raw string) error {
			_, err := rueidis.ParseURL(raw)
			return err
		},
	})
}
