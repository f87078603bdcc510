package drivertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/driver"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/internal/wire"
)

// TestClient checks the lock algorithm through the adapter whose Dial is
// dial: a [redlock.Client] over nodes that dial returns, against
// redis-server processes that it starts, stops, kills, pauses, restarts and
// puts behind fault proxies ([redistest]). Nothing in it fakes a node.
//
// It covers taking and releasing locks on 1, 3 and 5 nodes, over TCP and
// unix sockets; every subset of nodes down for N = 3 and 5; a lock taken
// by another; replies lost after a grant or a release was applied; mutual
// exclusion under contention, with a lost-update detector; extension,
// expiry and take-over; cancellation; slow nodes; fences across releases,
// expiries, FLUSHALL and restarts; restart quarantine, with canaries that
// disable it and must see a lock granted twice; the lock's context and
// AutoExtend; notified waiting; the events an Observer sees; and nodes
// that refuse for good (a wrong or missing password, an ACL without the
// scripting commands, a replica, a key of another type, a full node),
// which must end Lock at once with ErrRefused.
//
// dial gets URLs such as "redis://127.0.0.1:PORT" and
// "unix:///path/to/socket". It must not connect: a lock client has to be
// constructible while a minority of its nodes is down. TestClient closes
// every Node it dials when the subtest that dialled it ends.
func TestClient[N Node](t *testing.T, dial func(url string) (N, error)) {
	d := dialer(dial)
	s := &suite{dial: func(t testing.TB, url string) driver.Node { return d(t, url) }}
	t.Run("Scripts", s.testScripts)
	t.Run("LockReleaseN1", func(t *testing.T) { s.testLockRelease(t, 1, false) })
	t.Run("LockReleaseN3Unix", func(t *testing.T) { s.testLockRelease(t, 3, true) })
	t.Run("LockReleaseN5", func(t *testing.T) { s.testLockRelease(t, 5, false) })
	t.Run("EveryNodeSubsetDownN3", func(t *testing.T) { s.testSubsetsDown(t, 3) })
	t.Run("EveryNodeSubsetDownN5", func(t *testing.T) { s.testSubsetsDown(t, 5) })
	t.Run("TakenByAnother", s.testTaken)
	t.Run("LostReplyIsReleased", s.testLostReply)
	t.Run("LostReplyN1", s.testLostReplyN1)
	t.Run("LostReleaseReply", s.testLostReleaseReply)
	t.Run("MutualExclusion", s.testMutualExclusion)
	t.Run("ExtendMovesDeadline", s.testExtend)
	t.Run("ExtendNeverRecreates", s.testExtendNeverRecreates)
	t.Run("ExpiredExtendAndRelease", s.testExpired)
	t.Run("ExpiredAndTakenOver", s.testExpiredTakenOver)
	t.Run("LockLostOnMajority", s.testLockLost)
	t.Run("CancelWhileWaiting", s.testCancelWhileWaiting)
	t.Run("CancelledBeforeStart", s.testCancelledBeforeStart)
	t.Run("CleanUpIgnoresCancellation", s.testCleanUpIgnoresCancel)
	t.Run("SlowNodeDoesNotDelay", s.testSlowNode)
	t.Run("CloseWaitsForRelease", s.testCloseWaits)
	t.Run("LatencyEatsValidity", s.testLatencyEatsValidity)
	t.Run("EvenN", s.testEvenN)
	t.Run("FencesN3", func(t *testing.T) { s.testFences(t, 3) })
	t.Run("FencesN5", func(t *testing.T) { s.testFences(t, 5) })
	t.Run("ReleaseLeavesNoRecord", s.testReleaseLeavesNoRecord)
	t.Run("QuarantineAfterRestart", func(t *testing.T) { s.testQuarantine(t, false, false) })
	t.Run("CanaryNoQuarantineDoubleGrant", func(t *testing.T) { s.testQuarantine(t, true, false) })
	t.Run("QuarantineAfterSnapshotRestart", func(t *testing.T) { s.testQuarantine(t, false, true) })
	t.Run("CanarySnapshotNoQuarantineDoubleGrant", func(t *testing.T) { s.testQuarantine(t, true, true) })
	t.Run("LostLockContext", s.testLostContext)
	t.Run("ContextEndsAtDeadline", s.testContextDeadline)
	t.Run("AutoExtendKeepsOwnership", s.testAutoExtend)
	t.Run("AutoExtendLimit", s.testAutoExtendLimit)
	t.Run("NotifiedWaiting", s.testNotifiedWaiting)
	t.Run("WakeAfterSplitVote", s.testWakeAfterSplitVote)
	t.Run("CoalescedWaiters", s.testCoalescedWaiters)
	t.Run("HandOffInProcess", s.testHandOffInProcess)
	t.Run("Observer", s.testObserver)
	t.Run("Refused", s.testRefused)
	t.Run("Operations", s.testOperations)
	t.Run("LockAll", s.testLockAll)
	t.Run("Semaphore", s.testSemaphore)
	t.Run("Election", s.testElection)
	t.Run("RWLock", s.testRWLock)
	t.Run("Adopt", s.testAdopt)
	t.Run("Format", s.testFormat)
	t.Run("ClusterNode", s.testClusterNode)
	t.Run("ClusterReshard", s.testClusterReshard)
	t.Run("FailoverQuarantine", s.testFailoverQuarantine)
	t.Run("ClusterMasterRestartEmpty", s.testClusterRestartEmpty)
	t.Run("Misuse", s.testMisuse)
	t.Run("Holes", s.testHoles)
}

