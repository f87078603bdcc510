// Package bench measures this module's lock client side by side with other
// Redis lock libraries, in one process and one run, against the same local
// redis-server processes, and against a Redis Cluster used as one node.
//
// It lives in a module of its own so that the programs using redlock never
// download the libraries it is compared with. The command
// github.com/quorumlock/redlock/bench/cmd/lockbench starts the servers and
// the cluster, runs every cell and writes a dated Markdown report;
// BENCHMARKS.md at the root of the repository keeps the latest.
//
// # Libraries
//
//   - redlock/go-redis and redlock/rueidis: this module's client through
//     each adapter (goredisnode.Dial, rueidisnode.Dial), with its default
//     options, restart quarantine included. A node younger than the TTL
//     does not vote, so lockbench lets its fresh servers age past the TTL
//     before the first cell, as the nodes of a deployment a few minutes
//     old have; -quarantine=false sets Options.DisableQuarantine instead.
//     The cluster is one node from the adapter's New: goredisnode.New
//     over a *redis.ClusterClient with MaxRetries -1 and
//     ContextTimeoutEnabled, as New's documentation asks, or
//     rueidisnode.New over a rueidis client whose InitAddress lists the
//     masters (rueidis takes it for a cluster), with retries and
//     client-side caching off, as rueidisnode.Dial has them.
//   - redsync: github.com/go-redsync/redsync/v4 over one go-redis v9 client
//     (pool) per node, with default client options. Each goroutine makes a
//     Mutex per key once and reuses it. Its rounds wait for every node.
//   - redsync/failfast: the same with WithFailFast(true), whose rounds,
//     Lock's and Unlock's, end as soon as a quorum has granted or refused.
//     Each lock gets a new Mutex: Unlock returns while goroutines of its
//     round have still to read the Mutex's value, which the next Lock of
//     a reused Mutex writes (a data race in redsync v4.18.1). Not in the
//     default -libs.
//   - bsm/redislock: github.com/bsm/redislock over one go-redis client; it
//     locks a single node, so it runs only in the N = 1 cells, the
//     cluster's included.
//   - raw go-redis: the floor, a naive Redlock over go-redis: SET key token
//     NX PX ttl on every node at once (one goroutine per node, no
//     pipelining, a fresh 16-byte random token per attempt), held with
//     N/2+1 grants, then EVALSHA compare-and-delete on every node at once.
//     A failed attempt deletes its token everywhere and is retried after a
//     random pause of 0.5–1.5 × 50ms (1ms when tuned). Each attempt waits
//     for every node: one round trip to the slowest.
//   - quorum floor: W1 only, not a lock, and not in the default -libs.
//     SET key token PX ttl on every node at once (one goroutine per node,
//     over go-redis), returning as soon as a quorum has answered, then
//     DEL key the same way: one round trip to the quorum-th node, the
//     least any client that waits for a quorum can take. The commands are
//     unconditional, so that a DEL that overtakes its SET on a slow node
//     (the rest of each round goes on in the background) leaves a key
//     that expires and nothing fails.
//
// On the cluster, redsync, bsm/redislock and the raw floor each have one
// *redis.ClusterClient with default options where they have a
// *redis.Client on a plain server.
//
// # The cluster
//
// With Config.ClusterAddrs set (lockbench starts a cluster of three
// masters, without replicas, unless -cluster=false), every workload also
// runs with the whole Redis Cluster as the one node (N = 1), in cells
// placed right after the plain N = 1 cells so that the two are read side
// by side: W1 with Config.ClusterGoroutines (1 and 64), W2 and W2s with
// each retry setting. The clients send each script or command to the
// master of its key's hash slot, which for these keys is one of the
// three.
//
// # Workloads
//
// W1 is uncontended: G goroutines share one client of the library, and
// each locks and unlocks keys of its own in turn (Lock, then Release, or
// the library's equivalents), with the library's default settings.
//
// W2 is contended: G contenders, each with a client of its own as separate
// processes would have, lock and unlock one key. W2s is the same with one
// client shared by the contenders, as goroutines of one process share it. A
// contender waits for the lock with the library's retry behaviour, either as
// shipped (RetryDefault) or with a low retry delay (RetryTuned); when the
// library gives up (redsync after its 32 tries, bsm/redislock at once since
// it does not retry by default) the contender counts a give-up and tries
// again. Under the lock it reads a shared counter, yields (runtime.Gosched)
// and writes the value plus one back, so two holders at once lose an update;
// lost updates are the acquisitions less the counter. It also notes which
// contender held the lock before, which gives the share of acquisitions that
// went to another contender than the previous holder (handoff share), those
// acquisitions per second (cross/s) and the busiest contender's share of all
// acquisitions.
//
// SEM and ELECT measure this module's coordination primitives, which no
// peer library offers over N masters, so only redlock/go-redis and
// redlock/rueidis run them, on the plain servers (not on the cluster),
// with the default options. In SEM, G contenders (Config.Contenders), each
// with a client of its own, acquire a permit of one semaphore of n
// permits (Config.Permits), hold it for Config.Hold, the work, and
// release it; n = 0 runs the same loop on a plain Lock of the same key, to
// compare. Holding a permit, a contender raises a shared count of holders
// and of its slot's holders, and records its fence on the slot: more than
// n holders, two holders of a slot, or a fence no higher than the slot's
// last are violations, which must be 0. The row gives the grants per
// second, the wait (as in W2), the permits held on average and at most,
// and the busiest and least busy contender's shares of the grants. In
// ELECT, C candidates (Config.Candidates), each with a client of its own,
// campaign on one election; the leader checks that it is alone and that
// its term is above the last leader's, leads for Config.Hold and
// resigns, and campaigns again. A handover is a leadership that follows
// another; its latency runs from the moment the last leader began to
// resign to the next leader's Campaign return. One more client reads the
// leader with Leader, back to back, for its latency. Every slice of these
// two workloads uses keys of its own, so that what a slice cut short
// leaves behind does not hold up the next.
//
// RW, the read-mostly mix, measures the read-write lock, which no peer
// offers over N masters either: G goroutines (Config.Contenders) share
// one client, as W1's do, and take one key in turn, one operation in 20
// as its writer (RWLock.Lock) and the others as readers (RWLock.RLock),
// each goroutine starting at its own offset so that the writes are
// spread; each hold is released at once. The cell beside it (Cell.Mutex,
// "lock") runs the same operations with a plain Client.Lock of the key,
// every one exclusive. A read or a write is timed from the call to its
// return, the wait behind the other kind included. Holding, a goroutine
// checks the hold against the others': a writer beside any other holder,
// a reader beside a writer, a writer's fence not above every fence seen
// before, or a reader's below the last writer's are violations, which
// must be 0. The row gives the pairs per second, reads and writes
// together, the ratio to the Lock's, and the latencies of each kind.
// Each slice uses a key of its own, so that a writer's intent left by a
// wait cut short does not slow the next slice's readers.
//
// # The realistic network
//
// On loopback every server answers in the same few microseconds, which
// hides what a quorum is for. With Config.Network set (lockbench -net
// realistic) the clients reach each server through a delay proxy, all of
// them in a process of their own started by StartNetwork (the benchmark's
// executable again, see ServeNetworkIfChild), as NetConfig says:
//
//   - Each segment of bytes a client sends is held for its server's base
//     round trip plus an exponentially distributed jitter, never
//     overtaking the segment before it on its connection; the replies are
//     relayed as they come, so a request and its reply see one round trip.
//     The base round trips are spread evenly from NetConfig.MinRTT, the
//     first server's, to MaxRTT, the last's: by default 200µs, 400µs,
//     600µs, 800µs and 1ms over five servers, plus a jitter of mean 100µs.
//     A quorum of five is then normally the third server, at 600µs, and
//     the slowest is at 1ms.
//   - One server (NetConfig.StallNode, by default the first, the fastest,
//     which is in nearly every quorum) stalls for StallMin to StallMax
//     (uniform, 5–20ms by default) after gaps of mean StallEvery
//     (exponential, 1s by default), as a server does while it forks for
//     an RDB snapshot or waits on a slow fsync: what its clients send
//     meanwhile reaches it when the stall ends, and replies already on
//     their way still arrive. It stalls about 1.2% of the time.
//
// The proxies deliver from one goroutine locked to its thread, which
// sleeps with nanosleep and a timer slack of 1ns: a Go timer in a process
// with idle processors fires no sooner than a whole millisecond, which
// would blur round trips of a fraction of one. Still, the proxies share
// the machine's cores with the clients and the servers: the report gives,
// for each cell, how late past their due time the segments were
// delivered, and the stalls. The cluster is not used: its redirections
// name the servers' own ports, which would bypass the proxies.
//
// Compare a library with the two floors of the same cell: the quorum
// floor (the quorum-th node) and the raw floor (the slowest node). With
// Config.SlowAbove set, as lockbench sets it to the shortest stall, each
// W1 row also gives the share of lock calls that took at least that long:
// those that waited for the stalled server, or for a machine as slow. Two
// Goals lines check that this module's client's acquire p99 and p999 are
// nearer the quorum floor's than the raw floor's: at G = 1 a stall holds
// up a single call of a client that waits for every node, a few in a
// thousand, which p999 shows and p99 does not.
//
// # Measurement
//
// A cell runs every library that supports it for Config.Duration, split
// into Config.Reps slices; the libraries take turns slice by slice, each
// repetition starting with the next library, so that the drift of a noisy
// machine hits them alike. Clients are opened and warmed up (connections
// made, scripts cached) before the first slice.
//
//   - ops/s: completed lock+unlock pairs per second of measured time, over
//     all goroutines. A slice's time runs from the start signal to the end
//     of the last goroutine, which finishes the call it is in when the
//     slice ends.
//   - Latencies: time.Now around each call, recorded in a log-linear
//     histogram (buckets at most about 3% wide) per goroutine and merged;
//     percentiles (p50, p99, p999) are the middle of their bucket, max is
//     exact. A p999 needs some ten thousand calls to mean much: at G = 1
//     over the realistic network, half a minute per library. In W1 the
//     acquire latency is one lock call; in W2 it is the whole wait, from
//     the end of the contender's previous release (or the start of the
//     slice) to holding the lock, across give-ups. A wait still going on
//     when a slice ends is recorded with the time waited so far, a lower
//     bound, and counted as cut off; so W2 sees waits up to about one
//     slice long, and a starved contender shows as cut-off waits.
//   - Allocations: runtime.ReadMemStats (Mallocs, TotalAlloc) before and
//     after each slice, after a garbage collection, divided by the pairs
//     completed. This counts everything the process allocated meanwhile:
//     the library, its Redis client and that client's background
//     goroutines. The harness itself does not allocate in its loops.
//   - Commands (Config.CountPairs): before the cells, each library makes
//     that many lock+release pairs, one at a time, on the first server
//     and on the cluster, over eight keys it has locked once before, and
//     the servers' INFO stats and commandstats are read before and after.
//     The reads from client connections (total_reads_processed) are the
//     round trips, one request being in flight at a time; the calls of
//     each command are those the client sent and those its scripts ran;
//     the usec of the script commands is the servers' time in scripts,
//     their commands included; and the refused calls count redirections
//     (MOVED, ASK) and CROSSSLOT. A Goals line checks that this module's client makes the
//     same round trips and runs the same commands on the cluster as on one
//     server.
//
// # Scale (KEYS, WAITERS, plots)
//
// W1 with -n 3,5,7,9 and -g 1,4,16,64,256 gives latency and pairs per
// second against the number of nodes and of goroutines; the quorum floor
// of the same cells is the network's floor, one round trip to the
// quorum-th node (a lock adds its script's time on the server, measured by
// cmd/scriptcost). Two measurements of memory are not in a full run:
//
//   - KEYS (Config.Keys, Config.FenceRetentions; lockbench -keys,
//     -fence-retention): for each number of distinct keys, a fresh
//     redis-server; this module's client (the first of its adapters in
//     Config.Libraries, restart quarantine off since the server is
//     fresh, TTL 10 minutes) locks that many keys at once from 256
//     goroutines, holds them all, and releases them. INFO memory
//     used_memory (read once it is the same twice 300ms apart) above the
//     base, divided by the keys, is read with every lock held, after the
//     release (the fence counters live on for Options.FenceRetention), and,
//     with a positive retention, once the server has expired every key
//     with an expiry. DBSIZE counts the locks, the counters and the node
//     records, one per hash slot used (at most 16,384 per server). The
//     reference, SET NX PX, stores each key alone with a 24-character
//     token, as redsync and bsm/redislock do, pipelined. The client's heap
//     per held lock is read too.
//   - WAITERS (Config.Waiters; lockbench -waiters): on the first
//     Config.Nodes[0] servers, a client holds a key and a second client of
//     the same adapter has K goroutines blocked in Lock on it (both with
//     the restart quarantine off, the holder's TTL being two minutes).
//     runtime.MemStats HeapInuse, StackInuse and Sys after a collection,
//     less before, divided by K, and the goroutines per waiter; and the
//     commands the servers ran per second while every waiter waited.
//
// lockbench -json FILE saves a run's report; -svg DIR draws its plots (see
// Figures), and -plot FILES,... -svg DIR draws them from saved reports,
// each point the mean of the runs that measured it with a bar over their
// range. The plots are plain SVG drawn with the standard library
// (plot.go).
//
// # Where one lock waits (cmd/waits)
//
// The command github.com/quorumlock/redlock/bench/cmd/waits breaks one
// uncontended lock+release (W1, G = 1) into its waits. One goroutine
// locks and releases keys of its own, one pair at a time, with each
// library in turn, in slices of -slice (200ms) until each has run
// -slices (20) of them, after -warmup (500ms) of unmeasured pairs. The
// libraries are redlock/go-redis, redlock/rueidis, redsync and
// bsm/redislock as above, and two floors on one node: redlock-scripts,
// the acquire and release calls one redlock Lock and Release made,
// recorded once and sent again and again by a plain go-redis client (the
// scripts' round trips without the client core and adapter), and
// setnx-cad, SET NX PX then a compare-and-delete script. -libs picks
// some; -n (1) starts that many redis-servers, or -addrs uses running
// ones; -ttl (10s) and -quarantine (on) are as for lockbench, and with
// quarantine on it first waits until every server is older than the
// TTL. For each library it prints pairs per second, acquire and release
// p50 and p90 over every pair and the range of the slices' p50, and per
// pair: redlock's time inside its nodes' Eval calls (each node wrapped
// in a timer that keeps the adapter's optional interfaces), heap
// allocations, bytes and goroutines created (runtime/metrics), the
// process's voluntary context switches (getrusage), the CPU time of the
// client's threads and of the servers' threads and the client's
// run-queue wait (/proc/PID/task/*/schedstat), the servers' voluntary
// switches, the machine's entries into a CPU idle state other than POLL
// (/sys/devices/system/cpu/cpu*/cpuidle/state*/usage: halted CPUs that
// had to be woken), and the CPU the machine's other processes used
// meanwhile (/proc/stat), which names how idle the machine was. A
// counter it cannot read leaves its column blank. With -trace FILE it
// then runs -trace-pairs (2000) pairs of each library under
// runtime/trace, in turns of 100, writes the trace to FILE and reads it
// back with golang.org/x/exp/trace: per pair, the calling goroutine's
// time running, in system calls, runnable and parked by reason (network,
// chan receive, ...), its parks and system calls, and the process's
// goroutines created, other goroutines woken and P starts. Run under
// taskset -c 0, client and the servers it starts share one CPU, so no
// CPU halts between request and reply: the pinned latencies are the CPU
// on the critical path.
package bench
