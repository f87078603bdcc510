package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/admin"
	"github.com/quorumlock/redlock/observe"
)

func TestHistoryChecks(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	h := func(w int, fence int64, from, to int) hold {
		return hold{worker: w, fence: fence, acquired: at(from), released: at(to), until: at(from + 1000)}
	}
	good := []hold{h(1, 10, 0, 10), h(2, 11, 10, 20), h(1, 12, 25, 30)}
	if o := overlaps(good); len(o) != 0 {
		t.Errorf("overlaps in a good history: %v", o)
	}
	if f := fenceErrors(good); len(f) != 0 {
		t.Errorf("fence errors in a good history: %v", f)
	}
	// The second hold begins before the first ends.
	if o := overlaps([]hold{h(1, 10, 0, 10), h(2, 11, 5, 20)}); len(o) != 1 {
		t.Errorf("an overlap was missed: %v", o)
	}
	// A long hold overlaps one that starts after a short one in between.
	if o := overlaps([]hold{h(1, 10, 0, 100), h(2, 11, 10, 20), h(3, 12, 50, 60)}); len(o) != 2 {
		t.Errorf("overlaps with a long hold: %v", o)
	}
	// A hold that overran its validity ends at its deadline.
	overran := hold{worker: 1, fence: 10, acquired: at(0), released: at(5000), until: at(1000)}
	if o := overlaps([]hold{overran, h(2, 11, 2000, 2010)}); len(o) != 0 {
		t.Errorf("a hold past its deadline counted beyond it: %v", o)
	}
	if f := fenceErrors([]hold{h(1, 10, 0, 10), h(2, 10, 10, 20), h(3, 9, 20, 30)}); len(f) != 2 {
		t.Errorf("fence errors missed: %v", f)
	}
}

// newReport keeps the library's verdict and works out how long a quorum
// keeps the holder's key: the quorum-th longest of its TTLs.
func TestNewReport(t *testing.T) {
	held := func(holder string, ttl time.Duration) admin.KeyView {
		return admin.KeyView{Outcome: observe.OutcomeOK, Held: true, Holder: holder, Owner: "o-" + holder, TTL: ttl, Fence: 7}
	}
	empty := admin.KeyView{Outcome: observe.OutcomeOK}
	down := admin.KeyView{Outcome: observe.OutcomeFailed, Err: errors.New("connection refused")}
	wrongtype := admin.KeyView{Outcome: observe.OutcomeRefused, Err: errors.New("WRONGTYPE Operation against a key holding the wrong kind of value")}
	for _, tc := range []struct {
		state   admin.KeyState
		holder  string
		nodes   []admin.KeyView
		ttl     int64
		heldOn  int
		answers int
		code    int
	}{
		{admin.KeyHeld, "a", []admin.KeyView{held("a", 900*time.Millisecond), held("a", 800*time.Millisecond), held("a", 700*time.Millisecond)}, 800, 3, 3, 0},
		{admin.KeyHeld, "a", []admin.KeyView{held("a", 900*time.Millisecond), down, held("a", 700*time.Millisecond)}, 700, 2, 2, 0},
		{admin.KeySplit, "", []admin.KeyView{held("a", 900*time.Millisecond), held("b", 800*time.Millisecond), empty}, 0, 0, 3, 0},
		{admin.KeyFree, "", []admin.KeyView{empty, down, empty}, 0, 0, 2, 0},
		{admin.KeyUnknown, "", []admin.KeyView{down, down, empty}, 0, 0, 1, exitUnavailable},
		{admin.KeyUnknown, "", []admin.KeyView{wrongtype, wrongtype, empty}, 0, 0, 1, exitConfig},
		{admin.KeyUnknown, "", []admin.KeyView{wrongtype, down, empty}, 0, 0, 1, exitUnavailable},
	} {
		ins := &admin.Inspection{Key: "k", State: tc.state, Holder: tc.holder, Nodes: tc.nodes}
		if tc.holder != "" {
			ins.Owner = "o-" + tc.holder
		}
		if tc.state == admin.KeyUnknown {
			// The library's verdict on why no quorum answered.
			oe := &redlock.OpError{Op: "inspect", Key: "k", Quorum: 2, Err: redlock.ErrNoQuorum}
			for _, v := range tc.nodes {
				oe.Nodes = append(oe.Nodes, observe.NodeResult{Outcome: v.Outcome, Err: v.Err})
			}
			if tc.code == exitConfig {
				oe.Err = redlock.ErrRefused
			}
			ins.Err = oe
		}
		rep := newReport(ins, 2, nil, time.Now())
		if rep.State != tc.state.String() || rep.TTLMillis != tc.ttl || rep.HeldOn != tc.heldOn || rep.Answered != tc.answers ||
			rep.Owner != ins.Owner || exitCode(reportStatus(rep)) != tc.code {
			t.Errorf("%+v: got %+v, exit status %d", tc, rep, exitCode(reportStatus(rep)))
		}
	}

	// A node whose records for the key's slot are younger than the
	// quarantine is quarantined, whatever the probe of another slot found.
	now := time.Now()
	young, old := empty, empty
	young.Age, old.Age = 4*time.Second, 20*time.Second
	ins := &admin.Inspection{Key: "k", State: admin.KeyFree, Quarantine: 10 * time.Second, Nodes: []admin.KeyView{young, old, down}}
	healthy := observe.NodeState{Health: observe.NodeHealthy}
	rep := newReport(ins, 2, []observe.NodeState{healthy, healthy, {Health: observe.NodeUnreachable}}, now)
	if n := rep.Nodes[0]; n.State != "quarantined" || n.QuarantinedUntil == nil || !n.QuarantinedUntil.Equal(now.Add(6*time.Second)) {
		t.Errorf("a node 4s old, quarantine 10s: %+v", n)
	}
	if rep.Nodes[1].State != "healthy" || rep.Nodes[2].State != "unreachable" {
		t.Errorf("nodes 20s old and unreachable, quarantine 10s: %+v", rep.Nodes)
	}
}