// A suite runs the cases of TestClient through one adapter.
type suite struct {
	// dial dials url and closes the Node when t ends.
	dial func(t testing.TB, url string) driver.Node
}

// cluster is a set of independent redis-server processes with an admin
// connection to each.
type cluster struct {
	servers []*redistest.Server
}

func startCluster(t *testing.T, n int, unix bool) *cluster {
	t.Helper()
	return &cluster{servers: redistest.StartN(t, n, redistest.Config{Unix: unix})}
}

func (c *cluster) urls() []string {
	return redistest.URLs(c.servers)
}

// client dials every url and returns a redlock client over them. Unless
// opts asks for a quarantine, it is disabled: the test's servers are new,
// and would otherwise sit out each test's TTL before they vote. The tests
// of quarantine itself set Options.Quarantine or use quarantineClient.
func (s *suite) client(t *testing.T, urls []string, opts *redlock.Options) *redlock.Client {
	t.Helper()
	o := redlock.Options{}
	if opts != nil {
		o = *opts
	}
	if o.Quarantine == 0 {
		o.DisableQuarantine = true
	}
	return s.quarantineClient(t, urls, &o)
}

// quarantineClient is client with the quarantine left as opts sets it.
func (s *suite) quarantineClient(t *testing.T, urls []string, opts *redlock.Options) *redlock.Client {
	t.Helper()
	nodes := make([]redlock.Node, len(urls))
	for i, u := range urls {
		nodes[i] = s.dial(t, u)
	}
	o := *opts
	if o.RetryDelay == 0 {
		o.RetryDelay = 5 * time.Millisecond // keep the tests quick
	}
	c, err := redlock.New(nodes, &o)
	if err != nil {
		t.Fatalf("redlock.New: %v", err)
	}
	t.Cleanup(func() { c.Close() }) // before the nodes close: cleanups run last first
	return c
}

// values returns, for each server, the token (see tokenOf) or other value
// that key holds ("" when absent).
func (c *cluster) values(t *testing.T, key string) []string {
	t.Helper()
	vals := make([]string, len(c.servers))
	for i, srv := range c.servers {
		if !srv.Running() {
			continue
		}
		v := srv.MustDo(t, "GET", key)
		if v != nil {
			vals[i] = tokenOf(v.(string))
		}
	}
	return vals
}

// tokenOf returns the token in a value that a lock's grant wrote (a token,
// a space and the owner label), as Lock.Token returns it; any other value
// as it is.
func tokenOf(v string) string {
	if tok := wire.Token(v); tok != v && wire.ValidToken(tok) {
		return tok
	}
	return v
}

