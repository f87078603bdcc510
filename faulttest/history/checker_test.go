package history

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/wire"
)

// The checker is tested on synthetic histories, written by hand: each must
// pass, or must show exactly the violations listed.

func ms(n int) Mono { return Mono(time.Duration(n) * time.Millisecond) }

// held returns a successful acquisition of key "k" that returned at ret
// (having started 1ms earlier) and claims the lock until until.
func holder(id int, client, token string, ret, until int, fence int64) *Op {
	return &Op{ID: id, Client: client, Key: "k", TTLms: 100, Start: ms(ret - 1), Return: ms(ret),
		Tokens: []string{token}, OK: true, Token: token, Fence: fence, RoundStart: ms(ret - 1), Until: ms(until)}
}

// failed returns a failed call of key "k" whose rounds used tokens.
func failed(id int, client string, start, ret int, tokens ...string) *Op {
	return &Op{ID: id, Client: client, Key: "k", TTLms: 100, Start: ms(start), Return: ms(ret), Tokens: tokens, Err: "taken"}
}

// holding returns a node sample of a key that holds v until expires.
func holding(node, at int, v string, expires int) NodeSample {
	return NodeSample{Node: node, Reached: true, At: ms(at), Value: v, Expires: ms(expires)}
}

func empty(node, at int) NodeSample {
	return NodeSample{Node: node, Reached: true, At: ms(at)}
}

func unreached(node, at int) NodeSample {
	return NodeSample{Node: node, At: ms(at), Err: "paused"}
}

func sample(nodes ...NodeSample) Sample { return Sample{Key: "k", Nodes: nodes} }

func history(n int, ops ...*Op) *History {
	h := NewHistory("synthetic", n)
	h.Ops = ops
	return h
}

