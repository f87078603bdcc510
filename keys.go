package redlock

import (
	mathrand "math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/redlock/driver"
)

// This file names the keys the client writes besides the lock keys. Every
// script call touches the lock key and some of these records, and a Redis
// Cluster node runs a script only if all its keys are in one hash slot
// (else CROSSSLOT). So each record is named to hash to the slot of the
// lock key it serves, whatever bytes that key holds.
//
// Redis hashes a key by its hash tag, the bytes between the first "{" and
// the first "}" after it, when there are any; else by the whole key. A lock
// key with a tag keeps its fence counter's name, "redlock:fence:" + key,
// which has the same tag. Any other key gets "redlock:fence:{T}" + key,
// where T is the slot's tag: four bytes from "@" to "O" whose CRC16 is the
// key's slot (see slotTag). The node's marker is one hash per slot,
// "redlock:node:{T}": at most 16384 of them, however many keys are locked.

const (
	// fencePrefix starts the name of each lock's fence counter.
	fencePrefix = "redlock:fence:"
	// markerPrefix starts the name of each slot's node marker.
	markerPrefix = "redlock:node:"
	// oldMarker is the one marker per node that versions before 0.3 wrote;
	// it stays reserved so that no lock can clobber it.
	oldMarker = "redlock:node"
	// permitPrefix starts the name of each slot of a semaphore.
	permitPrefix = "redlock:permit:"
	// termPrefix starts the name of each election's term record.
	termPrefix = "redlock:term:"
)

// FenceKey returns the name of the counter from which a node draws the
// fences of the lock on key. It hashes to the same cluster slot as key.
func FenceKey(key string) string {
	return fencePrefix + slotSafe(key)
}

// MarkerKey returns the name of the hash in which a node records when its
// process started, the largest TTL used on it and its replication ID, for
// the locks in key's cluster slot (see the package documentation on
// restarts). It hashes to the same slot as key.
func MarkerKey(key string) string {
	return markerPrefix + "{" + slotTag(keySlot(key)) + "}"
}

// PermitKey returns the name of the lock key that holds slot i of the
// semaphore on key (see Semaphore). It hashes to the same cluster slot as
// key.
func PermitKey(key string, i int) string {
	return permitPrefix + strconv.Itoa(i) + ":" + slotSafe(key)
}

// TermKey returns the name of the record in which the leader of the
// election on key names its term (see Election). It hashes to the same
// cluster slot as key.
func TermKey(key string) string {
	return termPrefix + slotSafe(key)
}

// slotSafe returns key, or key behind the tag of its slot if it has no
// tag of its own: appended to a prefix without braces, it hashes to key's
// slot.
func slotSafe(key string) string {
	if hasTag(key) {
		return key
	}
	return "{" + slotTag(keySlot(key)) + "}" + key
}

// reserved reports whether key names one of the client's own records.
func reserved(key string) bool {
	return key == oldMarker || strings.HasPrefix(key, markerPrefix) || strings.HasPrefix(key, fencePrefix) ||
		strings.HasPrefix(key, permitPrefix) || strings.HasPrefix(key, termPrefix)
}

