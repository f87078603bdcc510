package main

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quorumlock/redlock/internal/wire"
	"github.com/redis/go-redis/v9"
)

// This file holds doctor's check of the node markers: the hash per
// cluster hash slot in which the lock scripts record when the node
// started and the largest TTL used in the slot (see wire.MarkerKey and
// lua/node.lua). A slot sits out a quarantine of its largest TTL after a
// restart or a promotion, and refuses grants while it does; a largest TTL
// above the maximum TTL, which only a client with a larger Options.MaxTTL,
// an older release or a hand with write access to the nodes can have
// written, holds the slot back for longer than any lock can be held.

// A markerReport is one node marker whose largest TTL is above the
// maximum TTL.
type markerReport struct {
	Slot int    `json:"slot"`
	Key  string `json:"key"`
	// MaxTTL is the marker's maxttl field as the node holds it: the
	// largest TTL used in the slot, in milliseconds.
	MaxTTL string `json:"maxttl"`
	// HeldBackMs is how much longer the marker holds the slot back now,
	// by its own start: 0 when the node has run longer than its largest
	// TTL, and so holds it back only after its next restart or promotion.
	HeldBackMs int64 `json:"held_back_ms"`

	maxTTLMs float64
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
// pipelines of HMGET, without writing any, and reports each marker whose
// largest TTL is above maxTTL: as an error when it holds its slot back now
// (unless quarantine is off), as a warning when it would after the node's
// next restart or promotion.
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
	var found []markerReport
	for len(todo) > 0 {
		batch := todo[:min(markerBatch, len(todo))]
		todo = todo[len(batch):]
		cmds := make([]*redis.SliceCmd, len(batch))
		err := within(ctx, timeout, func(ctx context.Context) error {
			pipe := rc.Pipeline()
			for i, s := range batch {
				cmds[i] = pipe.HMGet(ctx, markerKeys()[s], wire.MarkerStart, wire.MarkerMaxTTL)
			}
			_, err := pipe.Exec(ctx)
			return err
		})
		if err != nil {
			n.add(levelInfo, "markers", "the node markers were not checked: HMGET failed: %v", err)
			return
		}
		for i, c := range cmds {
			vals := c.Val()
			if len(vals) != 2 {
				continue
			}
			ms, ok := oversized(vals[1], limit)
			if !ok {
				continue
			}
			raw, _ := vals[1].(string)
			m := markerReport{Slot: batch[i], Key: markerKeys()[batch[i]], MaxTTL: raw, maxTTLMs: ms}
			if s, ok := vals[0].(string); ok {
				if start, err := strconv.ParseInt(s, 10, 64); err == nil {
					age := float64(now.Sub(time.UnixMicro(start)).Milliseconds())
					if left := ms - age; left > 0 || math.IsNaN(ms) {
						m.HeldBackMs = math.MaxInt64
						if left < float64(math.MaxInt64) {
							m.HeldBackMs = max(int64(left), 1)
						}
					}
				}
			}
			found = append(found, m)
		}
	}
	n.OversizedMarkers = found
	if len(found) == 0 {
		n.add(levelOK, "markers", "no node marker records a TTL above the maximum TTL (%v)", maxTTL)
		return
	}
	level, holding := levelWarn, 0
	for _, m := range found {
		if m.HeldBackMs > 0 && !noQuarantine {
			level = levelError
			holding++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d node marker(s) record a largest TTL above the maximum TTL (%v)", len(found), maxTTL)
	if holding > 0 {
		fmt.Fprintf(&b, "; %d of them hold their slots back now, so that locks in those slots are refused as quarantined", holding)
	}
	b.WriteString(": ")
	for i, m := range found[:min(3, len(found))] {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s (slot %d): largest TTL %s", m.Key, m.Slot, msText(m.maxTTLMs))
		switch {
		case m.HeldBackMs > 0:
			fmt.Fprintf(&b, ", holds the slot back for %s more", msText(float64(m.HeldBackMs)))
		default:
			b.WriteString(", holds the slot back that long after the next restart or promotion")
		}
	}
	if len(found) > 3 {
		fmt.Fprintf(&b, "; and %d more (--json lists them all)", len(found)-3)
	}
	b.WriteString(". Once no lock with a TTL above the maximum is held, remove the record with redis-cli: HDEL <marker> maxttl (or DEL <marker>); see docs/security.md, \"Recovering from an oversized TTL\"")
	n.add(level, "markers", "%s", b.String())
}

// oversized returns a marker's maxttl field, in milliseconds, and whether
// it is above limit. A value that is not a number counts as none, as the
// scripts read it (Lua's tonumber); one too large for a float64, or NaN,
// as above any limit.
func oversized(v any, limit float64) (float64, bool) {
	s, ok := v.(string)
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	switch {
	case err != nil && !math.IsInf(f, 0):
		return 0, false
	case math.IsNaN(f):
		return f, true
	}
	return f, f > limit
}

// msText writes a number of milliseconds as a duration for people, or as
// the number itself when no time.Duration holds it.
func msText(ms float64) string {
	if ms >= 0 && ms < float64(math.MaxInt64/int64(time.Millisecond)) {
		return roundDur(time.Duration(ms) * time.Millisecond).String()
	}
	return strconv.FormatFloat(ms, 'g', -1, 64) + "ms"
}
