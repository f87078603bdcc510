package faulttest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/wire"
)

// This file records read-write locks (Client.RWLock) and the hand-over
// of a hold (Client.Adopt). A reader's and a writer's holds are
// acquisitions of the lock's key of kinds OpRead and OpWrite; an
// adoption is an acquisition that continues the adopted one (Op.Adopts).

// RLock waits for a reader's hold with RWLock.RLock and records the call.
func (cl *Client) RLock(ctx context.Context, key string, ttl time.Duration) (*Held, error) {
	return cl.acquire(acquisition{kind: OpRead, key: key, ttl: ttl}, func(hl *Held) (err error) {
		hl.L, err = cl.RL.RWLock(key).RLock(ctx, ttl)
		return err
	})
}

// TryRLock makes one attempt at a reader's hold with RWLock.TryRLock and
// records it.
func (cl *Client) TryRLock(ctx context.Context, key string, ttl time.Duration) (*Held, error) {
	return cl.acquire(acquisition{kind: OpRead, key: key, ttl: ttl}, func(hl *Held) (err error) {
		hl.L, err = cl.RL.RWLock(key).TryRLock(ctx, ttl)
		return err
	})
}

// WLock waits for the writer's hold with RWLock.Lock and records the call.
func (cl *Client) WLock(ctx context.Context, key string, ttl time.Duration) (*Held, error) {
	return cl.acquire(acquisition{kind: OpWrite, key: key, ttl: ttl}, func(hl *Held) (err error) {
		hl.L, err = cl.RL.RWLock(key).Lock(ctx, ttl)
		return err
	})
}

// TryWLock makes one attempt at the writer's hold with RWLock.TryLock and
// records it.
func (cl *Client) TryWLock(ctx context.Context, key string, ttl time.Duration) (*Held, error) {
	return cl.acquire(acquisition{kind: OpWrite, key: key, ttl: ttl}, func(hl *Held) (err error) {
		hl.L, err = cl.RL.RWLock(key).TryLock(ctx, ttl)
		return err
	})
}

// HandOver records that hl's holder hands its token to another client
// and stops acting on hl: its claim ends now (Op.Handover). It returns the
// token. The holder must not extend or release hl afterwards; the adopter
// does (Client.Adopt).
func (hl *Held) HandOver() string {
	h := hl.cl.c.H
	h.Mu.Lock()
	hl.Op.Handover = h.Now()
	token := wire.Handover(hl.Op.Token, hl.Op.Fence)
	h.Mu.Unlock()
	hl.cl.mu.Lock()
	if hl.cl.holding[hl.name] == hl {
		delete(hl.cl.holding, hl.name)
	}
	hl.cl.mu.Unlock()
	return token
}

// Adopt takes over from's hold, whose holder handed over token
// (Held.HandOver), with Client.Adopt, and records the call as an
// acquisition that continues from's (Op.Adopts): of its kind and keys,
// with its token. A refused adoption is recorded as a failed call, which
// made no round.
func (cl *Client) Adopt(ctx context.Context, from *Held, token string) (*Held, error) {
	cl.call.Lock()
	defer cl.call.Unlock()
	h := cl.c.H
	src := from.snapshot()
	op := &Op{ID: h.NextID(), Client: cl.Name, Kind: src.Kind, Key: src.Key, Keys: src.Keys, Permits: src.Permits, Slot: src.Slot,
		TTLms: src.TTLms, Adopts: src.ID, Start: h.Now()}
	l, err := cl.RL.Adopt(ctx, from.name, token)
	op.Return = h.Now()
	defer h.AddOp(op)
	if err != nil {
		op.Err, op.Reason = err.Error(), reason(err)
		var oe *redlock.OpError
		if errors.As(err, &oe) {
			for _, n := range oe.Nodes {
				op.Outcomes = append(op.Outcomes, n.Outcome.String())
			}
		}
		return nil, err
	}
	hl := &Held{L: l, Op: op, cl: cl, name: from.name}
	h.Mu.Lock()
	op.OK, op.Token, op.Holder, op.Fence = true, wire.HandoverToken(l.Token()), l.ID(), l.Fence()
	// The validity is measured from before the adopt round, which began
	// after the call did.
	op.RoundStart = op.Start
	op.Until = cl.claim(op.Start, l.Until())
	h.Mu.Unlock()
	hl.Probe()
	cl.mu.Lock()
	cl.holding[hl.name] = hl
	cl.mu.Unlock()
	return hl, nil
}

