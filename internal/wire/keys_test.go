package wire

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/quick"

	"github.com/quorumlock/redlock/internal/redistest"
)

func TestCRC16(t *testing.T) {
	// The check value of CRC-16/XMODEM, and Slots from the Redis Cluster
	// specification and from CLUSTER KEYSLOT.
	if got := crc16("123456789"); got != 0x31C3 {
		t.Errorf("crc16(123456789) = %#x, want 0x31c3", got)
	}
	for key, want := range map[string]uint16{
		"foo": 12182, "{user1000}.following": 3443, "{user1000}.followers": 3443,
		"foo{}{bar}": 8363, "foo{{bar}}zap": 4015, "foo{bar}{zap}": 5061, "": 0,
	} {
		if got := Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
}

func TestSlotTag(t *testing.T) {
	seen := make(map[string]bool, Slots)
	for s := range uint16(Slots) {
		tag := slotTag(s)
		if len(tag) != 4 || strings.ContainsAny(tag, "{}") {
			t.Fatalf("slotTag(%d) = %q: want four bytes without braces", s, tag)
		}
		if got := crc16(tag) & (Slots - 1); got != s {
			t.Fatalf("slotTag(%d) = %q, which hashes to slot %d", s, tag, got)
		}
		seen[tag] = true
	}
	if len(seen) != Slots {
		t.Errorf("%d distinct tags for %d Slots", len(seen), Slots)
	}
}

// companions returns the keys a script call for key touches.
func companions(key string) []string {
	return []string{key, MarkerKey(key), PermitKey(key, 0), PermitKey(key, MaxPermits-1),
		SizeKey(key), TermKey(key), ReadersKey(key), IntentKey(key)}
}

// awkwardKeys are keys whose braces are, or are not, hash tags.
var awkwardKeys = []string{
	"orders", "", "{", "}", "{}", "}{", "a{b", "a}b", "a{}b", "{}x", "x{}", "{a}", "{a}{b}",
	"a{{b}}", "a{b}}", "{{}}", "{}{a}", "}{a}", "{a{b}c}", "ü{ñ}", "锁", "{锁}x",
	"\x00{\xff}", "\xff\xfe{", "redlock:nodes", "x:{y}:z", "{user1000}.following",
}

func TestCompanionsShareSlot(t *testing.T) {
	for _, key := range awkwardKeys {
		for _, k := range companions(key)[1:] {
			if Slot(k) != Slot(key) {
				t.Errorf("%q: companion %q hashes to slot %d, the key to %d", key, k, Slot(k), Slot(key))
			}
		}
	}
	// Different keys never share a record, even a key and the same key
	// behind the tag that its records get (issue 31, item 6).
	keys := append(awkwardKeys, "abc", "{"+slotTag(Slot("abc"))+"}abc", "=abc", "{a}", "={a}")
	for name, record := range map[string]func(string) string{"readers": ReadersKey,
		"intent": IntentKey, "term": TermKey, "size": SizeKey, "permit": func(k string) string { return PermitKey(k, 0) }} {
		seen := map[string]string{}
		for _, key := range keys {
			if other, dup := seen[record(key)]; dup && other != key {
				t.Errorf("%q and %q share the %s record %q", key, other, name, record(key))
			}
			seen[record(key)] = key
		}
	}
}

// TestCompanionsShareSlotOnServer asks a cluster-enabled redis-server, which
// answers CLUSTER KEYSLOT before it owns any slot, where generated keys and
// their companions hash: the server's hashing, not this package's copy of
// it, is the reference.
func TestCompanionsShareSlotOnServer(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{Args: []string{"--cluster-enabled", "yes"}})
	slotOf := func(k string) int64 {
		v, err := srv.Do("CLUSTER", "KEYSLOT", k)
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT %q: %v", k, err)
		}
		return v.(int64)
	}
	check := func(key string) bool {
		want := slotOf(key)
		if want != int64(Slot(key)) {
			t.Errorf("Slot(%q) = %d, the server says %d", key, Slot(key), want)
			return false
		}
		for _, k := range companions(key)[1:] {
			if got := slotOf(k); got != want {
				t.Errorf("%q is in slot %d, its companion %q in %d", key, want, k, got)
				return false
			}
		}
		return true
	}
	for _, key := range awkwardKeys {
		check(key)
	}
	// Generated keys: arbitrary bytes, and keys built from braces and a few
	// letters, where tags and non-tags are most likely.
	r := rand.New(rand.NewPCG(1, 2))
	braces := func() string {
		var b strings.Builder
		for range r.IntN(8) {
			b.WriteByte("{}ab"[r.IntN(4)])
		}
		return b.String()
	}
	for i := range 500 {
		if !check(braces()) || !check(fmt.Sprint(r.Uint64())) {
			t.Fatalf("after %d generated keys", i)
		}
	}
	if err := quick.Check(check, &quick.Config{MaxCount: 500}); err != nil {
		t.Error(err)
	}
	// Every slot's tag, as the server hashes it.
	for s := range uint16(Slots) {
		if s%97 == 0 && slotOf(MarkerKey(slotTag(s))) != int64(s) {
			t.Fatalf("the marker of slot %d is elsewhere", s)
		}
	}
}

func TestHandover(t *testing.T) {
	tok := strings.Repeat("a", TokenLen)
	h := Handover(tok, 1765000000000001)
	if got, f, ok := ParseHandover(h); !ok || got != tok || f != 1765000000000001 {
		t.Fatalf("ParseHandover(%q) = %q %d %v", h, got, f, ok)
	}
	for _, bad := range []string{tok, tok + ".", tok + ".0", tok + ".01", tok + ".-1", tok + ".+1", tok + ".1x", tok + ".9007199254740992",
		tok[1:] + ".5", tok + "..5", "." + tok, tok + ".5.5", tok + ". 5"} {
		if _, _, ok := ParseHandover(bad); ok {
			t.Errorf("ParseHandover(%q) accepted", bad)
		}
	}
	if _, f, ok := ParseHandover(tok + ".9007199254740990"); !ok || f != MaxFence {
		t.Errorf("MaxFence refused: %d %v", f, ok)
	}
}
