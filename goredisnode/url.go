package goredisnode

import (
	"github.com/quorumlock/redlock/driver/nodeurl"
	"github.com/redis/go-redis/v9"
)

// parseURL parses rawURL with redis.ParseURL, with errors that do not
// repeat the user information.
func parseURL(rawURL string) (*redis.Options, error) {
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, nodeurl.Error("goredisnode", rawURL, err, func(s string) error {
			_, err := redis.ParseURL(s)
			return err
		})
	}
	return opt, nil
}
