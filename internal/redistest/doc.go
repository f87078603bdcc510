// Package redistest runs real redis-server processes for tests, injects
// faults between a client and such a server, and checks that tests leave
// no goroutines behind. It is for testing code that talks to Redis, such as
// code that takes locks with [github.com/quorumlock/redlock], against the
// real server rather than a fake.
//
// A [Server] is one redis-server process on a free loopback port or a unix
// socket, with an empty data directory of its own. A test can stop, kill,
// pause, resume and restart it on the same address, with or without its
// data surviving, and run administrative commands on it with [Server.Do].
// [Start] and [StartN] start servers that close when the test ends:
//
//	func TestCheckout(t *testing.T) {
//		srv := redistest.Start(t, redistest.Config{})
//		node, err := goredisnode.Dial(srv.URL())
//		...
//		srv.Kill() // the node is gone; what does the code under test do?
//	}
//
// A [Proxy] stands between a client and a Server and reads the commands
// and replies it relays, so that it can inject faults that hit whole
// commands: it can apply a command and lose its reply, delay commands,
// swallow them, or cut every connection.
//
// Servers can replicate: [Server.ReplicaOf] makes a server a replica of
// another, directly or through a Proxy whose blackhole then cuts the
// replication link, and [Server.Promote] makes a replica a master, as a
// failover does. [StartSentinel] runs a Redis Sentinel that fails a master
// over to its replica on its own. A [Cluster] is a Redis Cluster of
// masters, built with cluster commands, whose masters a test can kill and
// restart empty, and between which it can move a slot as a reshard does:
//
//	cl := redistest.StartCluster(t, 3, redistest.Config{})
//	node, err := goredisnode.Dial(cl.URL()) // one node over the whole cluster
//	...
//	m, err := cl.MasterOf("orders")
//	err = cl.KillAndRestart(m) // it serves the slot again, without its keys
//
// [Main] is a TestMain that fails the tests if they leave goroutines
// running, as a client that is never closed does.
//
// The package needs redis-server (Redis 7 or later) in PATH, and runs on
// Unix systems only. When redis-server is missing, [New] fails and [Start]
// fails the test: a test that needs a server is never skipped for want of
// one. On Linux the servers die with the test binary even when it is
// killed; elsewhere a binary that dies without running its cleanups leaves
// its servers running.
package redistest
