package redlock_test

import (
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/redlock/driver"
	"github.com/quorumlock/redlock/internal/wire"
)

// The scripts of a read-write lock and of Adopt on a memoryNode, for the
// Examples only, with the replies of the Lua scripts of the same names
// (see wire/lua). The readers and the intents of a key are kept in maps of
// token (or intent ID) to expiry; the fence counter is the lock's.

// memoryRWArity holds the numbers of keys and arguments of each script.
var memoryRWArity = map[string][2]int{
	"rw_read": {4, 3}, "rw_write": {4, 5}, "rw_release": {3, 2}, "rw_drop": {1, 2}, "adopt": {3 + wire.MaxPermits, 3},
}

// evalRW runs the script name, one of those of memoryRWArity. n.mu must
// be held.
func (n *memoryNode) evalRW(now time.Time, name string, keys, args []string) (any, error) {
	arity := memoryRWArity[name]
	if len(keys) != arity[0] || len(args) != arity[1] {
		return nil, &driver.ReplyError{Msg: "ERR memoryNode cannot run " + name + " with these keys and arguments"}
	}
	if n.sets == nil {
		n.sets = make(map[string]map[string]time.Time)
	}
	token := args[0]
	num := func(i int) int64 { v, _ := strconv.ParseInt(args[i], 10, 64); return v }
	switch name {
	case "rw_read":
		readers, intents := n.live(now, keys[1]), n.live(now, keys[2])
		age := max(now.Sub(n.started).Milliseconds(), 0)
		n.maxTTL = max(n.maxTTL, num(1))
		if _, ok := readers[token]; ok {
			c, _ := n.counter(now, keys[3])
			return []any{int64(1), c, age, n.maxTTL}, nil
		}
		if held, ok := n.get(now, keys[0]); ok {
			return []any{int64(0), held.expires.Sub(now).Milliseconds(), age, n.maxTTL}, nil
		}
		if len(intents) > 0 {
			return []any{int64(0), int64(1), age, n.maxTTL}, nil
		}
		readers[token] = now.Add(time.Duration(num(1)) * time.Millisecond)
		fence := now.UnixMicro()
		if old, ok := n.counter(now, keys[3]); ok && old >= fence {
			fence = old
		} else {
			n.set(now, keys[3], strconv.FormatInt(fence, 10), counterTTL)
		}
		return []any{int64(1), fence, age, n.maxTTL}, nil
	case "rw_write":
		readers, intents := n.live(now, keys[1]), n.live(now, keys[2])
		if len(readers) > 0 {
			intents[args[3]] = now.Add(time.Duration(num(4)) * time.Millisecond)
			age := max(now.Sub(n.started).Milliseconds(), 0)
			return []any{int64(0), int64(1), age, max(n.maxTTL, num(1))}, nil
		}
		r := n.acquire(now, []string{keys[0], keys[3]}, token, num(1), 0)
		if r[0] == int64(1) {
			delete(intents, args[3])
		} else {
			intents[args[3]] = now.Add(time.Duration(num(4)) * time.Millisecond)
		}
		return r, nil
	case "rw_release":
		readers, status := n.live(now, keys[0]), int64(0)
		if _, ok := readers[token]; ok {
			delete(readers, token)
			status = 1
		}
		if c, ok := n.counter(now, keys[2]); !ok || c < num(1) {
			n.set(now, keys[2], args[1], counterTTL)
		}
		return []any{status, int64(0)}, nil
	case "rw_drop":
		intents, status := n.live(now, keys[0]), int64(0)
		if _, ok := intents[token]; ok {
			delete(intents, token)
			status = 1
		}
		return []any{status, int64(0)}, nil
	}
	// adopt: the lock key, or the readers; the Examples hold no permits.
	// The token holds where a value starts with it and a space. The
	// counter is reported raised above the hold's fence, as adopt.lua
	// raises it (the Examples print no fence).
	held, _ := strconv.ParseInt(args[2], 10, 64)
	c, _ := n.counter(now, keys[2])
	c = max(c, held+1)
	if held, ok := n.get(now, keys[0]); ok {
		if strings.HasPrefix(held.s, token+" ") {
			return []any{int64(1), int64(0), int64(0), held.expires.Sub(now).Milliseconds(), c, held.s}, nil
		}
		return []any{int64(-1), int64(0), int64(0), held.expires.Sub(now).Milliseconds(), int64(0)}, nil
	}
	for v, exp := range n.live(now, keys[1]) {
		if strings.HasPrefix(v, token+" ") {
			return []any{int64(1), int64(1), int64(0), exp.Sub(now).Milliseconds(), c, v}, nil
		}
	}
	return []any{int64(0), int64(0), int64(0), int64(0), int64(0)}, nil
}

// live returns the set named key, without its members whose expiry has
// passed.
func (n *memoryNode) live(now time.Time, key string) map[string]time.Time {
	s := n.sets[key]
	if s == nil {
		s = make(map[string]time.Time)
		n.sets[key] = s
	}
	for m, exp := range s {
		if !now.Before(exp) {
			delete(s, m)
		}
	}
	return s
}
