// Package redistest is a test harness that runs real redis-server processes
// on free loopback ports or unix sockets, and a RESP-aware fault proxy.
//
// A [Server] is one redis-server process that a test can stop, kill, pause,
// resume and restart on the same address, with or without its data
// surviving. [Server.Do] runs administrative commands against it directly.
//
// A [Proxy] stands between a client and a Server and reads the commands and
// replies it relays, so that it can inject faults that hit whole commands:
// it can apply a command and lose its reply, hold commands back, swallow
// them, or cut every connection.
//
// The package needs redis-server in PATH. When it is missing, [New] fails
// and [Start] fails the test: tests are never skipped for want of a server.
package redistest