func TestCheckerPasses(t *testing.T) {
	cases := []struct {
		name string
		h    *History
	}{
		{"empty", history(3)},
		{"sequential holders with rising fences", history(3,
			holder(1, "a", "t1", 10, 100, 5),
			holder(2, "b", "t2", 100, 200, 6),
			holder(3, "a", "t3", 250, 300, 7),
		)},
		{"released before the next holder returned", func() *History {
			a := holder(1, "a", "t1", 10, 100, 5)
			a.Release = &Release{Call: ms(40), Return: ms(41)}
			return history(3, a, holder(2, "b", "t2", 41, 140, 6))
		}()},
		{"an extension that shortened the claim", func() *History {
			a := holder(1, "a", "t1", 10, 100, 5)
			a.Extends = []Extend{{Start: ms(30), Return: ms(31), OK: true, Until: ms(60)}}
			return history(3, a, holder(2, "b", "t2", 61, 150, 6))
		}()},
		{"an extension that found the lock lost ends the claim", func() *History {
			a := holder(1, "a", "t1", 10, 100, 5)
			a.Extends = []Extend{{Start: ms(40), Return: ms(42), Lost: true, Err: "lost"}}
			return history(3, a, holder(2, "b", "t2", 50, 150, 6))
		}()},
		{"automatic extensions that failed do not carry the claim", func() *History {
			// AutoExtend extended once, then failed for want of a quorum
			// until the lock expired: the claim ends where the one
			// success put it, and b may return right after.
			a := holder(1, "a", "t1", 10, 100, 5)
			a.Extends = []Extend{
				{Start: ms(40), Return: ms(41), Auto: true, OK: true, Until: ms(140)},
				{Start: ms(80), Return: ms(90), Auto: true, Err: "no quorum"},
				{Start: ms(95), Return: ms(105), Auto: true, Err: "no quorum", Until: ms(400)},
				{Start: ms(141), Return: ms(141), Auto: true, Err: "expired"},
			}
			return history(3, a, holder(2, "b", "t2", 141, 250, 6))
		}()},
		{"failed and concurrent calls do not hold", history(3,
			holder(1, "a", "t1", 10, 100, 5),
			failed(2, "b", 20, 30, "x"),
			holder(3, "b", "t3", 100, 200, 6),
		)},
		{"a quorum holds until the claim; a minority may not", func() *History {
			a := holder(1, "a", "t1", 10, 100, 5)
			a.Probes = []Sample{sample(holding(0, 11, "t1", 102), holding(1, 11, "t1", 101), empty(2, 11))}
			return history(3, a)
		}()},
		{"a key without expiry holds", func() *History {
			a := holder(1, "a", "t1", 10, 100, 5)
			a.Probes = []Sample{sample(holding(0, 11, "t1", 0), holding(1, 11, "t1", 101), holding(2, 11, "x", 50))}
			return history(3, a)
		}()},
		{"nodes that did not answer are not counted", func() *History {
			a := holder(1, "a", "t1", 10, 100, 5)
			a.Probes = []Sample{sample(unreached(0, 11), unreached(1, 11), holding(2, 11, "t1", 101))}
			return history(3, a)
		}()},
		{"a crashed node is quarantine's business", func() *History {
			a := holder(1, "a", "t1", 10, 100, 5)
			a.Probes = []Sample{sample(empty(0, 50), empty(1, 50), holding(2, 50, "t1", 101))}
			h := history(3, a)
			h.Faults = []Fault{{At: ms(20), Kind: FaultKill, Node: 0}, {At: ms(21), Kind: FaultRestart, Node: 1}}
			return h
		}()},
		{"a sample after the release is not judged", func() *History {
			a := holder(1, "a", "t1", 10, 100, 5)
			a.Release = &Release{Call: ms(40), Return: ms(41)}
			a.Probes = []Sample{sample(empty(0, 45), empty(1, 45), empty(2, 45))}
			return history(3, a)
		}()},
		{"a failed round cleaned up", func() *History {
			f := failed(1, "a", 10, 20, "x1", "x2")
			f.Leftover = &Sample{Key: "k", Nodes: []NodeSample{empty(0, 21), holding(1, 21, "other", 100), empty(2, 21)}}
			return history(3, f)
		}()},
		{"the winner's own token is not a leftover", func() *History {
			a := holder(1, "a", "t2", 10, 100, 5)
			a.Tokens = []string{"t1", "t2"}
			a.Leftover = &Sample{Key: "k", Nodes: []NodeSample{holding(0, 11, "t2", 101), empty(1, 11), empty(2, 11)}}
			return history(3, a)
		}()},
		{"a leftover on a node paused during the call", func() *History {
			f := failed(1, "a", 10, 20, "x1")
			f.Leftover = &Sample{Key: "k", Nodes: []NodeSample{holding(0, 21, "x1", 100), empty(1, 21), empty(2, 21)}}
			h := history(3, f)
			h.Faults = []Fault{{At: ms(5), Kind: FaultPause, Node: 0}, {At: ms(15), Kind: FaultResume, Node: 0}}
			return h
		}()},
		{"a leftover behind a link fault changed during the call", func() *History {
			f := failed(1, "a", 10, 20, "x1")
			f.Leftover = &Sample{Key: "k", Nodes: []NodeSample{empty(0, 21), holding(1, 21, "x1", 100), empty(2, 21)}}
			h := history(3, f)
			h.Faults = []Fault{{At: ms(15), Kind: FaultLatency, Node: 1, Client: "a", Detail: "0s"}}
			return h
		}()},
		{"a late grant behind a request that timed out", lateGrant()},
		{"an operator removed the lock before the next holder returned", removedHolder(true, 60, true, false)},
		{"a removed holder's writes before any newer holder wrote", func() *History {
			h := removedHolder(true, 60, true, false)
			h.Writes = []Write{{At: ms(11), Op: 1, Fence: 5, Accepted: true}, {At: ms(55), Op: 1, Fence: 5, Accepted: true}}
			return h
		}()},
		{"a removed holder's writes after the newer holder's, rejected", removedHolder(true, 60, true, true)},
		{"nothing left at the end", func() *History {
			h := history(3)
			h.Final = []Sample{sample(empty(0, 900), empty(1, 900), unreached(2, 900))}
			return h
		}()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if vs := Check(c.h); len(vs) != 0 {
				t.Fatalf("violations in a correct history: %v", vs)
			}
		})
	}
}

