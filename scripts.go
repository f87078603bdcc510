package redlock

import (
	_ "embed"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/quorumlock/redlock/driver"
)

// This file holds the Lua scripts the client runs on its nodes, the keys
// they write besides the lock keys, and the decoding of their replies.

var (
	//go:embed lua/node.lua
	nodeSrc string
	//go:embed lua/acquire.lua
	acquireSrc string
	//go:embed lua/release.lua
	releaseSrc string
	//go:embed lua/extend.lua
	extendSrc string
	//go:embed lua/probe.lua
	probeSrc string
	//go:embed lua/holder.lua
	holderSrc string
	//go:embed lua/inspect.lua
	inspectSrc string
	//go:embed lua/force.lua
	forceSrc string
	//go:embed lua/acquire_all.lua
	acquireAllSrc string
	//go:embed lua/release_all.lua
	releaseAllSrc string
	//go:embed lua/extend_all.lua
	extendAllSrc string
	//go:embed lua/acquire_permit.lua
	acquirePermitSrc string
	//go:embed lua/release_permit.lua
	releasePermitSrc string
	//go:embed lua/elect.lua
	electSrc string
	//go:embed lua/leader.lua
	leaderSrc string

	acquireScript = driver.NewScript("acquire", nodeSrc+acquireSrc)
	releaseScript = driver.NewScript("release", releaseSrc)
	extendScript  = driver.NewScript("extend", extendSrc)
	probeScript   = driver.NewScript("probe", nodeSrc+probeSrc)
	// inspect writes nothing, which its flags tell Redis, so that it runs
	// on replicas and on a node out of memory too.
	inspectScript = driver.NewScript("inspect", "#!lua flags=no-writes\n"+holderSrc+inspectSrc)
	forceScript   = driver.NewScript("force", holderSrc+forceSrc)

	// The scripts of a lock on several keys (LockAll).
	acquireAllScript = driver.NewScript("acquire_all", nodeSrc+acquireAllSrc)
	releaseAllScript = driver.NewScript("release_all", releaseAllSrc)
	extendAllScript  = driver.NewScript("extend_all", extendAllSrc)

	// The scripts of a semaphore (Semaphore); a permit is extended as a
	// lock on its slot's key.
	acquirePermitScript = driver.NewScript("acquire_permit", nodeSrc+acquirePermitSrc)
	releasePermitScript = driver.NewScript("release_permit", releasePermitSrc)

	// The scripts of an election (Election), besides the lock's.
	electScript  = driver.NewScript("elect", holderSrc+electSrc)
	leaderScript = driver.NewScript("leader", "#!lua flags=no-writes\n"+holderSrc+leaderSrc)
)

// Scripts returns every script the client may run, so that a node can
// load them ahead of time (SCRIPT LOAD) if it wishes.
func Scripts() []*driver.Script {
	return []*driver.Script{acquireScript, releaseScript, extendScript, probeScript, inspectScript, forceScript,
		acquireAllScript, releaseAllScript, extendAllScript, acquirePermitScript, releasePermitScript,
		electScript, leaderScript}
}

// A decoded reply, as the decode function of a round makes it.
type decoded struct {
	outcome Outcome
	ttl     time.Duration // Taken: the holder's TTL; Quarantined: the wait
	fence   int64         // OK from acquire: the node's fence; leader: the leader's term
	slot    int           // OK from acquire: the semaphore slot granted; 0 for a lock
	age     time.Duration // acquire, probe: how long ago the node's process started
	maxTTL  time.Duration // acquire, probe: the largest TTL the node has seen
	clock   int64         // probe: the node's clock in ms since 1970; inspect: in µs
	woke    int64         // release, force: how many waiters the node told
	free    int64         // release_permit: how many slots were free after the release
	holder  string        // inspect, force: the ID of the token the key holds; "" if none
	owner   string        // inspect, force: the owner label the key holds
	err     error
}

// unexpected is the decoding of a reply that a script cannot have given.
func unexpected(script string, v any) decoded {
	return decoded{outcome: Failed, err: fmt.Errorf("redlock: unexpected reply %#v from the %s script", v, script)}
}

// decodeAcquire decodes the reply of the acquire script: {1, fence, age,
// maxttl} granted, {0, pttl, age, maxttl} held by another owner, {-1, wait,
// age, maxttl} refused during quarantine.
func decodeAcquire(v any) decoded {
	a, ok := ints(v, 4)
	if !ok || !fitsMillis(a[2]) || !fitsMillis(a[3]) {
		return unexpected("acquire", v)
	}
	d := decoded{age: millis(a[2]), maxTTL: millis(a[3])}
	switch {
	case a[0] == 1:
		d.outcome, d.fence = OK, a[1]
	case a[0] == 0 && fitsMillis(max(a[1], 0)):
		d.outcome, d.ttl = Taken, millis(max(a[1], 0))
	case a[0] == -1 && fitsMillis(max(a[1], 0)):
		d.outcome, d.ttl = Quarantined, millis(max(a[1], 0))
	default:
		return unexpected("acquire", v)
	}
	return d
}

