package gocronlock

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/quorumlock/redlock"
)

// Defaults for the zero values of the options.
const (
	// DefaultLockerTTL is the default LockerOptions.TTL.
	DefaultLockerTTL = time.Minute

	// DefaultElectorTTL is the default ElectorOptions.TTL.
	DefaultElectorTTL = 15 * time.Second

	// DefaultKeyPrefix is what a Locker puts before a job's name to make
	// the job's lock key, unless LockerOptions.Key says otherwise.
	DefaultKeyPrefix = "gocron:"
)

// LockerOptions configures a Locker. The zero value of every field selects
// the documented default; a nil *LockerOptions selects all defaults.
type LockerOptions struct {
	// Key derives the lock key of a job from the job's name, which gocron
	// passes to Locker.Lock: the name given with gocron.WithName, or else
	// the name of the job's function. Every instance must derive the same
	// key for the same job, and different keys for different jobs.
	// Default: DefaultKeyPrefix + name, such as "gocron:nightly-report".
	Key func(job string) string

	// TTL is the longest a run holds its job's lock. A run that takes
	// longer loses the lock while it works, and the job may start on
	// another instance; an instance that dies during a run keeps the job
	// from the other instances for at most TTL. Set it above the longest
	// run of any job. Default DefaultLockerTTL, one minute.
	TTL time.Duration

	// HoldAtLeast is the least time a run holds its job's lock, counted
	// from just before the lock was requested, however soon the job
	// returns: Unlock keeps a lock taken less than HoldAtLeast ago until
	// HoldAtLeast has passed (see Locker.Lock for how). It is ShedLock's
	// lockAtLeastFor. It must not exceed TTL.
	//
	// Instances do not tick at exactly the same moment: their clocks
	// differ, and their schedulers start runs late by varying amounts. A
	// job that finishes before a slower instance reaches the same tick
	// would otherwise run again there. Set HoldAtLeast above the largest
	// difference between the instances' clocks plus the largest delay of
	// a run, and below the job's interval less that difference, or the
	// next tick finds the lock still held and no instance runs the job.
	//
	// Default 0: a run releases the lock as soon as the job returns.
	HoldAtLeast time.Duration

	// Logger receives a record of each Unlock that fails, which gocron
	// does not report. Default: none.
	Logger *slog.Logger
}

// A Locker is a gocron.Locker that runs each job on one instance at a time:
// before each run, the instance's scheduler takes the job's lock on the
// nodes of a redlock.Client, and an instance that does not get it skips
// the run. With HoldAtLeast set, that makes a job run on one instance per
// tick. Give it to gocron.WithDistributedLocker, or to
// gocron.WithDistributedJobLocker for some jobs only.
//
// The lock is a Redlock lock: see package redlock for what it guarantees
// and what it assumes. A run that outlives TTL loses the lock without
// being stopped, since gocron gives the job no way to learn of the loss.
//
// A Locker is safe for concurrent use by multiple goroutines and
// schedulers.
type Locker struct {
	c    *redlock.Client
	key  func(string) string
	ttl  time.Duration
	hold time.Duration
	log  *slog.Logger
}

var _ gocron.Locker = (*Locker)(nil)

