// Package bench measures this module's lock client side by side with other
// Redis lock libraries, in one process and one run, against the same local
// redis-server processes. It is a module of its own so that programs using
// redlock never download the libraries it is compared with. The command
// lockbench (cmd/lockbench) runs it; cmd/scriptcost measures the server
// time of each script. BENCHMARKS.md at the root of the repository gives
// the results, the method and the command behind each number.
//
// The libraries (Libraries): this module's client through each adapter,
// with its default options, restart quarantine included (lockbench first
// lets its fresh servers age past the TTL); redsync over one go-redis
// client per node, a Mutex reused per key, and redsync/failfast with
// WithFailFast(true) and a Mutex per lock; bsm/redislock, one node only;
// the raw floor, SET NX PX on every node at once and a compare-and-delete
// script, waiting for every node; and the quorum floor (W1 only, not a
// lock), SET and DEL returning at the quorum-th reply.
//
// The workloads: W1, uncontended, G goroutines sharing one client, each on
// keys of its own; W2, contended, G contenders each with a client of its
// own on one key, and W2s, the same sharing one client, each with the
// library's retry as shipped or tuned, incrementing a shared counter under
// the lock with a yield between read and write, so that an overlap loses
// an update; RW, a read-mostly mix on this module's read-write lock beside
// a plain Lock doing the same; and two measurements that a full run leaves
// out: KEYS, the server's memory per distinct key held, released and
// expired, and WAITERS, the client's memory per goroutine waiting in Lock.
//
// A cell runs each library for Config.Duration in Config.Reps slices, the
// libraries taking turns slice by slice. Latencies are timed around each
// call into log-linear histograms (buckets about 3% wide); allocations are
// the process's, per pair; server CPU is the cell's servers' own count
// (INFO cpu, used_cpu_sys plus used_cpu_user) over the slices, per pair.
// In W2 the acquire latency is a contender's whole wait, from its previous
// release to holding the lock, across the library's give-ups; a wait cut
// off by the end of a slice counts as waited so far.
//
// With lockbench -net realistic, a delay proxy stands in front of each
// server, one server stalling now and then (see NetConfig).
package bench
