// Package redlock provides distributed locks over N independent Redis
// masters, using the Redlock algorithm described on the Redis page
// "Distributed locks with Redis".
//
// A [Client] is built from [Node] values, one per master. The masters must
// be independent: no replication between them, no failover, each on its
// own host. The goredisnode and rueidisnode modules make Nodes from
// go-redis and rueidis clients; package [driver] says what any other
// client library must do to be a Node. This package imports only the
// standard library.
//
//	c, err := redlock.New(nodes, nil)
//	...
//	l, err := c.Lock(ctx, "invoice:42", 10*time.Second)
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
// A single node is locked with SET key token NX PX ttl. The token is random
// and new for every attempt. A script deletes the key only if it still
// holds the token. A round of [Client.Lock] or [Client.TryLock]:
//
//  1. reads the monotonic clock (t0) and sends the SET to all N nodes at
//     once, each request with a timeout far below the TTL
//     (Options.NodeTimeout);
//  2. succeeds when at least N/2+1 nodes granted it and validity is left.
//     The lock is valid until t0 + ttl − drift, where drift = ttl×0.01 +
//     2ms (Options.DriftFactor, Options.MinDrift) allows for the nodes'
//     clocks running at a slightly different rate from the client's;
//  3. otherwise deletes its token on all N nodes, also on those that said
//     no or did not answer, since a grant may have been applied and its
//     reply lost. Lock then tries again after a random pause.
//
// A round ends as soon as it is decided; it does not wait for slow nodes.
// The clean-up of a failed round is sent to every node, once the round's
// other requests have returned or timed out, before Lock or TryLock
// returns. Neither that
// clean-up nor [Lock.Release] is cut short by the caller's context;
// Options.ReleaseTimeout bounds them.
//
// [Lock.Extend] sets a new expiry only on keys that still hold the token. It
// succeeds with a quorum within the current validity, and the new validity
// is measured from the start of the extension. It never re-creates an
// expired key. Lock.Release deletes the token on every node.
//
// # Guarantees
//
// Mutual exclusion: at any moment at most one owner holds a key within the
// validity it was given. This holds provided that:
//
//   - the clocks of the client and the nodes run at rates that differ by
//     less than the drift allowance, and the clocks of a majority of the
//     nodes do not step forward;
//   - a node that lost its keys does not vote while the locks it granted
//     may still be valid (restart quarantine, below, enforces this unless
//     it is disabled);
//   - nodes do not evict lock keys. Use maxmemory-policy noeviction: every
//     lock key has an expiry, so volatile-* policies evict lock keys as
//     readily as allkeys-* policies do.
//
// Liveness: every lock expires, so a crashed owner blocks others for at
// most its TTL. Locks can be obtained while a majority of the nodes is
// reachable and out of quarantine.
//
// # Fencing tokens
//
// [Lock.Fence] returns a number greater than the fence of every earlier
// owner of the same key. Each node keeps a counter per key. A grant sets it
// to max(counter+1, the node's clock in microseconds), and a release raises
// it on every node to at least the released lock's fence. A lock's fence is
// the largest value its granting nodes returned. It costs no extra round
// trip.
//
// Because fences follow the nodes' clocks, they keep rising after a counter
// is lost to a restart, a flush or its expiry. They come from no consensus
// protocol: they are ordered only while the nodes' clocks differ by less
// than the TTL and do not step back by more than a counter's lifetime
// (Options.FenceRetention: ten TTLs, at least a minute, by default).
//
// A resource that refuses every write whose fence is below the largest it
// has accepted is safe even from an owner that paused past its deadline.
//
// # Restart quarantine
//
// A node that restarts without its keys forgets the locks it granted. If it
// voted at once, it could grant a lock that the other nodes still hold for
// someone else. So a node does not count toward a quorum until its
// redis-server process has run for longer than any lock it may have lost
// could live: the TTL asked for, the largest TTL this client has seen, or
// the largest TTL any node of the round has recorded, whichever is longest.
// Options.Quarantine sets a floor. The acquire script reports how long the
// node's process has run.
//
// A newly started node is quarantined like a restarted one. So is a node
// restarted from an RDB snapshot or an append-only file, since it lacks the
// grants made after its data was saved. Set Options.DisableQuarantine only
// for nodes that run with appendonly yes and appendfsync always, which keep
// every grant across a restart. [Client.States] and [Client.Probe] report
// each node's state.
//
// # Losing a lock
//
// [Lock.Context] returns a context that ends at the validity deadline,
// unless an extension succeeded in time, or as soon as Extend finds that a
// quorum no longer holds the token. Its cause then wraps [ErrLockLost];
// after Release it is [ErrReleased]. [Lock.AutoExtend] extends the lock in
// the background every third of its TTL and stops at the first sign that
// the lock is gone.
//
// # Waiting
//
// Lock does not poll blindly. The release script publishes on
// "redlock:released:" + key. On nodes that implement [driver.Notifier] (both
// adapters do), a waiting Lock subscribes after its first failed round and
// tries again as soon as the key is released, after a random pause of a
// few milliseconds that keeps woken waiters from splitting the votes. The
// pause is shorter the longer a waiter has waited, so waiters woken
// together mostly try oldest first.
// Polling every Options.RetryDelay remains as the fallback, for instance
// for locks that expire instead of being released. Goroutines of one
// Client waiting for the same key queue in the process, so only one of
// them contends at a time, and a release by one of them wakes the next
// at once, without waiting for the announcement. A Client whose release woke waiters holds back
// briefly before it takes the same key again, so that a waiter gets its
// turn. There is no queue across processes: waiting is roughly, not
// strictly, first come, first served.
//
// # Requests and goroutines
//
// Requests to a node that implements [driver.Batcher] (both adapters do) go
// through a few long-lived goroutines per node, each of which sends
// everything queued for the node in one write; other nodes get a
// goroutine per request. [Client.Close] waits for the requests still in
// flight, such as the releases that Release did not wait for, and ends
// the idle goroutines: close the Client before its nodes.
//
// # Observing
//
// The client logs to Options.Logger, and is silent without one. An
// [Observer] set in Options.Observer is told of every operation, every
// round with each node's answer, every lock lost while held and every
// change of a node's health; the otelredlock module is one for
// OpenTelemetry.
//
// # Keys
//
// Besides each lock key, the client keeps, per Redis Cluster hash slot, a
// hash ([wire.MarkerKey], "redlock:slot:{T}") with the format of the data
// ([wire.Format]), the slot's fence counter, the process start time, how
// long the locks granted in the slot may still be held, the last LASTSAVE
// and the replication ID seen: a released lock leaves no record of its
// key. The marker hashes to the lock key's slot, so that every script's
// keys are in one slot, as a cluster node requires, for any key. A
// semaphore's slots ([wire.PermitKey]) and size ([wire.SizeKey]), an
// election's term record ([wire.TermKey]) and a read-write lock's readers
// and intents are named from the lock key, one to one: a key with its own
// hash tag behind "=", any other behind its slot's tag. Lock keys named
// like them ("redlock:slot:…", "redlock:node…", "redlock:fence:…",
// "redlock:permit:…", "redlock:size:…", "redlock:term:…",
// "redlock:readers:…", "redlock:intent:…") are rejected; [CheckKey] says
// whether a key may be locked. A lock key's value is the acquisition's
// random token ([Lock.Token], one shell word), a space and the owner's
// label (Options.Owner); while readers hold an [RWLock], it is
// "=readers", so that no lock is granted beside them.
//
// # Semaphores
//
// [Client.Semaphore] hands out at most n permits on a key at once. A
// permit is a lock on one of n slots ([wire.PermitKey]), and holds the lock's
// guarantees on its slot: under the assumptions of Guarantees, no two
// valid permits share a slot, so at most n permits are valid at any
// moment. A node grants a round the first free slot in an order the round
// names, so that nodes agree when clients do not contend; the permit is
// the slot a quorum granted, and a slot that only some nodes granted is
// freed by the permit's release, or expires. A permit counts on a node
// only until its own expiry, so the slot of a holder that is gone frees
// itself. Its fence rises from each holder of its slot to the next: a
// resource with n writers keeps the largest fence per slot
// ([Permit.Slot]).
//
// # Read-write locks
//
// [Client.RWLock] is a lock that many readers share ([RWLock.RLock]) or
// one writer holds ([RWLock.Lock]), never both within their validity. On
// each node a writer is the lock key holding its token, exactly a
// [Client.Lock]'s record, and the readers are a sorted set of tokens, each
// with its own expiry ([wire.ReadersKey]). A node grants a reader only
// while no writer holds and no waiting writer's intent is live, and a
// writer only while the key is free and no reader is live; any two quorums
// share a node, which never grants both, so the exclusion argument is the
// mutex's. A reader expires on its own and extends on its own. A writer
// that finds the key held records a short-lived intent ([wire.IntentKey],
// living [Client.IntentTTL]) that keeps new readers out, so a stream of
// readers cannot starve it: it gets in once the readers already granted
// are done. A writer's fence is above every earlier writer's and reader's;
// a reader's is the key's current floor, at least the last writer's.
//
// # Handing a lock over
//
// [Client.Adopt] takes over a hold by its token ([Lock.Token]): a
// dispatcher that took a lock passes the token to the worker that
// finishes the job, or a process restarted from a checkpoint takes its own
// lock back. One round that only reads checks that a quorum holds the
// token, as a lock, an RWLock reader or writer, or a Semaphore permit, and
// returns a [Lock] that extends and releases that hold. A token that holds
// on no quorum is refused at once with ErrTaken or ErrLockLost.
//
// # When to use which
//
//   - [Client.Lock]: one owner at a time of one resource. The default.
//   - [Client.RWLock]: many readers or one writer, when reads are many,
//     long or concurrent enough that a mutex would queue them needlessly.
//     A read-mostly key pays one sorted-set update per read; for short
//     reads a plain Lock is as fast and simpler.
//   - [Client.Semaphore]: at most n owners at once, each with its own
//     slot and fence (connection limits, worker pools).
//   - [Client.Election]: one long-lived leader among candidates, with
//     terms, renewed in the background and observed by others.
//   - [Client.LockAll]: several resources at once, all or none, without
//     the deadlocks of taking locks one by one.
//   - [Client.Adopt]: pass a hold from the process that took it to another
//     one, without a window in which neither holds it.
//
// # Leader election
//
// [Client.Election] elects one leader at a time among the candidates that
// [Election.Campaign] on a key. Leadership is a [Lock] whose token carries
// the leader's value, renewed in the background while the process runs,
// and lost, visibly, when it cannot be renewed within its validity: the
// Lock's Context ends. Release resigns. At most one candidate leads at any
// moment, under the lock's assumptions. The term is the Lock's Fence, so
// terms rise from each leader to the next under the assumptions of
// Fencing tokens. Once it holds the lock, the new leader records its term
// beside it ([wire.TermKey]); [Election.Leader] and [Election.Observe]
// report a leader only once a quorum holds both, so a reader's term is the
// leader's own.
//
// # Deployments
//
// A Node is one URL: an independent master, a master with replicas behind
// Sentinel, or a whole Redis Cluster (the adapters accept go-redis's
// cluster URL form). The vote of N nodes gives the fault tolerance; a
// cluster is one vote. While the lock key's slot of a cluster is being
// resharded, acquisitions in that slot are answered TRYAGAIN and tried
// again, and held locks move with their slot. A node whose process
// restarted empty, or that was promoted from replica to master, sits out
// the quarantine in each slot, as the records of that slot show. With one
// cluster as the only node, no other node reports the TTLs in use after a
// master restarts empty: set Options.Quarantine to the largest.
//
// # Operations
//
// [Client.Inspect] shows what every node holds for a key and the quorum's
// verdict, with each holder's [Lock.ID] and owner label but never its
// token. [Client.ForceRelease] removes a lock whose owner is gone, raising
// the fence floor so that the removed owner's late writes fail their
// fence checks. [Semaphore.Inspect] and [Semaphore.ForceRelease] do the
// same for a semaphore's slots. [Client.States] tells what the client last
// saw of each node, and [Client.Probe] asks every node afresh.
//
// # What is not guaranteed
//
// A lock with a deadline cannot stop an owner that pauses past it (a
// garbage collection, a page fault, a stopped process or machine) and then
// carries on. Such an owner may act while another owner holds the lock.
// The context and the deadline tell an owner when to stop; they do not
// stop it. A resource that must never see two owners has to check the
// fencing token itself.
//
// The deadline is measured on the client's monotonic clock, so a step of
// the client's wall clock does not move it; the rate of that clock still
// counts. Redis expires keys by the node's wall clock. A node clock that
// jumps forward expires keys early, and on a majority of the nodes it can
// hand a lock out twice. Configure NTP to slew the clocks, never to step
// them, at a rate well below the drift allowance.
//
// A replica promoted by a failover may lack the latest grants. A node
// promoted since its process started, whose records for a slot saw
// another replication ID (or none), counts as just started in that slot
// and sits out the quarantine. What no node can see is not covered: an
// old master cut off from the failover that still grants to the clients
// that reach it, while its promoted replica grants to others (one vote
// cast twice; Redis's min-replicas-to-write narrows this), or a client
// with quarantine disabled. Deleting or flushing lock keys on a node in
// service breaks mutual exclusion, as quarantine cannot see it. A restart from a
// snapshot or an append-only file within the same wall-clock second as the
// save the node's hash last recorded goes unnoticed, since LASTSAVE counts
// whole seconds.
//
// Release returns once a quorum has confirmed, and Client.Close waits for
// the other nodes; a node the release misses keeps the key until the key
// expires. A request that timed out may still reach its
// node after the clean-up of its round has passed; the key it sets blocks
// others until it expires, though nobody holds the lock.
//
// # Errors
//
// Operations return [*OpError], which says what each node did, wrapping one
// of [ErrTaken], [ErrNoQuorum], [ErrRefused], [ErrExpired] or
// [ErrLockLost]. errors.Is works on them and on the caller's context
// errors. Bad arguments give errors wrapping [ErrInvalid].
//
// The client tells a node that may answer next time from one that will
// not. A node that cannot be reached, whose connection breaks, that times
// out, or that answers LOADING, BUSY, TRYAGAIN, MASTERDOWN or CLUSTERDOWN
// has the outcome [Failed]: Lock tries again, and a quorum that misses it
// fails with [ErrNoQuorum]. Any other error reply (NOAUTH, WRONGPASS,
// NOPERM, WRONGTYPE, READONLY, MOVED, ASK, CROSSSLOT, OOM, MISCONF,
// NOSCRIPT, ERR from an unknown command or a failing script) and a TLS
// certificate that fails verification give the outcome [Refused], and the
// node's state [NodeRefusing]. When the refusals alone leave a quorum out
// of reach, Lock, TryLock, Extend and Release return at once with
// [ErrRefused], whatever the context allows: the text names each node
// that refused and the server's reason. Adapters return error replies as
// [driver.ReplyError] values so that the client can tell them apart.
//
// A node with maxmemory-policy noeviction that is full refuses new lock
// keys (OOM), but releases still delete them: the release script deletes
// the key before any write that could need memory.
package redlock
