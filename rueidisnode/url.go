package rueidisnode

import (
	"errors"

	"github.com/quorumlock/redlock/driver/nodeurl"
	"github.com/redis/rueidis"
)

// parseURL parses rawURL as Dial reads it, with rueidis.ParseURL: into the
// options of a client for one server, or, when rawURL names a cluster (see
// [nodeurl.Cluster]), of a cluster client. Its errors do not repeat the
// user information.
func parseURL(rawURL string) (opt rueidis.ClientOption, cluster bool, err error) {
	opt, cluster, err = parse(rawURL)
	if err != nil {
		return opt, false, nodeurl.Error("rueidisnode", rawURL, err, func(s string) error {
			_, _, err := parse(s)
			return err
		})
	}
	return opt, cluster, nil
}

func parse(rawURL string) (opt rueidis.ClientOption, cluster bool, err error) {
	cluster, rest, err := nodeurl.Cluster(rawURL)
	if err != nil {
		return opt, false, err
	}
	opt, err = rueidis.ParseURL(rest)
	switch {
	case err != nil:
	case opt.Sentinel.MasterSet != "":
		err = errors.New("master_set: a node is a single server or a cluster, not a Sentinel-managed set")
	case cluster && opt.SelectDB != 0:
		err = errors.New("db: a cluster has only database 0")
	case !cluster && len(opt.InitAddress) != 1:
		err = errors.New("addr: a node is a single server")
	case opt.InitAddress[0] == "":
		err = errors.New("empty unix socket path")
	}
	return opt, cluster, err
}
