package wire

import (
	"testing"
	"time"
)

func TestRWKeysReserved(t *testing.T) {
	for _, key := range []string{ReadersKey("k"), IntentKey("k"), ReadersKey("{t}k"), IntentKey("")} {
		if !Reserved(key) {
			t.Errorf("%q is not reserved", key)
		}
	}
	if Reserved("readers:k") || Reserved("redlock:reader") {
		t.Error("a key outside the prefixes is reserved")
	}
	if ReadersKey("a") == ReadersKey("b") || IntentKey("a") == ReadersKey("a") {
		t.Error("two records share a name")
	}
}

func TestSetRW(t *testing.T) {
	r := Set{Name: "k", Kind: Reader}
	w := Set{Name: "k", Kind: Writer, Intent: "id", IntentTTL: 1500 * time.Millisecond}
	if c := r.Acquire("tok", time.Second, 0); c.Script != rwReadScript || len(c.Keys) != 4 || len(c.Args) != 3 {
		t.Errorf("reader's Acquire: %s %q %q", c.Script.Name(), c.Keys, c.Args)
	}
	c := w.Acquire("tok", time.Second, 0)
	if c.Script != rwWriteScript || len(c.Keys) != 4 || len(c.Args) != 5 || c.Args[3] != "id" || c.Args[4] != "1500" {
		t.Errorf("writer's Acquire: %s %q %q", c.Script.Name(), c.Keys, c.Args)
	}
	// A writer's failed round is undone as a lock's, which leaves the
	// intent; a reader's by its own script.
	if u := c.Undo(7, false); u.Script != releaseScript {
		t.Errorf("writer's Undo runs %s", u.Script.Name())
	}
	if u := r.Acquire("tok", time.Second, 0).Undo(7, false); u.Script != rwReleaseScript || u.Keys[1] != "k" {
		t.Errorf("reader's Undo: %s %q", u.Script.Name(), u.Args)
	}
	if e := w.Extend("tok", time.Second); e.Script != extendScript {
		t.Errorf("writer's Extend runs %s", e.Script.Name())
	}
	if e := r.Extend("tok", time.Second); e.Script != rwExtendScript {
		t.Errorf("reader's Extend runs %s", e.Script.Name())
	}
	if d := w.DropIntent(); d.Script != rwDropScript || d.Keys[0] != IntentKey("k") || d.Args[0] != "id" {
		t.Errorf("DropIntent: %s %q %q", d.Script.Name(), d.Keys, d.Args)
	}
	if a := Adopt("k", "tok", 7); len(a.Keys) != 3+MaxPermits || a.Keys[3] != PermitKey("k", 0) || a.Keys[2] != MarkerKey("k") || a.Args[2] != "7" {
		t.Errorf("Adopt's keys: %d, %q", len(a.Keys), a.Keys[:5])
	}
}

func TestDecodeAdopt(t *testing.T) {
	i := func(v ...int64) []any {
		out := make([]any, len(v))
		for k, x := range v {
			out[k] = x
		}
		return out
	}
	for _, tc := range []struct {
		v    any
		want Reply
	}{
		{append(i(1, 0, 0, 1500, 42), "tok own er"), Reply{Status: OK, Kind: Exclusive, TTL: 1500 * time.Millisecond, Fence: 42, Owner: "own er"}},
		{append(i(1, 1, 0, 10, 42), "tok o"), Reply{Status: OK, Kind: Reader, TTL: 10 * time.Millisecond, Fence: 42, Owner: "o"}},
		{append(i(1, 2, 5, 10, 42), "tok o"), Reply{Status: OK, Kind: Permit, Slot: 5, TTL: 10 * time.Millisecond, Fence: 42, Owner: "o"}},
		{i(-1, 0, 0, 10, 0), Reply{Status: Taken, TTL: 10 * time.Millisecond}},
		{i(0, 0, 0, 0, 0), Reply{Status: Absent}},
	} {
		if d := decodeAdopt(tc.v); d != tc.want {
			t.Errorf("decodeAdopt(%v) = %+v, want %+v", tc.v, d, tc.want)
		}
	}
	for _, v := range []any{i(1, 0, 0, 1, 1), append(i(1, 3, 0, 1, 1), "t o"), append(i(1, 0, 0, 1, 1), 7), i(1, 2, MaxPermits, 1, 1), i(1, 0, 1, 1, 1), i(2, 0, 0, 0, 0), i(1, 0, 0, 1, -1), i(1, 0, 0, 1), "x"} {
		if d := decodeAdopt(v); d.Status != Failed {
			t.Errorf("decodeAdopt(%v) = %+v, want Failed", v, d)
		}
	}
}

func TestDecodeInspectRW(t *testing.T) {
	base := []any{int64(0), "", "", int64(0), int64(5), int64(100), int64(1000), "1795240000000000"}
	v := append(append([]any(nil), base...), []any{"abc", "me", int64(900), "def", "", int64(1900)}, int64(2))
	d := decodeInspect(v)
	if d.Status != OK || d.RW == nil || len(d.RW.Readers) != 2 || d.RW.Intents != 2 ||
		d.RW.Readers[1] != (ReaderView{ID: "def", TTL: 1900 * time.Millisecond}) || d.RW.Readers[0].Owner != "me" {
		t.Errorf("decodeInspect with readers = %+v (%+v)", d, d.RW)
	}
	if d := decodeInspect(append(append([]any(nil), base...), []any{}, int64(0))); d.Status != OK || d.RW == nil || len(d.RW.Readers) != 0 {
		t.Errorf("decodeInspect without readers = %+v", d)
	}
	for _, extra := range [][]any{
		{[]any{"abc", "me"}, int64(0)},
		{[]any{"", "me", int64(1)}, int64(0)},
		{[]any{"abc", "me", int64(1)}, int64(-1)},
		{[]any{"abc", "me", "1"}, int64(0)},
	} {
		if d := decodeInspect(append(append([]any(nil), base...), extra...)); d.Status != Failed {
			t.Errorf("decodeInspect(%v) = %+v, want Failed", extra, d)
		}
	}
	if d := decodeForce([]any{int64(0), "", "", int64(0), int64(1), int64(3)}); d.Status != OK || d.RW == nil || d.RW.Removed != 3 || d.Woke != 1 {
		t.Errorf("decodeForce with readers = %+v", d)
	}
}
