package redistest

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// syncTimeout bounds ReplicaOf's and CaughtUp's waits.
const syncTimeout = 20 * time.Second

// StartReplica starts a server with cfg, as Start does, and makes it a
// replica of master with ReplicaOf, through via if via is not nil. It
// fails t if either fails.
func StartReplica(t testing.TB, master *Server, via *Proxy, cfg Config) *Server {
	t.Helper()
	s := Start(t, cfg)
	if err := s.ReplicaOf(master, via); err != nil {
		t.Fatal(err)
	}
	return s
}

// ReplicaOf makes s a replica of master (REPLICAOF), and waits until s
// has loaded master's data and its link to master is up. If via is not
// nil, s connects to via's address instead, so that a test can cut the
// link with via.SetBlackhole; via must be a [Proxy] to master. A master on
// a unix socket can only be replicated through a Proxy.
//
// So that the replica's first synchronization starts at once, ReplicaOf
// sets master's repl-diskless-sync-delay to 0 (CONFIG SET).
//
// The replica keeps replicating until Promote, or until it restarts: a
// restarted server is a master again.
func (s *Server) ReplicaOf(master *Server, via *Proxy) error {
	addr := master.Addr()
	if via != nil {
		if via.target != master {
			return errors.New("redistest: ReplicaOf through a Proxy to another server")
		}
		addr = via.Addr()
	} else if master.Network() != "tcp" {
		return errors.New("redistest: ReplicaOf a server on a unix socket: replicate through a Proxy")
	}
	if _, err := master.Do("CONFIG", "SET", "repl-diskless-sync-delay", "0"); err != nil {
		return fmt.Errorf("redistest: %w", err)
	}
	host, port, _ := net.SplitHostPort(addr)
	if _, err := s.Do("REPLICAOF", host, port); err != nil {
		return fmt.Errorf("redistest: REPLICAOF: %w", err)
	}
	deadline := time.Now().Add(syncTimeout)
	for {
		info, err := s.replication()
		if err != nil {
			return err
		}
		if info["role"] == "slave" && info["master_host"] == host && info["master_port"] == port &&
			info["master_link_status"] == "up" && info["master_sync_in_progress"] == "0" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: replica %s has not synchronized with %s after %v: role %s, link %s, sync in progress %s",
				s.Addr(), addr, syncTimeout, info["role"], info["master_link_status"], info["master_sync_in_progress"])
		}
		time.Sleep(pollInterval)
	}
}

// Promote makes s, a replica, a master (REPLICAOF NO ONE), as a failover
// does: s keeps its data, takes a new replication ID and accepts writes.
func (s *Server) Promote() error {
	info, err := s.replication()
	if err != nil {
		return err
	}
	if info["role"] != "slave" {
		return fmt.Errorf("redistest: Promote of %s, which is not a replica (role %s)", s.Addr(), info["role"])
	}
	if _, err := s.Do("REPLICAOF", "NO", "ONE"); err != nil {
		return fmt.Errorf("redistest: REPLICAOF NO ONE: %w", err)
	}
	return nil
}

// CaughtUp waits until s, a replica of master, has received and applied
// everything that master had written when CaughtUp was called: until its
// replication offset reaches master's.
func (s *Server) CaughtUp(master *Server) error {
	m, err := master.replication()
	if err != nil {
		return err
	}
	want, err := strconv.ParseInt(m["master_repl_offset"], 10, 64)
	if err != nil {
		return fmt.Errorf("redistest: master_repl_offset %q: %w", m["master_repl_offset"], err)
	}
	deadline := time.Now().Add(syncTimeout)
	for {
		r, err := s.replication()
		if err != nil {
			return err
		}
		if r["master_replid"] == m["master_replid"] {
			if got, err := strconv.ParseInt(r["master_repl_offset"], 10, 64); err == nil && got >= want {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: replica %s at offset %s of %s after %v, want offset %d of %s",
				s.Addr(), r["master_repl_offset"], r["master_replid"], syncTimeout, want, m["master_replid"])
		}
		time.Sleep(pollInterval)
	}
}

// replication returns the fields of s's INFO replication.
func (s *Server) replication() (map[string]string, error) {
	v, err := s.Do("INFO", "replication")
	if err != nil {
		return nil, err
	}
	text, _ := v.(string)
	fields := make(map[string]string)
	for line := range strings.Lines(text) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			fields[k] = v
		}
	}
	return fields, nil
}
