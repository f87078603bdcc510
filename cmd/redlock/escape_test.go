package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/quorumlock/redlock/internal/redistest"
)

func TestPrintable(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"host-7:4242", "host-7:4242"},
		{`C:\jobs "nightly"`, `C:\jobs "nightly"`}, // backslashes and quotes stay
		{"Zürich 東京 🙂", "Zürich 東京 🙂"},
		{"a\x1b[2Jb", `a\x1b[2Jb`},
		{"row\nforged\r\ttab", `row\nforged\r\ttab`},
		{"bell\a del\x7f nul\x00", `bell\a del\x7f nul\x00`},
		{"csi\u009b c1\u0085", `csi\u009b c1\u0085`},
		{"bidi\u202eevil", `bidi\u202eevil`},
		{"bad\xff\xfeutf8", `bad\xff\xfeutf8`},
		{"cut\xe6\x9d", `cut\xe6\x9d`},
	} {
		if got := printable(c.in); got != c.want {
			t.Errorf("printable(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got, want := printableLines("line 1\x1b[m\n  line 2\r"), "line 1\\x1b[m\n  line 2\\r"; got != want {
		t.Errorf("printableLines: %q, want %q", got, want)
	}
}

// A lock record whose owner label holds terminal escapes, line breaks and
// bytes that are not UTF-8 (written past the library, which refuses such
// labels, by anyone who can write the nodes) shows escaped in every output
// for people, and cannot forge a row of a table; JSON carries it as JSON
// escapes it. Issue 32, item 5.
func TestHostileOwnerLabelIsEscaped(t *testing.T) {
	t.Parallel()
	srv := redistest.StartN(t, 3, redistest.Config{})
	nodes := nodesFlag(srv...)
	const label = "evil\x1b[31m\nforged-node  deadbeef  x\r\a\u009b\xff"
	// The record as the nodes keep it: a token, a space and the owner's
	// label (see wire.TokenID and lua/holder.lua).
	for _, s := range srv {
		s.MustDo(t, "SET", "hostile", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA "+label, "PX", "600000")
	}
	escaped := printable(label)
	check := func(what string, r result, code int, want ...string) {
		t.Helper()
		expect(t, r, code, append(want, escaped)...)
		out := r.stdout + r.stderr
		for _, raw := range []string{"\x1b", "\r", "\a", "\u009b", "\xff"} {
			if strings.Contains(out, raw) {
				t.Fatalf("%s: the output holds %q raw:\n%q", what, raw, out)
			}
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "forged-node") {
				t.Fatalf("%s: a forged row:\n%s", what, out)
			}
		}
	}
	check("inspect", run(t, "inspect", "--no-quarantine", nodes, "hostile"), 0, `lock "hostile": HELD by `, "OWNER")
	check("status", run(t, "status", "--no-quarantine", nodes, "hostile"), 0, `lock "hostile": HELD by `)

	// JSON is left to encoding/json: the label comes back with its
	// control characters (and U+FFFD for the byte that is not UTF-8).
	r := run(t, "inspect", "--no-quarantine", "--json", nodes, "hostile")
	expect(t, r, 0)
	var rep statusReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("inspect --json: %v\n%s", err, r)
	}
	if want := strings.ToValidUTF8(label, "\uFFFD"); rep.Owner != want {
		t.Fatalf("inspect --json: owner %q, want %q", rep.Owner, want)
	}

	check("release", run(t, "release", "--force", "--yes", nodes, "hostile"), 0, `lock "hostile": REMOVED the keys of `, "removed")
	expect(t, run(t, "inspect", "--no-quarantine", nodes, "hostile"), 0, `lock "hostile": FREE`)
}
