package wire

import (
	"strings"
	"testing"
	"time"
)

func TestDecode(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		v    any
		want Reply
	}{
		{[]any{int64(1), int64(1795240000000000), int64(5000), int64(10000)},
			Reply{Status: OK, Fence: 1795240000000000, Age: 5000 * ms, MaxTTL: 10000 * ms}},
		{[]any{int64(0), int64(1500), int64(7), int64(9)}, Reply{Status: Taken, TTL: 1500 * ms, Age: 7 * ms, MaxTTL: 9 * ms}},
		{[]any{int64(0), int64(-1), int64(7), int64(9)}, Reply{Status: Taken, Age: 7 * ms, MaxTTL: 9 * ms}},
		{[]any{int64(-1), int64(300), int64(700), int64(1000)}, Reply{Status: Quarantined, TTL: 300 * ms, Age: 700 * ms, MaxTTL: 1000 * ms}},
	} {
		if got := decodeAcquire(tc.v); got != tc.want {
			t.Errorf("decodeAcquire(%#v) = %+v, want %+v", tc.v, got, tc.want)
		}
	}
	for _, v := range []any{
		[]any{int64(2), int64(0), int64(0), int64(0)},
		[]any{int64(1), int64(0), int64(-5), int64(0)},
		[]any{int64(1), int64(0)},
		[]any{"1", "0", "0", "0"},
		"OK", nil,
	} {
		if d := decodeAcquire(v); d.Status != Failed || d.Err == nil {
			t.Errorf("decodeAcquire(%#v) = %+v, want Failed", v, d)
		}
	}
	for v, want := range map[any]Status{int64(1): OK, int64(0): Absent, int64(-1): Taken, int64(2): Failed, "1": Failed} {
		if d := decodeStatus(v); d.Status != want || (want == Failed) != (d.Err != nil) {
			t.Errorf("decodeStatus(%#v) = %+v", v, d)
		}
	}
	if d := decodeStatus(nil); d.Status != Failed || d.Err == nil {
		t.Errorf("decodeStatus(nil) = %+v", d)
	}
	if d := decodeRelease([]any{int64(1), int64(3)}); d != (Reply{Status: OK, Woke: 3}) {
		t.Errorf("decodeRelease = %+v", d)
	}
	for _, v := range []any{int64(1), []any{int64(2), int64(0)}, []any{int64(1), int64(-1)}, []any{int64(1)}} {
		if d := decodeRelease(v); d.Status != Failed || d.Err == nil {
			t.Errorf("decodeRelease(%#v) = %+v, want Failed", v, d)
		}
	}
	if d := decodeProbe([]any{int64(1), int64(2), int64(3), "abc"}); d != (Reply{Status: OK, Age: ms, MaxTTL: 2 * ms, Clock: 3, ServerID: "abc"}) {
		t.Errorf("decodeProbe = %+v", d)
	}
	if d := decodeProbe([]any{int64(1), int64(2), int64(3)}); d.Status != Failed {
		t.Errorf("decodeProbe without an id = %+v", d)
	}
	if d := decodeProbe([]any{int64(-1), int64(2), int64(3), ""}); d.Status != Failed {
		t.Errorf("decodeProbe of a negative age = %+v", d)
	}
	held := []any{int64(1), "0123456789ab", "host:1", int64(1500), int64(77), int64(5000), int64(9000), "1795240000000000"}
	want := Reply{Status: OK, Holder: "0123456789ab", Owner: "host:1", TTL: 1500 * ms, Fence: 77, Age: 5000 * ms, MaxTTL: 9000 * ms, Clock: 1795240000000000}
	if d := decodeInspect(held); d != want {
		t.Errorf("decodeInspect = %+v, want %+v", d, want)
	}
	free := []any{int64(0), "", "", int64(0), int64(0), int64(-1), int64(0), "1"}
	if d := decodeInspect(free); d != (Reply{Status: OK, Age: -1, Clock: 1}) {
		t.Errorf("decodeInspect of a free key without records = %+v", d)
	}
	if d := decodeForce([]any{int64(1), "0123456789ab", "", int64(20), int64(2)}); d != (Reply{Status: OK, Holder: "0123456789ab", TTL: 20 * ms, Woke: 2}) {
		t.Errorf("decodeForce = %+v", d)
	}
	for _, v := range []any{
		held[:7],
		append([]any{int64(2)}, held[1:]...),      // held is 0 or 1
		append([]any{int64(1), ""}, held[2:]...),  // a held key has an ID
		append(append([]any{}, held[:7]...), "x"), // the clock is a number
		append([]any{int64(1), int64(5)}, held[2:]...),
	} {
		if d := decodeInspect(v); d.Status != Failed || d.Err == nil {
			t.Errorf("decodeInspect(%#v) = %+v, want Failed", v, d)
		}
	}
	for _, v := range []any{[]any{int64(1), "id", "", int64(20)}, []any{int64(1), "id", "", int64(20), int64(-1)}} {
		if d := decodeForce(v); d.Status != Failed || d.Err == nil {
			t.Errorf("decodeForce(%#v) = %+v, want Failed", v, d)
		}
	}
}

func TestTokenID(t *testing.T) {
	// The first 12 hex digits of SHA-1("abc"), as redis.sha1hex gives them
	// (the conformance tests compare the two on real servers).
	if got := TokenID("abc owner with spaces"); got != "a9993e364706" {
		t.Errorf("TokenID = %q", got)
	}
	if TokenID("abc") != TokenID("abc other") {
		t.Error("the owner label changes the ID")
	}
}

func TestScripts(t *testing.T) {
	for _, s := range Scripts() {
		if len(s.SHA1()) != 40 || !strings.Contains(s.Source(), "-- "+s.Name()+".lua: ") {
			t.Errorf("script %q: sha %q, source starts %q", s.Name(), s.SHA1(), s.Source()[:20])
		}
	}
}
