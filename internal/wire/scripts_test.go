package wire

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestAcquireOneKeepsTheFormat checks that the common case of the acquire
// script, which runs before node.lua defines FORMAT, accepts the marker of
// that format and no other.
func TestAcquireOneKeepsTheFormat(t *testing.T) {
	m := regexp.MustCompile(`(?m)^local FORMAT = '(\d+)'$`).FindStringSubmatch(markerSrc)
	if m == nil {
		t.Fatal("node.lua defines no FORMAT")
	}
	want := "m[1] == '" + m[1] + "' and"
	if !strings.Contains(acquireOneSrc, want) {
		t.Errorf("acquire_one.lua does not check the marker's format with %q (node.lua's FORMAT is %s)", want, m[1])
	}
}

// TestLongGrantIsTheHorizons checks that LongGrant is the TTL above which
// hold, in horizon.lua, gives a grant the marker's horizon of its own: a
// release sent without the marker (Call.LeanKeys) could not give it back.
func TestLongGrantIsTheHorizons(t *testing.T) {
	want := "ttl > " + strconv.FormatInt(LongGrant.Milliseconds(), 10) + " and"
	if !strings.Contains(horizonSrc, want) {
		t.Errorf("horizon.lua's hold does not take a long grant with %q (LongGrant is %v)", want, LongGrant)
	}
}

// TestLuaWritesNoConstant checks that no piece of a script in lua/ writes
// out a constant that the scripts share with Go: each is written once, in
// Go, and the pieces name it (see luaConstants). Comments are not read.
func TestLuaWritesNoConstant(t *testing.T) {
	var forbidden []*regexp.Regexp
	for _, s := range []string{releasedPrefix, leaderPrefix, markerPrefix, legacyPrefix, readersHeld, strconv.Itoa(Format)} {
		forbidden = append(forbidden, regexp.MustCompile(`['"]`+regexp.QuoteMeta(s)+`['"]`))
	}
	ms := strconv.FormatInt(LongGrant.Milliseconds(), 10)
	forbidden = append(forbidden, regexp.MustCompile(`(^|[^\w.])`+ms+`($|[^\w.])`))
	files, err := luaFiles.ReadDir("lua")
	if err != nil || len(files) == 0 {
		t.Fatalf("lua/: %d files, %v", len(files), err)
	}
	for _, f := range files {
		b, err := luaFiles.ReadFile("lua/" + f.Name())
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			code, _, _ := strings.Cut(line, "--")
			for _, re := range forbidden {
				if m := re.FindString(code); m != "" {
					t.Errorf("lua/%s:%d writes out %s, a constant of Go's: %s", f.Name(), i+1, strings.Trim(m, " ()"), strings.TrimSpace(line))
				}
			}
		}
	}
}
