package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/examples/internal/connect"
)

// config is what the program is asked to do.
type config struct {
	key    string        // the lock's key
	ttl    time.Duration // the lock's time to live, shorter than the job
	steps  int           // the number of steps of the job
	step   time.Duration // how long one step takes
	budget time.Duration // how long the lock may be extended for; 0 for ever

	// After step loseAfter, if lose is not nil, the job calls lose with
	// the lock's key to simulate a failure that loses the lock; loseHow
	// says what lose does.
	loseAfter int
	lose      func(ctx context.Context, key string) error
	loseHow   string

	// opts configures the lock client; nil selects the defaults, with
	// restart quarantine on. Only tests, whose servers nobody locked
	// anything on before, set DisableQuarantine, so as not to wait one
	// TTL for servers that have just started.
	opts *redlock.Options
}

// run takes the lock on the nodes at urls, keeps it alive with
// AutoExtend while the job runs under the lock's context, and releases
// it. It reports to w as it goes. If the lock is lost, the job stops at
// once and run returns an error that wraps the cause, which wraps
// redlock.ErrLockLost.
func run(ctx context.Context, urls []string, w io.Writer, cfg config) (err error) {
	if cfg.ttl <= 0 || cfg.steps <= 0 || cfg.step <= 0 || cfg.budget < 0 {
		return fmt.Errorf("ttl, steps and step must be positive and budget not negative: ttl %s, steps %d, step %s, budget %s",
			cfg.ttl, cfg.steps, cfg.step, cfg.budget)
	}
	locks, closeNodes, err := connect.Dial(urls, cfg.opts)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := closeNodes(); cerr != nil && err == nil {
			err = cerr
		}
	}()

	l, err := connect.Lock(ctx, locks, cfg.key, cfg.ttl)
	if err != nil {
		return fmt.Errorf("taking the lock: %w", err)
	}
	limit := extensions(cfg.ttl, cfg.budget)
	every := (cfg.ttl / 3).Round(time.Millisecond)
	fmt.Fprintf(w, "acquired %q: fence %d, ttl %s; the job takes %d steps of %s\n",
		l.Key(), l.Fence(), cfg.ttl, cfg.steps, cfg.step)
	if limit > 0 {
		fmt.Fprintf(w, "extending it every %s, at most %d times (a budget of %s)\n", every, limit, cfg.budget)
	} else {
		fmt.Fprintf(w, "extending it every %s for as long as the job runs\n", every)
	}
	// AutoExtend extends the lock every third of its TTL. It stops at the
	// first sign that the lock is gone, after limit extensions, or on
	// Release; the lock's context then ends at the deadline, if it has
	// not ended already.
	l.AutoExtend(limit)

	start := time.Now()
	done, jobErr := job(ctx, w, l, cfg)
	// Release stops AutoExtend. After a loss it reports how the lock
	// ended, which the job has already told; only a release failing after
	// a job that ran to the end means the job was not covered throughout.
	relErr := l.Release(ctx)
	if jobErr != nil {
		fmt.Fprintf(w, "job stopped after %d of %d steps: %v\n", done, cfg.steps, jobErr)
		if relErr != nil {
			fmt.Fprintf(w, "release: %v\n", relErr)
		}
		return fmt.Errorf("job stopped after %d of %d steps: %w", done, cfg.steps, jobErr)
	}
	if relErr != nil {
		return fmt.Errorf("job finished, but the lock may not have been held to the end: %w", relErr)
	}
	fmt.Fprintf(w, "job finished all %d steps in %s, longer than the ttl, under one lock; released\n",
		cfg.steps, time.Since(start).Round(time.Millisecond))
	return nil
}

// extensions returns how many extensions, one every third of ttl, fit in
// budget, and at least one; 0, for no limit, if budget is 0.
func extensions(ttl, budget time.Duration) int {
	if budget == 0 {
		return 0
	}
	return max(int(budget/(ttl/3)), 1)
}

// job runs the job's steps while the lock is held. Its work runs under a
// context that ends when the lock's context does, with the same cause, or
// when ctx does (the program is interrupted). It returns the number of
// steps done and, if the job stopped early, why.
func job(ctx context.Context, w io.Writer, l *redlock.Lock, cfg config) (int, error) {
	work, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(l.Context(), func() { cancel(context.Cause(l.Context())) })
	defer stop()

	for i := 1; i <= cfg.steps; i++ {
		if err := connect.Work(work, cfg.step); err != nil {
			return i - 1, err
		}
		fmt.Fprintf(w, "step %d/%d done; lock valid for %s more\n", i, cfg.steps, time.Until(l.Until()).Round(time.Millisecond))
		if i == cfg.loseAfter && cfg.lose != nil {
			fmt.Fprintf(w, "simulating a failure: %s\n", cfg.loseHow)
			if err := cfg.lose(ctx, l.Key()); err != nil {
				return i, fmt.Errorf("simulating a failure: %w", err)
			}
		}
	}
	return cfg.steps, nil
}