// removedHolder returns a history in which a holds the lock until 100 and
// an operator removes it at 50 (confirmed if ok); b obtains the lock at
// ret, with a fence above a's if rising. If writes, a writes before the
// removal, b after it, and a twice after b.
func removedHolder(ok bool, ret int, rising, writes bool) *History {
	a := holder(1, "a", "t1", 10, 100, 5)
	a.Holder = "id-a"
	fence := int64(4)
	if rising {
		fence = 6
	}
	b := holder(2, "b", "t2", ret, ret+100, fence)
	b.Holder = "id-b"
	h := history(3, a, b)
	h.Removals = []Removal{{Key: "k", By: "operator", How: ByForceRelease, Call: ms(50), Return: ms(52), OK: ok, Holders: []string{"id-a"}}}
	if writes {
		h.Writes = []Write{
			{At: ms(11), Op: 1, Fence: 5, Accepted: true},
			{At: ms(ret + 1), Op: 2, Fence: fence, Accepted: rising},
			{At: ms(ret + 2), Op: 1, Fence: 5, Accepted: !rising},
			{At: ms(ret + 3), Op: 1, Fence: 5, Accepted: !rising},
		}
	}
	return h
}

// lateGrant returns a failed call whose grant on node 1 timed out and was
// applied after the clean-up.
func lateGrant() *History {
	f := failed(1, "a", 10, 20, "x1")
	f.Unsettled = []RoundNode{{Token: "x1", Node: 1}}
	f.Leftover = &Sample{Key: "k", Nodes: []NodeSample{empty(0, 21), holding(1, 21, "x1", 100), empty(2, 21)}}
	return history(3, f)
}

func TestLateGrants(t *testing.T) {
	if n := LateGrants(lateGrant()); n != 1 {
		t.Fatalf("LateGrants = %d, want 1", n)
	}
	h := lateGrant()
	h.Ops[0].Unsettled[0].Node = 2 // the request to node 1 was answered
	if n := LateGrants(h); n != 0 {
		t.Fatalf("LateGrants = %d, want 0", n)
	}
	if vs := Check(h); len(vs) != 1 || vs[0].Kind != Leftover {
		t.Fatalf("Check = %v, want one leftover", vs)
	}
}

