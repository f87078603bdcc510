package redlock_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/driver"
)

// A memoryNode is a Node that keeps its keys in the memory of the test
// process, so that the Examples of this package run without redis-server.
// It exists for the Examples only: the tests of the algorithm itself run
// against real redis-server processes, whose expiry, scripting and
// failures no stand-in reproduces.
//
// A memoryNode runs the three scripts of a lock, "acquire", "release" and
// "extend", chosen by name, and answers with replies of the same shape as
// the Lua scripts of the same names give. It refuses every other script.
// It announces no releases (it is not a driver.Notifier), so a client
// that waits for one of its locks polls.
//
// A memoryNode reports that its process started a day before the node was
// made, longer ago than any lock of the Examples lives, so that the
// client's restart quarantine never holds its vote back.
type memoryNode struct {
	name    string
	started time.Time

	mu     sync.Mutex
	keys   map[string]memoryValue          // lock keys and fence counters
	maxTTL int64                           // the largest TTL asked for, in ms
	sets   map[string]map[string]time.Time // readers and intents (memnode_rw_test.go)
}

// A memoryValue is the value of one key and when it expires.
type memoryValue struct {
	s       string
	expires time.Time
}

// newMemoryNode returns an empty node with the given name, which must
// differ from the names of the other nodes of a Client.
func newMemoryNode(name string) *memoryNode {
	return &memoryNode{
		name:    name,
		started: time.Now().Add(-24 * time.Hour),
		keys:    make(map[string]memoryValue),
	}
}

// Name returns the name given to newMemoryNode.
func (n *memoryNode) Name() string { return n.name }

// memoryArity holds the numbers of keys and arguments of each script.
var memoryArity = map[string][2]int{"acquire": {2, 3}, "release": {2, 2}, "extend": {2, 2}}

// leanMarker stands for the marker a lean release does not send: its
// counter is raised there, where nothing reads it.
const leanMarker = "\x00lean"

// counterTTL is how long a memoryNode keeps a fence counter, in ms: as
// long as it runs, as a node keeps its markers.
const counterTTL = 1 << 40

