package wire

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// FuzzDecode feeds the decoders of the scripts' replies every shape of
// value an adapter could return, well formed or not, and checks each
// against its specification: never a panic; Failed, with an error and
// nothing else, for anything but the documented reply; and for a
// documented reply, every field taken from the reply as documented.
func FuzzDecode(f *testing.F) {
	i := func(v int64) any { return v }
	for _, v := range []any{
		// Well formed.
		[]any{i(1), i(1795240000000000), i(5000), i(10000)},
		[]any{i(0), i(1500), i(7), i(9)},
		[]any{i(0), i(-1), i(7), i(9)},
		[]any{i(0), i(-2), i(0), i(0)},
		[]any{i(-1), i(300), i(700), i(1000)},
		[]any{i(1), i(3)},
		[]any{i(0), i(0)},
		[]any{i(-1), i(2)},
		[]any{i(12), i(34), i(1795240000000)},
		i(1), i(0), i(-1),
		// Malformed.
		[]any{i(2), i(0), i(0), i(0)},
		[]any{i(1), i(0), i(-5), i(0)},
		[]any{i(1), i(0), i(0), i(-5)},
		[]any{i(1), i(0)},
		[]any{i(1), i(-1)},
		[]any{i(2), i(0)},
		[]any{i(-1), i(2), i(3)},
		[]any{"1", "0", "0", "0"},
		[]any{1, 0, 0, 0},
		[]any{i(1), []any{i(1)}, i(0), i(0)},
		[]any{i(1), nil, i(0), i(0)},
		[]any{i(1), i(0), i(math.MaxInt64), i(math.MaxInt64)},
		[]any{i(0), i(math.MinInt64), i(0), i(0)},
		// acquire_permit and release_permit.
		[]any{i(1), i(1795240000000000), i(12), i(34), i(3)},
		[]any{i(0), i(500), i(12), i(34), i(-1)},
		[]any{i(-1), i(500), i(12), i(34), i(-1)},
		[]any{i(1), i(1), i(12), i(34), i(-1)},
		[]any{i(0), i(500), i(12), i(34), i(2)},
		[]any{i(1), i(3), i(4)},
		[]any{i(1), i(3), i(MaxPermits + 1)},
		[]any{},
		"OK", "1", nil, true, false, 1, int32(1), 1.0, []byte("1"), i(2), i(math.MinInt64),
	} {
		f.Add(encodeReply(v))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, _ := decodeReply(b, 0)
		checkAcquire(t, v, decodeAcquire(v))
		checkStatus(t, "decodeStatus", v, decodeStatus(v))
		checkRelease(t, v, decodeRelease(v))
		checkProbe(t, v, decodeProbe(v))
		checkPermit(t, v, decodePermit(v))
		checkReleasePermit(t, v, decodeReleasePermit(v))
		checkFailed(t, "decodeAdopt", v, decodeAdopt(v))
		checkFailed(t, "decodeInspect", v, decodeInspect(v))
	})
}

// maxMillis is the largest count of milliseconds that a time.Duration holds.
const maxMillis = math.MaxInt64 / int64(time.Millisecond)

// fits reports whether n milliseconds is a duration a reply may carry: not
// negative and at most maxMillis; the decoders reject any other.
func fits(n int64) bool { return n >= 0 && n <= maxMillis }