func TestCheckerFinds(t *testing.T) {
	cases := []struct {
		name string
		h    *History
		want map[Kind]int
	}{
		{"overlapping holders", history(3,
			holder(1, "a", "t1", 10, 100, 5),
			holder(2, "b", "t2", 50, 150, 6),
		), map[Kind]int{Overlap: 1}},
		{"a holder inside another's claim", history(3,
			holder(1, "a", "t1", 10, 100, 5),
			holder(2, "b", "t2", 30, 40, 6),
			holder(3, "c", "t3", 60, 70, 7),
		), map[Kind]int{Overlap: 2}},
		{"an extension carries the claim into the next holder's", func() *History {
			a := holder(1, "a", "t1", 10, 50, 5)
			a.Extends = []Extend{{Start: ms(40), Return: ms(41), OK: true, Until: ms(150)}}
			return history(3, a, holder(2, "b", "t2", 120, 200, 6))
		}(), map[Kind]int{Overlap: 1}},
		{"automatic extensions carry the claim into the next holder's", func() *History {
			a := holder(1, "a", "t1", 10, 100, 5)
			a.Extends = []Extend{
				{Start: ms(40), Return: ms(41), Auto: true, OK: true, Until: ms(140)},
				{Start: ms(80), Return: ms(90), Auto: true, Err: "no quorum"},
				{Start: ms(100), Return: ms(101), Auto: true, OK: true, Until: ms(200)},
			}
			return history(3, a, holder(2, "b", "t2", 150, 250, 6))
		}(), map[Kind]int{Overlap: 1}},
		{"a release called after the next holder returned", func() *History {
			a := holder(1, "a", "t1", 10, 100, 5)
			a.Release = &Release{Call: ms(60), Return: ms(61)}
			return history(3, a, holder(2, "b", "t2", 59, 140, 6))
		}(), map[Kind]int{Overlap: 1}},
		{"a majority does not hold the token", func() *History {
			a := holder(1, "a", "t1", 10, 100, 5)
			a.Probes = []Sample{sample(holding(0, 11, "t1", 102), holding(1, 11, "x", 500), empty(2, 11))}
			return history(3, a)
		}(), map[Kind]int{Quorum: 1}},
		{"a majority's keys expire before the claim", func() *History {
			a := holder(1, "a", "t1", 10, 100, 5)
			a.Probes = []Sample{sample(holding(0, 11, "t1", 99), holding(1, 11, "t1", 98), holding(2, 11, "t1", 101))}
			return history(3, a)
		}(), map[Kind]int{Quorum: 1}},
		{"a later sample under an extended claim", func() *History {
			a := holder(1, "a", "t1", 10, 100, 5)
			a.Extends = []Extend{{Start: ms(50), Return: ms(51), OK: true, Until: ms(200)}}
			a.Probes = []Sample{
				sample(holding(0, 11, "t1", 101), holding(1, 11, "t1", 101), holding(2, 11, "t1", 101)),
				sample(holding(0, 52, "t1", 150), holding(1, 52, "t1", 150), holding(2, 52, "t1", 201)),
			}
			return history(3, a)
		}(), map[Kind]int{Quorum: 1}},
		{"a node clock jump is not excused", func() *History {
			a := holder(1, "a", "t1", 10, 100, 5)
			a.Probes = []Sample{sample(empty(0, 30), empty(1, 30), holding(2, 30, "t1", 101))}
			h := history(3, a)
			h.Faults = []Fault{{At: ms(20), Kind: FaultClock, Node: 0}, {At: ms(20), Kind: FaultClock, Node: 1}}
			return h
		}(), map[Kind]int{Quorum: 1}},
		{"a fence that goes back", history(3,
			holder(1, "a", "t1", 10, 100, 7),
			holder(2, "b", "t2", 100, 200, 6),
		), map[Kind]int{Fence: 1}},
		{"a hold returned after its validity, with a fence below one returned before", history(3,
			holder(1, "a", "t1", 10, 100, 7),
			holder(2, "b", "t2", 110, 105, 6), // granted before a's fence, returned dead: it held nothing
			holder(3, "a", "t3", 200, 300, 9),
		), map[Kind]int{}},
		{"a fence that repeats", history(3,
			holder(1, "a", "t1", 10, 100, 7),
			holder(2, "b", "t2", 100, 200, 7),
			holder(3, "a", "t3", 200, 300, 9),
		), map[Kind]int{Fence: 1}},
		{"a failed round left behind", func() *History {
			f := failed(1, "a", 10, 20, "x1", "x2")
			f.Leftover = &Sample{Key: "k", Nodes: []NodeSample{empty(0, 21), holding(1, 21, "x1", 100), holding(2, 21, "x2", 100)}}
			return history(3, f)
		}(), map[Kind]int{Leftover: 2}},
		{"a lost round of a call that succeeded left behind", func() *History {
			a := holder(1, "a", "t2", 10, 100, 5)
			a.Tokens = []string{"t1", "t2"}
			a.Leftover = &Sample{Key: "k", Nodes: []NodeSample{holding(0, 11, "t2", 101), holding(1, 11, "t1", 101), empty(2, 11)}}
			return history(3, a)
		}(), map[Kind]int{Leftover: 1}},
		{"a lost reply does not excuse a leftover", func() *History {
			f := failed(1, "a", 10, 20, "x1")
			f.Leftover = &Sample{Key: "k", Nodes: []NodeSample{holding(0, 21, "x1", 100), empty(1, 21), empty(2, 21)}}
			h := history(3, f)
			h.Faults = []Fault{{At: ms(5), Kind: FaultDropReply, Node: 0, Client: "a"}, {At: ms(15), Kind: FaultLatency, Node: 0, Client: "b"}}
			return h
		}(), map[Kind]int{Leftover: 1}},
		{"a removal that no quorum confirmed removes no one", removedHolder(false, 60, true, false), map[Kind]int{Overlap: 1}},
		{"a holder that returned before the removal", removedHolder(true, 40, true, false), map[Kind]int{Overlap: 1}},
		{"a removal of another acquisition", func() *History {
			h := removedHolder(true, 60, true, false)
			h.Removals[0].Holders = []string{"id-x"}
			return h
		}(), map[Kind]int{Overlap: 1}},
		{"a removed holder's fence above the next", removedHolder(true, 60, false, true), map[Kind]int{Fence: 1, Stale: 2}},
		{"a key left at the end", func() *History {
			h := history(3)
			h.Final = []Sample{sample(empty(0, 900), holding(1, 900, "t1", 1000), empty(2, 900))}
			return h
		}(), map[Kind]int{Quiescence: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			vs := Check(c.h)
			if got := Count(vs); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("found %v, want %v:\n%v", got, c.want, vs)
			}
			for _, v := range vs {
				if v.Detail == "" || v.Key != "k" {
					t.Errorf("violation without detail or key: %+v", v)
				}
			}
		})
	}
}

