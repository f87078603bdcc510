// Package redlock provides distributed locks over N independent Redis
// masters with the Redlock algorithm, as described on the Redis page
// "Distributed locks with Redis".
//
// A Client is built from Nodes, one per Redis master. The nodes must be
// independent: no replication between them, each its own process on its
// own host. The adapters in the goredisnode and rueidisnode modules make
// Nodes from go-redis and rueidis clients; this package itself imports only
// the standard library.
//
//	c, err := redlock.New(nodes, nil)
//	...
//	l, err := c.Lock(ctx, "invoice:42", 10*time.Second)
//	if err != nil {
//		return err
//	}
//	defer l.Release(ctx)
//	// Work here must finish before l.Until(), or extend the lock in time.
//
// # The algorithm
//
// A single node is locked with SET key token NX PX ttl, where the token is
// random and fresh for every attempt, and unlocked by a script that deletes
// the key only if it still holds the token. Over N nodes, a round of
// Client.Lock or Client.TryLock:
//
//  1. reads the monotonic clock (t0) and sends the SET to all N nodes at
//     once, each request with a timeout far below the TTL;
//  2. succeeds when at least N/2+1 nodes granted it and validity is left:
//     the lock is valid until t0 + ttl − drift, where drift = ttl×0.01 +
//     2ms allows for the nodes' clocks running at a slightly different rate
//     from the client's (Options.DriftFactor, Options.MinDrift);
//  3. otherwise deletes its token on all N nodes, also those that said no
//     or did not answer, since a grant may have been applied after its
//     reply was lost, and Lock tries again after a random pause.
//
// Lock.Extend moves the deadline with a script that sets a new expiry only
// on keys that still hold the token; it succeeds with a quorum within the
// current validity. Lock.Release deletes the token on all nodes.
//
// # Guarantees
//
// Safety: at any moment at most one owner holds the lock within its
// validity, provided that (a) the clocks of the client and the nodes run at
// rates that differ by less than the drift allowance, (b) a node that
// restarts does not come back with fewer keys than it had and vote again
// within the TTL (run it with appendfsync always, or keep it down for a
// TTL after a crash), and (c) nodes do not evict lock keys (maxmemory-policy
// noeviction or volatile-*, never allkeys-*).
//
// Liveness: every lock expires, so a crashed owner blocks others for at
// most its TTL; and locks can be obtained while a majority of the nodes is
// reachable.
//
// # Limits
//
// A lock with a deadline cannot stop an owner that pauses (a garbage
// collection, a page fault, a stopped process) past its deadline and then
// carries on: it may act while another owner holds the lock. The validity
// deadline tells an owner when to stop, but a resource that must never see
// two owners has to check a fencing token itself. Redlock also relies on
// bounded clock drift (a node's clock jumping forward can expire a key
// early); configure NTP to slew rather than step.
//
// # Errors
//
// Operations return *OpError, which says what each node did, wrapping one
// of ErrTaken, ErrNoQuorum, ErrExpired or ErrLockLost; errors.Is works on
// them and on the caller's context errors. Bad arguments give errors
// wrapping ErrInvalid.
package redlock
