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

	acquireScript = driver.NewScript("acquire", nodeSrc+acquireSrc)
	releaseScript = driver.NewScript("release", releaseSrc)
	extendScript  = driver.NewScript("extend", extendSrc)
	probeScript   = driver.NewScript("probe", nodeSrc+probeSrc)
)

// Scripts returns every script the client may run, so that a node can
// load them ahead of time (SCRIPT LOAD) if it wishes.
func Scripts() []*driver.Script {
	return []*driver.Script{acquireScript, releaseScript, extendScript, probeScript}
}

// A decoded reply, as the decode function of a round makes it.
type decoded struct {
	outcome Outcome
	ttl     time.Duration // Taken: the holder's TTL; Quarantined: the wait
	fence   int64         // OK from acquire: the node's fence
	age     time.Duration // acquire, probe: how long ago the node's process started
	maxTTL  time.Duration // acquire, probe: the largest TTL the node has seen
	clock   int64         // probe: the node's clock in ms since 1970
	woke    int64         // release: how many waiters the node told
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

// decodeProbe decodes the reply of the probe script: {age, maxttl, clock}.
func decodeProbe(v any) decoded {
	a, ok := ints(v, 3)
	if !ok || !fitsMillis(a[0]) || !fitsMillis(a[1]) {
		return unexpected("probe", v)
	}
	return decoded{outcome: OK, age: millis(a[0]), maxTTL: millis(a[1]), clock: a[2]}
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
