package drivertest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/admin"
	"github.com/quorumlock/redlock/driver"
	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/internal/tlsfilestest"
	"github.com/quorumlock/redlock/observe"
)

// testRefused covers nodes that refuse for good: a wrong password, none
// on a node that needs one, an ACL without the scripting commands, a
// replica, a certificate that fails verification, a failed snapshot
// (MISCONF), a key of another type and a full node. Each must end Lock after
// one round, even with a context that would let it wait, with an error
// that wraps ErrRefused and names the server's reason.
func (s *suite) testRefused(t *testing.T) {
	t.Run("WrongPassword", func(t *testing.T) {
		srv := redistest.Start(t, redistest.Config{})
		addUser(t, srv)
		c := s.client(t, []string{aclURL(srv, ACLUser, "wrongpassword123")}, nil)
		_, err := c.Lock(ctxT(t), keyFor(t), time.Second)
		mustRefuse(t, err, "WRONGPASS")
		if st := admin.New(c).States()[0]; st.Health != observe.NodeRefusing {
			t.Errorf("node state %v, want %v", st.Health, observe.NodeRefusing)
		}
	})
	t.Run("NoPassword", func(t *testing.T) {
		srv := redistest.Start(t, redistest.Config{})
		srv.MustDo(t, "CONFIG", "SET", "requirepass", ACLPassword) // srv.Do stops working here
		c := s.client(t, []string{srv.URL()}, nil)
		_, err := c.Lock(ctxT(t), keyFor(t), time.Second)
		mustRefuse(t, err, "NOAUTH")
	})
	t.Run("NoScriptingPermission", func(t *testing.T) {
		srv := redistest.Start(t, redistest.Config{})
		addUser(t, srv)
		srv.MustDo(t, "ACL", "SETUSER", ACLUser, "-evalsha", "-eval")
		c := s.client(t, []string{aclURL(srv, ACLUser, ACLPassword)}, nil)
		_, err := c.TryLock(ctxT(t), keyFor(t), time.Second)
		mustRefuse(t, err, "NOPERM")
	})
	t.Run("Replica", func(t *testing.T) {
		master := redistest.Start(t, redistest.Config{})
		replica := redistest.Start(t, redistest.Config{Args: []string{"--replicaof", "127.0.0.1", port(master)}})
		awaitReplication(t, replica)
		c := s.client(t, []string{replica.URL()}, nil)
		_, err := c.Lock(ctxT(t), keyFor(t), time.Second)
		mustRefuse(t, err, "READONLY")
	})
	t.Run("UnverifiedCertificate", func(t *testing.T) {
		srv := tlsfilestest.StartRedis(t, tlsfilestest.RedisConfig{CA: tlsfilestest.NewCA(t, "drivertest CA"), AuthClients: "no"})
		// The client does not trust the server's CA: verification fails.
		c := s.client(t, []string{srv.URL()}, nil)
		_, err := c.Lock(ctxT(t), keyFor(t), time.Second)
		oe := mustOpError(t, err, redlock.ErrRefused)
		if errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("error %v after %d rounds; want a refusal naming the certificate, without waiting for the context", err, oe.Rounds)
		}
	})
	t.Run("FailedSave", func(t *testing.T) {
		// A node with save points whose last snapshot failed refuses
		// writes (MISCONF, stop-writes-on-bgsave-error): the snapshot's
		// file name is taken by a directory, so the save cannot rename its
		// temporary file onto it.
		srvs := redistest.StartN(t, 2, redistest.Config{Args: []string{"--save", "3600 1"}})
		for _, srv := range srvs {
			dir, _ := srv.MustDo(t, "CONFIG", "GET", "dir").([]any)
			if len(dir) != 2 {
				t.Fatalf("CONFIG GET dir = %v", dir)
			}
			if err := os.MkdirAll(filepath.Join(dir[1].(string), "dump.rdb", "x"), 0o755); err != nil {
				t.Fatal(err)
			}
			srv.MustDo(t, "BGSAVE")
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				info, _ := srv.MustDo(t, "INFO", "persistence").(string)
				if strings.Contains(info, "rdb_last_bgsave_status:err") {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the snapshot did not fail: %s", info)
				}
			}
		}
		healthy := redistest.Start(t, redistest.Config{})
		c := s.client(t, append(redistest.URLs(srvs), healthy.URL()), nil)
		_, err := c.Lock(ctxT(t), keyFor(t), time.Second)
		mustRefuse(t, err, "MISCONF")
	})
	t.Run("WrongType", s.testRefusedWrongType)
	t.Run("ExtendAndRelease", s.testRefusedExtendRelease)
	t.Run("FullNode", s.testRefusedFull)
}

