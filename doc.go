// Package redlock provides distributed locks over N independent Redis
// masters, using the Redlock algorithm described on the Redis page
// "Distributed locks with Redis".
//
// A [Client] is built from [Node] values, one per master. The masters must
// be independent: no replication between them, each on its own host. The
// goredisnode and rueidisnode modules make Nodes from go-redis and rueidis
// clients; package [driver] says what any other client library must do to
// be a Node. This package imports only the standard library.
//
//	locks, err := redlock.New(nodes, nil)
//	...
//	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
//	defer cancel()
//	l, err := locks.Lock(ctx, "invoice:42", 10*time.Second)
//	if err != nil {
//		return err
//	}
//	defer l.Release(ctx)
//	// Finish before l.Until(), or extend the lock in time; stop when
//	// l.Context() is done; send l.Fence() with every write.
//
// A Client and a [Lock] are safe for concurrent use by multiple goroutines.
//
// # The algorithm
//
// A round of [Client.Lock] reads the monotonic clock (t0), sends
// SET key token NX PX ttl, inside a script, to all N nodes at once, and
// succeeds when at least N/2+1 nodes granted it with validity left: the
// lock is valid until t0 + ttl − drift, where drift = ttl×0.01 + 2ms. A
// failed round deletes its token on every node, also those that said no or
// did not answer, and Lock tries again after a random pause, or as soon as
// a release is announced, until it succeeds or its context ends.
// [Lock.Release] deletes the token on every node; [Lock.Extend] sets a new
// expiry only where the token still is, and never re-creates a key.
//
// # Guarantees
//
// Mutual exclusion: at any moment at most one owner holds a key within the
// validity it was given. A plain Lock, the writer of an [RWLock] and its
// readers exclude each other on one key. This holds provided that the
// clocks of the client and the nodes run at nearly the same rate and a
// majority of the node clocks do not step forward; that a node that lost
// its keys does not vote while the locks it granted may be valid (the
// restart quarantine enforces this); and that nodes do not evict lock keys
// (use maxmemory-policy noeviction).
//
// Liveness: every lock expires, so a crashed owner blocks others for at
// most its TTL. Locks can be obtained while a majority of the nodes is
// reachable and out of quarantine.
//
// Fencing: [Lock.Fence] is greater than the fence of every earlier owner of
// the key, at no extra round trip, while the nodes' clocks differ by less
// than the TTL. A resource that refuses writes with a fence below the
// largest it has accepted is safe even from an owner that paused past its
// deadline, which no lock with a deadline can prevent.
//
// A node whose redis-server started more recently than the longest lock it
// may have lost does not vote (the restart quarantine): the first lock on
// fresh servers waits one TTL, and the client logs that at Info.
// Options.DisableQuarantine turns it off, for nodes with appendfsync always
// or throwaway test servers.
//
// # Limits
//
// A TTL above Options.MaxTTL (default 1 hour) and a key longer than 1024
// bytes are refused with [ErrInvalid] before anything is sent; long jobs
// take a short TTL and [Lock.AutoExtend]. Two node entries that are the
// same Redis server (the same run_id, or the same cluster node) are
// refused, by New or by the first round that sees them: one server, one
// vote. A [Semaphore]'s size is recorded on the nodes, and a different
// size is refused while permits are held. A lock's [Lock.Token] is one
// shell word.
//
// # When to use which
//
//   - [Client.Lock], [Client.TryLock]: one owner at a time. The default.
//   - [Client.LockAll]: several keys at once, all or none.
//   - [Client.RWLock]: many readers or one writer.
//   - [Client.Semaphore]: at most n owners at once, each with a fence.
//   - [Client.Election]: one long-lived leader, with rising terms.
//   - [Client.Adopt]: hand a held lock to another process by its token.
//
// Each returns a [Lock] (a [Permit] embeds one). [Lock.Context] ends with
// a cause wrapping [ErrLockLost] when the lock is lost or its deadline
// passes unextended; [Lock.AutoExtend] extends it in the background and
// stops at the first sign of loss.
//
// # Errors
//
// Operations return [*OpError], which says what each node did, wrapping
// one of [ErrTaken], [ErrNoQuorum], [ErrRefused], [ErrExpired] or
// [ErrLockLost]; [ErrReleased] after Release, and
// [ErrInvalid] for bad arguments. errors.Is works on them and on the
// caller's context errors. A node that cannot answer now (down, slow,
// LOADING, quarantined) leaves Lock trying again and may end in
// ErrNoQuorum; a node that refuses for good (a wrong password, an ACL, a
// replica, a full node) counts as a refusal, and when refusals leave no
// quorum, Lock returns [ErrRefused] at once.
//
// # More
//
//   - [How it works]: the algorithm step by step, fences, the quarantine,
//     waiting, the records on the nodes, semaphores, read-write locks,
//     elections, hand-over, what is not guaranteed, and error classes.
//   - [SAFETY.md]: what each guarantee assumes, and the fault runs against
//     real redis-server processes that prove it.
//   - [FAQ.md]: the critiques of Redlock, and what each error means.
//   - [Production]: N, the TTL, persistence, eviction, clocks, TLS, ACLs,
//     Sentinel and Redis Cluster.
//   - Package [github.com/quorumlock/redlock/admin]: the operators' API, to
//     read a key on every node, remove a lock whose owner is gone, and see
//     each node's health.
//   - Package [github.com/quorumlock/redlock/observe]: what an
//     Options.Observer is told, for metrics, traces and audit logs.
//
// [How it works]: https://github.com/quorumlock/redlock/blob/main/docs/how-it-works.md
// [SAFETY.md]: https://github.com/quorumlock/redlock/blob/main/SAFETY.md
// [FAQ.md]: https://github.com/quorumlock/redlock/blob/main/FAQ.md
// [Production]: https://github.com/quorumlock/redlock/blob/main/docs/production.md
package redlock