// decodePermit decodes the reply of the acquire_permit script: what
// decodeAcquire decodes, and the slot granted as a fifth element.
func decodePermit(v any) decoded {
	a, ok := ints(v, 5)
	if !ok {
		return unexpected("acquire_permit", v)
	}
	d := decodeAcquire(a[:4])
	switch {
	case d.outcome == OK && a[4] >= 0 && a[4] < MaxPermits:
		d.slot = int(a[4])
	case d.outcome != Failed && d.outcome != OK && a[4] == -1:
	default:
		return unexpected("acquire_permit", v)
	}
	return d
}

// decodeLeader decodes the reply of the leader script: {held, id, value,
// pttl, term}.
func decodeLeader(v any) decoded {
	a, ok := v.([]any)
	if !ok || len(a) != 5 {
		return unexpected("leader", v)
	}
	d, ok := decodeHolder(a[:4])
	term, ok1 := a[4].(int64)
	if !ok || !ok1 || term < 0 {
		return unexpected("leader", v)
	}
	d.fence = term
	return d
}

// decodeStatus decodes the reply of the extend script: 1 done, 0 key
// absent, -1 held by another owner.
func decodeStatus(v any) decoded {
	switch v {
	case int64(1):
		return decoded{outcome: OK}
	case int64(0):
		return decoded{outcome: Absent}
	case int64(-1):
		return decoded{outcome: Taken}
	}
	return unexpected("extend", v)
}

// decodeRelease decodes the reply of the release script: {status, woke},
// with status as for decodeStatus and woke the number of waiters told.
func decodeRelease(v any) decoded {
	if a, ok := ints(v, 2); ok && a[1] >= 0 {
		if d := decodeStatus(a[0]); d.outcome != Failed {
			d.woke = a[1]
			return d
		}
	}
	return unexpected("release", v)
}

// decodeReleasePermit decodes the reply of the release_permit script:
// {status, woke, free}, status and woke as for decodeRelease.
func decodeReleasePermit(v any) decoded {
	if a, ok := ints(v, 3); ok && a[2] >= 0 && a[2] <= MaxPermits {
		if d := decodeRelease(a[:2]); d.outcome != Failed {
			d.free = a[2]
			return d
		}
	}
	return unexpected("release_permit", v)
}

// decodeProbe decodes the reply of the probe script: {age, maxttl, clock}.
func decodeProbe(v any) decoded {
	a, ok := ints(v, 3)
	if !ok || !fitsMillis(a[0]) || !fitsMillis(a[1]) {
		return unexpected("probe", v)
	}
	return decoded{outcome: OK, age: millis(a[0]), maxTTL: millis(a[1]), clock: a[2]}
}

// decodeInspect decodes the reply of the inspect script: {held, id, owner,
// pttl, fence, age, maxttl, clock}, with age -1 for a slot without records
// and clock, in µs, as a string.
func decodeInspect(v any) decoded {
	a, ok := v.([]any)
	if !ok || len(a) != 8 {
		return unexpected("inspect", v)
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
	d.fence, d.age, d.maxTTL, d.clock = fence, millis(age), millis(maxTTL), us
	if age < 0 {
		d.age = -1
	}
	return d
}

// decodeForce decodes the reply of the force script: {removed, id, owner,
// pttl, told}.
func decodeForce(v any) decoded {
	a, ok := v.([]any)
	if !ok || len(a) != 5 {
		return unexpected("force", v)
	}
	d, ok := decodeHolder(a[:4])
	told, ok1 := a[4].(int64)
	if !ok || !ok1 || told < 0 {
		return unexpected("force", v)
	}
	d.woke = told
	return d
}

// decodeHolder decodes {held, id, owner, pttl}, which the inspect and force
// scripts' replies start with.
func decodeHolder(a []any) (decoded, bool) {
	held, ok1 := a[0].(int64)
	id, ok2 := a[1].(string)
	owner, ok3 := a[2].(string)
	pttl, ok4 := a[3].(int64)
	if !ok1 || !ok2 || !ok3 || !ok4 || (held != 0 && held != 1) {
		return decoded{}, false
	}
	d := decoded{outcome: OK}
	if held == 1 {
		if id == "" || !fitsMillis(max(pttl, 0)) {
			return decoded{}, false
		}
		d.holder, d.owner, d.ttl = id, owner, millis(max(pttl, 0))
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

func msString(d time.Duration) string {
	return strconv.FormatInt(d.Milliseconds(), 10)
}
