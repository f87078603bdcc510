module github.com/quorumlock/redlock/bench

go 1.26.0

replace (
	github.com/quorumlock/redlock => ../
	github.com/quorumlock/redlock/goredisnode => ../goredisnode
	github.com/quorumlock/redlock/rueidisnode => ../rueidisnode
)

require (
	github.com/bsm/redislock v0.10.0
	github.com/go-redsync/redsync/v4 v4.18.1
	github.com/quorumlock/redlock v0.0.0
	github.com/quorumlock/redlock/goredisnode v0.0.0
	github.com/quorumlock/redlock/rueidisnode v0.0.0
	github.com/redis/go-redis/v9 v9.23.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/redis/rueidis v1.0.79 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)
