// Package gocronlock lets the schedulers of several instances of a program
// share their jobs through Redlock locks, with the distributed-locking
// interfaces of github.com/go-co-op/gocron/v2. It lives in a module of its
// own so that the redlock package itself depends on nothing but the
// standard library.
//
// Two ways to share jobs are offered, one for each interface of gocron:
//
//   - A [Locker] (gocron.WithDistributedLocker) takes a lock per job before
//     each run. Every instance schedules every job; at each tick the
//     instance that takes the job's lock runs it and the others skip it.
//     Jobs spread over the instances, and a job runs wherever a quorum of
//     the nodes can be reached.
//   - An [Elector] (gocron.WithDistributedElector) elects one instance,
//     the leader, that runs every job, while the others skip them all. One
//     lock is held for as long as the leader leads; there is no round trip
//     per run.
//
// Both take a *redlock.Client. Each instance uses a Client of its own over
// the same nodes:
//
//	locks, err := redlock.New(nodes, nil)
//	...
//	locker, err := gocronlock.NewLocker(locks, &gocronlock.LockerOptions{
//		TTL:         10 * time.Minute, // longer than any run
//		HoldAtLeast: 30 * time.Second, // more than the instances' clocks differ
//	})
//	...
//	s, err := gocron.NewScheduler(gocron.WithDistributedLocker(locker))
//
// # One run per tick
//
// gocron calls Locker.Lock, with the job's name, when a run is due on an
// instance, and the returned lock's Unlock when the run ends. Lock makes
// a single attempt, so an instance that finds the job's lock held skips
// the run rather than waiting and running it again. That keeps runs from
// overlapping, but is not enough for one run per tick: instances reach a
// tick at slightly different moments, and a job that is over before the
// last instance gets there would run again. LockerOptions.HoldAtLeast
// keeps each run's lock for a least time, however short the run, so that
// it covers the spread of the instances' ticks: a job runs at most once
// per tick as long as every instance tries to take the lock within
// HoldAtLeast of the moment the one that runs it began to. Jobs should run at the same moments on every
// instance: a CronJob does, and a DurationJob does when it starts at the
// same time everywhere (gocron.WithStartAt). The job's name, which makes
// its lock's key, must be the same everywhere (gocron.WithName).
//
// # Leadership
//
// An Elector's Run campaigns in the redlock.Election on one key
// (Client.Election): it takes the election's lock, records its term on
// the nodes, and holds the lock, kept alive in the background, for as
// long as it can: that instance leads. Election.Leader and
// Election.Observe on the same key tell who leads. gocron asks
// Elector.IsLeader before each run. The leadership ends when the lock is
// lost or when Run returns; [Term.Context] ends then, and
// [Elector.Elected] waits for the next term. After the loss of the lock,
// another instance may lead while the former leader's runs that have
// started carry on: runs that must not overlap should stop when the
// term's context ends, and send [Term.Fence] to a resource that checks
// fencing tokens.
//
// # Errors
//
// NewLocker and NewElector return an [*OptionError], which wraps
// redlock.ErrInvalid, for a bad argument or option. Locker.Lock returns
// the Client's errors, which say why the lock was not taken
// (redlock.ErrTaken when another instance holds it); gocron hands them to
// the job's AfterLockError listener. Elector.IsLeader returns
// [ErrNotLeader] when the instance does not lead.
package gocronlock