func TestRemovedWrites(t *testing.T) {
	for _, c := range []struct {
		rising         bool
		made, rejected int
	}{{true, 2, 2}, {false, 2, 0}} {
		if made, rejected := RemovedWrites(removedHolder(true, 60, c.rising, true)); made != c.made || rejected != c.rejected {
			t.Errorf("fences rising %v: RemovedWrites = %d, %d, want %d, %d", c.rising, made, rejected, c.made, c.rejected)
		}
	}
	if made, _ := RemovedWrites(removedHolder(false, 60, true, true)); made != 0 {
		t.Errorf("RemovedWrites counts %d writes after a removal that was not confirmed", made)
	}
}

// TestHistoryRoundTrip: a history saved as JSON and loaded again gives the
// same verdict.
func TestHistoryRoundTrip(t *testing.T) {
	a := holder(1, "a", "t1", 10, 100, 5)
	a.Probes = []Sample{sample(holding(0, 11, "t1", 99), holding(1, 11, "t1", 98), holding(2, 11, "t1", 101))}
	a.Extends = []Extend{{Start: ms(50), Return: ms(51), OK: true, Until: ms(120)}}
	h := history(3, a, holder(2, "b", "t2", 110, 200, 4))
	h.Faults = []Fault{{At: ms(3), Kind: FaultPause, Node: 1, Detail: "SIGSTOP"}}
	r := removedHolder(true, 60, false, true)
	r.Ops[0].ID, r.Ops[1].ID, r.Ops[0].Key, r.Ops[1].Key = 3, 4, "r", "r"
	for i := range r.Writes {
		r.Writes[i].Op += 2
	}
	r.Removals[0].Key = "r"
	h.Ops, h.Removals, h.Writes = append(h.Ops, r.Ops...), r.Removals, r.Writes
	path := filepath.Join(t.TempDir(), "h.json")
	if err := h.Save(path); err != nil {
		t.Fatal(err)
	}
	h2, err := LoadHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	if want, got := Check(h), Check(h2); !reflect.DeepEqual(want, got) || len(want) != 6 {
		t.Fatalf("before saving: %v\nafter loading: %v", want, got)
	}
}

