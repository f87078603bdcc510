package wire

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Status is what a script did on a node, as its reply says.
type Status int

// The statuses of a reply. They have the values of the redlock.Outcome of
// the same names.
const (
	// OK: the script did what was asked (granted, extended, released,
	// read).
	OK Status = iota + 1
	// Taken: another token holds the key.
	Taken
	// Absent: the key does not exist (extend, release).
	Absent
	// Failed: the reply is not one the script can give; Reply.Err says
	// what it was.
	Failed
	// Quarantined: the node restarted too recently to vote (acquire).
	Quarantined
)

// A Reply is a script's reply, Reply. Each call's documentation says
// which fields its reply sets.
type Reply struct {
	Status Status
	TTL    time.Duration // Taken: the holder's TTL; Quarantined: the wait; inspect, force, leader: the key's TTL
	Fence  int64         // acquire: the node's fence; inspect: the fence counter; leader: the leader's term
	Slot   int           // acquire: the semaphore slot granted; 0 for a lock
	Age    time.Duration // acquire, probe, inspect: how long ago the node's process started; -1 until known
	MaxTTL time.Duration // acquire, probe, inspect: the longest TTL of a grant in the key's slot that may still be held
	Clock  int64         // probe: the node's clock in ms since 1970; inspect: in µs
	Woke   int64         // release, force: how many waiters the node told
	Free   int64         // a semaphore's release: how many slots were free after it
	Holder string        // inspect, force, leader: the ID of the token the key holds; "" if none
	Owner  string        // inspect, force, leader: the owner label the key holds; adopt: the one beside the token
	Kind   Kind          // adopt: what the token holds (Exclusive, Reader, or a permit's Slot with Permit)
	RW     *RWView       // inspect, force with a read-write lock's records: its readers and writers' intents
	Err    error         // Failed: the reply that could not be Reply

	ServerID string // probe: the server's run_id; "" if it could not tell
}

// unexpected is the decoding of a reply that a script cannot have given.
func unexpected(script string, v any) Reply {
	return Reply{Status: Failed, Err: fmt.Errorf("redlock: unexpected reply %#v from the %s script", v, script)}
}

// decodeAcquire decodes the reply of the acquire script: {1, fence, age,
// maxttl} granted, {0, pttl, age, maxttl} held by another owner, {-1, wait,
// age, maxttl} refused during quarantine.
func decodeAcquire(v any) Reply {
	a, ok := ints(v, 4)
	if !ok || !fitsMillis(a[2]) || !fitsMillis(a[3]) {
		return unexpected("acquire", v)
	}
	d := Reply{Age: millis(a[2]), MaxTTL: millis(a[3])}
	switch {
	case a[0] == 1:
		d.Status, d.Fence = OK, a[1]
	case a[0] == 0 && fitsMillis(max(a[1], 0)):
		d.Status, d.TTL = Taken, millis(max(a[1], 0))
	case a[0] == -1 && fitsMillis(max(a[1], 0)):
		d.Status, d.TTL = Quarantined, millis(max(a[1], 0))
	default:
		return unexpected("acquire", v)
	}
	return d
}

// decodePermit decodes the reply of the acquire_permit script: what
// decodeAcquire decodes, and the slot granted as a fifth element.
func decodePermit(v any) Reply {
	a, ok := ints(v, 5)
	if !ok {
		return unexpected("acquire_permit", v)
	}
	d := decodeAcquire(a[:4])
	switch {
	case d.Status == OK && a[4] >= 0 && a[4] < MaxPermits:
		d.Slot = int(a[4])
	case d.Status != Failed && d.Status != OK && a[4] == -1:
	default:
		return unexpected("acquire_permit", v)
	}
	return d
}

// decodeLeader decodes the reply of the leader script: {held, id, value,
// pttl, term}.
func decodeLeader(v any) Reply {
	a, ok := v.([]any)
	if !ok || len(a) != 5 {
		return unexpected("leader", v)
	}
	d, ok := decodeHolder(a[:4])
	term, ok1 := a[4].(int64)
	if !ok || !ok1 || term < 0 {
		return unexpected("leader", v)
	}
	d.Fence = term
	return d
}

// decodeStatus decodes the reply of the extend script: 1 done, 0 key
// absent, -1 held by another owner.
func decodeStatus(v any) Reply {
	switch v {
	case int64(1):
		return Reply{Status: OK}
	case int64(0):
		return Reply{Status: Absent}
	case int64(-1):
		return Reply{Status: Taken}
	}
	return unexpected("extend", v)
}