// NewLocker returns a Locker that takes the locks of jobs on c's nodes. A
// nil c or an invalid option gives an *OptionError. TTL is checked
// against c's options only when a lock is taken: a TTL that c rejects
// makes every Lock fail with an error wrapping redlock.ErrInvalid.
func NewLocker(c *redlock.Client, opts *LockerOptions) (*Locker, error) {
	if c == nil {
		return nil, &OptionError{Name: "client", Reason: "is nil"}
	}
	var o LockerOptions
	if opts != nil {
		o = *opts
	}
	switch {
	case o.TTL < 0:
		return nil, &OptionError{Name: "LockerOptions.TTL", Reason: o.TTL.String() + " is negative"}
	case o.HoldAtLeast < 0:
		return nil, &OptionError{Name: "LockerOptions.HoldAtLeast", Reason: o.HoldAtLeast.String() + " is negative"}
	}
	if o.TTL == 0 {
		o.TTL = DefaultLockerTTL
	}
	if o.HoldAtLeast > o.TTL {
		return nil, &OptionError{Name: "LockerOptions.HoldAtLeast",
			Reason: o.HoldAtLeast.String() + " is longer than the TTL " + o.TTL.String() + ": no lock lives that long"}
	}
	if o.Key == nil {
		o.Key = func(job string) string { return DefaultKeyPrefix + job }
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Locker{c: c, key: o.Key, ttl: o.TTL, hold: o.HoldAtLeast, log: o.Logger}, nil
}

// Lock makes one attempt to take the lock of the job named job for TTL,
// with Client.TryLock. It does not wait for the lock: an instance that
// waited would run the job again once the other's run had ended.
//
// An error means that the instance must skip this run. It wraps
// redlock.ErrTaken when another instance holds the job's lock (it runs
// the job, or holds the lock for HoldAtLeast), redlock.ErrNoQuorum,
// ErrRefused or ErrExpired when the nodes could not grant it,
// redlock.ErrInvalid for a key or TTL the Client rejects, or ctx's error.
// gocron skips the run and passes the error to the job's AfterLockError
// listener.
//
// The returned gocron.Lock's Unlock, which gocron calls when the run
// ends, gives the lock up:
//
//   - once HoldAtLeast has passed since the attempt began (at once with
//     HoldAtLeast 0), it releases the lock (redlock.Lock.Release);
//   - before that, it extends the lock (redlock.Lock.Extend) to the time
//     that remains, rounded up to the millisecond and one more (the nodes
//     count whole milliseconds), instead of releasing it. The lock then
//     expires when HoldAtLeast has passed, not sooner, and no instance
//     takes it before; nothing is released;
//   - when the time that remains is shorter than the least TTL the Client
//     accepts for Extend, so that Extend fails with an error wrapping
//     redlock.ErrInvalid without a round trip, Unlock waits until
//     HoldAtLeast has passed and then releases the lock. That least TTL
//     is the one that leaves redlock.MinValidity once the drift allowance
//     is taken off, 8ms with the default Options, and a little more than
//     Options.NodeTimeout when that is set. An Observer of the Client
//     sees the rejected Extend as an extension that failed as invalid;
//   - when the extension fails for another reason (no quorum, refused,
//     expired, lost), Unlock does not release the lock: its keys expire
//     with the TTL, or sooner on the nodes that applied the extension,
//     but not before HoldAtLeast has passed. Unlock returns the error.
//
// HoldAtLeast is measured on this instance's monotonic clock and the
// keys expire by the nodes' clocks; as for every Redlock lock, the
// guarantee assumes that those clocks run at nearly the same rate.
//
// Unlock is not cut short when ctx is cancelled, as it is when gocron
// shuts down, since a lock given up early would let another instance
// run the job again in the same tick. It is bounded instead: by the
// extension's node timeout, by the wait above, and by the Client's
// ReleaseTimeout. Unlock returns an error, and records it to Logger
// since gocron discards it, when the release or the extension fails: an
// error wrapping redlock.ErrExpired means the run outlived its lock. A
// second Unlock returns redlock.ErrReleased.
func (lk *Locker) Lock(ctx context.Context, job string) (gocron.Lock, error) {
	start := time.Now()
	l, err := lk.c.TryLock(ctx, lk.key(job), lk.ttl)
	if err != nil {
		return nil, err
	}
	return &jobLock{lk: lk, l: l, start: start}, nil
}

// A jobLock is the lock of one run of a job.
type jobLock struct {
	lk    *Locker
	l     *redlock.Lock
	start time.Time // read before the acquiring round: HoldAtLeast counts from here
	done  atomic.Bool
}

func (j *jobLock) Unlock(ctx context.Context) error {
	if j.done.Swap(true) {
		return redlock.ErrReleased
	}
	err := j.unlock(context.WithoutCancel(ctx))
	if err != nil {
		j.lk.log.Warn("gocronlock: giving up a job's lock failed", "key", j.l.Key(), "err", err)
	}
	return err
}

func (j *jobLock) unlock(ctx context.Context) error {
	if rest := j.lk.hold - time.Since(j.start); rest > 0 {
		err := j.l.Extend(ctx, ceilMillisecond(rest)+time.Millisecond)
		if !errors.Is(err, redlock.ErrInvalid) {
			return err
		}
		// Too short for an extension: wait it out. The ttl is the only
		// argument Extend checks, so nothing was sent.
		time.Sleep(j.lk.hold - time.Since(j.start))
	}
	return j.l.Release(ctx)
}

// ceilMillisecond rounds d up to a whole millisecond, the precision of
// the nodes' expiry. A node reads its clock in whole milliseconds, rounded
// down, so Unlock adds one more for a key to live no shorter than d.
func ceilMillisecond(d time.Duration) time.Duration {
	if r := d % time.Millisecond; r != 0 {
		d += time.Millisecond - r
	}
	return d
}
