package goredisnode

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net/url"
	"slices"
	"strings"

	"github.com/quorumlock/redlock/driver/nodeurl"
	"github.com/redis/go-redis/v9"
)

// parseURL parses rawURL as Dial reads it: into the options of a client
// for one server, or, when rawURL names a cluster (see [nodeurl.Cluster]),
// of a cluster client. Its errors do not repeat the user information, and
// wrap redlock.ErrInvalid.
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
	if err := nodeurl.Scheme(rawURL); err != nil {
		return nil, nil, err
	}
	if err := nodeurl.Addrs(rawURL); err != nil {
		return nil, nil, err
	}
	cluster, rest, err := nodeurl.Cluster(rawURL)
	switch {
	case err != nil:
		return nil, nil, err
	case cluster:
		copt, err := redis.ParseClusterURL(rest)
		if err == nil {
			err = checkParams(nodeurl.Query(rest))
		}
		return nil, copt, err
	}
	opt, err := redis.ParseURL(rawURL)
	if err == nil {
		err = checkParams(nodeurl.Query(rawURL))
	}
	if err == nil && opt.DB < 0 {
		err = fmt.Errorf("database %d: want 0 or more", opt.DB)
	}
	return opt, nil, err
}

// intParams are the integer query parameters that go-redis reads, with
// the ranges Dial accepts.
var intParams = map[string][2]int{
	"db":                      {0, math.MaxInt32},
	"protocol":                {2, 3},
	"max_retries":             {-1, 100}, // overridden: Dial never retries
	"dialer_retries":          {0, 100},  // overridden: one attempt
	"max_redirects":           {-1, 1000},
	"pool_size":               {0, nodeurl.MaxConns},
	"min_idle_conns":          {0, nodeurl.MaxConns},
	"max_idle_conns":          {0, nodeurl.MaxConns},
	"max_active_conns":        {0, nodeurl.MaxConns},
	"max_concurrent_dials":    {0, nodeurl.MaxConns},
	"failing_timeout_seconds": {0, 86400},
}

// durationParams are the duration query parameters that go-redis reads.
var durationParams = []string{
	"min_retry_backoff", "max_retry_backoff", "dial_timeout", "dialer_retry_timeout",
	"read_timeout", "write_timeout", "pool_timeout", "conn_max_idle_time", "idle_timeout",
	"conn_max_lifetime", "max_conn_age", "conn_max_lifetime_jitter",
}

// checkParams checks the values of the query parameters q that go-redis
// parses but does not bound: integers and durations within a range, and
// a client name that Redis accepts. go-redis itself refuses unknown
// parameters, and values that are not numbers or booleans. An empty value
// leaves the default, as go-redis reads it.
func checkParams(q url.Values) error {
	for _, name := range slices.Sorted(maps.Keys(q)) {
		for _, v := range q[name] {
			if v == "" {
				continue
			}
			if r, ok := intParams[name]; ok {
				if _, err := nodeurl.Int(name, v, r[0], r[1]); err != nil {
					return err
				}
			}
			// go-redis reads 0 and -1 as "no timeout".
			if slices.Contains(durationParams, name) && v != "-1" {
				if _, err := nodeurl.Duration(name, v, true); err != nil {
					return err
				}
			}
			if name == "client_name" && strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
				return errors.New("client_name: Redis refuses spaces and control characters in a client name")
			}
		}
	}
	return nil
}
