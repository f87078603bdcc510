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
