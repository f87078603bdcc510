package goredisnode

import (
	"testing"

	"github.com/quorumlock/redlock/internal/adaptertest"
	"github.com/redis/go-redis/v9"
)

// FuzzURL fuzzes the URL parsing of Dial with the shared fuzz target.
func FuzzURL(f *testing.F) {
	adaptertest.FuzzURL(f, adapter, adaptertest.URLParser{
		Parse: func(raw string) (string, bool, error) {
			opt, err := parseURL(raw)
			if err != nil {
				return "", false, err
			}
			return clientName(opt), adaptertest.Local(opt.Network, opt.Addr), nil
		},
		LibraryParse: func(raw string) error {
			_, err := redis.ParseURL(raw)
			return err
		},
	})
}
