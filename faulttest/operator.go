package faulttest

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/quorumlock/redlock/admin"
)

// This file holds what an operator does to a lock whose owner seems gone:
// remove it with Client.ForceRelease, or, as a canary does in its place,
// delete its key by hand. Both are recorded in the history as a Removal.

// ForceRelease removes the lock on key with Client.ForceRelease, as an
// operator would with the client cl, and records the removal with the
// acquisitions whose keys it deleted, as the nodes named them.
func (cl *Client) ForceRelease(ctx context.Context, key string) error {
	h := cl.c.H
	r := Removal{Key: key, By: cl.Name, How: ByForceRelease, Call: h.Now()}
	views, err := admin.New(cl.RL).ForceRelease(ctx, key)
	r.Return = h.Now()
	r.OK = err == nil
	if err != nil {
		r.Err = err.Error()
	}
	for _, v := range views {
		if v.Err == nil && v.Held && !slices.Contains(r.Holders, v.Holder) {
			r.Holders = append(r.Holders, v.Holder)
		}
	}
	h.AddRemoval(r)
	return err
}

// delScript deletes a key and returns what it held.
const delScript = `local v = redis.call('GET', KEYS[1])
redis.call('DEL', KEYS[1])
return v`

// DeleteByHand deletes key on every node with DEL, over the test's admin
// connections, as an operator who does without ForceRelease would: the
// lock is gone, but no node's fence counter is raised. It records the
// removal under the operator's name by, confirmed if a quorum of nodes
// answered, and returns how many did.
func (c *Cluster) DeleteByHand(by, key string) int {
	h := c.H
	r := Removal{Key: key, By: by, How: ByDel, Call: h.Now()}
	values := make([]string, c.N())
	errs := make([]error, c.N())
	var wg sync.WaitGroup
	for i := range c.N() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var v any
			v, errs[i] = c.proc(i).Do("EVAL", delScript, "1", key)
			values[i], _ = v.(string)
		}()
	}
	wg.Wait()
	r.Return = h.Now()
	answered := 0
	var failed []string
	for i, err := range errs {
		if err != nil {
			failed = append(failed, fmt.Sprintf("node %d: %v", i, err))
			continue
		}
		answered++
		if values[i] != "" && !slices.Contains(r.Holders, holderID(values[i])) {
			r.Holders = append(r.Holders, holderID(values[i]))
		}
	}
	r.OK = answered >= h.Quorum
	r.Err = strings.Join(failed, "; ")
	h.AddRemoval(r)
	return answered
}

// holderID returns the ID of the acquisition whose token a lock key's
// value holds, as Lock.ID gives it: the first 12 hex digits of the SHA-1
// of the token, which is the value up to its first space (an owner's label
// follows it).
func holderID(value string) string {
	token, _, _ := strings.Cut(value, " ")
	sum := sha1.Sum([]byte(token))
	return hex.EncodeToString(sum[:6])
}
