package wire

import (
	"strconv"
	"time"

	"github.com/quorumlock/redlock/driver"
)

// A Call is one script call that a round sends to every node: the script,
// its keys and arguments, and how to read its reply.
type Call struct {
	Script *driver.Script
	Keys   []string
	Args   []string
	Decode func(reply any) Reply

	// Undo returns the call that undoes this one on the nodes that may
	// have applied it, raising fence counters to at least fence; nil for
	// a call that changes no lock. contended says that some node answered
	// that another holds the keys: see Set.undo.
	Undo func(fence int64, contended bool) Call

	// LeanKeys, for a lock's release, are its keys without their slots'
	// markers: the release then only deletes and announces. Lean marks the
	// nodes (bit i for node i, the first 64 only) to send LeanKeys to
	// instead of Keys; the caller sets it. A node may have them when its
	// counters already cover the lock's fence, as on a node whose grant
	// gave the lock its fence (a counter never goes down), and when the
	// lock's grants and extensions were never longer than LongGrant, so
	// that no marker holds a horizon of the lock's to give back.
	LeanKeys []string
	Lean     uint64
}

// LongGrant is the TTL above which a grant or an extension may take the
// marker's horizon of its own (see hold in lua/horizon.lua), which its
// release gives back.
const LongGrant = time.Minute

// LeanOn reports whether node i is sent c.LeanKeys.
func (c *Call) LeanOn(i int) bool {
	return c.LeanKeys != nil && i < 64 && c.Lean&(1<<i) != 0
}

// The fence counters are kept per cluster hash slot, in the node marker
// (lua/node.lua): a lock leaves no record of its key on a node once it is
// released, and the counters live as long as the marker.

// MaxPermits is the largest number of slots of a semaphore.
const MaxPermits = 128

// A Set is what one lock is on: one key, several keys taken together, or
// one of the slots of a semaphore.
type Set struct {
	// Name is the key; for several keys, them joined by commas; for a
	// semaphore, its key.
	Name string
	// Keys holds several keys, sorted and distinct; nil for one key.
	Keys []string
	// Permits is a semaphore's number of slots, each a lock on
	// PermitKey(Name, i); 0 for a lock. Slot is the slot a permit holds,
	// once a round has granted one; -1 before. From is the slot from
	// which an acquisition round's nodes look for a free one.
	Permits, Slot, From int

	// Kind is what a hold of a read-write lock on Name is: Reader or
	// Writer; the zero value, Exclusive, for everything else. Intent and
	// IntentTTL are a Writer's (see rw.go).
	Kind      Kind
	Intent    string
	IntentTTL time.Duration

	// names holds, for one key made by One, the key and its marker,
	// named once for every call of the lock. The calls share it, cut
	// to its capacity, so that a Node that appends to a call's keys
	// cannot write into it.
	names []string
}

// One returns the set of the one key, its records named once for all the
// calls of a lock on it.
func One(key string) Set {
	return Set{Name: key, names: []string{key, MarkerKey(key)}}
}

// one returns a set of one key's key and marker.
func (s Set) one() []string {
	if s.names != nil {
		return s.names[:2:2]
	}
	return []string{s.Name, MarkerKey(s.Name)}
}

// All returns the set's keys: the one key, or several; a semaphore's key.
func (s Set) All() []string {
	if s.Keys == nil {
		return []string{s.Name}
	}
	return s.Keys
}

// Channels returns the channels on which the releases that wake the set's
// waiters are announced: one per key; a semaphore's releases of all its
// slots are announced on the channel of its key.
func (s Set) Channels() []string {
	keys := s.All()
	out := make([]string, len(keys))
	for i, key := range keys {
		out[i] = ReleasedChannel(key)
	}
	return out
}

// Acquire returns the call that takes the set on a node for ttl with the
// given token, a node that started less than quarantine ago refusing to
// vote (0: no quarantine). A semaphore's nodes look at its slots from
// slot From on (the client draws it at random for each round).
//
// Its reply: OK with the node's Fence (and a permit's Slot), Taken with
// the holder's TTL, or Quarantined with the time left; each with the
// node's Age and the largest TTL it records, MaxTTL. Its Undo is the
// Release of the set with token.
func (s Set) Acquire(token string, ttl, quarantine time.Duration) Call {
	args := []string{token, ms(ttl), ms(quarantine)}
	c := Call{Script: acquireScript, Args: args, Decode: decodeAcquire}
	switch {
	case s.Kind != Exclusive:
		c = s.acquireRW(args)
	case s.Permits > 0:
		c.Script, c.Decode = acquirePermitScript, decodePermit
		c.Keys = append(s.slots(), MarkerKey(s.Name), SizeKey(s.Name))
		c.Args = append(args, strconv.Itoa(s.Permits), strconv.Itoa(s.From))
	case s.Keys == nil:
		c.Keys = s.one()
	default:
		c.Keys, c.Args = s.with(), append(args, strconv.Itoa(len(s.Keys)))
	}
	c.Undo = func(fence int64, contended bool) Call { return s.undo(token, fence, contended) }
	return c
}

// undo returns the Release of the set with token that undoes a failed
// acquisition. A lock's frees only its own grants and raises no fence
// counter. It announces what it frees only when the round was contended
// (some node answered that another holds the key): the contenders told
// "taken" by a node this round holds then wake at once, rather than a
// RetryDelay later, when a split vote leaves the key free. A round that
// failed for want of answers announces nothing: waking the key's waiters
// would send them to rounds that cannot succeed either.
//
// A semaphore's clean-up raises no counter either (fence 0): raising the
// others to a grant's fence, drawn after an operator's ForceRelease read
// the counters, put every counter above that floor, and the removal then
// left the permit it was asked to remove on every node.
func (s Set) undo(token string, fence int64, contended bool) Call {
	switch {
	case s.Kind == Exclusive && s.Permits == 0 && contended:
		return s.release(token, fence, "undo")
	case s.Kind == Exclusive && s.Permits == 0:
		return s.release(token, fence, "quiet")
	case s.Permits > 0:
		return s.Release(token, 0)
	}
	return s.Release(token, fence)
}