// valid reports whether l is within its validity, not lost and not
// released.
func valid(l *redlock.Lock) bool {
	return l.Context().Err() == nil && time.Now().Before(l.Until())
}

// nodeToken returns the token that a hold's Lock.Token hands over, as the
// nodes keep it: without the dot and the fence.
func nodeToken(handover string) string {
	tok, _, _ := strings.Cut(handover, ".")
	return tok
}

// countValue returns on how many servers key holds want (a value, or a
// Lock.Token).
func (c *cluster) countValue(t *testing.T, key, want string) int {
	t.Helper()
	want = nodeToken(want)
	n := 0
	for _, v := range c.values(t, key) {
		if v == want {
			n++
		}
	}
	return n
}

// settle waits until key holds token (or, with token "", is absent) on
// every running server. A round returns as soon as a quorum has answered,
// and the other calls may still be on their way; tests that change keys
// behind the client's back wait for them first.
func (c *cluster) settle(t *testing.T, key, token string) {
	t.Helper()
	token = nodeToken(token)
	running := 0
	for _, srv := range c.servers {
		if srv.Running() {
			running++
		}
	}
	for deadline := time.Now().Add(10 * time.Second); c.countValue(t, key, token) < running; {
		if time.Now().After(deadline) {
			t.Fatalf("token on %d of %d running servers after 10s: %q", c.countValue(t, key, token), running, c.values(t, key))
		}
		time.Sleep(time.Millisecond)
	}
}

// A grant is a lock or a permit of a semaphore.
type grant interface {
	Token() string
	Release(ctx context.Context) error
}

// onAll calls take until the grant it returns is on every one of servers,
// under each of the keys that keys gives for it, and returns that grant.
// A round ends as soon as a quorum has granted, and a node too slow to
// answer within the node timeout may never see the grant; and on a loaded
// machine a round can fail because too few nodes answered in time
// (ErrNoQuorum), or took longer than the lock's validity (ErrExpired). The
// tests that need the grant everywhere try again, up to three times,
// after waiting for within; another error fails t.
func onAll[G grant](t *testing.T, ctx context.Context, servers []*redistest.Server, within time.Duration, take func() (G, error), keys func(G) []string) G {
	t.Helper()
	cl := &cluster{servers: servers}
	var failed []string // why the earlier tries failed
	for try := 1; ; try++ {
		g, err := take()
		if err != nil {
			if try == 3 || !errors.Is(err, redlock.ErrNoQuorum) && !errors.Is(err, redlock.ErrExpired) {
				t.Fatalf("try %d of taking a grant on all %d nodes: %v (earlier tries: %q)", try, len(servers), err, failed)
			}
			// The failed round was cleaned up on every node.
			failed = append(failed, err.Error())
			continue
		}
		everywhere := func() bool {
			for _, key := range keys(g) {
				if cl.countValue(t, key, g.Token()) != len(servers) {
					return false
				}
			}
			return true
		}
		for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if everywhere() {
				return g
			}
		}
		var got []string
		for _, key := range keys(g) {
			got = append(got, fmt.Sprintf("%s: %q", key, cl.values(t, key)))
		}
		if try == 3 {
			t.Fatalf("in 3 tries, the grant never reached all %d nodes: %v (earlier tries: %q)", len(servers), got, failed)
		}
		failed = append(failed, fmt.Sprintf("the grant reached %v", got))
		g.Release(ctx) // or it expires
		// The release returns on a quorum: the next try would find the
		// last node still held.
		for _, key := range keys(g) {
			cl.settle(t, key, "")
		}
	}
}

// lockOnAll has c take key for ttl, with TryLock, until the grant is on
// every one of servers, the nodes (or the masters of key's slot in the
// clusters that are the nodes); see onAll. It waits a quarter of ttl for
// each grant.
func lockOnAll(t *testing.T, ctx context.Context, c *redlock.Client, key string, ttl time.Duration, servers []*redistest.Server) *redlock.Lock {
	t.Helper()
	return onAll(t, ctx, servers, ttl/4,
		func() (*redlock.Lock, error) { return c.TryLock(ctx, key, ttl) },
		func(l *redlock.Lock) []string { return l.Keys() })
}

