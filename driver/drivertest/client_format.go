package drivertest

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/admin"
	"github.com/quorumlock/redlock/internal/clientx"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/internal/wire"
	"github.com/quorumlock/redlock/observe"
)

// testFormat checks what the data on the nodes promises (issue 31, items
// 2, 4, 5, 6 and 8): tokens that are one shell word, records that no two
// keys share, readers that keep the mutex out, a semaphore's size kept
// beside its permits, and a long lock whose weight on the quarantine ends
// with it.
func (s *suite) testFormat(t *testing.T) {
	t.Run("TokenIsOneWord", s.testTokenOneWord)
	t.Run("RecordsOneToOne", s.testRecordsOneToOne)
	t.Run("ReadersExcludeMutex", s.testReadersExcludeMutex)
	t.Run("SemaphoreSize", s.testSemaphoreSize)
	t.Run("LongLockEffectEnds", s.testLongLockEnds)
	t.Run("FormatVersion", s.testFormatVersion)
	t.Run("HorizonCoversRestart", s.testHorizonCoversRestart)
	t.Run("LeanRelease", s.testLeanRelease)
}

// testFormatVersion: a client refuses nodes that hold the data of another
// format of the client's, with ErrRefused and a FORMAT reply that says
// so, rather than mixing its data with theirs; and leaves, where earlier
// clients kept their marker, a string on which their scripts fail.
func (s *suite) testFormatVersion(t *testing.T) {
	cl := startCluster(t, 3, false)
	c := s.client(t, cl.urls(), &redlock.Options{Tries: 1})
	ctx, key := ctxT(t), keyFor(t)
	marker := wire.MarkerKey(key)
	legacy := "redlock:node:" + marker[strings.IndexByte(marker, '{'):]
	l := lockOnAll(t, ctx, c, key, 10*time.Second, cl.servers)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, srv := range cl.servers {
		if v := srv.MustDo(t, "HGET", marker, wire.MarkerFormat); v != fmt.Sprint(wire.Format) {
			t.Errorf("%s: the marker's format is %#v, want %d", srv.Addr(), v, wire.Format)
		}
		// The marker of an earlier client is now a string: its HMGET
		// fails with WRONGTYPE.
		if _, err := srv.Do("HMGET", legacy, "start", "maxttl"); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
			t.Errorf("%s: an earlier client's read of its marker %q: %v, want WRONGTYPE", srv.Addr(), legacy, err)
		}
	}

	// A node whose marker says another format, and one that holds an
	// earlier client's marker: a majority refuses, so the lock is refused.
	other := keyFor(t) + ":other"
	om := wire.MarkerKey(other)
	cl.servers[0].MustDo(t, "HSET", om, "start", "1", wire.MarkerFormat, "2")
	cl.servers[1].MustDo(t, "DEL", om, "redlock:node:"+om[strings.IndexByte(om, '{'):])
	cl.servers[1].MustDo(t, "HSET", "redlock:node:"+om[strings.IndexByte(om, '{'):], "start", "1", "maxttl", "10000")
	_, err := c.TryLock(ctx, other, 10*time.Second)
	oe := mustOpError(t, err, redlock.ErrRefused)
	for i, res := range oe.Nodes[:2] {
		if res.Outcome != observe.OutcomeRefused || res.Err == nil || !strings.Contains(res.Err.Error(), "FORMAT") || !strings.Contains(res.Err.Error(), "format") {
			t.Errorf("node %d: %v %v, want refused with a FORMAT error", i, res.Outcome, res.Err)
		}
	}
	if !strings.Contains(err.Error(), "format") {
		t.Errorf("the error does not say why: %v", err)
	}
	if n := cl.countValue(t, other, ""); n != len(cl.servers) {
		t.Errorf("the refused lock left its key on %d nodes", len(cl.servers)-n)
	}
}