// permit returns a permit of the semaphore "s" of two permits, on slot.
func permit(id int, client, token string, slot, ret, until int, fence int64) *Op {
	op := holder(id, client, token, ret, until, fence)
	op.Kind, op.Key, op.Permits, op.Slot = OpPermit, "s", 2, slot
	op.Keys = []string{wire.PermitKey("s", slot)}
	return op
}

// leader returns a leadership of the election "e" with term.
func leader(id int, client, token string, ret, until int, term int64) *Op {
	op := holder(id, client, token, ret, until, term)
	op.Kind, op.Key = OpLeader, "e"
	return op
}

// lockAll returns a lock on all of keys.
func lockAll(id int, client, token string, ret, until int, fence int64, keys ...string) *Op {
	op := holder(id, client, token, ret, until, fence)
	op.Kind, op.Key, op.Keys = OpAll, strings.Join(keys, ","), keys
	return op
}

// lockOn returns a lock on key.
func lockOn(key string, id int, client, token string, ret, until int, fence int64) *Op {
	op := holder(id, client, token, ret, until, fence)
	op.Key = key
	return op
}

// batch returns samples of keys read together: nodes[i][j] is what node
// j held under keys[i].
func batch(n int, keys []string, nodes ...[]NodeSample) []Sample {
	out := make([]Sample, len(keys))
	for i, k := range keys {
		out[i] = Sample{Key: k, Nodes: nodes[i], Batch: n}
	}
	return out
}