// Release returns the call that deletes the set where it holds token,
// raises its fence counters to at least fence, and wakes its waiters. A semaphore's release looks at every slot, since a
// node may have granted a round another slot than the one a quorum agreed
// on.
//
// Its reply: OK when it deleted the keys, Absent when they were gone,
// Taken when another token holds them; Woke counts the waiters told, and
// Free a semaphore's free slots after the release.
func (s Set) Release(token string, fence int64) Call {
	return s.release(token, fence, "")
}

// release is Release, for a failed acquisition's clean-up when quiet is
// "quiet" (it announces nothing and raises no counter) or "undo" (it
// announces, and raises no counter).
func (s Set) release(token string, fence int64, quiet string) Call {
	args := []string{token, strconv.FormatInt(fence, 10)}
	switch {
	case s.Kind == Reader:
		return s.releaseReader(args)
	case s.Permits > 0:
		return Call{Script: releasePermitScript, Keys: append(s.slots(), SizeKey(s.Name), MarkerKey(s.Name)), Args: append(args, strconv.Itoa(s.Permits), strconv.Itoa(s.Slot), s.Name), Decode: decodeReleasePermit}
	case s.Keys == nil:
		if quiet != "" {
			args = append(args, quiet)
		}
		c := Call{Script: releaseScript, Keys: s.one(), Args: args, Decode: decodeRelease}
		if s.Kind == Exclusive {
			c.LeanKeys = c.Keys[:1:1]
		}
		return c
	}
	c := Call{Script: releaseScript, Keys: s.with(), Args: append(args, quiet, strconv.Itoa(len(s.Keys))), Decode: decodeRelease}
	if s.Kind == Exclusive {
		c.LeanKeys = s.Keys
	}
	return c
}

// Extend returns the call that sets the set's time to live to ttl where
// it holds token, never re-creating a key. A permit is extended as a lock
// on its slot's key.
//
// Its reply: OK, Absent or Taken, as for Release.
func (s Set) Extend(token string, ttl time.Duration) Call {
	args := []string{token, ms(ttl)}
	switch {
	case s.Kind == Reader:
		return s.extendReader(args)
	case s.Permits > 0:
		return Call{Script: extendScript, Keys: []string{PermitKey(s.Name, s.Slot), MarkerKey(s.Name), SizeKey(s.Name)}, Args: append(args, "1", "size"), Decode: decodeStatus}
	case s.Keys == nil:
		return Call{Script: extendScript, Keys: s.one(), Args: args, Decode: decodeStatus}
	}
	return Call{Script: extendScript, Keys: s.with(), Args: append(args, strconv.Itoa(len(s.Keys))), Decode: decodeStatus}
}

// slots returns a semaphore's slot keys.
func (s Set) slots() []string {
	out := make([]string, s.Permits, s.Permits+2)
	for i := range s.Permits {
		out[i] = PermitKey(s.Name, i)
	}
	return out
}

// with returns the keys, then the markers of their slots, each slot once.
func (s Set) with() []string {
	out := append([]string(nil), s.Keys...)
	seen := make(map[string]bool, 1)
	for _, key := range s.Keys {
		if m := MarkerKey(key); !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	return out
}

// Probe returns the call that reads a node's state in the slot of the
// empty key, changing nothing but the node's marker. Its reply: OK with
// the node's Age, MaxTTL and Clock (ms since 1970).
func Probe() Call {
	return Call{Script: probeScript, Keys: []string{MarkerKey("")}, Decode: decodeProbe}
}

// Inspect returns the call that reads what a node holds for key and
// changes nothing. Its reply: OK with Holder (a token's ID; "" for a free
// key), Owner and TTL of a held key, the Fence counter, the Age and
// MaxTTL of the slot's records (Age -1 without records), and the Clock in
// µs.
func Inspect(key string) Call {
	return Call{Script: inspectScript, Keys: []string{key, MarkerKey(key)}, Decode: decodeInspect}
}

// Force returns the call that deletes key whatever token holds it, unless
// its grant on the node came with a fence above floor; raises the fence
// counter to floor; and wakes the waiters of
// waitKey. Its reply: OK with what the key held before (Holder, Owner,
// TTL) and Woke, the waiters told.
func Force(key string, floor int64, waitKey string) Call {
	return Call{Script: forceScript, Keys: []string{key, MarkerKey(key)}, Args: []string{strconv.FormatInt(floor, 10), waitKey}, Decode: decodeForce}
}

// Elect returns the call that records, where key holds token, the lock's
// fence as the election's term, keeping the record fenceTTL, and
// announces the new leader. Its reply: OK, Absent or Taken, as for
// Release.
func Elect(key, token string, fence int64, fenceTTL time.Duration) Call {
	return Call{Script: electScript, Keys: []string{key, TermKey(key)}, Args: []string{token, strconv.FormatInt(fence, 10), ms(fenceTTL)}, Decode: decodeStatus}
}

// Leader returns the call that reads the leader of the election on key
// and changes nothing. Its reply: OK with Holder, Owner (the leader's
// value) and TTL of the lock, and the recorded term in Fence.
func Leader(key string) Call {
	return Call{Script: leaderScript, Keys: []string{key, TermKey(key)}, Decode: decodeLeader}
}

// ms returns d in whole milliseconds, as the scripts take time.
func ms(d time.Duration) string {
	return strconv.FormatInt(d.Milliseconds(), 10)
}
