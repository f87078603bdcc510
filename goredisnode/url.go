package goredisnode

import (
	"github.com/quorumlock/redlock/driver/nodeurl"
	"github.com/redis/go-redis/v9"
)

// parseURL parses rawURL as Dial reads it: into the options of a client
// for one server, or, when rawURL names a cluster (see [nodeurl.Cluster]),
// of a cluster client. Its errors do not repeat the user information.
func parseURL(rawURL string) (*redis.Options, *redis.ClusterOptions, error) {
	opt, copt, err := parse(rawURL)
	if err != nil {
		return nil, nil, nodeurl.Error("goredisnode", rawURL, err, func(s string) error {
			_, _, err := parse(s)
			return err
		})
	}
	return opt, copt, nil
}

func parse(rawURL string) (*redis.Options, *redis.ClusterOptions, error) {
	cluster, rest, err := nodeurl.Cluster(rawURL)
	switch {
	case err != nil:
		return nil, nil, err
	case cluster:
		copt, err := redis.ParseClusterURL(rest)
		return nil, copt, err
	}
	opt, err := redis.ParseURL(rawURL)
	return opt, nil, err
}
