module github.com/quorumlock/redlock/faulttest

go 1.26.0

require (
	github.com/alicebob/miniredis/v2 v2.40.0
	github.com/quorumlock/redlock v0.0.0
	github.com/quorumlock/redlock/goredisnode v0.0.0
	github.com/redis/go-redis/v9 v9.22.0
	github.com/yuin/gopher-lua v1.1.1
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.41.0 // indirect
)

replace (
	github.com/quorumlock/redlock => ../
	github.com/quorumlock/redlock/goredisnode => ../goredisnode
)
