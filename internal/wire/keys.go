package wire

import (
	"crypto/sha1"
	"encoding/hex"
	"strconv"
	"strings"
)

// The names of the client's own records and channels. Every script call
// touches the lock key and some of these records, and a Redis Cluster node
// runs a script only if all its keys are in one hash slot (else
// CROSSSLOT). So each record is named to hash to the slot of the lock key
// it serves, whatever bytes that key holds, and no two lock keys share a
// record.
//
// Redis hashes a key by its hash tag, the bytes between the first "{" and
// the first "}" after it, when there are any; else by the whole key. A lock
// key with a tag gets records named prefix + "=" + key, which have the
// same tag. Any other key gets prefix + "{T}" + key, where T is the slot's
// tag: four bytes from "@" to "O" whose CRC16 is the key's slot (see
// slotTag). The "=" and the "{" keep the two kinds apart: without them, the
// records of "abc" and of "{T}abc" would be the same keys. The node's
// marker is one hash per slot, "redlock:slot:{T}": at most 16384 of them,
// however many keys are locked.
const (
	fencePrefix  = "redlock:fence:"  // earlier formats' fence counters; reserved
	markerPrefix = "redlock:slot:"   // each slot's node marker
	permitPrefix = "redlock:permit:" // each slot of a semaphore
	sizePrefix   = "redlock:size:"   // each semaphore's number of slots
	termPrefix   = "redlock:term:"   // each election's term record
	// The records of a read-write lock besides its key, which holds the
	// writer (see lua/rw_read.lua).
	readersPrefix = "redlock:readers:" // each RW lock's readers
	intentPrefix  = "redlock:intent:"  // each RW lock's waiting writers
	// legacyMarker is a name that earlier releases wrote a node marker
	// under, and legacyPrefix the prefix of the names they wrote markers
	// under later, where format 1 leaves a string that fails their
	// scripts (see lua/node.lua); no lock may take them.
	legacyMarker = "redlock:node"
	legacyPrefix = "redlock:node:"

	releasedPrefix = "redlock:released:" // the channel of each key's releases
	leaderPrefix   = "redlock:leader:"   // the channel of each election's new leaders

	// readersHeld is what a lock key holds while readers of a read-write
	// lock hold it (see lua/rw_read.lua): no token has this form, so no
	// lock or writer is granted there.
	readersHeld = "=readers"
)

// The fields of a node marker, the hash that MarkerKey names (see
// lua/node.lua).
const (
	// MarkerStart is when the node's process started, or was promoted
	// from replica to master, in microseconds of the node's clock.
	MarkerStart = "start"
	// MarkerUntil is how long a lock granted in the slot may be held, in
	// microseconds of the node's clock: the latest end of any grant or
	// extension the marker records (see lua/node.lua).
	MarkerUntil = "until"
	// MarkerQuiet is when the quarantine that the last start imposed
	// ends, in microseconds of the node's clock: the MarkerUntil that the
	// marker recorded before the start.
	MarkerQuiet = "quiet"
	// MarkerReplID is the replication ID the marker last saw.
	MarkerReplID = "replid"
	// MarkerFormat is the version of the data on the node, Format.
	MarkerFormat = "v"
	// MarkerFence is the slot's fence counter: the largest fence the
	// node has drawn or a release has raised it to.
	MarkerFence = "fence"
)

// Format is the version of the data that this client keeps on the nodes:
// the names and values of its records. A node serves clients of one format
// only; a client refuses, with a FORMAT error reply, to use a node that
// holds data of another (see lua/node.lua).
const (
	Format = 1
)

// MarkerKey returns the name of the hash in which a node records, for the
// locks in key's cluster slot, when its process started, how long the
// locks granted may be held, its replication ID, the data's Format and
// the fence counter from which it draws the locks' fences. It hashes to
// the same slot as key.
func MarkerKey(key string) string {
	var b [len(markerPrefix) + 6]byte
	copy(b[:], markerPrefix+"{")
	putSlotTag(b[len(markerPrefix)+1:], Slot(key))
	b[len(b)-1] = '}'
	return string(b[:])
}

