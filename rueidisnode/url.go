package rueidisnode

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net/url"
	"slices"
	"strings"

	"github.com/quorumlock/redlock/driver/nodeurl"
	"github.com/redis/rueidis"
)

// parseURL parses rawURL as Dial reads it, with rueidis.ParseURL: into the
// options of a client for one server, or, when rawURL names a cluster (see
// [nodeurl.Cluster]), of a cluster client. Its errors do not repeat the
// user information, and wrap redlock.ErrInvalid.
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
	if err := nodeurl.Scheme(rawURL); err != nil {
		return opt, false, err
	}
	if err := nodeurl.Addrs(rawURL); err != nil {
		return opt, false, err
	}
	cluster, rest, err := nodeurl.Cluster(rawURL)
	if err != nil {
		return opt, false, err
	}
	opt, err = rueidis.ParseURL(rest)
	if err == nil {
		err = checkParams(nodeurl.Query(rest), &opt)
	}
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
	case opt.SelectDB < 0:
		err = fmt.Errorf("database %d: want 0 or more", opt.SelectDB)
	}
	return opt, cluster, err
}

// params are the query parameters that rueidis.ParseURL reads (beside
// cluster, which nodeurl.Cluster reads): rueidis ignores any other, which
// Dial refuses instead, so that a misspelt one is not lost.
var params = []string{
	"db", "dial_timeout", "write_timeout", "addr", "skip_verify", "protocol",
	"client_cache", "max_retries", "client_name", "master_set",
}

// checkParams checks the query parameters q, which rueidis.ParseURL
// parsed into opt: that each is one rueidis reads, and that its value is
// in range. It also puts write_timeout where it belongs: rueidis.ParseURL
// takes it for the dial timeout.
func checkParams(q url.Values, opt *rueidis.ClientOption) error {
	for _, name := range slices.Sorted(maps.Keys(q)) {
		if !slices.Contains(params, name) {
			return fmt.Errorf("unknown parameter %q; rueidisnode reads %s", name, strings.Join(params, ", "))
		}
		for _, v := range q[name] {
			var err error
			switch name {
			case "db":
				_, err = nodeurl.Int(name, v, 0, math.MaxInt32)
			case "protocol":
				_, err = nodeurl.Int(name, v, 2, 3)
			case "max_retries":
				_, err = nodeurl.Int(name, v, -1, 100) // Dial never retries
			case "dial_timeout", "write_timeout":
				_, err = nodeurl.Duration(name, v, true)
			case "client_cache":
				_, err = nodeurl.Bool(name, v) // Dial never caches
			case "skip_verify":
				if v != "" {
					_, err = nodeurl.Bool(name, v)
				}
			case "client_name":
				if strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
					err = errors.New("client_name: Redis refuses spaces and control characters in a client name")
				}
			}
			if err != nil {
				return err
			}
		}
	}
	opt.Dialer.Timeout = 0
	if v := q.Get("dial_timeout"); v != "" {
		opt.Dialer.Timeout, _ = nodeurl.Duration("dial_timeout", v, true)
	}
	if v := q.Get("write_timeout"); v != "" {
		opt.ConnWriteTimeout, _ = nodeurl.Duration("write_timeout", v, true)
	}
	return nil
}
