package wire

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
)

// TestAcquireOneAgreesWithGeneral runs the acquire script and its general
// code alone (without acquire_one.lua) on the same random markers and
// keys, and checks that both reply the same and leave the same marker
// and key: the common case written out decides what the general code
// decides. Times read from the node's clock may differ by the time
// between the two calls.
func TestAcquireOneAgreesWithGeneral(t *testing.T) {
	pick2 := func(r *rand.Rand, v ...int64) int64 { return v[r.IntN(len(v))] }
	srv := redistest.Start(t, redistest.Config{})
	do := func(args ...string) any {
		t.Helper()
		v, err := srv.Do(args...)
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		return v
	}
	general := "local n = tonumber(ARGV[4]) or 1\nlocal ttl, quarantine = tonumber(ARGV[2]), tonumber(ARGV[3])\n" + nodeSrc + acquireSrc
	full := acquireScript.Source()
	clock := func() int64 {
		a := do("TIME").([]any)
		s, _ := strconv.ParseInt(a[0].(string), 10, 64)
		us, _ := strconv.ParseInt(a[1].(string), 10, 64)
		return s*1e6 + us
	}
	lastsave := strconv.FormatInt(do("LASTSAVE").(int64), 10)
	replid := ""
	for line := range strings.Lines(do("INFO", "replication").(string)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "master_replid:"); ok {
			replid = v
		}
	}
	const token, other = "tok label", "other label"
	fields := []string{"v", "start", "quiet", "lastsave", "replid", "until", "who", "until2", "ttl2", "ttl1", "fence"}
	// Fields that hold times of the node's clock, in µs.
	clocked := map[string]bool{"start": true, "quiet": true, "until": true, "until2": true, "fence": true}
	// A field that is missing and one that holds 0 are the same to every
	// script and tool that reads the marker.
	near := func(a, b string, tol int64) bool {
		if a == "" {
			a = "0"
		}
		if b == "" {
			b = "0"
		}
		x, err1 := strconv.ParseInt(a, 10, 64)
		y, err2 := strconv.ParseInt(b, 10, 64)
		return a == b || (err1 == nil && err2 == nil && max(x-y, y-x) <= tol)
	}
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 4))
	pick := func(s ...string) string { return s[r.IntN(len(s))] }
	us := func(d int64) string { return strconv.FormatInt(d, 10) }
	granted, common := 0, 0
	for i := range 2000 {
		ttl := pick("1000", "10000", "59999", "60000", "60001", "120000")
		q := pick("0", "1", "10000", "3600000")
		ttlN, _ := strconv.ParseInt(ttl, 10, 64)
		qN, _ := strconv.ParseInt(q, 10, 64)
		need := max(ttlN, qN) * 1000 // µs: the age a grant needs
		// The times of the marker are offsets from the node's clock, read
		// again before each of the two calls, and none lies within 300ms
		// of where a decision turns, so that the time between the reading
		// and the call does not turn it, even on a loaded machine.
		off := func(lo, hi int64) int64 {
			x := lo + r.Int64N(hi-lo)
			for _, b := range []int64{0, ttlN * 1000, -need} {
				if x > b-300000 && x < b+300000 {
					x = b + 600000
				}
			}
			return x
		}
		offs := map[string]int64{
			"start":  pick2(r, off(-7200e6, 0), off(-need-1e6, -need+1e6)),
			"quiet":  pick2(r, off(-60e6, 0), off(0, 60e6)),
			"until":  pick2(r, off(-60e6, 0), off(0, 600e6)),
			"until2": pick2(r, off(-60e6, 0), off(0, 60e6), off(0, 600e6)),
			"fence":  pick2(r, -r.Int64N(1e6), 1e12),
		}
		state := map[string]string{
			"v":        pick("1", "1", "1", "1", "1", "1", "1", "1", "1", "2"),
			"start":    "t",
			"quiet":    pick("0", "0", "t", "t"),
			"lastsave": pick(lastsave, lastsave, lastsave, lastsave, lastsave, lastsave, lastsave, "12345"),
			"replid":   pick(replid, replid, replid, replid, replid, replid, "0123456789abcdef0123456789abcdef01234567", ""),
			"until":    pick("0", "t", "t"),
			"who":      pick("", "", token, "x"),
			"until2":   "t",
			"ttl2":     pick("0", "1000", "10000", "60000", "120000"),
			"ttl1":     pick("0", "0", "0", "0", "0", "90000"),
			"fence":    "t",
		}
		if state["who"] == token {
			// The marker names a grant's token only with its TTL, above a
			// minute (hold and settle write them together).
			state["ttl1"] = "90000"
		}
		for _, f := range fields {
			if r.IntN(80) == 0 {
				delete(state, f) // a field missing
			}
		}
		held := pick("", "", token, other)
		var replies [2]any
		var before, behind [2]int64 // the node's clock before and after each call
		var after [2][]string
		for j, src := range []string{full, general} {
			key, marker := fmt.Sprintf("k%d:%d", i, j), fmt.Sprintf("redlock:slot:{m%d:%d}", i, j)
			args := []string{"HSET", marker}
			now := clock()
			before[j] = now
			for _, f := range fields {
				if v, ok := state[f]; ok {
					if v == "t" {
						v = us(now + offs[f])
					}
					args = append(args, f, v)
				}
			}
			do(args...)
			if held != "" {
				do("SET", key, held, "PX", "30000")
			}
			do("CONFIG", "RESETSTAT")
			v, err := srv.Do("EVAL", src, "2", key, marker, token, ttl, q)
			if err != nil {
				v = "error: " + strings.SplitN(err.Error(), " ", 2)[0]
			}
			if j == 0 && strings.Contains(do("INFO", "commandstats").(string), "cmdstat_time:calls=1,") {
				common++ // the call returned from acquire_one.lua
			}
			replies[j] = v
			m := do(append([]string{"HMGET", marker}, fields...)...).([]any)
			for _, x := range m {
				s, _ := x.(string)
				after[j] = append(after[j], s)
			}
			kv, _ := srv.Do("GET", key)
			s, _ := kv.(string)
			after[j] = append(after[j], s)
			behind[j] = clock()
		}
		if fmt.Sprint(replies[0]) == fmt.Sprint(replies[1]) && slices.Equal(after[0], after[1]) {
			continue // equal to the microsecond: both read the same clock
		}
		// The times the two calls leave and reply may differ by as much as
		// the time from the first call's start to the second's end, which
		// a loaded machine stretches, and by 100ms more; a marker out of
		// date is read anew on both sides, with the node's uptime in whole
		// seconds, which may tick between the two calls: by 1.1s more.
		gap := max(behind[1]-before[0], 0)
		ms, clk := 100+gap/1000, 100000+gap
		if state["lastsave"] != lastsave || state["replid"] != replid || state["start"] == "" || state["v"] == "" {
			ms, clk = 1100+gap/1000, 1100000+gap
		}
		a, b := replies[0], replies[1]
		same := fmt.Sprint(a) == fmt.Sprint(b)
		if x, ok := a.([]any); ok {
			if y, ok := b.([]any); ok && len(x) == 4 && len(y) == 4 {
				tol := ms // a TTL left or a wait
				if x[0] == int64(1) {
					tol = clk // a fence from the clock
				}
				same = x[0] == y[0] && near(fmt.Sprint(x[1]), fmt.Sprint(y[1]), tol) &&
					near(fmt.Sprint(x[2]), fmt.Sprint(y[2]), ms) && x[3] == y[3]
			}
		}
		if !same {
			t.Fatalf("case %d (state %v, times %v, ttl %s, quarantine %s, key held by %q): reply %v, the general code's %v", i, state, offs, ttl, q, held, a, b)
		}
		for k, f := range append(fields, "key") {
			tol := int64(0)
			if clocked[f] {
				tol = clk
			}
			if !near(after[0][k], after[1][k], tol) {
				t.Fatalf("case %d (state %v, times %v, ttl %s, quarantine %s, key held by %q): %s is %q after, the general code's %q", i, state, offs, ttl, q, held, f, after[0][k], after[1][k])
			}
		}
		if x, ok := a.([]any); ok && x[0] == int64(1) {
			granted++
		}
	}
	if granted == 0 || common < 250 {
		t.Fatalf("of 2000 cases, %d granted and %d returned from the common path", granted, common)
	}

	// The cases reach the common path: a call that returns from it reads
	// the clock once, where the general code reads it again.
	reached := 0
	for i := range 600 {
		key, marker := fmt.Sprintf("c%d", i), fmt.Sprintf("redlock:slot:{c%d}", i)
		now := clock()
		do("HSET", marker, "v", "1", "start", us(now-7200e6), "quiet", "0", "lastsave", lastsave, "replid", replid,
			"until", "0", "who", "", "until2", us(now+r.Int64N(60e6)), "ttl2", pick("1000", "10000"), "ttl1", "0", "fence", us(now))
		do("CONFIG", "RESETSTAT")
		if _, err := srv.Do("EVAL", full, "2", key, marker, token, pick("1000", "10000"), pick("0", "10000")); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(do("INFO", "commandstats").(string), "cmdstat_time:calls=1,") {
			reached++
		}
	}
	if reached < 300 {
		t.Errorf("%d of 600 calls on markers up to date returned from the common path", reached)
	}
}