// PermitKey returns the name of the lock key that holds slot i of the
// semaphore on key. It hashes to the same cluster slot as key.
func PermitKey(key string, i int) string {
	return inSlot(permitPrefix+strconv.Itoa(i)+":", key)
}

// TermKey returns the name of the record in which the leader of the
// election on key names its term. It hashes to the same cluster slot as
// key.
func TermKey(key string) string {
	return inSlot(termPrefix, key)
}

// ReadersKey returns the name of the sorted set that holds the readers of
// the read-write lock on key, each token scored with its expiry on the
// node's clock (µs). It hashes to the same cluster slot as key.
func ReadersKey(key string) string {
	return inSlot(readersPrefix, key)
}

// IntentKey returns the name of the sorted set in which the writers that
// wait for the read-write lock on key record their intent, each scored
// with its expiry on the node's clock (µs); a live intent keeps new
// readers out. It hashes to the same cluster slot as key.
func IntentKey(key string) string {
	return inSlot(intentPrefix, key)
}

// SizeKey returns the name of the record in which the nodes keep the
// number of slots of the semaphore on key while any of its permits is
// held. It hashes to the same cluster slot as key.
func SizeKey(key string) string {
	return inSlot(sizePrefix, key)
}

// ReleasedChannel returns the channel on which the release of key is
// announced, so that waiters wake.
func ReleasedChannel(key string) string { return releasedPrefix + key }

// LeaderChannel returns the channel on which a new leader of the election
// on key is announced.
func LeaderChannel(key string) string { return leaderPrefix + key }

// Reserved reports whether key names one of the client's own records,
// which no lock may take.
func Reserved(key string) bool {
	return key == legacyMarker || strings.HasPrefix(key, markerPrefix) || strings.HasPrefix(key, legacyPrefix) || strings.HasPrefix(key, fencePrefix) ||
		strings.HasPrefix(key, permitPrefix) || strings.HasPrefix(key, termPrefix) || strings.HasPrefix(key, sizePrefix) ||
		strings.HasPrefix(key, readersPrefix) || strings.HasPrefix(key, intentPrefix)
}

// TokenLen is the length of a token: 24 random bytes in URL-safe base64.
const TokenLen = 32

// A lock key's value is the acquisition's token, a space and the owner's
// label; Value returns it, and Token and Owner take it apart.
func Value(token, owner string) string { return token + " " + owner }

// Token returns the token in a lock key's value.
func Token(value string) string {
	token, _, _ := strings.Cut(value, " ")
	return token
}

// Owner returns the owner label in a lock key's value.
func Owner(value string) string {
	_, owner, _ := strings.Cut(value, " ")
	return owner
}

