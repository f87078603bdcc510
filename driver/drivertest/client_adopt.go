package drivertest

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/clientx"
	"github.com/quorumlock/redlock/internal/wire"
)

// testAdopt: Client.Adopt takes over a hold by its token.
func (s *suite) testAdopt(t *testing.T) {
	t.Run("Lock", func(t *testing.T) { s.testAdoptKind(t, "lock") })
	t.Run("Writer", func(t *testing.T) { s.testAdoptKind(t, "writer") })
	t.Run("Reader", func(t *testing.T) { s.testAdoptKind(t, "reader") })
	t.Run("Permit", func(t *testing.T) { s.testAdoptKind(t, "permit") })
	t.Run("WrongToken", s.testAdoptWrongToken)
	t.Run("Invalid", s.testAdoptInvalid)
}

// testAdoptKind: a hold of the given kind, on every node, is adopted by
// another client with its token, with the same fence and a validity no
// later than the holder's; the adopter extends it and releases it, and
// the hold is gone from every node.
func (s *suite) testAdoptKind(t *testing.T, kind string) {
	cl := startCluster(t, 3, false)
	holder := s.client(t, cl.urls(), nil)
	adopter := s.client(t, cl.urls(), nil)
	ctx, key := ctxT(t), keyFor(t)
	const ttl = 10 * time.Second
	var h *redlock.Lock
	marker := wire.MarkerKey(key) // the slot's fence counter: a permit's slot key shares key's slot
	gone := func() { cl.awaitNoKey(t, key, 5*time.Second) }
	switch kind {
	case "lock":
		h = lockOnAll(t, ctx, holder, key, ttl, cl.servers)
	case "writer":
		rw := holder.RWLock(key)
		h = onAll(t, ctx, cl.servers, ttl/4,
			func() (*redlock.Lock, error) { return rw.TryLock(ctx, ttl) },
			func(l *redlock.Lock) []string { return l.Keys() })
	case "reader":
		h = cl.readerOnAll(t, ctx, holder.RWLock(key), ttl)
		gone = func() { cl.awaitReaderGone(t, key, h.Token()) }
	case "permit":
		p := cl.permitOnAll(t, ctx, holder.Semaphore(key, 3), ttl)
		h = p.Lock
		slotKey := wire.PermitKey(key, p.Slot)
		gone = func() { cl.awaitNoKey(t, slotKey, 5*time.Second) }
	}
	a, err := adopter.Adopt(ctx, key, h.Token())
	if err != nil {
		t.Fatalf("Adopt: %v", err)
	}
	if nodeToken(a.Token()) != nodeToken(h.Token()) || a.ID() != h.ID() || a.Key() != key {
		t.Errorf("adopted %q %q, want the holder's token on %q", a.Key(), a.ID(), key)
	}
	// The fence is the holder's + 1, carried by the token, and every
	// holding node's counter is at least that: the next owner's is above.
	if a.Fence() != h.Fence()+1 {
		t.Errorf("adopted fence %d; the holder's is %d", a.Fence(), h.Fence())
	}
	for i, srv := range cl.servers {
		v, _ := srv.MustDo(t, "HGET", marker, wire.MarkerFence).(string)
		if n, _ := strconv.ParseInt(v, 10, 64); n < a.Fence() {
			t.Errorf("node %d's counter %d is below the adopted fence %d", i, n, a.Fence())
		}
	}
	if !valid(a) || a.Until().After(time.Now().Add(ttl)) {
		t.Errorf("adopted validity until %v (valid %v), beyond a TTL from now", a.Until(), valid(a))
	}
	if err := a.Extend(ctx, 2*ttl); err != nil {
		t.Fatalf("the adopter's Extend: %v", err)
	}
	if !a.Until().After(h.Until()) {
		t.Errorf("the extension did not move the deadline past the original %v", h.Until())
	}
	if err := a.Release(ctx); err != nil {
		t.Fatalf("the adopter's Release: %v", err)
	}
	gone()
	// The holder's own handle finds it gone.
	if err := h.Extend(ctx, ttl); !errors.Is(err, redlock.ErrLockLost) {
		t.Errorf("the first holder's Extend after the adopter's Release: %v, want ErrLockLost", err)
	}
	// A released hold cannot be adopted: it is gone.
	_, err = adopter.Adopt(ctx, key, h.Token())
	mustOpError(t, err, redlock.ErrLockLost)
}