// Eval runs the script with the given name. Another script, or keys or
// arguments that it does not take, give a *driver.ReplyError.
func (n *memoryNode) Eval(ctx context.Context, script *driver.Script, keys, args []string) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	name := script.Name()
	if name == "probe" {
		// The client's identification of its nodes: no run_id, as a
		// server without INFO, which is taken as a server of its own.
		n.mu.Lock()
		defer n.mu.Unlock()
		now := time.Now()
		return []any{now.Sub(n.started).Milliseconds(), n.maxTTL, now.UnixMilli(), ""}, nil
	}
	if _, rw := memoryRWArity[name]; rw {
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.evalRW(time.Now(), name, keys, args)
	}
	if name == "release" {
		// The clean-up of a failed round names its mode ("quiet",
		// "undo"): a memoryNode announces nothing anyway, and raises a
		// counter no further than the fence it is given. A lean release
		// sends the key without its marker: the counter stays as it is.
		if len(args) == 3 && (args[2] == "quiet" || args[2] == "undo") {
			args = args[:2]
		}
		if len(keys) == 1 {
			keys = []string{keys[0], leanMarker}
		}
	}
	arity, ok := memoryArity[name]
	if !ok || len(keys) != arity[0] || len(args) != arity[1] {
		return nil, &driver.ReplyError{Msg: "ERR memoryNode cannot run " + name + " with these keys and arguments"}
	}
	// In each script, every argument after the token is an integer.
	token, v := args[0], make([]int64, len(args)-1)
	for i, s := range args[1:] {
		var err error
		if v[i], err = strconv.ParseInt(s, 10, 64); err != nil {
			return nil, &driver.ReplyError{Msg: "ERR value is not an integer or out of range"}
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	now := time.Now()
	switch name {
	case "acquire":
		return n.acquire(now, keys, token, v[0], v[1]), nil
	case "release":
		return n.release(now, keys, token, v[0]), nil
	}
	return n.extend(now, keys, token, v[0]), nil
}

// acquire does what acquire.lua does. The keys are the lock key and the
// node marker, under which a memoryNode keeps the fence counter; it keeps
// one largest TTL for all keys. The durations are in ms. It returns {1, fence,
// age, maxttl} when the key now holds token, {0, pttl, age, maxttl} when
// another token holds it, and {-1, wait, age, maxttl} in quarantine.
func (n *memoryNode) acquire(now time.Time, keys []string, token string, ttl, quarantine int64) []any {
	n.maxTTL = max(n.maxTTL, ttl, quarantine)
	age := max(now.Sub(n.started).Milliseconds(), 0)
	if quarantine > 0 && age < n.maxTTL {
		return []any{int64(-1), n.maxTTL - age, age, n.maxTTL}
	}
	held, ok := n.get(now, keys[0])
	switch {
	case !ok:
		n.set(now, keys[0], token, ttl)
		// The fence is max(counter + 1, the node's clock in µs).
		fence := now.UnixMicro()
		if old, ok := n.counter(now, keys[1]); ok && old >= fence {
			fence = old + 1
		}
		n.set(now, keys[1], strconv.FormatInt(fence, 10), counterTTL)
		return []any{int64(1), fence, age, n.maxTTL}
	case held.s == token: // a retry of a grant that token already got
		fence, _ := n.counter(now, keys[1])
		return []any{int64(1), fence, age, n.maxTTL}
	}
	return []any{int64(0), held.expires.Sub(now).Milliseconds(), age, n.maxTTL}
}

// release does what release.lua does. The keys are the lock key and the
// node marker, with the fence counter. It returns {status, woke}: status 1 when the key held
// token and was deleted, 0 when it was absent, -1 when another token holds
// it; woke is always 0, as a memoryNode announces nothing. Whatever the
// key holds, the counter is raised to at least fence.
func (n *memoryNode) release(now time.Time, keys []string, token string, fence int64) []any {
	status := int64(0)
	if held, ok := n.get(now, keys[0]); ok && held.s == token {
		delete(n.keys, keys[0])
		status = 1
	} else if ok {
		status = -1
	}
	if c, ok := n.counter(now, keys[1]); !ok || c < fence {
		n.set(now, keys[1], strconv.FormatInt(fence, 10), counterTTL)
	}
	return []any{status, int64(0)}
}

// extend does what extend.lua does. The keys are the lock key and the node
// marker. It returns 1 when the key held token and now lives ttl ms more,
// 0 when it was absent, -1 when another token holds it. An absent key is
// never re-created.
func (n *memoryNode) extend(now time.Time, keys []string, token string, ttl int64) int64 {
	held, ok := n.get(now, keys[0])
	switch {
	case !ok:
		return 0
	case held.s != token:
		return -1
	}
	n.set(now, keys[0], token, ttl)
	n.maxTTL = max(n.maxTTL, ttl)
	return 1
}

// get returns the value of key, unless it is absent or has expired. An
// expired key is deleted when it is read.
func (n *memoryNode) get(now time.Time, key string) (memoryValue, bool) {
	v, ok := n.keys[key]
	if ok && !now.Before(v.expires) {
		delete(n.keys, key)
		return memoryValue{}, false
	}
	return v, ok
}

// set sets key to s for ttl ms.
func (n *memoryNode) set(now time.Time, key, s string, ttl int64) {
	n.keys[key] = memoryValue{s: s, expires: now.Add(time.Duration(ttl) * time.Millisecond)}
}

// counter returns the fence counter in key, if there is one.
func (n *memoryNode) counter(now time.Time, key string) (int64, bool) {
	v, ok := n.get(now, key)
	if !ok {
		return 0, false
	}
	c, err := strconv.ParseInt(v.s, 10, 64)
	return c, err == nil
}

// memoryNodes returns n in-memory nodes named redis-a:6379, redis-b:6379
// and so on.
func memoryNodes(n int) []redlock.Node {
	nodes := make([]redlock.Node, n)
	for i := range nodes {
		nodes[i] = newMemoryNode(fmt.Sprintf("redis-%c:6379", 'a'+i))
	}
	return nodes
}