// toMS converts milliseconds as the decoders do.
func toMS(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// specInts returns v as n integers if it is a []any of exactly n int64:
// the only shape of array that an adapter returns for the scripts' replies.
func specInts(v any, n int) ([]int64, bool) {
	a, ok := v.([]any)
	if !ok || len(a) != n {
		return nil, false
	}
	out := make([]int64, n)
	for i := range a {
		x, ok := a[i].(int64)
		if !ok {
			return nil, false
		}
		out[i] = x
	}
	return out, true
}

// checkFailed checks the rules every decoder keeps, and reports whether d
// is Failed.
func checkFailed(t *testing.T, name string, v any, d Reply) bool {
	t.Helper()
	if (d.Status == Failed) != (d.Err != nil) {
		t.Fatalf("%s(%#v) = %+v: an error exactly when Failed", name, v, d)
	}
	if d.Status != Failed {
		return false
	}
	if !strings.HasPrefix(d.Err.Error(), "redlock: unexpected reply ") {
		t.Fatalf("%s(%#v): error %q", name, v, d.Err)
	}
	if d.TTL != 0 || d.Fence != 0 || d.Age != 0 || d.MaxTTL != 0 || d.Clock != 0 || d.Woke != 0 {
		t.Fatalf("%s(%#v) = %+v: a failed decode carries values", name, v, d)
	}
	return true
}

// nonNegative fails t if a duration Reply from n milliseconds is
// negative.
func nonNegative(t *testing.T, name string, v any, field string, n int64, d time.Duration) {
	t.Helper()
	if d < 0 {
		t.Fatalf("%s(%#v): %s %v from %d ms is negative", name, v, field, d, n)
	}
}

func checkAcquire(t *testing.T, v any, d Reply) {
	t.Helper()
	const name = "decodeAcquire"
	failed := checkFailed(t, name, v, d)
	a, ok := specInts(v, 4)
	valid := ok && (a[0] == 1 || a[0] == 0 || a[0] == -1) && fits(a[2]) && fits(a[3]) && (a[0] == 1 || fits(max(a[1], 0)))
	if failed != !valid {
		t.Fatalf("%s(%#v) = %+v; the reply is well formed: %v", name, v, d, valid)
	}
	if failed {
		return
	}
	want := Reply{Age: toMS(a[2]), MaxTTL: toMS(a[3])}
	switch a[0] {
	case 1:
		want.Status, want.Fence = OK, a[1]
	case 0:
		want.Status, want.TTL = Taken, toMS(max(a[1], 0))
	case -1:
		want.Status, want.TTL = Quarantined, toMS(max(a[1], 0))
	}
	if d != want {
		t.Fatalf("%s(%#v) = %+v, want %+v", name, v, d, want)
	}
	nonNegative(t, name, v, "age", a[2], d.Age)
	nonNegative(t, name, v, "maxTTL", a[3], d.MaxTTL)
	nonNegative(t, name, v, "ttl", max(a[1], 0), d.TTL)
}

func checkStatus(t *testing.T, name string, v any, d Reply) {
	t.Helper()
	failed := checkFailed(t, name, v, d)
	want := map[any]Status{int64(1): OK, int64(0): Absent, int64(-1): Taken}
	o, valid := Failed, false
	if n, ok := v.(int64); ok {
		if w, ok := want[n]; ok {
			o, valid = w, true
		}
	}
	if failed != !valid || d != (Reply{Status: o, Err: d.Err}) {
		t.Fatalf("%s(%#v) = %+v, want %v", name, v, d, o)
	}
}

// checkPermit checks decodePermit against the acquire_permit script's
// replies: acquire's four elements and a slot, from 0 to MaxPermits-1 for
// a grant and -1 otherwise.
func checkPermit(t *testing.T, v any, d Reply) {
	t.Helper()
	const name = "decodePermit"
	failed := checkFailed(t, name, v, d)
	a, ok := specInts(v, 5)
	valid := ok && decodeAcquire([]any{a[0], a[1], a[2], a[3]}).Status != Failed &&
		(a[0] == 1 && a[4] >= 0 && a[4] < MaxPermits || a[0] != 1 && a[4] == -1)
	if failed != !valid {
		t.Fatalf("%s(%#v) = %+v; the reply is well formed: %v", name, v, d, valid)
	}
	if failed {
		return
	}
	want := decodeAcquire([]any{a[0], a[1], a[2], a[3]})
	if a[0] == 1 {
		want.Slot = int(a[4])
	}
	if d != want {
		t.Fatalf("%s(%#v) = %+v, want %+v", name, v, d, want)
	}
}

// checkReleasePermit checks decodeReleasePermit against the
// release_permit script's replies: release's two elements and the number
// of free slots, from 0 to MaxPermits.
func checkReleasePermit(t *testing.T, v any, d Reply) {
	t.Helper()
	const name = "decodeReleasePermit"
	failed := checkFailed(t, name, v, d)
	a, ok := specInts(v, 3)
	valid := ok && decodeRelease([]any{a[0], a[1]}).Status != Failed && a[2] >= 0 && a[2] <= MaxPermits
	if failed != !valid {
		t.Fatalf("%s(%#v) = %+v; the reply is well formed: %v", name, v, d, valid)
	}
	if failed {
		return
	}
	want := decodeRelease([]any{a[0], a[1]})
	want.Free = a[2]
	if d != want {
		t.Fatalf("%s(%#v) = %+v, want %+v", name, v, d, want)
	}
}

func checkRelease(t *testing.T, v any, d Reply) {
	t.Helper()
	const name = "decodeRelease"
	failed := checkFailed(t, name, v, d)
	a, ok := specInts(v, 2)
	valid := ok && (a[0] == 1 || a[0] == 0 || a[0] == -1) && a[1] >= 0
	if failed != !valid {
		t.Fatalf("%s(%#v) = %+v; the reply is well formed: %v", name, v, d, valid)
	}
	if failed {
		return
	}
	want := Reply{Status: map[int64]Status{1: OK, 0: Absent, -1: Taken}[a[0]], Woke: a[1]}
	if d != want {
		t.Fatalf("%s(%#v) = %+v, want %+v", name, v, d, want)
	}
}

func checkProbe(t *testing.T, v any, d Reply) {
	t.Helper()
	const name = "decodeProbe"
	failed := checkFailed(t, name, v, d)
	all, ok := v.([]any)
	var id string
	var a []int64
	if ok = ok && len(all) == 4; ok {
		var intsOK bool
		id, ok = all[3].(string)
		a, intsOK = specInts(all[:3], 3)
		ok = ok && intsOK
	}
	valid := ok && fits(a[0]) && fits(a[1])
	if failed != !valid {
		t.Fatalf("%s(%#v) = %+v; the reply is well formed: %v", name, v, d, valid)
	}
	if failed {
		return
	}
	if want := (Reply{Status: OK, Age: toMS(a[0]), MaxTTL: toMS(a[1]), Clock: a[2], ServerID: id}); d != want {
		t.Fatalf("%s(%#v) = %+v, want %+v", name, v, d, want)
	}
	nonNegative(t, name, v, "age", a[0], d.Age)
	nonNegative(t, name, v, "maxTTL", a[1], d.MaxTTL)
}

// The tags of the encoding of a reply value that FuzzDecode decodes its
// input with. A tag byte is followed by:
const (
	tagSmall  = iota // 1 byte: an int64 from -128 to 127
	tagInt64         // 8 bytes, little endian: an int64
	tagString        // a length byte (mod 16), then that many bytes: a string
	tagNil           // nothing: nil
	tagArray         // a length byte (mod 8), then that many values: []any
	tagBool          // 1 byte: a bool
	tagBytes         // as tagString: a []byte
	tagInt           // 1 byte: an int (not an int64) from -128 to 127
	numTags
)

// decodeReply decodes a value from b, padding b with zeros where it is
// short, so that every input is some value; it returns the rest of b.
func decodeReply(b []byte, depth int) (any, []byte) {
	next := func() byte {
		if len(b) == 0 {
			return 0
		}
		c := b[0]
		b = b[1:]
		return c
	}
	switch tag := next() % numTags; tag {
	case tagSmall:
		return int64(int8(next())), b
	case tagInt64:
		var buf [8]byte
		n := copy(buf[:], b)
		return int64(binary.LittleEndian.Uint64(buf[:])), b[n:]
	case tagString, tagBytes:
		n := min(int(next()%16), len(b))
		s := b[:n:n]
		b = b[n:]
		if tag == tagBytes {
			return s, b
		}
		return string(s), b
	case tagNil:
		return nil, b
	case tagArray:
		n := int(next() % 8)
		if depth >= 3 {
			n = 0
		}
		a := make([]any, n)
		for i := range a {
			a[i], b = decodeReply(b, depth+1)
		}
		return a, b
	case tagBool:
		return next()&1 == 1, b
	default: // tagInt
		return int(int8(next())), b
	}
}

// encodeReply encodes v for decodeReply, for the seed corpus.
func encodeReply(v any) []byte {
	switch v := v.(type) {
	case int64:
		if v >= math.MinInt8 && v <= math.MaxInt8 {
			return []byte{tagSmall, byte(int8(v))}
		}
		return binary.LittleEndian.AppendUint64([]byte{tagInt64}, uint64(v))
	case string:
		return append([]byte{tagString, byte(len(v))}, v...)
	case []byte:
		return append([]byte{tagBytes, byte(len(v))}, v...)
	case nil:
		return []byte{tagNil}
	case []any:
		b := []byte{tagArray, byte(len(v))}
		for _, e := range v {
			b = append(b, encodeReply(e)...)
		}
		return b
	case bool:
		if v {
			return []byte{tagBool, 1}
		}
		return []byte{tagBool, 0}
	case int:
		return []byte{tagInt, byte(int8(v))}
	}
	// Types an adapter never returns (int32, float64) decode as nil.
	return []byte{tagNil}
}

// TestReplyEncoding checks that the seeds of FuzzDecode decode to the
// values they were made from.
func TestReplyEncoding(t *testing.T) {
	for _, v := range []any{
		[]any{int64(1), int64(1795240000000000), int64(5000), int64(-10000)},
		[]any{"OK", []byte("x"), nil, true, 3, []any{int64(-128), int64(127)}},
		int64(math.MinInt64), "", false,
	} {
		got, rest := decodeReply(encodeReply(v), 0)
		if fmt.Sprintf("%#v", got) != fmt.Sprintf("%#v", v) || len(rest) != 0 {
			t.Errorf("decodeReply(encodeReply(%#v)) = %#v, rest %v", v, got, rest)
		}
	}
}
