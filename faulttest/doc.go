// Package faulttest runs the redlock client against real redis-server
// processes under injected faults, records what every client did in a
// History, and judges the history with Check.
//
// The scenarios live in the package's tests; SAFETY.md, at the root of the
// repository, says which guarantee each one proves and which assumption
// each canary drops. Run them with
//
//	cd faulttest && go test -race -count=1 ./...             # short profile, for CI
//	cd faulttest && go test -race -count=1 -v ./...          # the same, with the summary table
//	cd faulttest && go test -race -count=1 -v -timeout 30m . -long   # long profile
//
// REDLOCK_FAULT_LONG=1 selects the long profile too. A failing scenario
// saves its history as JSON to $REDLOCK_FAULT_ARTIFACTS, or to the
// system's temporary directory, and logs the path; with
// REDLOCK_FAULT_ARTIFACTS set every scenario saves its history.
//
// Timeline draws a history as an SVG picture (package
// github.com/quorumlock/redlock/internal/timeline): a lane per client with its
// calls and holds, each hold labelled with its fence; a lane per node with
// the faults; the violations Check found, in red. The test flag -timeline
// DIR, or REDLOCK_TIMELINE=DIR, writes the picture of every scenario run
// into DIR (relative to this directory, where go test runs the tests), as
// <scenario>.svg, and <scenario>-2.svg and so on for a scenario run again
// (-count):
//
//	cd faulttest && go test -count=1 -run 'Scenarios/^restart-with-quarantine$' . -timeline /tmp/timelines
//
// # Tools
//
// A Cluster runs N servers (redistest.Server) and injects process faults:
// SIGKILL, SIGSTOP and SIGCONT, restarts with or without an fsync-always
// append-only file, and steps and rates of a node's wall clock through a
// small LD_PRELOAD shim (shim/clockshim.c, built with gcc when a test needs
// it): a step moves the clock at once, a rate makes it run fast or slow,
// and since Redis takes key expiry from the wall clock, a node whose clock
// runs fast expires its keys early in real time.
// Each Client of a cluster reaches node i through its own Link, a TCP
// proxy with latency, blackhole and connection reset, in front of its own
// redistest.Proxy, which can apply a command and lose its reply. So every
// (client, node) pair can be faulted on its own. A client's clock can run
// at another rate than real time (Client.Rate), which changes the end of
// validity it claims.
//
// A node can also be a master with a replica (Config.Replicated): the
// replication stream runs through a proxy that CutReplication cuts, and
// Failover kills the master and promotes the replica, to which the
// clients' links then lead. Or it can be a Redis Cluster
// (Config.ClusterMasters), which clients reach without links: its
// masters are killed and restarted (KillMaster, RestartMaster), and the
// lock's slot moved between them (BeginMove, FinishMove). An operator can
// remove a lock with Client.ForceRelease, or delete its key by hand
// (Cluster.DeleteByHand).
//
// # Histories
//
// Every acquisition a Client makes is recorded on the monotonic clock of
// the test process, which all clients share: when the call started and
// returned, the tokens of its rounds, the token, fence and claimed end of
// validity of the lock it obtained, its extensions (those Lock.AutoExtend
// makes too, which the client's Observer reports) and its release. Right
// after an acquisition, the lock's key is read on every node over an admin
// connection (value and PEXPIRETIME, with the node's TIME in the same
// script); after a failed call, the key is read again to find what its
// rounds left behind; once a run is over and every fault healed, every
// lock key is read a last time. An operator's removals are recorded with
// the acquisitions they removed, and the writes to a fenced resource with
// the acquisition that made them. A Client also takes a semaphore's
// permits, an election's leadership and locks on several keys (LockAll),
// recorded as acquisitions of their lock keys with what they are
// (Op.Kind); the keys of a LockAll, or a semaphore's slots, are read
// together on each node (Cluster.SampleAll). A read-write lock's readers
// and writers are acquisitions of its key too (OpRead, OpWrite), readers
// read as members of the key's readers (Cluster.SampleReaders); and an
// adoption (Client.Adopt) is recorded as the adopted acquisition
// continuing in another client (Op.Adopts), whose holder handed its token
// over (Held.HandOver). Check finds eleven kinds of violation in such a
// history; see Kind.
package faulttest
