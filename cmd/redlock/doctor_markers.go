package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quorumlock/redlock/internal/wire"
	"github.com/redis/go-redis/v9"
)

// This file holds doctor's check of the node markers: the hash per
// cluster hash slot in which the lock scripts record when the node
// started and how long the locks granted in the slot may still be held
// (format 1, see wire.MarkerKey and lua/node.lua). The fields that hold a
// slot back are its horizon:
//
//   - quiet (µs of the node's clock): when the quarantine that the last
//     restart or promotion imposed ends; the slot refuses grants to a
//     client that asks for quarantine until then;
//   - until (µs) and who: the end of the longest grant the node has not
//     seen released, and the value (token and owner) of that grant;
//   - until2 (µs) and ttl2 (ms): every other grant ends by until2, and
//     within ttl2 of its start.
//
// At a restart or a promotion the scripts set quiet to the latest end of
// a grant that the horizon records, as the Lua function held computes it:
// max(until, min(until2, start + ttl2)). A client refuses TTLs above its
// Options.MaxTTL, so none of these lies more than the maximum TTL ahead,
// unless a client with a larger MaxTTL, an older release or a hand with
// write access to the nodes wrote it: then the marker holds its slot back
// for longer than any lock can be held.

// The horizon fields of a node marker that the wire package does not
// name (see lua/node.lua).
const (
	markerUntil2 = "until2"
	markerTTL2   = "ttl2"
	markerWho    = "who"
)

// A markerReport is one node marker that holds its slot back, or would
// after a restart or a promotion, for longer than the maximum TTL.
type markerReport struct {
	Slot int    `json:"slot"`
	Key  string `json:"key"`
	// Quiet, Until, Until2 and TTL2 are the marker's horizon fields as
	// the node holds them ("" for a field it does not hold): quiet, until
	// and until2 in microseconds of the node's clock, ttl2 in
	// milliseconds.
	Quiet  string `json:"quiet,omitempty"`
	Until  string `json:"until,omitempty"`
	Until2 string `json:"until2,omitempty"`
	TTL2   string `json:"ttl2,omitempty"`
	// Holder and Owner name the grant that until records: the ID of its
	// token, as inspect shows holders (never the token, which releases
	// the lock), and its owner label.
	Holder string `json:"holder,omitempty"`
	Owner  string `json:"owner,omitempty"`
	// HeldBackMs is how much longer quiet holds the slot back now, in
	// milliseconds: 0 when the quarantine of its last start has ended.
	HeldBackMs int64 `json:"held_back_ms"`
	// AfterRestartMs is how long until, until2 and ttl2 would hold the
	// slot back if the node restarted, or was promoted, now.
	AfterRestartMs int64 `json:"after_restart_ms"`
	// Remove names the fields whose HDEL ends the excess, once no lock
	// with a TTL above the maximum is held in the slot.
	Remove []string `json:"remove"`

	heldBack, afterRestart float64 // HeldBackMs and AfterRestartMs, unbounded
}

// markerBatch is how many markers one pipeline reads.
const markerBatch = 2048

// markerKeys returns the name of the marker of every hash slot, by slot.
// The names come from wire.MarkerKey, so that doctor reads the markers
// that the scripts write: for each slot, the marker of some key in it.
var markerKeys = sync.OnceValue(func() []string {
	keys := make([]string, wire.Slots)
	left := wire.Slots
	for i := 0; left > 0; i++ {
		k := "m" + strconv.Itoa(i)
		if s := wire.Slot(k); keys[s] == "" {
			keys[s] = wire.MarkerKey(k)
			left--
		}
	}
	return keys
})

