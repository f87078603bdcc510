package redlock

import (
	"errors"
	"math"
	"testing"
	"time"
)

// FuzzOptions gives New every combination of option values and Lock's
// checks every TTL, and checks what they promise: a bad option or TTL is
// an error wrapping ErrInvalid, never a panic; a good one leaves at least
// minValidity after the drift allowance, a node timeout below it, and
// retry pauses within half and one and a half times RetryDelay.
func FuzzOptions(f *testing.F) {
	f.Add(0.0, int64(0), int64(0), int64(0), 0, int64(0), int64(0), false, int64(10*time.Second))
	f.Add(0.01, int64(time.Millisecond), int64(100*time.Millisecond), int64(time.Millisecond), 3, int64(time.Second), int64(time.Minute), false, int64(time.Second))
	f.Add(0.49, int64(0), int64(0), int64(0), 0, int64(0), int64(0), true, int64(10*time.Millisecond))
	f.Add(0.5, int64(-1), int64(-1), int64(-1), -1, int64(-1), int64(-1), true, int64(-1))
	f.Add(math.NaN(), int64(0), int64(0), int64(0), 0, int64(0), int64(0), false, int64(0))
	f.Add(0.0, int64(0), int64(time.Hour), int64(math.MaxInt64), 0, int64(0), int64(1), true, int64(math.MaxInt64))
	f.Fuzz(func(t *testing.T, drift float64, minDrift, nodeTimeout, retryDelay int64, tries int, releaseTimeout, quarantine int64, disable bool, ttl int64) {
		o := Options{DriftFactor: drift, MinDrift: time.Duration(minDrift), NodeTimeout: time.Duration(nodeTimeout),
			RetryDelay: time.Duration(retryDelay), Tries: tries, ReleaseTimeout: time.Duration(releaseTimeout),
			Quarantine: time.Duration(quarantine), DisableQuarantine: disable}
		c, err := New(nodes("a", "b", "c"), &o)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("New(%+v): %v, want an error wrapping ErrInvalid", o, err)
			}
			return
		}
		if c.opts.DriftFactor <= 0 || c.opts.DriftFactor >= 0.5 || c.opts.MinDrift <= 0 || c.opts.RetryDelay <= 0 || c.opts.ReleaseTimeout <= 0 {
			t.Fatalf("New(%+v) accepted, with options %+v", o, c.opts)
		}
		if d, half := c.retryDelay(), c.opts.RetryDelay/2; d < half || d-half > c.opts.RetryDelay || d-half == c.opts.RetryDelay && d != math.MaxInt64 {
			t.Fatalf("retry pause %v outside [RetryDelay/2, 3*RetryDelay/2) for RetryDelay %v", d, c.opts.RetryDelay)
		}
		got, err := c.checkLock("k", time.Duration(ttl))
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("checkLock(%v): %v, want an error wrapping ErrInvalid", time.Duration(ttl), err)
			}
			return
		}
		validity := got - c.drift(got)
		switch {
		case got > time.Duration(ttl) || got%time.Millisecond != 0:
			t.Fatalf("TTL %v became %v: it must be cut to whole milliseconds, never lengthened", time.Duration(ttl), got)
		case validity < minValidity:
			t.Fatalf("TTL %v accepted with a validity of %v", got, validity)
		case c.nodeTimeout(got) >= validity || c.nodeTimeout(got) < 0:
			t.Fatalf("TTL %v accepted with node timeout %v against a validity of %v", got, c.nodeTimeout(got), validity)
		}
	})
}