// testRefusedWrongType: a key that holds a hash on a minority of nodes
// does not stop the lock; on a majority it is refused, not "unreachable".
func (s *suite) testRefusedWrongType(t *testing.T) {
	cl := startCluster(t, 3, false)
	c := s.client(t, cl.urls(), nil)
	ctx, key := ctxT(t), keyFor(t)
	cl.servers[0].MustDo(t, "HSET", key, "f", "v")
	l, err := c.Lock(ctx, key, 10*time.Second)
	if err != nil {
		t.Fatalf("Lock with a hash on one node of three: %v", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatalf("Release with a hash on one node of three: %v", err)
	}

	cl.servers[1].MustDo(t, "HSET", key, "f", "v")
	_, err = c.TryLock(ctx, key, 10*time.Second)
	oe := mustRefuse(t, err, "WRONGTYPE")
	if strings.Contains(err.Error(), "no quorum") {
		t.Errorf("error %q speaks of no quorum", err)
	}
	if oe.Nodes[2].Outcome == observe.OutcomeRefused {
		t.Errorf("the node without the hash refused: %v", oe.Nodes[2])
	}
	_, err = c.Lock(ctx, key, 10*time.Second)
	mustRefuse(t, err, "WRONGTYPE")
	// The grant of the third node was cleaned up.
	if n := cl.servers[2].MustDo(t, "EXISTS", key); n != int64(0) {
		t.Errorf("the failed rounds left the key on the third node")
	}
}

// testRefusedExtendRelease: when the nodes stop letting the client run
// scripts while it holds a lock, Extend and Release fail with ErrRefused
// at once, and the lock stays valid until its deadline.
func (s *suite) testRefusedExtendRelease(t *testing.T) {
	servers := redistest.StartN(t, 3, redistest.Config{})
	urls := make([]string, len(servers))
	for i, srv := range servers {
		addUser(t, srv)
		urls[i] = aclURL(srv, ACLUser, ACLPassword)
	}
	c := s.client(t, urls, nil)
	ctx, key := ctxT(t), keyFor(t)
	l, err := c.Lock(ctx, key, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, srv := range servers[:2] {
		srv.MustDo(t, "ACL", "SETUSER", ACLUser, "-evalsha", "-eval")
	}
	err = l.Extend(ctx, 30*time.Second)
	mustRefuse(t, err, "NOPERM")
	if !valid(l) {
		t.Error("a refused extension ended the lock")
	}
	err = l.Release(ctx)
	mustRefuse(t, err, "NOPERM")
}

// testRefusedFull fills a node with noeviction to its maxmemory: new
// locks are refused with OOM at once, and a lock taken before the node
// filled up is released, its key gone.
func (s *suite) testRefusedFull(t *testing.T) {
	srv := redistest.Start(t, redistest.Config{Args: []string{"--maxmemory", "3mb", "--maxmemory-policy", "noeviction"}})
	c := s.client(t, []string{srv.URL()}, nil)
	ctx, key := ctxT(t), keyFor(t)
	held, err := c.Lock(ctx, key, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, srv)

	_, err = c.Lock(ctx, key+":other", 30*time.Second)
	mustRefuse(t, err, "OOM")
	if err := held.Release(ctx); err != nil {
		t.Fatalf("Release on a full node: %v", err)
	}
	if n := srv.MustDo(t, "EXISTS", key); n != int64(0) {
		t.Fatal("the released lock's key is still on the full node")
	}
}

// fill writes values to srv until it refuses a write with OOM, and then
// lowers its maxmemory below what it uses. A node refuses a write when
// its memory, which counts the buffers of its connections, is above the
// limit as the command starts; each srv.Do is a connection of its own,
// so a node filled that way is only just full, and may accept writes
// again once the connection is gone.
func fill(t *testing.T, srv *redistest.Server) {
	t.Helper()
	value := strings.Repeat("x", 64<<10)
	for i := 0; ; i++ {
		_, err := srv.Do("SET", "filler:"+strconv.Itoa(i), value)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "OOM") {
				t.Fatalf("filling the node: %v", err)
			}
			break
		}
		if i > 10000 {
			t.Fatal("the node never filled up")
		}
	}
	info, _ := srv.MustDo(t, "INFO", "memory").(string)
	_, used, _ := strings.Cut(info, "used_memory:")
	used, _, _ = strings.Cut(used, "\r\n")
	n, err := strconv.ParseInt(used, 10, 64)
	if err != nil {
		t.Fatalf("used_memory in INFO memory: %v", err)
	}
	srv.MustDo(t, "CONFIG", "SET", "maxmemory", strconv.FormatInt(n-128<<10, 10))
}

// mustRefuse asserts that err is an *OpError wrapping ErrRefused after a
// single round, with no context error, that names code, and that every
// node that refused gave code; it returns the *OpError.
func mustRefuse(t *testing.T, err error, code string) *redlock.OpError {
	t.Helper()
	// Lock stops at the first round in which the refusals leave no
	// quorum; an earlier round may have failed for a reason that can pass,
	// as when the first connection's handshake outlasts the node timeout
	// on a loaded machine. A Lock that retried refusals would instead run
	// until its context ended.
	oe := mustOpError(t, err, redlock.ErrRefused)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		t.Fatalf("error %v after %d rounds; want a refusal, without waiting for the context", err, oe.Rounds)
	}
	if !strings.Contains(err.Error(), code) || strings.Contains(err.Error(), "reachable") {
		t.Errorf("error %q does not name %s, or speaks of reachability", err, code)
	}
	for _, n := range oe.Nodes {
		if n.Outcome != observe.OutcomeRefused {
			continue
		}
		var reply *driver.ReplyError
		if !errors.As(n.Err, &reply) || reply.Code() != code {
			t.Errorf("node %s refused with %v (%T), want a *driver.ReplyError with the code %s", n.Node, n.Err, n.Err, code)
		}
	}
	return oe
}

// aclURL returns srv's URL with a user and a password.
func aclURL(srv *redistest.Server, user, password string) string {
	return strings.Replace(srv.URL(), "://", "://"+user+":"+password+"@", 1)
}

// port returns the TCP port srv listens on.
func port(srv *redistest.Server) string {
	_, p, _ := strings.Cut(srv.Addr(), ":")
	return p
}

// awaitReplication waits until replica has synchronised with its master.
func awaitReplication(t *testing.T, replica *redistest.Server) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		v, err := replica.Do("INFO", "replication")
		if s, _ := v.(string); err == nil && strings.Contains(s, "master_link_status:up") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica did not synchronise within 30s: %v %v", v, err)
		}
	}
}