// decodeRelease decodes the reply of the release script: {status, woke},
// with status as for decodeStatus and woke the number of waiters told.
func decodeRelease(v any) Reply {
	if a, ok := ints(v, 2); ok && a[1] >= 0 {
		if d := decodeStatus(a[0]); d.Status != Failed {
			d.Woke = a[1]
			return d
		}
	}
	return unexpected("release", v)
}

// decodeReleasePermit decodes the reply of the release_permit script:
// {status, woke, free}, status and woke as for decodeRelease.
func decodeReleasePermit(v any) Reply {
	if a, ok := ints(v, 3); ok && a[2] >= 0 && a[2] <= MaxPermits {
		if d := decodeRelease(a[:2]); d.Status != Failed {
			d.Free = a[2]
			return d
		}
	}
	return unexpected("release_permit", v)
}

// decodeProbe decodes the reply of the probe script: {age, maxttl, clock,
// id}.
func decodeProbe(v any) Reply {
	all, ok := v.([]any)
	if !ok || len(all) != 4 {
		return unexpected("probe", v)
	}
	id, isString := all[3].(string)
	a, ok := ints(all[:3], 3)
	if !ok || !isString || !fitsMillis(a[0]) || !fitsMillis(a[1]) {
		return unexpected("probe", v)
	}
	return Reply{Status: OK, Age: millis(a[0]), MaxTTL: millis(a[1]), Clock: a[2], ServerID: id}
}

// decodeInspect decodes the reply of the inspect script: {held, id, owner,
// pttl, fence, age, maxttl, clock}, with age -1 for a slot without records
// and clock, in µs, as a string.
func decodeInspect(v any) Reply {
	a, ok := v.([]any)
	if !ok || len(a) != 8 && len(a) != 10 {
		return unexpected("inspect", v)
	}
	var rw *RWView
	if len(a) == 10 {
		if rw, ok = decodeRWView(a[8], a[9]); !ok {
			return unexpected("inspect", v)
		}
	}
	d, ok := decodeHolder(a[:4])
	if !ok {
		return unexpected("inspect", v)
	}
	fence, ok1 := a[4].(int64)
	age, ok2 := a[5].(int64)
	maxTTL, ok3 := a[6].(int64)
	clock, ok4 := a[7].(string)
	us, err := strconv.ParseInt(clock, 10, 64)
	if !ok1 || !ok2 || !ok3 || !ok4 || err != nil || !fitsMillis(max(age, 0)) || !fitsMillis(maxTTL) {
		return unexpected("inspect", v)
	}
	d.Fence, d.Age, d.MaxTTL, d.Clock, d.RW = fence, millis(age), millis(maxTTL), us, rw
	if age < 0 {
		d.Age = -1
	}
	return d
}

// decodeForce decodes the reply of the force script: {removed, id, owner,
// pttl, told}.
func decodeForce(v any) Reply {
	a, ok := v.([]any)
	if !ok || len(a) != 5 && len(a) != 6 {
		return unexpected("force", v)
	}
	d, ok := decodeHolder(a[:4])
	told, ok1 := a[4].(int64)
	if !ok || !ok1 || told < 0 {
		return unexpected("force", v)
	}
	d.Woke = told
	if len(a) == 6 {
		removed, ok := a[5].(int64)
		if !ok || removed < 0 {
			return unexpected("force", v)
		}
		d.RW = &RWView{Removed: int(removed)}
	}
	return d
}

// decodeHolder decodes {held, id, owner, pttl}, which the inspect and force
// scripts' replies start with.
func decodeHolder(a []any) (Reply, bool) {
	held, ok1 := a[0].(int64)
	id, ok2 := a[1].(string)
	owner, ok3 := a[2].(string)
	pttl, ok4 := a[3].(int64)
	if !ok1 || !ok2 || !ok3 || !ok4 || (held != 0 && held != 1) {
		return Reply{}, false
	}
	d := Reply{Status: OK}
	if held == 1 {
		if id == "" || !fitsMillis(max(pttl, 0)) {
			return Reply{}, false
		}
		d.Holder, d.Owner, d.TTL = id, owner, millis(max(pttl, 0))
	}
	return d, true
}

// ints returns v as n integers, if it is an array of exactly n integers.
func ints(v any, n int) ([]int64, bool) {
	if a, ok := v.([]int64); ok {
		return a, len(a) == n
	}
	a, ok := v.([]any)
	if !ok || len(a) != n {
		return nil, false
	}
	out := make([]int64, n)
	for i, e := range a {
		if out[i], ok = e.(int64); !ok {
			return nil, false
		}
	}
	return out, true
}

// fitsMillis reports whether n milliseconds are a duration a script can
// report: not negative, and within what a time.Duration holds (292 years).
func fitsMillis(n int64) bool {
	return n >= 0 && n <= math.MaxInt64/int64(time.Millisecond)
}

func millis(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