// testTokenOneWord: a token is one shell word without the owner label,
// the nodes keep the label beside it for Inspect, Adopt refuses a
// malformed token at once, and a printed or logged Lock shows its key and
// ID but never its token.
func (s *suite) testTokenOneWord(t *testing.T) {
	cl := startCluster(t, 3, false)
	c := s.client(t, cl.urls(), &redlock.Options{Owner: "batch worker 7"})
	ctx, key := ctxT(t), keyFor(t)
	l := lockOnAll(t, ctx, c, key, 10*time.Second, cl.servers)
	tok := l.Token()
	if raw := nodeToken(tok); len(raw) != clientx.Limits.TokenLen || tok != raw+"."+strconv.FormatInt(l.Fence(), 10) ||
		strings.ContainsAny(tok, " \t\n'\"$\\*?") || strings.Contains(tok, "worker") {
		t.Fatalf("Token() = %q: want %d characters, a dot and the fence %d, one shell word, no owner label", tok, clientx.Limits.TokenLen, l.Fence())
	}
	ins, err := admin.New(c).Inspect(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if ins.State != admin.KeyHeld || ins.Owner != "batch worker 7" || ins.Holder != l.ID() {
		t.Errorf("Inspect: state %v owner %q holder %q, want held by %s of batch worker 7", ins.State, ins.Owner, ins.Holder, l.ID())
	}

	// Printed and logged, the lock shows its key and ID only.
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("held", "lock", l)
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("held", "lock", l)
	for _, text := range []string{fmt.Sprintf("%v", l), fmt.Sprintf("%+v", l), fmt.Sprintf("%#v", l), fmt.Sprintf("%s", l), logged.String()} {
		if strings.Contains(text, nodeToken(tok)) || !strings.Contains(text, key) || !strings.Contains(text, l.ID()) {
			t.Errorf("a printed or logged Lock shows %q: want its key and ID, never the token", text)
		}
	}

	// A hand-over through the token alone: Adopt finds the holder's hold
	// and the label beside it, and its release frees the key.
	a, err := c.Adopt(ctx, key, tok)
	if err != nil {
		t.Fatalf("Adopt(Token()): %v", err)
	}
	if nodeToken(a.Token()) != nodeToken(tok) || a.ID() != l.ID() || a.Fence() != l.Fence()+1 {
		t.Errorf("adopted lock: token %q ID %s, want %q %s with the fence %d", a.Token(), a.ID(), tok, l.ID(), l.Fence()+1)
	}
	if err := a.Extend(ctx, 10*time.Second); err != nil {
		t.Errorf("Extend of the adopted lock: %v", err)
	}
	if got := cl.values(t, key); got[0] != nodeToken(tok) {
		t.Errorf("after the adopted lock's extension the key holds %q", got)
	}
	raw := nodeToken(tok)
	for _, bad := range []string{tok + " batch worker 7", raw, raw + ".", raw + ".0", raw + ".-1", raw[:31] + tok[32:], tok + "x", strings.Repeat("é", 16), raw[:31] + " ", raw[:31] + "=", raw + ".99999999999999999999"} {
		start := time.Now()
		_, err := c.Adopt(ctx, key, bad)
		if !errors.Is(err, redlock.ErrInvalid) {
			t.Errorf("Adopt(%q): %v, want ErrInvalid", bad, err)
		}
		if since := time.Since(start); since > time.Second {
			t.Logf("Adopt(%q) took %v", bad, since)
		}
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	cl.settle(t, key, "")
}

// slotTwin returns the key that names, with the tag of key's slot in
// front, what earlier versions mapped key's records to: "{T}" + key.
func slotTwin(key string) string {
	r := wire.ReadersKey(key)
	return r[strings.IndexByte(r, '{'):]
}

// testRecordsOneToOne: a key and the same key behind its slot's tag share
// no record. Earlier, a reader of one blocked a writer of the other, a
// permit of one filled the other, and ForceRelease of one deleted the
// other's permit.
func (s *suite) testRecordsOneToOne(t *testing.T) {
	cl := startCluster(t, 3, false)
	c := s.client(t, cl.urls(), nil)
	ctx, key := ctxT(t), keyFor(t)
	twin := slotTwin(key)
	if wire.Slot(twin) != wire.Slot(key) {
		t.Fatalf("%q and %q are in different slots", key, twin)
	}
	for name, record := range map[string]func(string) string{"readers": wire.ReadersKey, "intents": wire.IntentKey,
		"term": wire.TermKey, "size": wire.SizeKey, "permit 0": func(k string) string { return wire.PermitKey(k, 0) }} {
		if record(key) == record(twin) {
			t.Errorf("%q and %q share their %s record %q", key, twin, name, record(key))
		}
	}

	// A reader of one key, and a writer of the other.
	r, err := c.RWLock(key).TryRLock(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	w, err := c.RWLock(twin).TryLock(ctx, 10*time.Second)
	if err != nil {
		t.Errorf("a reader of %q kept out the writer of %q: %v", key, twin, err)
	} else if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// A full semaphore of one size 1 on one key, and the other's permit.
	p, err := c.Semaphore(key, 1).TryAcquire(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	q, err := c.Semaphore(twin, 1).TryAcquire(ctx, 10*time.Second)
	if err != nil {
		t.Fatalf("the permit of %q filled the semaphore on %q: %v", key, twin, err)
	}
	for _, srv := range cl.servers {
		for deadline := time.Now().Add(5 * time.Second); srv.MustDo(t, "EXISTS", wire.PermitKey(twin, 0)) != int64(1); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the permit of %q never reached every node", twin)
			}
		}
	}
	// ForceRelease of the first semaphore's slot leaves the other's.
	if _, err := admin.New(c).ForceReleasePermit(ctx, c.Semaphore(key, 1), 0); err != nil {
		t.Fatal(err)
	}
	if n := cl.countValue(t, wire.PermitKey(twin, 0), q.Token()); n != len(cl.servers) {
		t.Errorf("after ForceRelease of %q's permit, %q's permit is on %d of %d nodes", key, twin, n, len(cl.servers))
	}
	if err := q.Release(ctx); err != nil {
		t.Fatal(err)
	}
	_ = p
}

// testReadersExcludeMutex: a plain lock, an RW lock's writer and its
// readers exclude each other on one key, and Inspect shows readers as
// such, never as a plain holder.
func (s *suite) testReadersExcludeMutex(t *testing.T) {
	cl := startCluster(t, 3, false)
	c := s.client(t, cl.urls(), &redlock.Options{Tries: 1})
	ctx, key := ctxT(t), keyFor(t)
	rw := c.RWLock(key)
	r := cl.readerOnAll(t, ctx, rw, 10*time.Second)
	_, err := c.TryLock(ctx, key, 10*time.Second)
	mustOpError(t, err, redlock.ErrTaken)
	_, err = c.Lock(ctx, key, 10*time.Second) // Tries: 1
	mustOpError(t, err, redlock.ErrTaken)
	ins, err := admin.New(c).Inspect(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if ins.State != admin.KeyShared || len(ins.Readers) != 1 || ins.Holder != "" {
		t.Errorf("Inspect while a reader holds: state %v, %d readers, holder %q; want shared by one reader", ins.State, len(ins.Readers), ins.Holder)
	}
	for _, v := range ins.Nodes {
		if v.Held {
			t.Errorf("node %s shows the key held by %q while only a reader holds it", v.Node, v.Holder)
		}
	}
	// A second reader shares; the last reader's release frees the key
	// for the mutex.
	r2, err := rw.TryRLock(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Release(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = c.TryLock(ctx, key, 10*time.Second)
	mustOpError(t, err, redlock.ErrTaken)
	if err := r2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	cl.settle(t, key, "")
	l, err := c.TryLock(ctx, key, 10*time.Second)
	if err != nil {
		t.Fatalf("TryLock once the readers are gone: %v", err)
	}
	// And the other way: a plain lock keeps readers and writers out.
	_, err = rw.TryRLock(ctx, 10*time.Second)
	mustOpError(t, err, redlock.ErrTaken)
	_, err = rw.TryLock(ctx, 10*time.Second)
	mustOpError(t, err, redlock.ErrTaken)
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// testSemaphoreSize: while permits of a semaphore of one size are held, a
// semaphore of another size on the key is refused with ErrInvalid that
// names both sizes, rather than overfilling; once they are released, the
// new size is taken.
func (s *suite) testSemaphoreSize(t *testing.T) {
	cl := startCluster(t, 3, false)
	c := s.client(t, cl.urls(), nil)
	ctx, key := ctxT(t), keyFor(t)
	var held []*redlock.Permit
	for range 2 {
		p, err := c.Semaphore(key, 2).TryAcquire(ctx, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, p)
	}
	for _, n := range []int{3, 1} {
		start := time.Now()
		p, err := c.Semaphore(key, n).TryAcquire(ctx, 10*time.Second)
		if !errors.Is(err, redlock.ErrInvalid) || p != nil {
			t.Fatalf("Semaphore(k, %d) beside a full Semaphore(k, 2): %v, %v; want ErrInvalid", n, p, err)
		}
		if msg := err.Error(); !strings.Contains(msg, "2") || !strings.Contains(msg, fmt.Sprint(n)) {
			t.Errorf("the error names not both sizes: %v", err)
		}
		// Acquire, which waits, is refused as at once.
		_, err = c.Semaphore(key, n).Acquire(ctxTimeout(t, 10*time.Second), 10*time.Second)
		if !errors.Is(err, redlock.ErrInvalid) {
			t.Errorf("Acquire of Semaphore(k, %d): %v; want ErrInvalid", n, err)
		}
		t.Logf("refused in %v: %v", time.Since(start), err)
	}
	for _, p := range held {
		if err := p.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, srv := range cl.servers {
		for deadline := time.Now().Add(5 * time.Second); srv.MustDo(t, "EXISTS", wire.SizeKey(key)) != int64(0); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the size record outlives the last permit on %s", srv.Addr())
			}
		}
	}
	p, err := c.Semaphore(key, 3).TryAcquire(ctx, 10*time.Second)
	if err != nil {
		t.Fatalf("Semaphore(k, 3) once no permit is held: %v", err)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// testLongLockEnds: on nodes that did not restart, a lock with a TTL of an
// hour, once released, holds back no later lock: neither on its key nor on
// others, for a client that learns the TTLs in use from the nodes.
func (s *suite) testLongLockEnds(t *testing.T) {
	cl := startCluster(t, 3, false)
	ctx, key := ctxT(t), keyFor(t)
	long := s.client(t, cl.urls(), nil) // no quarantine
	l := lockOnAll(t, ctx, long, key, time.Hour, cl.servers)
	ins, err := admin.New(long).Inspect(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range ins.Nodes {
		if v.MaxTTL < 59*time.Minute {
			t.Errorf("while the hour-long lock is held, node %s says locks in the slot may be held for %v", v.Node, v.MaxTTL)
		}
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	cl.settle(t, key, "")
	ins, err = admin.New(long).Inspect(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range ins.Nodes {
		if v.MaxTTL > time.Minute {
			t.Errorf("after the hour-long lock's release, node %s says locks in the slot may be held for %v", v.Node, v.MaxTTL)
		}
	}

	// A client with the quarantine on, whose 2s locks need nodes that have
	// run for 2s: these have, and have not restarted.
	for _, srv := range cl.servers {
		if up := srv.MustDo(t, "INFO", "server").(string); !strings.Contains(up, "uptime_in_seconds:") {
			t.Fatalf("INFO server without uptime: %q", up)
		}
	}
	time.Sleep(3 * time.Second)
	short := s.quarantineClient(t, cl.urls(), &redlock.Options{})
	for _, k := range []string{key, key + ":other", key, key + ":other"} {
		l, err := short.TryLock(ctx, k, 2*time.Second)
		if err != nil {
			t.Fatalf("a 2s lock on %q after the hour-long lock's release: %v", k, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for i, st := range admin.New(short).States() {
		if st.Health != observe.NodeHealthy {
			t.Errorf("node %d: %v, want healthy", i, st.Health)
		}
	}
}

// testHorizonCoversRestart: a client that learns of a lock only from the
// nodes still holds back the nodes that restarted and lost it, while it
// may be held. Lock x is granted inside the horizon an earlier lock y of
// its slot set, so its grant writes nothing to the marker; two of three
// nodes then restart empty. A fresh client that asks for a short lock on
// x hears of x's TTL only from the third node, and must not count the
// restarted nodes, which are younger than x's TTL, until x has ended.
func (s *suite) testHorizonCoversRestart(t *testing.T) {
	cl := startCluster(t, 3, false)
	a := s.client(t, cl.urls(), &redlock.Options{DisableQuarantine: true, Tries: 1})
	ctx, key := ctxT(t), keyFor(t)
	x, y := "{"+key+"}x", "{"+key+"}y"
	// Long enough that the restarted nodes' age, which a node reports up
	// to a second short, passes the time x has left.
	const ttl = 6 * time.Second
	t0 := time.Now()
	if _, err := a.TryLock(ctx, y, ttl); err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl * 9 / 10)
	lx, err := a.TryLock(ctx, x, ttl)
	if err != nil {
		t.Fatal(err)
	}
	for _, srv := range cl.servers[:2] {
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	// The restarted nodes are now younger than x's TTL by less than the
	// time x has left: the time left alone would let them vote.
	time.Sleep(time.Until(t0.Add(ttl * 16 / 10)))
	b := s.quarantineClient(t, cl.urls(), &redlock.Options{Tries: 1}) // the default quarantine
	tries := 0
	for time.Now().Before(lx.Until()) {
		tries++
		l, err := b.TryLock(ctx, x, time.Second)
		if err == nil {
			t.Errorf("a fresh client got %s %v after the first grant, while the lock granted before two nodes restarted is valid for %v more: two holders", x, time.Since(t0), time.Until(lx.Until()))
			l.Release(ctx)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	if tries == 0 {
		t.Fatal("the machine was too slow: x had ended before the fresh client tried")
	}
}

// testLeanRelease: a release reads no marker on the nodes whose grant gave
// the lock its fence, whose counters already cover it; it still raises
// the other nodes' counters to the fence, and still gives back, on every
// node, the horizon of a lock extended past a minute.
func (s *suite) testLeanRelease(t *testing.T) {
	cl := startCluster(t, 3, false)
	ctx, key := ctxT(t), keyFor(t)
	c := s.client(t, cl.urls(), nil)
	marker := wire.MarkerKey(key)
	counter := func(srv *redistest.Server) int64 {
		v, _ := srv.MustDo(t, "HGET", marker, wire.MarkerFence).(string)
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("%s: fence counter %q: %v", srv.Addr(), v, err)
		}
		return n
	}
	reads := func(srv *redistest.Server) bool {
		st := srv.MustDo(t, "INFO", "commandstats").(string)
		return strings.Contains(st, "cmdstat_hget:") || strings.Contains(st, "cmdstat_hmget:")
	}

	// One node: its grant gave the lock its fence.
	one := s.client(t, cl.urls()[:1], nil)
	l, err := one.TryLock(ctx, key, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cl.servers[0].MustDo(t, "CONFIG", "RESETSTAT")
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if reads(cl.servers[0]) {
		t.Errorf("the release read the marker of the node whose grant gave the fence %d", l.Fence())
	}
	if got := counter(cl.servers[0]); got < l.Fence() {
		t.Errorf("counter %d after the release, below the lock's fence %d", got, l.Fence())
	}

	// Three nodes: the release raises every counter to the fence, and
	// reads no marker on some node, the one that gave the fence.
	l = lockOnAll(t, ctx, c, key, 10*time.Second, cl.servers)
	for _, srv := range cl.servers {
		srv.MustDo(t, "CONFIG", "RESETSTAT")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	// Release returns once a quorum has answered: wait for the third
	// node's release, whose script deletes the key and raises the
	// counter at once.
	cl.settle(t, key, "")
	lean := 0
	for i, srv := range cl.servers {
		if !reads(srv) {
			lean++
		}
		if got := counter(srv); got < l.Fence() {
			t.Errorf("node %d: counter %d after the release, below the lock's fence %d", i, got, l.Fence())
		}
	}
	if lean == 0 {
		t.Errorf("the release read the marker on every node, also on the one that gave the fence %d", l.Fence())
	}

	l = lockOnAll(t, ctx, c, key, 10*time.Second, cl.servers)
	if err := l.Extend(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	cl.settle(t, key, "")
	for i, srv := range cl.servers {
		m := srv.MustDo(t, "HMGET", marker, "who", "ttl1")
		if a, _ := m.([]any); len(a) != 2 || a[0] != "" || a[1] != "0" {
			t.Errorf("node %d: who, ttl1 = %v after the release of a lock extended to 2 minutes; want the horizon given back", i, m)
		}
	}
}
