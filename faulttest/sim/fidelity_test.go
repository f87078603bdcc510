package sim

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/quorumlock/redlock/driver/drivertest"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/internal/wire"
)

// A fidelityCase is a command the scripts rely on, and what of its reply
// must agree between a real redis-server and a simulated server.
type fidelityCase struct {
	name string
	args []string
	// shape reduces a reply (or error text) to what must agree.
	shape func(reply any, err string) string
}

func kind(v any) string {
	switch v := v.(type) {
	case nil:
		return "nil"
	case []any:
		var parts []string
		for _, e := range v {
			parts = append(parts, kind(e))
		}
		return "[" + strings.Join(parts, " ") + "]"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// fields returns the names of the fields of INFO text that the scripts
// read, with the values that must agree (second_repl_offset of a master
// that was never promoted is -1; the others are present).
func fields(text string) string {
	var out []string
	for _, f := range []string{"run_id", "uptime_in_seconds", "master_replid", "master_replid2", "second_repl_offset"} {
		for _, line := range strings.Split(text, "\r\n") {
			if v, ok := strings.CutPrefix(line, f+":"); ok {
				if f == "second_repl_offset" {
					out = append(out, f+"="+v)
				} else {
					out = append(out, f)
				}
			}
		}
	}
	return strings.Join(out, ",")
}

var fidelityCases = []fidelityCase{
	{"time", []string{"TIME"}, func(r any, e string) string { return kind(r) + e }},
	{"lastsave", []string{"LASTSAVE"}, func(r any, e string) string { return kind(r) + e }},
	{"info-server", []string{"INFO", "server"}, func(r any, e string) string { s, _ := r.(string); return fields(s) + e }},
	{"info-replication", []string{"INFO", "replication"}, func(r any, e string) string { s, _ := r.(string); return fields(s) + e }},
	{"set-nx-get-absent", []string{"SET", "k", "v1", "NX", "PX", "10000", "GET"}, func(r any, e string) string { return fmt.Sprint(r) + e }},
	{"set-nx-get-present", []string{"SET", "k", "v2", "NX", "PX", "10000", "GET"}, func(r any, e string) string { return fmt.Sprint(r) + e }},
	{"pttl-missing", []string{"PTTL", "nothing"}, func(r any, e string) string { return fmt.Sprint(r) + e }},
	{"publish", []string{"PUBLISH", "redlock:released:k", ""}, func(r any, e string) string { return fmt.Sprint(r) + e }},
	{"script-info-pcall", []string{"EVAL", "local r = redis.pcall('INFO', 'replication'); return type(r)", "0"}, func(r any, e string) string { return fmt.Sprint(r) + e }},
	{"script-lastsave", []string{"EVAL", "return type(redis.pcall('LASTSAVE'))", "0"}, func(r any, e string) string { return fmt.Sprint(r) + e }},
	{"script-no-writes", []string{"EVAL", "#!lua flags=no-writes\nlocal r = redis.pcall('SET', 'nw', 'v'); return {type(r), type(r.err), redis.call('GET', 'nw')}", "0"}, func(r any, e string) string { return fmt.Sprint(r) + e }},
	{"script-error-table", []string{"EVAL", "error({err = 'FORMAT redlock: x'})", "0"}, func(r any, e string) string { return fmt.Sprint(r) + e }},
	{"script-nil-false", []string{"EVAL", "return {1, 'a', false, 2}", "0"}, func(r any, e string) string { return fmt.Sprint(r) + e }},
	{"script-time", []string{"EVAL", "local t = redis.call('TIME'); return {type(t[1]), type(t[2])}", "0"}, func(r any, e string) string { return fmt.Sprint(r) + e }},
}

// TestFidelity runs the commands that the scripts depend on, and the
// scripts' own probe, on a real redis-server and on a simulated server,
// and compares what the scripts read of the replies.
func TestFidelity(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{})
	real := make(map[string]string)
	for _, c := range fidelityCases {
		r, err := srv.Do(c.args...)
		e := ""
		if err != nil {
			e = "error: " + strings.Fields(err.Error())[0]
		}
		real[c.name] = c.shape(r, e)
	}
	probe := wire.Probe()
	r, err := srv.Do(append([]string{"EVAL", probe.Script.Source(), fmt.Sprint(len(probe.Keys))}, append(probe.Keys, probe.Args...)...)...)
	if err != nil {
		t.Fatalf("probe on redis-server: %v", err)
	}
	real["probe"] = kind(r)

	synctest.Test(t, func(t *testing.T) {
		n := 0
		s := newServer(0, 1, time.Now(), func(p string) string { n++; return fmt.Sprintf("%040d", n) })
		defer s.m.Close()
		sim := make(map[string]string)
		for _, c := range fidelityCases {
			s.mu.Lock()
			rep := s.dispatch(time.Now(), 0, c.args)
			s.mu.Unlock()
			e := ""
			if rep.err != "" {
				e = "error: " + strings.Fields(rep.err)[0]
			}
			sim[c.name] = c.shape(rep.val, e)
		}
		s.mu.Lock()
		rep := s.dispatch(time.Now(), 0, append([]string{"EVAL", probe.Script.Source(), fmt.Sprint(len(probe.Keys))}, append(probe.Keys, probe.Args...)...))
		s.mu.Unlock()
		if rep.err != "" {
			t.Fatalf("probe on the simulated server: %s", rep.err)
		}
		sim["probe"] = kind(rep.val)
		for name, want := range real {
			if sim[name] != want {
				t.Errorf("%s: simulated %q, redis-server %q", name, sim[name], want)
			}
		}
	})
}

// TestNodeScripts runs the conformance suite's sequence of every script
// (drivertest.ExerciseScripts, which an adapter passes against a real
// redis-server) through the simulator's node: a link, without message
// faults, to a simulated server. It checks the node as a driver.Node
// (EVALSHA and the NOSCRIPT fallback, replies converted as the adapters
// convert them, error replies as *driver.ReplyError) together with the
// server's Lua engine.
func TestNodeScripts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &world{seed: 1, cfg: Config{NodeTimeout: 50 * time.Millisecond}}
		s := newServer(0, 1, time.Now(), w.newID)
		defer s.m.Close()
		l := &link{w: w, srv: s, name: "s0:6379/0", seen: make(map[uint64]int)}
		drivertest.ExerciseScripts(t, l, "{t}k")
		drivertest.ExerciseScripts(t, l, "x")
		w.inflight.Wait()
	})
}
