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

// The scrubber hides user information by the structure of the URLs it
// learnt, never a password wherever it appears: a password "e" or "3"
// leaves words and numbers alone, and one cut by a separator is learnt
// whole before the list is split.
func TestScrub(t *testing.T) {
	registerSecrets("redis://u:e@127.0.0.1:1,redis://:3@127.0.0.1:2")
	registerSecrets("--nodes=redis://u:Tr0ub4dor,xyz@h:1 redis://v:Summer Time@h:2")
	for in, want := range map[string]string{
		"3 of 3 nodes answered":                     "3 of 3 nodes answered",
		`{"votes": 3, "quorum": 2}`:                 `{"votes": 3, "quorum": 2}`,
		"dial redis://u:e@127.0.0.1:1: refused":     "dial redis://xxxxx@127.0.0.1:1: refused",
		`invalid argument "redis://:3@127.0.0.1:2"`: `invalid argument "redis://xxxxx@127.0.0.1:2"`,
		"x redis://u:Tr0ub4dor,xyz@h:1 y":           "x redis://xxxxx@h:1 y",
		`"redis://v:Summer Time@h:2"`:               `"redis://xxxxx@h:2"`,
	} {
		if got := scrub(in); got != want {
			t.Errorf("scrub(%q) = %q, want %q", in, got, want)
		}
	}
	for _, pw := range []string{"Tr0ub4dor,xyz", "Summer Time"} {
		if got := scrubAll("panic: " + pw); strings.Contains(got, pw) {
			t.Errorf("scrubAll kept %q: %q", pw, got)
		}
	}
	var b strings.Builder
	w := &scrubWriter{w: &b}
	w.Write([]byte("error: redis://u:e@127.0.0.1:1 nodes answered"))
	if b.String() != "error: redis://xxxxx@127.0.0.1:1 nodes answered" {
		t.Errorf("scrubWriter wrote %q", b.String())
	}
}

// A list that cuts a password at a separator is refused, naming the URL
// by its place; a URL that does not parse is named by its place and shown
// only without its user information.
func TestNodeURLErrors(t *testing.T) {
	t.Setenv(envNodes, "")
	t.Setenv(envNodesFile, "")
	for list, want := range map[string]string{
		"redis://u:Tr0ub4dor,xyz@h:1":           "node URL 1 of --nodes has a comma, a space or a tab",
		"redis://h:1,redis://u:Summer Time@h:2": "node URL 2 of --nodes has a comma",
		"redis://h:1 redis://u:a\tHunter2@h:2":  "node URL 2 of --nodes has a comma",
		"redis://h:1,127.0.0.1:6379":            `node URL 2 of --nodes, "127.0.0.1:6379", is not valid: no scheme; a node URL starts with redis://`,
		"redis://u:pw@h:1?pool_size=-5":         `node URL 1 of --nodes, "redis://xxxxx@h:1?pool_size=-5", is not valid: pool_size="-5"`,
		"redis://u:pw@h:1,h:2":                  "node URL 2 of --nodes is not a valid node URL",
	} {
		f := &nodeFlags{nodes: []string{list}}
		_, err := f.urls()
		if exitCode(err) != exitUsage || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", list, err, want)
		}
		for _, pw := range []string{"Tr0ub4dor", "xyz", "Summer", "Time", "Hunter2", "pw"} {
			if err != nil && strings.Contains(err.Error(), pw) {
				t.Errorf("%q: %v shows %q", list, err, pw)
			}
		}
	}
}

func TestParseInfo(t *testing.T) {
	m := parseInfo("# Server\r\nredis_version:7.0.15\r\nrun_id:abc\r\n\r\n# Replication\r\nrole:master\r\n")
	if m["redis_version"] != "7.0.15" || m["run_id"] != "abc" || m["role"] != "master" {
		t.Errorf("parseInfo: %v", m)
	}
}