// ValidToken reports whether token has the form of a token: TokenLen
// characters of URL-safe base64.
func ValidToken(token string) bool {
	if len(token) != TokenLen {
		return false
	}
	for i := 0; i < len(token); i++ {
		c := token[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// MaxFence bounds the fences a hand-over may carry: fence + 1 must be a
// whole number that a Lua number (a double) holds exactly.
const MaxFence = 1<<53 - 2

// Handover returns what a hold's holder hands over for Adopt: its token, a
// dot and its fence in decimal. The dot is not in URL-safe base64, so the
// whole is one shell word.
func Handover(token string, fence int64) string {
	return token + "." + strconv.FormatInt(fence, 10)
}

// HandoverToken returns the token of a Handover, as the nodes keep it.
func HandoverToken(h string) string {
	token, _, _ := strings.Cut(h, ".")
	return token
}

// ParseHandover takes a Handover apart. It reports false for anything
// else: a token that is not ValidToken, or a fence that is not a decimal
// in [1, MaxFence] written without sign or leading zeros.
func ParseHandover(h string) (token string, fence int64, ok bool) {
	token, digits, found := strings.Cut(h, ".")
	if !found || !ValidToken(token) || digits == "" || digits[0] == '0' || len(digits) > 16 {
		return "", 0, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return "", 0, false
		}
	}
	fence, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || fence > MaxFence {
		return "", 0, false
	}
	return token, fence, true
}

// TokenID returns the ID of the token in a lock key's value, which is the
// token, a space and the owner's label: the first 12 hex digits of the
// token's SHA-1, as holder in lua/holder.lua computes it. It names an
// acquisition without giving away the token, which lets its bearer release
// the lock.
func TokenID(value string) string {
	sum := sha1.Sum([]byte(Token(value)))
	return hex.EncodeToString(sum[:6])
}

// inSlot returns prefix, which has no braces, followed by "=" and key if
// key has a hash tag of its own, or else by the tag of key's slot in
// braces and key: a name that hashes to key's slot, and that no other key
// gets for the same prefix. It is one concatenation, one allocation.
func inSlot(prefix, key string) string {
	if _, ok := hashTag(key); ok {
		return prefix + "=" + key
	}
	return prefix + "{" + slotTag(Slot(key)) + "}" + key
}

// hashTag returns the part of key that Redis Cluster hashes when it is not
// the whole key.
func hashTag(key string) (string, bool) {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return "", false
	}
	n := strings.IndexByte(key[open+1:], '}')
	if n <= 0 {
		return "", false
	}
	return key[open+1 : open+1+n], true
}

// Slot returns the Redis Cluster hash slot of key.
func Slot(key string) uint16 {
	if tag, ok := hashTag(key); ok {
		key = tag
	}
	return crc16(key) & (Slots - 1)
}

// Slots is the number of hash slots of a Redis Cluster.
const Slots = 16384

// crc16 is the CRC16 that Redis Cluster uses: CCITT polynomial 0x1021,
// initial value 0, no reflection (XMODEM).
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// A CRC with initial value 0 is linear over GF(2) for messages of one
// length: crc(a ^ b) = crc(a) ^ crc(b). slotTag uses this to find, for any
// slot, four bytes in 0x40–0x4F ("@" to "O", no braces) that hash to it:
// the low nibbles of the four bytes are 16 free bits, and the CRC maps them
// to the 16 bits of the result one to one. tagBase is the CRC of "@@@@"
// and tagInverse[b] the nibbles that flip bit b of the CRC alone.
var tagBase, tagInverse = tagSolver()

// slotTag returns the four-byte tag of a slot.
func slotTag(slot uint16) string {
	var t [4]byte
	putSlotTag(t[:], slot)
	return string(t[:])
}

// putSlotTag writes the four-byte tag of slot into t.
func putSlotTag(t []byte, slot uint16) {
	var nibbles uint16
	need := slot ^ tagBase // the wanted CRC has its top two bits zero
	for b := range 16 {
		if need&(1<<b) != 0 {
			nibbles ^= tagInverse[b]
		}
	}
	for i := range 4 {
		t[i] = '@' | byte(nibbles>>(4*i))&0xF
	}
}

// tagSolver inverts the map from the tag's nibbles to its CRC by Gaussian
// elimination. The map is invertible (TestSlotTag checks every slot); if it
// were not, some slot would get a wrong tag and the test would say so.
func tagSolver() (base uint16, inverse [16]uint16) {
	const zero = "@@@@"
	base = crc16(zero)
	// rows[i]: the CRC change (low 16 bits) and, above them, the nibble
	// bits that cause it.
	var rows [16]uint32
	for i := range rows {
		b := []byte(zero)
		b[i/4] ^= 1 << (i % 4)
		rows[i] = uint32(crc16(string(b))^base) | 1<<(16+i)
	}
	for col := range 16 {
		p := col
		for p < 16 && rows[p]&(1<<col) == 0 {
			p++
		}
		if p == 16 {
			continue
		}
		rows[col], rows[p] = rows[p], rows[col]
		for i := range rows {
			if i != col && rows[i]&(1<<col) != 0 {
				rows[i] ^= rows[col]
			}
		}
	}
	for b := range inverse {
		inverse[b] = uint16(rows[b] >> 16)
	}
	return base, inverse
}
