package redlock

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/quorumlock/redlock/internal/wire"
)

// This file holds every check of what a caller gives: the options, keys,
// TTLs, labels and counts. Each failed check is an error wrapping
// ErrInvalid, and nothing is sent to a node.

// check validates the options.
func (o *Options) check() error {
	switch {
	case math.IsNaN(o.DriftFactor) || o.DriftFactor < 0 || o.DriftFactor >= 0.5:
		return invalidf("DriftFactor %v is outside [0, 0.5)", o.DriftFactor)
	case o.MinDrift < 0:
		return invalidf("MinDrift %v is negative", o.MinDrift)
	case o.NodeTimeout < 0:
		return invalidf("NodeTimeout %v is negative", o.NodeTimeout)
	case o.RetryDelay < 0:
		return invalidf("RetryDelay %v is negative", o.RetryDelay)
	case o.Tries < 0:
		return invalidf("Tries %d is negative", o.Tries)
	case o.ReleaseTimeout < 0:
		return invalidf("ReleaseTimeout %v is negative", o.ReleaseTimeout)
	case o.Quarantine < 0:
		return invalidf("Quarantine %v is negative", o.Quarantine)
	case o.MaxTTL < 0:
		return invalidf("MaxTTL %v is negative", o.MaxTTL)
	case o.Quarantine > cmp.Or(o.MaxTTL, defaultMaxTTL):
		return invalidf("Quarantine %v is above MaxTTL %v: no lock may last longer than MaxTTL, so no node need sit out longer", o.Quarantine, cmp.Or(o.MaxTTL, defaultMaxTTL))
	case o.Quarantine > 0 && o.DisableQuarantine:
		return invalidf("Quarantine %v is set and DisableQuarantine too", o.Quarantine)
	}
	return checkLabel("Owner", o.Owner)
}

// checkKey reports whether key may be locked: it returns an error wrapping
// ErrInvalid for the empty key, for a key longer than 1024 bytes, and for
// the names of the records the client keeps beside its locks (fence
// counters, node markers, semaphore slots, election terms), and nil
// otherwise. Every operation on a key makes this check first; tools call
// it to refuse a key before they ask anything of a user or a node.
func checkKey(key string) error {
	switch {
	case key == "":
		return invalidf("empty key")
	case len(key) > maxKeyLen:
		return invalidf("key %s is %d bytes long; the longest is %d", quoteKey(key), len(key), maxKeyLen)
	case wire.Reserved(key):
		return invalidf("key %s is reserved for the client's own records", quoteKey(key))
	}
	return nil
}

// checkLock validates a key and a TTL, and returns the TTL as checkTTL
// does.
func (c *Client) checkLock(key string, ttl time.Duration) (time.Duration, error) {
	if err := checkKey(key); err != nil {
		return 0, err
	}
	return c.checkTTL(ttl)
}

// checkTTL validates a TTL, and returns it truncated to the millisecond
// precision of PX, so that no node is ever given a shorter life than the
// client counts on.
func (c *Client) checkTTL(ttl time.Duration) (time.Duration, error) {
	ttl = ttl.Truncate(time.Millisecond)
	if ttl > c.opts.MaxTTL {
		return 0, invalidf("TTL %v is above MaxTTL %v; hold a lock longer with AutoExtend or Extend", ttl, c.opts.MaxTTL)
	}
	if v := ttl - c.drift(ttl); v < minValidity {
		return 0, invalidf("TTL %v leaves a validity of %v after the clock drift allowance %v; the least is %v", ttl, v, c.drift(ttl), minValidity)
	}
	if c.opts.NodeTimeout >= ttl-c.drift(ttl) {
		return 0, invalidf("NodeTimeout %v is not below the validity %v that TTL %v gives", c.opts.NodeTimeout, ttl-c.drift(ttl), ttl)
	}
	return ttl, nil
}

// checkLabel checks a label that a lock's token carries: an owner's, or
// an election candidate's value.
func checkLabel(what, label string) error {
	switch {
	case len(label) > maxOwnerLen:
		return invalidf("%s %q is %d bytes long; the most is %d", what, label, len(label), maxOwnerLen)
	case !utf8.ValidString(label) || strings.IndexFunc(label, unicode.IsControl) >= 0:
		return invalidf("%s %q is not UTF-8 text without control characters", what, label)
	}
	return nil
}

// maxKeys is the most keys that LockAll takes at once.
const maxKeys = 64

// newKeyset checks keys for a lock on all of them and returns their
// keyset: sorted, without repeats. When they fail the check, the keyset
// is still named, by the keys joined with commas.
func newKeyset(keys []string) (keyset, error) {
	bad := keyset{Set: wire.Set{Name: strings.Join(keys, ",")}}
	if len(keys) == 0 {
		return bad, invalidf("no keys")
	}
	if len(keys) > maxKeys {
		return bad, invalidf("%d keys; the most a lock can take is %d", len(keys), maxKeys)
	}
	all := slices.Clone(keys)
	slices.Sort(all)
	all = slices.Compact(all)
	for _, key := range all {
		if err := checkKey(key); err != nil {
			return bad, err
		}
	}
	if len(all) == 1 {
		return keyset{Set: wire.One(all[0])}, nil
	}
	return keyset{Set: wire.Set{Name: strings.Join(all, ","), Keys: all}}, nil
}

// maxPermits is the largest number of permits a Semaphore has.
const maxPermits = wire.MaxPermits

// checkSemaphore checks the key and the number of permits of a semaphore.
func checkSemaphore(key string, n int) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if n < 1 || n > maxPermits {
		return invalidf("a semaphore of %d permits; it must have from 1 to %d", n, maxPermits)
	}
	return nil
}

// checkSlot checks a slot of a semaphore of n permits.
func checkSlot(slot, n int) error {
	if slot < 0 || slot >= n {
		return invalidf("slot %d of a semaphore of %d permits; slots are 0 to %d", slot, n, n-1)
	}
	return nil
}
