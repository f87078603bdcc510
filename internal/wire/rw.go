package wire

import (
	"strconv"
	"time"
)

// This file is the wire protocol of a read-write lock and of Adopt: the
// calls that Set makes for a reader or a writer, the writer's intent, and
// the reading of a token's hold. The lock key itself holds a writer, as it
// holds a lock: a writer is extended and released with the lock's scripts.

// A Kind is what a hold is.
type Kind int

const (
	// Exclusive is a lock's hold: the key holds the token. A Set of a
	// lock, of several keys or of a semaphore has this Kind.
	Exclusive Kind = iota
	// Reader is a reader's share of a read-write lock: the token is a
	// member of ReadersKey(Name), scored with its expiry.
	Reader
	// Writer is a read-write lock's exclusive hold: the key holds the
	// token, as a lock's does, granted only while no reader is live. A
	// writer that waits records its intent under IntentKey(Name).
	Writer
	// Permit is a semaphore's permit, in the replies of Adopt only.
	Permit
)

// rwKeys returns the keys of a read-write lock's acquisition: the key,
// its readers, its intents and the node marker.
func (s Set) rwKeys() []string {
	return []string{s.Name, ReadersKey(s.Name), IntentKey(s.Name), MarkerKey(s.Name)}
}

// acquireRW is Acquire of a reader or a writer, whose arguments begin
// with args. A writer that finds the key held or readers live records its
// intent, s.Intent, for s.IntentTTL; its Undo (the lock's Release) leaves
// the intent, which outlives the failed round, so that readers stay out
// until the writer's next round; see DropIntent.
func (s Set) acquireRW(args []string) Call {
	c := Call{Script: rwReadScript, Keys: s.rwKeys(), Args: args, Decode: decodeAcquire}
	if s.Kind == Writer {
		c.Script = rwWriteScript
		c.Args = append(args, s.Intent, ms(max(s.IntentTTL, time.Millisecond)))
	}
	return c
}

// releaseReader is Release of a reader: its token leaves the readers, and
// the release of the last live reader wakes the waiting writers.
func (s Set) releaseReader(args []string) Call {
	return Call{Script: rwReleaseScript, Keys: []string{ReadersKey(s.Name), s.Name, MarkerKey(s.Name)}, Args: args, Decode: decodeRelease}
}

// extendReader is Extend of a reader: its own expiry moves, no other's.
func (s Set) extendReader(args []string) Call {
	return Call{Script: rwExtendScript, Keys: []string{ReadersKey(s.Name), MarkerKey(s.Name), s.Name}, Args: args, Decode: decodeStatus}
}

// DropIntent returns the call by which a writer that stops waiting takes
// its intent back, and wakes waiting readers when no intent is left. Its
// reply: OK when the intent was there, Absent when not; Woke.
func (s Set) DropIntent() Call {
	return Call{Script: rwDropScript, Keys: []string{IntentKey(s.Name)}, Args: []string{s.Intent, s.Name}, Decode: decodeRelease}
}

// RWKeys returns the records of a read-write lock on key besides the key
// itself: its readers and its writers' intents.
func RWKeys(key string) []string {
	return []string{ReadersKey(key), IntentKey(key)}
}

// InspectRW returns Inspect(key) that also reads the readers and the
// intents of a read-write lock on key: its reply has RW set.
func InspectRW(key string) Call {
	c := Inspect(key)
	c.Keys = append(c.Keys, RWKeys(key)...)
	return c
}

// ForceRW returns Force(key, ...) that also removes the readers and the
// intents of a read-write lock on key: its reply has RW set, with the
// number of live readers removed.
func ForceRW(key string, floor int64, waitKey string) Call {
	c := Force(key, floor, waitKey)
	c.Keys = append(c.Keys, RWKeys(key)...)
	return c
}

// An RWView is what a node holds of a read-write lock besides its writer.
type RWView struct {
	Readers []ReaderView // inspect: the live readers, the latest expiry last
	Intents int          // inspect: how many writers' intents are live
	Removed int          // force: how many live readers were removed
}

// A ReaderView is one live reader on a node.
type ReaderView struct {
	ID    string        // the token's ID (TokenID)
	Owner string        // its owner label
	TTL   time.Duration // how long it has left
}

// decodeRWView decodes the two elements that inspect.lua adds for a
// read-write lock: {id, owner, pttl, ...} and the number of intents.
func decodeRWView(readers, intents any) (*RWView, bool) {
	a, ok := readers.([]any)
	n, ok1 := intents.(int64)
	if readers == nil {
		a, ok = nil, true // an empty Lua table may come back as a nil array
	}
	if !ok || !ok1 || n < 0 || len(a)%3 != 0 {
		return nil, false
	}
	rw := &RWView{Intents: int(n)}
	for i := 0; i < len(a); i += 3 {
		id, ok1 := a[i].(string)
		owner, ok2 := a[i+1].(string)
		pttl, ok3 := a[i+2].(int64)
		if !ok1 || !ok2 || !ok3 || id == "" || !fitsMillis(max(pttl, 0)) {
			return nil, false
		}
		rw.Readers = append(rw.Readers, ReaderView{ID: id, Owner: owner, TTL: millis(max(pttl, 0))})
	}
	return rw, true
}

// Adopt returns the call that reads, writing only a fence, whether token (a
// Token, without the owner label) holds on key on a node: as the key's
// holder (a lock or a writer), as a live reader of the key, or as the
// permit of one of the MaxPermits slots a semaphore on key may have.
// Where it holds, the slot's counter is raised to at least fence + 1, the
// fence of the hold's holder being fence. Its reply: OK with Kind
// (Exclusive, Reader or Permit with the Slot), TTL the time the hold has
// left, Fence the slot's counter and Owner the owner label beside the
// token; Taken with TTL when another token holds; Absent when nothing
// holds.
func Adopt(key, token string, fence int64) Call {
	keys := make([]string, 3, 3+MaxPermits)
	keys[0], keys[1], keys[2] = key, ReadersKey(key), MarkerKey(key)
	s := Set{Name: key, Permits: MaxPermits}
	keys = append(keys, s.slots()...)
	return Call{Script: adoptScript, Keys: keys, Args: []string{token, strconv.Itoa(MaxPermits), strconv.FormatInt(fence, 10)}, Decode: decodeAdopt}
}

// decodeAdopt decodes the reply of the adopt script: {status, kind, slot,
// left, fence}, and the value that holds when status is 1.
func decodeAdopt(v any) Reply {
	var value string
	if b, ok := v.([]any); ok && len(b) == 6 {
		s, ok := b[5].(string)
		if !ok {
			return unexpected("adopt", v)
		}
		value, v = s, b[:5]
	}
	a, ok := ints(v, 5)
	if !ok || !fitsMillis(max(a[3], 0)) || a[4] < 0 || (a[0] == 1) != (value != "") {
		return unexpected("adopt", v)
	}
	d := Reply{TTL: millis(max(a[3], 0)), Owner: Owner(value)}
	switch {
	case a[0] == 1 && (a[1] == 0 || a[1] == 1) && a[2] == 0:
		d.Status, d.Fence, d.Kind = OK, a[4], Exclusive
		if a[1] == 1 {
			d.Kind = Reader
		}
	case a[0] == 1 && a[1] == 2 && a[2] >= 0 && a[2] < MaxPermits:
		d.Status, d.Fence, d.Kind, d.Slot = OK, a[4], Permit, int(a[2])
	case a[0] == -1:
		d.Status = Taken
	case a[0] == 0:
		d.Status = Absent
	default:
		return unexpected("adopt", v)
	}
	return d
}
