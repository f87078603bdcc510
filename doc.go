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
// restarts and comes back without its keys does not vote while locks it
// lost may still be valid (restart quarantine, below, enforces this unless
// it is disabled), and (c) nodes do not evict lock keys (maxmemory-policy
// noeviction: every lock key has an expiry, so volatile-* policies evict
// them as readily as allkeys-* ones).
//
// Liveness: every lock expires, so a crashed owner blocks others for at
// most its TTL; and locks can be obtained while a majority of the nodes is
// reachable and out of quarantine.
//
// # Fencing tokens
//
// Lock.Fence returns a number that is greater than the fence of every
// earlier owner of the same key, as long as the nodes' clocks differ by
// less than the TTL. Each node keeps a counter per key that a grant sets to
// max(counter+1, the node's clock in microseconds) and that a release lifts
// to at least the released lock's fence; the lock's fence is the largest
// its granting nodes gave. Because fences follow the nodes' clocks, they
// keep increasing when counters are lost to a restart or a flush. A
// resource that rejects any write whose fence is not greater than the
// greatest it has accepted is safe even from an owner that paused past its
// deadline.
//
// # Restart quarantine
//
// A node that restarts without persistence forgets the locks it granted.
// If it voted at once, it could grant a lock that is still held through the
// other nodes. So the acquire script reports how long the node's process
// has run, and a node counts toward a quorum only once it has run for
// longer than any lock it might have lost could live: the TTL asked for,
// the largest TTL this client has seen, or the largest TTL any node of the
// round reports having granted, whichever is longest (Options.Quarantine
// sets a floor). A newly started node is quarantined like a restarted one;
// Options.DisableQuarantine turns this off for nodes that run with
// appendfsync always, whose keys survive restarts. Client.States and
// Client.Probe report each node's state.
//
// # Losing a lock
//
// Lock.Context returns a context that ends, with a cause wrapping
// ErrLockLost, at the validity deadline unless an extension succeeded in
// time, or as soon as Extend sees that a quorum no longer holds the token.
// Lock.AutoExtend extends the lock in the background every third of its
// TTL and stops at the first definite loss; it never re-creates an expired
// key.
//
// # Waiting
//
// Lock does not poll blindly. The release script publishes on
// "redlock:released:" + key; on nodes that implement Notifier (both
// adapters do), a waiting Lock subscribes after its first failed round
// and tries again as soon as the key is released, after a random pause of
// a few milliseconds that keeps woken waiters from splitting the votes.
// Polling every Options.RetryDelay remains as the fallback, for instance
// for locks that expire instead of being released. Goroutines of one
// Client waiting for the same key queue in the process, so only one of
// them contends at a time; and a Client whose release woke waiters holds
// back briefly before it takes the same key again, so that waiters get
// their turn.
//
// # Keys
//
// Besides each lock key, the client writes "redlock:fence:" + key, the
// lock's fence counter, which expires ten TTLs (at least a minute) after
// the last grant, and one hash per node, "redlock:node", with the process
// start time and the largest TTL used on it. Lock keys with those names
// are rejected.
//
// # Limits
//
// A lock with a deadline cannot stop an owner that pauses (a garbage
// collection, a page fault, a stopped process) past its deadline and then
// carries on: it may act while another owner holds the lock. The context
// and the deadline tell an owner when to stop; a resource that must never
// see two owners has to check the fencing token itself. Redlock also relies
// on bounded clock drift: a node's clock jumping forward expires keys early
// and makes fences jump, so configure NTP to slew rather than step. A node
// that restarts from a snapshot or an append-only file is quarantined like
// one that comes back empty (it may lack the grants made since the data
// was saved), unless it restarts within the same second as its last save:
// LASTSAVE, by which the scripts notice, counts whole seconds.
//
// # Errors
//
// Operations return *OpError, which says what each node did, wrapping one
// of ErrTaken, ErrNoQuorum, ErrExpired or ErrLockLost; errors.Is works on
// them and on the caller's context errors. Bad arguments give errors
// wrapping ErrInvalid.
package redlock
