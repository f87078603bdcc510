// Package drivertest checks an adapter, an implementation of package
// driver for some Redis client library, against real redis-server
// processes, as package testing/fstest checks a file system. The adapters
// of this repository, goredisnode and rueidisnode, pass it; an adapter for
// another client library should too.
//
// [TestAdapter] checks the adapter on its own, below the lock algorithm:
// running and decoding the lock scripts, falling back from EVALSHA to EVAL,
// batches, error replies, contexts, and dialling every URL form without
// revealing a password. [TestClient] checks the lock algorithm through it:
// a [redlock.Client] over the adapter's nodes while servers are killed,
// paused and restarted and replies are lost. [FuzzURL] fuzzes the
// adapter's URL parsing, and [BenchmarkEval] and [BenchmarkClient] measure
// it. An adapter's tests call them from its own package, where
// Adapter.EvalLua can reach an unexported method:
//
//	var adapter = drivertest.Adapter[*Node]{
//		Pkg:          "mynode",
//		Dial:         Dial,
//		EvalLua:      (*Node).eval,
//		IsErrorReply: isErrorReply,
//		CheckDialled: checkDialled,
//	}
//
//	func TestAdapter(t *testing.T) { drivertest.TestAdapter(t, adapter) }
//	func TestClient(t *testing.T)  { drivertest.TestClient(t, Dial) }
//
// The remaining functions help an adapter test what is its own, such as a
// constructor for a client the caller already has.
//
// The checks start their own servers with package
// [github.com/quorumlock/redlock/internal/redistest], which needs redis-server
// (Redis 7 or later) in PATH, and check what reached the servers with
// connections of their own, never with the library under test. The
// package imports no client library.
package drivertest
