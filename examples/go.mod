module github.com/quorumlock/redlock/examples

go 1.24.0

replace (
	github.com/quorumlock/redlock => ../
	github.com/quorumlock/redlock/goredisnode => ../goredisnode
)

require (
	github.com/quorumlock/redlock v0.0.0
	github.com/quorumlock/redlock/goredisnode v0.0.0
	github.com/redis/go-redis/v9 v9.22.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.41.0 // indirect
)
