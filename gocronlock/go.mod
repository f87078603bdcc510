module github.com/quorumlock/redlock/gocronlock

go 1.24.0

require (
	github.com/go-co-op/gocron/v2 v2.21.2
	github.com/google/uuid v1.6.0
	github.com/jonboulle/clockwork v0.5.0
	github.com/quorumlock/redlock v0.0.0
	github.com/quorumlock/redlock/goredisnode v0.0.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/redis/go-redis/v9 v9.22.0 // indirect
	github.com/robfig/cron/v3 v3.0.1 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.41.0 // indirect
)

replace (
	github.com/quorumlock/redlock => ../
	github.com/quorumlock/redlock/goredisnode => ../goredisnode
)