// checkMarkers reads the marker of every hash slot that the node serves
// (slots: ranges such as "0-5460", or nil for every slot), a few
// pipelines of HMGET, without writing any, and reports each marker that
// holds its slot back for longer than maxTTL: as an error when its quiet
// does so now (unless quarantine is off), as a warning when its until,
// until2 and ttl2 would after the node's next restart or promotion.
//
// Each pipeline has timeout to answer; the check has no budget beyond
// that, so that the callers run it under a context without the deadline
// of their few other commands: 16384 records are the most a node's check
// reads, and a slow machine (or a race-enabled build) needs seconds.
func checkMarkers(ctx context.Context, rc redis.Cmdable, timeout time.Duration, noQuarantine bool, n *nodeReport, slots []string) {
	var todo []int
	for s := range wire.Slots {
		if slots == nil || inSlots(s, slots) {
			todo = append(todo, s)
		}
	}
	if len(todo) == 0 {
		return
	}
	limit := float64(maxTTL.Milliseconds())
	var now time.Time
	if err := within(ctx, timeout, func(ctx context.Context) (err error) {
		now, err = rc.Time(ctx).Result()
		return err
	}); err != nil {
		n.add(levelInfo, "markers", "the node markers were not checked: TIME failed: %v", err)
		return
	}
	nowUs := float64(now.UnixMicro())
	var found []markerReport
	present := 0 // markers that exist
	for len(todo) > 0 {
		batch := todo[:min(markerBatch, len(todo))]
		todo = todo[len(batch):]
		cmds := make([]*redis.SliceCmd, len(batch))
		err := within(ctx, timeout, func(ctx context.Context) error {
			pipe := rc.Pipeline()
			for i, s := range batch {
				cmds[i] = pipe.HMGet(ctx, markerKeys()[s], wire.MarkerQuiet, wire.MarkerUntil, markerUntil2, markerTTL2, markerWho)
			}
			_, err := pipe.Exec(ctx)
			return err
		})
		if err != nil {
			n.add(levelInfo, "markers", "the node markers were not checked: HMGET failed: %v", err)
			return
		}
		for i, c := range cmds {
			if slices.ContainsFunc(c.Val(), func(v any) bool { return v != nil }) {
				present++
			}
			if m, ok := horizon(c.Val(), nowUs, limit); ok {
				m.Slot, m.Key = batch[i], markerKeys()[batch[i]]
				found = append(found, m)
			}
		}
	}
	n.OversizedMarkers = found
	switch {
	case len(found) == 0 && slots != nil:
		n.add(levelOK, "markers", "no node marker holds its slot back longer than the maximum TTL (%v), now or after a restart", maxTTL)
		return
	case len(found) == 0 && present == 0:
		// A server outside a cluster keeps its markers per hash slot
		// too, but its user thinks of one server, not of slots.
		n.add(levelOK, "markers", "no node markers: no lock client has recorded a TTL on this node yet")
		return
	case len(found) == 0:
		n.add(levelOK, "markers", "%d node marker(s), none with a TTL above the maximum (%v): none keeps the node from voting longer than a lock can last, now or after a restart", present, maxTTL)
		return
	}
	level, holding := levelWarn, 0
	for _, m := range found {
		if m.heldBack > limit && !noQuarantine {
			level = levelError
			holding++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d node marker(s) hold their slots back longer than the maximum TTL (%v), now or after a restart or promotion", len(found), maxTTL)
	if holding > 0 {
		fmt.Fprintf(&b, "; %d of them hold their slots back now, so that locks in those slots are refused as quarantined", holding)
	}
	b.WriteString(": ")
	for i, m := range found[:min(3, len(found))] {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s (slot %d)", m.Key, m.Slot)
		if m.heldBack > limit {
			fmt.Fprintf(&b, " holds the slot back %s (quiet)", holdText(m.heldBack, " more"))
			if m.afterRestart > limit {
				b.WriteString(", and")
			}
		}
		if m.afterRestart > limit {
			fmt.Fprintf(&b, " would hold it back %s after the next restart or promotion (", holdText(m.afterRestart, ""))
			var by []string
			if slices.Contains(m.Remove, wire.MarkerUntil) {
				until := "until"
				if m.Holder != "" {
					until += fmt.Sprintf(": the grant of holder %s, owner \"%s\"", m.Holder, printable(m.Owner))
				}
				by = append(by, until)
			}
			if slices.Contains(m.Remove, markerUntil2) {
				by = append(by, "until2 and ttl2")
			}
			fmt.Fprintf(&b, "%s)", strings.Join(by, "; "))
		}
		fmt.Fprintf(&b, ": HDEL %s %s", m.Key, strings.Join(m.Remove, " "))
	}
	if len(found) > 3 {
		fmt.Fprintf(&b, "; and %d more (--json lists them all)", len(found)-3)
	}
	b.WriteString(". Once no lock with a TTL above the maximum is held in the slot, remove those fields with redis-cli, HDEL <marker> <fields> (DEL <marker> would drop the slot's fence counter too); see docs/security.md, \"Recovering from an oversized TTL\"")
	n.add(level, "markers", "%s", b.String())
}

// horizon reads the fields of one marker, as HMGET returns quiet, until,
// until2, ttl2 and who, at the node's clock now (µs), and returns its
// report if it holds its slot back for more than limit milliseconds, now
// or after a restart. It reads numbers as the scripts do (Lua's tonumber:
// a field that is missing or not a number counts as 0); one too large for
// a float64, or NaN, counts as above any limit.
func horizon(vals []any, now, limit float64) (markerReport, bool) {
	if len(vals) != 5 {
		return markerReport{}, false
	}
	str := func(i int) string { s, _ := vals[i].(string); return s }
	quiet, until, until2, ttl2 := number(str(0)), number(str(1)), number(str(2)), number(str(3))
	byUntil, byUntil2 := held(until, until2, ttl2, now)
	m := markerReport{
		Quiet: str(0), Until: str(1), Until2: str(2), TTL2: str(3),
		heldBack:     max(math.Ceil((quiet-now)/1000), 0),
		afterRestart: max(byUntil, byUntil2, 0),
	}
	if m.heldBack <= limit && m.afterRestart <= limit {
		return markerReport{}, false
	}
	if m.heldBack > limit {
		m.Remove = append(m.Remove, wire.MarkerQuiet)
	}
	if byUntil > limit {
		m.Remove = append(m.Remove, wire.MarkerUntil, markerWho)
		if who := str(4); who != "" {
			m.Holder, m.Owner = wire.TokenID(who), wire.Owner(who)
		}
	}
	if byUntil2 > limit {
		m.Remove = append(m.Remove, markerUntil2, markerTTL2)
	}
	m.HeldBackMs, m.AfterRestartMs = msInt(m.heldBack), msInt(m.afterRestart)
	return m, true
}

// held returns how long (ms) a lock granted in a slot may still be held at
// now (µs), as the function held of lua/node.lua computes it from the
// marker's until, until2 (µs) and ttl2 (ms): the larger of the two, and
// of 0. The grant that until records ends by byUntil; every other by
// byUntil2.
func held(until, until2, ttl2, now float64) (byUntil, byUntil2 float64) {
	return math.Ceil((until - now) / 1000), min(math.Ceil((until2-now)/1000), ttl2)
}

// number reads a marker's field as the scripts do, with Lua's tonumber:
// 0 for a value that is not a number, +Inf for one too large for a
// float64; NaN, which no comparison orders, as +Inf, above any limit.
func number(s string) float64 {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	switch {
	case math.IsNaN(f):
		return math.Inf(1)
	case err != nil && !math.IsInf(f, 0):
		return 0
	}
	return f
}

// msInt returns a number of milliseconds as an int64, math.MaxInt64 for
// one that no int64 holds.
func msInt(ms float64) int64 {
	if ms >= float64(math.MaxInt64) {
		return math.MaxInt64
	}
	return int64(ms)
}

// holdText writes how long a marker holds its slot back, ms: "for 2h0m0s"
// and more, or "without end" when no number of milliseconds says it.
func holdText(ms float64, more string) string {
	if math.IsInf(ms, 1) {
		return "without end"
	}
	return "for " + msText(ms) + more
}

// msText writes a number of milliseconds as a duration for people, or as
// the number itself when no time.Duration holds it.
func msText(ms float64) string {
	if ms >= 0 && ms < float64(math.MaxInt64/int64(time.Millisecond)) {
		return roundDur(time.Duration(ms) * time.Millisecond).String()
	}
	return strconv.FormatFloat(ms, 'g', -1, 64) + "ms"
}