// testAdoptWrongToken: a token that does not hold is refused at once, in
// one round, and no key changes.
func (s *suite) testAdoptWrongToken(t *testing.T) {
	cl := startCluster(t, 3, false)
	c := s.client(t, cl.urls(), nil)
	ctx, key := ctxT(t), keyFor(t)
	// Nothing holds: the lock is gone.
	_, err := c.Adopt(ctx, key, strings.Repeat("n", 32)+".1")
	if oe := mustOpError(t, err, redlock.ErrLockLost); oe.Rounds != 1 || len(oe.Nodes) != 3 {
		t.Errorf("Adopt of a free key: %d rounds, %d nodes", oe.Rounds, len(oe.Nodes))
	}
	if errors.Is(err, redlock.ErrTaken) {
		t.Errorf("Adopt of a free key says taken: %v", err)
	}
	for _, k := range []string{key, wire.ReadersKey(key), wire.MarkerKey(key)} {
		cl.expectNoKey(t, k)
	}

	h := lockOnAll(t, ctx, c, key, 10*time.Second, cl.servers)
	dump := func() []string {
		var out []string
		for _, srv := range cl.servers {
			for _, k := range []string{key, wire.MarkerKey(key), wire.ReadersKey(key)} {
				v, _ := srv.MustDo(t, "DUMP", k).(string)
				out = append(out, v)
			}
		}
		return out
	}
	before := dump()
	for _, tok := range []string{strings.Repeat("x", 32) + ".1", nodeToken(h.Token())[1:] + "x." + strconv.FormatInt(h.Fence(), 10)} {
		start := time.Now()
		_, err := c.Adopt(ctx, key, tok)
		oe := mustOpError(t, err, redlock.ErrTaken)
		if oe.Rounds != 1 || time.Since(start) > 5*time.Second {
			t.Errorf("Adopt of a wrong token: %d rounds", oe.Rounds)
		}
	}
	after := dump()
	for i := range before {
		if before[i] != after[i] {
			t.Errorf("record %d changed under Adopt", i)
		}
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// A reader's token does not adopt a writer's hold, nor the reverse.
	rw := c.RWLock(key)
	cl.awaitNoKey(t, key, 5*time.Second)
	r := cl.readerOnAll(t, ctx, rw, 10*time.Second)
	a, err := c.Adopt(ctx, key, r.Token())
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	cl.awaitReaderGone(t, key, r.Token())
	if _, err := c.Adopt(ctx, key, r.Token()); !errors.Is(err, redlock.ErrLockLost) {
		t.Errorf("Adopt of a released reader: %v, want ErrLockLost", err)
	}
}

// testAdoptInvalid: a bad key or token is refused before any node is
// asked: here, with the only node down.
func (s *suite) testAdoptInvalid(t *testing.T) {
	cl := startCluster(t, 1, false)
	c := s.client(t, cl.urls(), nil)
	if err := cl.servers[0].Kill(); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	cases := []struct{ key, token string }{
		{"", "tok"},
		{wire.MarkerKey("x"), "tok"},
		{wire.ReadersKey("x"), "tok"},
		{wire.IntentKey("x"), "tok"},
		{"k", ""},
		{"k", strings.Repeat("t", clientx.Limits.TokenLen+1)},
	}
	for _, tc := range cases {
		start := time.Now()
		_, err := c.Adopt(ctx, tc.key, tc.token)
		if !errors.Is(err, redlock.ErrInvalid) {
			t.Errorf("Adopt(%q, %d bytes): %v, want ErrInvalid", tc.key, len(tc.token), err)
		}
		var oe *redlock.OpError
		if errors.As(err, &oe) && len(oe.Nodes) > 0 || time.Since(start) > time.Second {
			t.Errorf("Adopt(%q, %d bytes) asked the nodes: %v", tc.key, len(tc.token), err)
		}
	}
}
