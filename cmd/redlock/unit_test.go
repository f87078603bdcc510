package main

import (
	"strings"
	"testing"
	"time"
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

func TestSummarize(t *testing.T) {
	held := func(holder string, ttl int64) nodeStatus {
		return nodeStatus{Answered: true, Held: true, Holder: holder, TTLMillis: ttl}
	}
	empty := nodeStatus{Answered: true}
	down := nodeStatus{}
	for _, tc := range []struct {
		nodes []nodeStatus
		state string
		ttl   int64
	}{
		{[]nodeStatus{held("a", 900), held("a", 800), held("a", 700)}, "held", 800},
		{[]nodeStatus{held("a", 900), held("a", 800), empty}, "held", 800},
		{[]nodeStatus{held("a", 900), held("b", 800), empty}, "free", 0},
		{[]nodeStatus{held("a", 900), down, empty}, "unknown", 0},
		{[]nodeStatus{empty, down, empty}, "free", 0},
		{[]nodeStatus{down, down, empty}, "unknown", 0},
	} {
		rep := &statusReport{Quorum: len(tc.nodes)/2 + 1, Nodes: tc.nodes}
		summarize(rep)
		if rep.State != tc.state || rep.TTLMillis != tc.ttl {
			t.Errorf("%+v: got %s, ttl %d; want %s, ttl %d", tc.nodes, rep.State, rep.TTLMillis, tc.state, tc.ttl)
		}
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