// TestCheckerPrimitives judges histories of semaphores, elections and
// locks on several keys.
func TestCheckerPrimitives(t *testing.T) {
	renewed := func(a *Op, until ...int) *Op {
		for i, u := range until {
			at := a.Return + ms(20*(i+1))
			a.Extends = append(a.Extends, Extend{Start: at - ms(1), Return: at, Auto: true, OK: true, Until: ms(u)})
		}
		return a
	}
	cases := []struct {
		name string
		h    *History
		want map[Kind]int
	}{
		// Semaphores.
		{"two permits of two at once, each on its slot", history(3,
			permit(1, "a", "t1", 0, 10, 100, 5),
			permit(2, "b", "t2", 1, 20, 100, 3),
			permit(3, "c", "t3", 0, 100, 200, 6),
		), nil},
		{"a third permit once one was released", func() *History {
			a := permit(1, "a", "t1", 0, 10, 100, 5)
			a.Release = &Release{Call: ms(50), Return: ms(51)}
			return history(3, a, permit(2, "b", "t2", 1, 20, 100, 3), permit(3, "c", "t3", 0, 51, 150, 6))
		}(), nil},
		{"three permits of two at once", history(3,
			permit(1, "a", "t1", 0, 10, 100, 5),
			permit(2, "b", "t2", 1, 20, 100, 5),
			func() *Op {
				op := permit(3, "c", "t3", 1, 30, 100, 6)
				op.Keys = []string{"other-slot"}
				op.Slot = 2
				return op
			}(),
		), map[Kind]int{Permits: 1}},
		{"two permits on one slot", history(3,
			permit(1, "a", "t1", 1, 10, 100, 5),
			permit(2, "b", "t2", 1, 50, 150, 6),
		), map[Kind]int{Permits: 1}},
		{"two on one slot while the other is held", history(3,
			permit(1, "a", "t1", 0, 10, 100, 5),
			permit(2, "b", "t2", 1, 20, 100, 5),
			permit(3, "c", "t3", 0, 30, 100, 6),
		), map[Kind]int{Permits: 2}},
		{"an extension carries a permit past the next", func() *History {
			a := permit(1, "a", "t1", 0, 10, 50, 5)
			a.Extends = []Extend{{Start: ms(40), Return: ms(41), OK: true, Until: ms(150)}}
			return history(3, a, permit(2, "b", "t2", 0, 120, 200, 6))
		}(), map[Kind]int{Permits: 1}},
		{"a permit's fence that goes back on its slot", history(3,
			permit(1, "a", "t1", 1, 10, 100, 7),
			permit(2, "b", "t2", 1, 100, 200, 6),
		), map[Kind]int{Fence: 1}},
		{"a permit's failed round left on another slot", func() *History {
			f := failed(1, "a", 10, 20, "x1")
			f.Kind, f.Key, f.Permits = OpPermit, "s", 2
			f.Leftovers = batch(1, []string{wire.PermitKey("s", 0), wire.PermitKey("s", 1)},
				[]NodeSample{empty(0, 21), empty(1, 21), empty(2, 21)},
				[]NodeSample{empty(0, 21), holding(1, 21, "x1", 100), empty(2, 21)})
			return history(3, f)
		}(), map[Kind]int{Leftover: 1}},

		// Elections.
		{"leaders in turn, renewed, terms rising", func() *History {
			a := renewed(leader(1, "a", "t1", 10, 100, 5), 130, 160, 190)
			a.Release = &Release{Call: ms(150), Return: ms(151)}
			return history(3, a, leader(2, "b", "t2", 151, 300, 9))
		}(), nil},
		{"a leadership lost at a renewal", func() *History {
			a := renewed(leader(1, "a", "t1", 10, 100, 5), 130)
			a.Extends = append(a.Extends, Extend{Start: ms(50), Return: ms(60), Auto: true, Lost: true, Err: "lost"})
			return history(3, a, leader(2, "b", "t2", 61, 300, 9))
		}(), nil},
		{"a renewal before Campaign returned", func() *History {
			a := leader(1, "a", "t1", 50, 100, 5)
			a.Extends = []Extend{{Start: ms(40), Return: ms(45), Auto: true, OK: true, Until: ms(130)}}
			return history(3, a, leader(2, "b", "t2", 130, 300, 9))
		}(), nil},
		{"two leaders at once", history(3,
			leader(1, "a", "t1", 10, 100, 5),
			leader(2, "b", "t2", 90, 200, 6),
		), map[Kind]int{Leaders: 1}},
		{"a renewal carries a leader into the next one's term", history(3,
			renewed(leader(1, "a", "t1", 10, 100, 5), 140, 170),
			leader(2, "b", "t2", 150, 300, 9),
		), map[Kind]int{Leaders: 1}},
		{"a term not above the last leader's", history(3,
			leader(1, "a", "t1", 10, 100, 5),
			leader(2, "b", "t2", 100, 200, 9),
			leader(3, "c", "t3", 200, 300, 9),
		), map[Kind]int{Term: 1}},

		// Locks on several keys.
		{"LockAll after a Lock on one of its keys ended", history(3,
			lockOn("k1", 1, "a", "t1", 10, 100, 5),
			lockAll(2, "b", "t2", 100, 200, 6, "k1", "k2"),
			lockOn("k2", 3, "a", "t3", 200, 300, 7),
		), nil},
		{"LockAlls of disjoint keys at once", history(3,
			lockAll(1, "a", "t1", 10, 100, 5, "k1", "k2"),
			lockAll(2, "b", "t2", 20, 100, 3, "k3", "k4"),
		), nil},
		{"a LockAll held whole on each node", func() *History {
			a := lockAll(1, "a", "t1", 10, 100, 5, "k1", "k2")
			a.Probes = batch(1, a.Keys,
				[]NodeSample{holding(0, 11, "t1", 101), empty(1, 11), holding(2, 11, "t1", 101)},
				[]NodeSample{holding(0, 11, "t1", 101), empty(1, 11), holding(2, 11, "t1", 101)})
			return history(3, a)
		}(), nil},
		{"a part held after the release is not judged", func() *History {
			a := lockAll(1, "a", "t1", 10, 100, 5, "k1", "k2")
			a.Release = &Release{Call: ms(40), Return: ms(41)}
			a.Probes = batch(1, a.Keys,
				[]NodeSample{holding(0, 45, "t1", 101), empty(1, 45), empty(2, 45)},
				[]NodeSample{empty(0, 45), empty(1, 45), empty(2, 45)})
			return history(3, a)
		}(), nil},
		{"a LockAll overlapping a Lock on one of its keys", history(3,
			lockOn("k2", 1, "a", "t1", 10, 100, 5),
			lockAll(2, "b", "t2", 50, 150, 6, "k1", "k2"),
		), map[Kind]int{Overlap: 1}},
		{"two LockAlls overlap on each shared key", history(3,
			lockAll(1, "a", "t1", 10, 100, 5, "k1", "k2", "k3"),
			lockAll(2, "b", "t2", 50, 150, 6, "k2", "k3"),
		), map[Kind]int{Overlap: 2}},
		{"a LockAll's fence not above an earlier holder of one key", history(3,
			lockOn("k1", 1, "a", "t1", 10, 100, 5),
			lockOn("k2", 2, "b", "t2", 10, 100, 8),
			lockAll(3, "c", "t3", 100, 200, 7, "k1", "k2"),
		), map[Kind]int{Fence: 1}},
		{"a node holds a part of a LockAll", func() *History {
			a := lockAll(1, "a", "t1", 10, 100, 5, "k1", "k2")
			a.Probes = batch(1, a.Keys,
				[]NodeSample{holding(0, 11, "t1", 101), holding(1, 11, "t1", 101), holding(2, 11, "t1", 101)},
				[]NodeSample{holding(0, 11, "t1", 101), empty(1, 11), holding(2, 11, "t1", 101)})
			return history(3, a)
		}(), map[Kind]int{Partial: 1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			vs := Check(c.h)
			got := Count(vs)
			if c.want == nil {
				c.want = map[Kind]int{}
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("found %v, want %v:\n%v", got, c.want, vs)
			}
			for _, v := range vs {
				if v.Detail == "" || v.Key == "" || len(v.Ops) == 0 {
					t.Errorf("violation without detail, key or ops: %+v", v)
				}
			}
		})
	}
}