// permitOnAll has sem grant a permit for ttl, with TryAcquire, until the
// permit's slot holds it on every node of cl; see onAll.
func (cl *cluster) permitOnAll(t *testing.T, ctx context.Context, sem *redlock.Semaphore, ttl time.Duration) *redlock.Permit {
	t.Helper()
	return onAll(t, ctx, cl.servers, ttl/4,
		func() (*redlock.Permit, error) { return sem.TryAcquire(ctx, ttl) },
		func(p *redlock.Permit) []string { return []string{wire.PermitKey(p.Key(), p.Slot)} })
}

// contend has one goroutine per client take the lock on key rounds times,
// with Lock and ttl, and release it. Under the lock each reads a shared
// counter, pauses, writes it back plus one, and calls during if it is not
// nil. It fails t if a call or during fails, if two holders were inside at
// once, or if an update was lost.
func contend(t *testing.T, ctx context.Context, key string, ttl time.Duration, rounds int, clients []*redlock.Client, during func(*redlock.Lock) error) {
	t.Helper()
	var counter, inside atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, len(clients)*(2*rounds+1)) // never blocks
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				l, err := c.Lock(ctx, key, ttl)
				if err != nil {
					errs <- err
					return
				}
				if inside.Add(1) != 1 {
					errs <- errors.New("two holders were inside at once")
				}
				v := counter.Load()
				time.Sleep(200 * time.Microsecond)
				counter.Store(v + 1)
				if during != nil {
					if err := during(l); err != nil {
						errs <- err
					}
				}
				inside.Add(-1)
				if err := l.Release(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got, want := counter.Load(), int64(len(clients)*rounds); got != want {
		t.Fatalf("counter = %d, want %d: updates were lost", got, want)
	}
}

// held starts three servers and a client that holds the lock on a fresh
// key for ttl, with the grant on all three (see lockOnAll: the request to
// the last node may have been cut off by the node timeout).
func (s *suite) held(t *testing.T, ttl time.Duration) (*cluster, *redlock.Client, context.Context, string, *redlock.Lock) {
	t.Helper()
	cl := startCluster(t, 3, false)
	c := s.client(t, cl.urls(), nil)
	ctx, key := ctxT(t), keyFor(t)
	return cl, c, ctx, key, lockOnAll(t, ctx, c, key, ttl, cl.servers)
}

// awaitNoKey waits until key exists on no running server, and fails t if
// it still does after within. Release returns once a quorum has confirmed
// and releases the other nodes in the background; within must be shorter
// than the lock's TTL, or expiry could pass for a release.
func (c *cluster) awaitNoKey(t *testing.T, key string, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(time.Millisecond) {
		left := 0
		for _, v := range c.values(t, key) {
			if v != "" {
				left++
			}
		}
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			c.expectNoKey(t, key)
			return
		}
	}
}

// expectNoKey fails t if key exists on any running server.
func (c *cluster) expectNoKey(t *testing.T, key string) {
	t.Helper()
	for i, v := range c.values(t, key) {
		if v != "" {
			t.Errorf("server %d still holds %q = %q", i, key, v)
		}
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// mustOpError asserts that err is an *OpError wrapping reason.
func mustOpError(t *testing.T, err, reason error) *redlock.OpError {
	t.Helper()
	if !errors.Is(err, reason) {
		t.Fatalf("error %v, want one wrapping %v", err, reason)
	}
	var oe *redlock.OpError
	if !errors.As(err, &oe) {
		t.Fatalf("error %T %v is not an *OpError", err, err)
	}
	return oe
}

func outcomes(oe *redlock.OpError) string {
	var parts []string
	for _, n := range oe.Nodes {
		parts = append(parts, n.Outcome.String())
	}
	return strings.Join(parts, ",")
}

func keyFor(t *testing.T) string {
	return fmt.Sprintf("conformance:%s:%d", t.Name(), time.Now().UnixNano())
}
