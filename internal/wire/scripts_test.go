package wire

import (
	"regexp"
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