// TestRemovedBeforeItReturned: an acquisition whose lock an operator
// removed while the call was still waiting for its last answers held
// nothing. Its fence, below that of the holder after the removal, is not
// a violation; in a history whose removals need not meet A5 (the
// simulator's), nothing after it is judged against its fence either.
func TestRemovedBeforeItReturned(t *testing.T) {
	removed := holder(1, "a", "t1", 110, 8000, 5)
	removed.Holder = "h1"
	next := holder(2, "b", "t2", 76, 8000, 9)
	later := holder(3, "c", "t3", 9000, 9500, 7)
	for _, unfenced := range []bool{false, true} {
		h := history(5, removed, next)
		h.Removals = []Removal{{Key: "k", By: "op", How: ByForceRelease, Call: ms(15), Return: ms(16), OK: true, Holders: []string{"h1"}}}
		h.RemovalsUnfenced = unfenced
		if vs := Check(h); len(vs) != 0 {
			t.Errorf("unfenced %v: %v", unfenced, vs)
		}
	}
	// A hold after both is still judged against the holder's fence.
	h := history(5, removed, next, later)
	h.Removals = []Removal{{Key: "k", By: "op", How: ByForceRelease, Call: ms(15), Return: ms(16), OK: true, Holders: []string{"h1"}}}
	h.RemovalsUnfenced = true
	if vs := Check(h); len(vs) != 1 || vs[0].Kind != Fence || !reflect.DeepEqual(vs[0].Ops, []int{2, 3}) {
		t.Errorf("a later hold with a fence below the next holder's: %v, want one fence violation of ops 2 and 3", vs)
	}
}
