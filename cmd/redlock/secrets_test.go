package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/internal/redistest"
)

// Passwords with a comma, a space or a tab in them (issue 32, item 1):
// a list that cuts them is refused without showing any piece of them, and
// percent-encoded they work. Against real servers, with ACL users and
// with requirepass.
func TestPasswordsWithSeparators(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Config{})
	pws := map[string]string{"alice": "Tr0ub4dor,xyz", "bob": "Summer Time", "carol": "Hunter2\tx"}
	for user, pw := range pws {
		srv.MustDo(t, "ACL", "SETUSER", user, "on", ">"+pw, "~*", "&*", "+@all")
	}
	addr := srv.Addr()
	var all []result
	check := func(code int, r result, want ...string) {
		t.Helper()
		expect(t, r, code, want...)
		all = append(all, r)
	}
	for user, pw := range pws {
		raw := "redis://" + user + ":" + pw + "@" + addr
		check(exitUsage, run(t, "status", "--nodes", raw, "k"), "node URL 1 of --nodes has a comma, a space or a tab", "percent-encode")
		check(exitUsage, runIn(t, t.TempDir(), []string{"REDLOCK_NODES=redis://127.0.0.1:1," + raw}, "status", "k"), "node URL 2 of $REDLOCK_NODES has a comma")
		enc := "redis://" + user + ":" + strings.NewReplacer(",", "%2C", " ", "%20", "\t", "%09").Replace(pw) + "@" + addr
		check(0, run(t, "run", "--no-quarantine", "--nodes", enc, "k-"+user, "--", "echo", "ran"), "ran")
		// In a file, a line is one URL: only the characters that URLs
		// never hold raw must be encoded.
		file := filepath.Join(t.TempDir(), "nodes")
		os.WriteFile(file, []byte("# the nodes\n\n"+enc+"\n"), 0o600)
		check(0, run(t, "run", "--no-quarantine", "--nodes-file", file, "k-"+user, "--", "echo", "ran"), "ran")
		bad := filepath.Join(t.TempDir(), "nodes")
		os.WriteFile(bad, []byte("redis://127.0.0.1:1\n"+raw+"?pool_size=-1\n"), 0o600)
		check(exitUsage, run(t, "status", "--nodes-file", bad, "k"), "line 2 of --nodes-file "+bad, "xxxxx@")
	}
	for _, r := range all {
		for _, piece := range []string{"Tr0ub4dor", "xyz", "Summer", "Time@", "Hunter2"} {
			if strings.Contains(r.stdout+r.stderr, piece) {
				t.Fatalf("%q was printed:\n%s", piece, r)
			}
		}
	}
}

// The scrubber works on whole URLs: a password "e" or "3" (requirepass)
// leaves the words and the JSON numbers of the output alone.
func TestShortPasswordsLeaveOutputAlone(t *testing.T) {
	t.Parallel()
	e := redistest.Start(t, redistest.Config{})
	three := redistest.Start(t, redistest.Config{})
	// A third server, as two node entries of one server would be refused
	// (one server, one vote); it has the password "e" too.
	e2 := redistest.Start(t, redistest.Config{})
	e.MustDo(t, "CONFIG", "SET", "requirepass", "e")
	three.MustDo(t, "CONFIG", "SET", "requirepass", "3")
	e2.MustDo(t, "CONFIG", "SET", "requirepass", "e")
	nodes := "--nodes=redis://:e@" + e.Addr() + ",redis://:3@" + three.Addr() + ",redis://:e@" + e2.Addr() + "/1"
	r := run(t, "run", "--no-quarantine", nodes, "k", "--", "echo", "held")
	expect(t, r, 0, "held")
	r = run(t, "status", "--no-quarantine", nodes, "k")
	expect(t, r, 0, "FREE", "healthy")
	if strings.Contains(r.stdout, "xxxxx") {
		t.Fatalf("status shows xxxxx:\n%s", r)
	}
	r = run(t, "status", "--no-quarantine", "--json", nodes, "k")
	expect(t, r, 0)
	var rep struct {
		Quorum int `json:"quorum"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || rep.Quorum != 2 || strings.Contains(r.stdout, "xxxxx") {
		t.Fatalf("status --json: %v, quorum %d:\n%s", err, rep.Quorum, r)
	}
}

// A panic ends with exit status 70 and a message without the passwords.
func TestPanicScrubbed(t *testing.T) {
	registerSecrets("--nodes=redis://u:Pan1c,Pw@h:1")
	var b strings.Builder
	code := 0
	func() {
		defer recoverPanic(&b, &code)
		panic("boom: redis://u:Pan1c,Pw@h:1 Pan1c,Pw")
	}()
	if code != exitSoftware || !strings.Contains(b.String(), "redlock: internal error") || strings.Contains(b.String(), "Pan1c") {
		t.Fatalf("exit %d:\n%s", code, b.String())
	}
}

// The command run under a lock gets no variable the nodes or their
// secrets came from (issue 32, item 2).
func TestRunHidesNodeVariables(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Config{})
	file := filepath.Join(t.TempDir(), "nodes")
	os.WriteFile(file, []byte(srv.URL()+"\n"), 0o600)
	for _, env := range [][]string{{"REDLOCK_NODES=" + srv.URL()}, {"REDLOCK_NODES_FILE=" + file}} {
		for _, cmd := range []string{"run", "elect"} {
			r := runIn(t, t.TempDir(), append(env, "KEEP_ME=1"), cmd, "--no-quarantine", "k-env-"+cmd, "--", "env")
			expect(t, r, 0, "KEEP_ME=1", "REDLOCK_KEY=k-env-"+cmd)
			if strings.Contains(r.stdout, "REDLOCK_NODES") {
				t.Fatalf("%s passed the nodes on:\n%s", cmd, r)
			}
		}
	}
}