// noteRW notes the records of the read-write lock on key besides the key
// itself, for Quiesce: its readers, which live ttl, and its writers'
// intents, which live intentTTL.
func (c *Cluster) noteRW(key string, ttl, intentTTL time.Duration) {
	c.noteLock(wire.ReadersKey(key), ttl)
	c.noteLock(wire.IntentKey(key), intentTTL)
}

// readersProbeScript reads the node's clock, then for each token in ARGV
// whether it is a live reader in KEYS[1], and its expiry (µs on the
// node's clock), or false twice.
const readersProbeScript = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local out = {tonumber(t[1]), tonumber(t[2])}
local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. string.format('%d', now), '+inf', 'WITHSCORES')
for _, tok in ipairs(ARGV) do
	-- A reader's member is its token, a space and its owner's label.
	local s
	for i = 1, #live, 2 do
		if string.sub(live[i], 1, #tok + 1) == tok .. ' ' then
			s = tonumber(live[i + 1])
		end
	end
	if s and s > now then
		out[#out + 1] = tok
		out[#out + 1] = math.floor(s)
	else
		out[#out + 1] = false
		out[#out + 1] = false
	end
end
return out`

// SampleReaders reads, for each of tokens, whether it is a live reader of
// the read-write lock on key, on every node at once over the admin
// connections: one sample per token, of the key's readers
// (wire.ReadersKey), each node read in one script. A node's Value is the
// token while it is a live reader, and Expires when it stops being one.
func (c *Cluster) SampleReaders(key string, tokens []string) []Sample {
	if len(tokens) == 0 {
		return nil
	}
	rk := wire.ReadersKey(key)
	out := make([]Sample, len(tokens))
	for j := range tokens {
		out[j] = Sample{Key: rk, Nodes: make([]NodeSample, c.N())}
	}
	var wg sync.WaitGroup
	for i := range c.n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j, ns := range c.sampleReaders(i, rk, tokens) {
				out[j].Nodes[i] = ns
			}
		}()
	}
	wg.Wait()
	return out
}

func (c *Cluster) sampleReaders(i int, rk string, tokens []string) []NodeSample {
	out := make([]NodeSample, len(tokens))
	c.mu.Lock()
	srv, paused, down := c.servers[i], c.paused[i], c.down[i]
	c.mu.Unlock()
	var v any
	var err error
	switch {
	case srv == nil:
		err = errors.New("readers are not sampled on Redis Cluster nodes")
	case paused:
		err = errors.New("paused")
	case down:
		err = errors.New("down")
	default:
		v, err = srv.Do(append([]string{"EVAL", readersProbeScript, "1", rk}, tokens...)...)
	}
	at := c.H.Now()
	a, ok := v.([]any)
	if err == nil && (!ok || len(a) != 2+2*len(tokens)) {
		err = fmt.Errorf("readers probe answered %#v", v)
	}
	for j := range tokens {
		out[j] = NodeSample{Node: i, At: at}
		if err != nil {
			out[j].Err = err.Error()
			continue
		}
		out[j].Reached = true
		if tok, _ := a[2+2*j].(string); tok != "" {
			nowUs := atoi(a[0])*1_000_000 + atoi(a[1])
			out[j].Value = tok
			out[j].Expires = at + Mono(time.Duration(atoi(a[3+2*j])-nowUs)*time.Microsecond)
		}
	}
	return out
}

// Intents returns how many live writers' intents each node holds for the
// read-write lock on key, read over the admin connections; -1 for a node
// that is paused, down or did not answer.
func (c *Cluster) Intents(key string) []int {
	out := make([]int, c.N())
	for i := range c.n {
		out[i] = -1
		c.mu.Lock()
		srv, paused, down := c.servers[i], c.paused[i], c.down[i]
		c.mu.Unlock()
		if srv == nil || paused || down {
			continue
		}
		v, err := srv.Do("EVAL", `local t = redis.call('TIME')
return redis.call('ZCOUNT', KEYS[1], '(' .. (tonumber(t[1]) * 1000000 + tonumber(t[2])), '+inf')`, "1", wire.IntentKey(key))
		if err == nil {
			out[i] = int(atoi(v))
		}
	}
	return out
}

// DropIntents deletes the writers' intents of the read-write lock on key
// on every node that is up, over the admin connections, as an operator
// would by hand: no script of the library's does it without the writer's
// intent ID. It returns how many nodes had intents to delete.
func (c *Cluster) DropIntents(key string) int {
	n := 0
	for i := range c.n {
		c.mu.Lock()
		srv, paused, down := c.servers[i], c.paused[i], c.down[i]
		c.mu.Unlock()
		if srv == nil || paused || down {
			continue
		}
		if v, err := srv.Do("DEL", wire.IntentKey(key)); err == nil && atoi(v) > 0 {
			n++
		}
	}
	return n
}
