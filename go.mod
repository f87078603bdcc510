module github.com/quorumlock/redlock

go 1.24
