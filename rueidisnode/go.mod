module github.com/quorumlock/redlock/rueidisnode

go 1.24.0

require (
	github.com/quorumlock/redlock v0.0.0
	github.com/redis/rueidis v1.0.69
)

require golang.org/x/sys v0.41.0 // indirect

replace github.com/quorumlock/redlock => ../