func TestNodeURLs(t *testing.T) {
	t.Setenv(envNodes, "")
	f := &nodeFlags{}
	if u, err := f.urls(); err != nil || len(u) != 1 || u[0] != defaultNodes {
		t.Errorf("default: %v %v", u, err)
	}
	t.Setenv(envNodes, "redis://a:1, redis://b:2\tredis://c:3")
	if u, err := f.urls(); err != nil || strings.Join(u, " ") != "redis://a:1 redis://b:2 redis://c:3" {
		t.Errorf("from the environment: %v %v", u, err)
	}
	f.nodes = []string{"redis://x:1,redis://y:2", "redis://z:3"}
	if u, err := f.urls(); err != nil || strings.Join(u, " ") != "redis://x:1 redis://y:2 redis://z:3" {
		t.Errorf("from --nodes: %v %v", u, err)
	}
	f.nodes = []string{","}
	if _, err := f.urls(); exitCode(err) != exitUsage {
		t.Errorf("empty --nodes: %v", err)
	}
}

func TestScrub(t *testing.T) {
	n, err := dialNode("redis://u:p%40ss%2Fw0rd@127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
	for _, s := range []string{"p@ss/w0rd", "p%40ss%2Fw0rd"} {
		if got := scrub("x " + s + " y"); strings.Contains(got, "w0rd") {
			t.Errorf("scrub(%q) = %q", s, got)
		}
	}
	var b strings.Builder
	w := &scrubWriter{w: &b}
	w.Write([]byte("error: p@ss/w0rd"))
	if strings.Contains(b.String(), "w0rd") {
		t.Errorf("scrubWriter wrote %q", b.String())
	}
}

func TestParseInfo(t *testing.T) {
	m := parseInfo("# Server\r\nredis_version:7.0.15\r\nrun_id:abc\r\n\r\n# Replication\r\nrole:master\r\n")
	if m["redis_version"] != "7.0.15" || m["run_id"] != "abc" || m["role"] != "master" {
		t.Errorf("parseInfo: %v", m)
	}
}
