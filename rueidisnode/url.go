package rueidisnode

import (
	"errors"

	"github.com/quorumlock/redlock/driver/nodeurl"
	"github.com/redis/rueidis"
)

// parseURL parses rawURL with rueidis.ParseURL and checks that it names a
// single server, with errors that do not repeat the user information.
func parseURL(rawURL string) (rueidis.ClientOption, error) {
	opt, err := parseSingle(rawURL)
	if err != nil {
		return opt, nodeurl.Error("rueidisnode", rawURL, err, func(s string) error {
			_, err := parseSingle(s)
			return err
		})
	}
	return opt, nil
}

func parseSingle(rawURL string) (opt rueidis.ClientOption, err error) {
	opt, err = rueidis.ParseURL(rawURL)
	switch {
	case err != nil:
	case opt.Sentinel.MasterSet != "":
		err = errors.New("master_set: a node is a single server, not a Sentinel-managed set")
	case len(opt.InitAddress) != 1:
		err = errors.New("addr: a node is a single server")
	case opt.InitAddress[0] == "":
		err = errors.New("empty unix socket path")
	}
	return opt, err
}