// hasTag reports whether key has a hash tag: a "{" followed, later, by a
// "}" with at least one byte between them.
func hasTag(key string) bool {
	_, ok := hashTag(key)
	return ok
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

// keySlot returns the Redis Cluster hash slot of key.
func keySlot(key string) uint16 {
	if tag, ok := hashTag(key); ok {
		key = tag
	}
	return crc16(key) & (slots - 1)
}

const slots = 16384

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
	var nibbles uint16
	need := slot ^ tagBase // the wanted CRC has its top two bits zero
	for b := range 16 {
		if need&(1<<b) != 0 {
			nibbles ^= tagInverse[b]
		}
	}
	var t [4]byte
	for i := range t {
		t[i] = '@' | byte(nibbles>>(4*i))&0xF
	}
	return string(t[:])
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

// A keyset is what a lock is on: one key, several keys taken together,
// or one of the slots of a semaphore.
type keyset struct {
	// name is the key; for several keys, them joined by commas; for a
	// semaphore, its key. It names the lock in errors, events and the
	// Client's queue of waiters.
	name string
	// all holds several keys, sorted and distinct; nil for one key.
	all []string
	// permits is a semaphore's number of slots, each a lock on
	// PermitKey(name, i); 0 for a lock. slot is the slot a permit holds,
	// once a round has granted one; -1 before.
	permits, slot int
	// owner is the label the lock's tokens carry, if not the Client's
	// Options.Owner: an election candidate's value.
	owner string
}

// keys returns the lock's keys: the one key, or several; a semaphore's
// key.
func (k keyset) keys() []string {
	if k.all == nil {
		return []string{k.name}
	}
	return k.all
}

// channels returns the channels on which the releases that wake the
// lock's waiters are announced: one per key; a semaphore's releases of
// all its slots are announced on the channel of its key.
func (k keyset) channels() []string {
	keys := k.keys()
	out := make([]string, len(keys))
	for i, key := range keys {
		out[i] = releasedPrefix + key
	}
	return out
}

// acquireCall returns the script, keys and arguments of an acquisition.
// A semaphore's nodes look at its slots from a random one on.
func (k keyset) acquireCall(token string, ttl, quarantine, fenceTTL time.Duration) (*driver.Script, []string, []string) {
	args := []string{token, msString(ttl), msString(quarantine), msString(fenceTTL)}
	switch {
	case k.permits > 0:
		keys := append(k.slots(), MarkerKey(k.name))
		return acquirePermitScript, keys, append(args, strconv.Itoa(k.permits), strconv.Itoa(mathrand.IntN(k.permits)))
	case k.all == nil:
		return acquireScript, []string{k.name, FenceKey(k.name), MarkerKey(k.name)}, args
	}
	return acquireAllScript, k.with(true, true), append(args, strconv.Itoa(len(k.all)))
}

// releaseCall returns the script, keys and arguments of a release. A
// semaphore's release looks at every slot, since a node may have granted
// a round another slot than the one a quorum agreed on.
func (k keyset) releaseCall(token string, fence int64, fenceTTL time.Duration) (*driver.Script, []string, []string) {
	args := []string{token, strconv.FormatInt(fence, 10), msString(fenceTTL)}
	switch {
	case k.permits > 0:
		return releasePermitScript, k.slots(), append(args, strconv.Itoa(k.permits), strconv.Itoa(k.slot), k.name)
	case k.all == nil:
		return releaseScript, []string{k.name, FenceKey(k.name)}, args
	}
	return releaseAllScript, k.with(true, false), append(args, strconv.Itoa(len(k.all)))
}

// extendCall returns the script, keys and arguments of an extension. A
// permit is extended as a lock on its slot's key.
func (k keyset) extendCall(token string, ttl time.Duration) (*driver.Script, []string, []string) {
	args := []string{token, msString(ttl)}
	switch {
	case k.permits > 0:
		return extendScript, []string{PermitKey(k.name, k.slot), MarkerKey(k.name)}, args
	case k.all == nil:
		return extendScript, []string{k.name, MarkerKey(k.name)}, args
	}
	return extendAllScript, k.with(false, true), append(args, strconv.Itoa(len(k.all)))
}

// slots returns a semaphore's slot keys, then their fence counters.
func (k keyset) slots() []string {
	out := make([]string, 2*k.permits, 2*k.permits+1)
	for i := range k.permits {
		out[i] = PermitKey(k.name, i)
		out[k.permits+i] = FenceKey(out[i])
	}
	return out
}

// with returns the keys, then their fence counters if fences, then the
// markers of their slots, each slot once, if markers.
func (k keyset) with(fences, markers bool) []string {
	out := append([]string(nil), k.all...)
	if fences {
		for _, key := range k.all {
			out = append(out, FenceKey(key))
		}
	}
	if markers {
		seen := make(map[string]bool, 1)
		for _, key := range k.all {
			if m := MarkerKey(key); !seen[m] {
				seen[m] = true
				out = append(out, m)
			}
		}
	}
	return out
}

// newKeyset checks keys for a lock on all of them and returns their
// keyset: sorted, without repeats.
func newKeyset(keys []string) (keyset, error) {
	if len(keys) == 0 {
		return keyset{}, invalidf("no keys")
	}
	if len(keys) > MaxKeys {
		return keyset{}, invalidf("%d keys; the most a lock can take is %d", len(keys), MaxKeys)
	}
	all := slices.Clone(keys)
	slices.Sort(all)
	all = slices.Compact(all)
	for _, key := range all {
		if err := checkKey(key); err != nil {
			return keyset{}, err
		}
	}
	if len(all) == 1 {
		return keyset{name: all[0]}, nil
	}
	return keyset{name: strings.Join(all, ","), all: all}, nil
}

// MaxKeys is the most keys that LockAll takes at once.
const MaxKeys = 64
