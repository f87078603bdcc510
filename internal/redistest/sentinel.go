package redistest

import (
	"errors"
	"fmt"
	"net"
	"testing"
	"time"
)

// sentinelDownAfter is how long a Sentinel waits for a master that does
// not answer before it takes it to be down and fails it over.
const sentinelDownAfter = time.Second

// NewSentinel starts a Redis Sentinel ("redis-server --sentinel") on a
// free loopback port, which monitors master, a server on TCP, under the
// name name, alone: with a quorum of one. It learns master's replicas from
// master. When master has not answered for a second, Sentinel takes it to
// be down and fails it over: it promotes one of its replicas, makes the
// others replicate from it, and answers SENTINEL GET-MASTER-ADDR-BY-NAME
// with its address, as clients that follow a Sentinel ask. Sentinel
// prefers the replica with the most data, and promotes none while no
// replica has been linked to master recently.
//
// The Sentinel is a Server: Do sends it commands, and Kill, Restart and
// Close work as for any server. Config.Unix is not supported.
func NewSentinel(name string, master *Server, cfg Config) (*Server, error) {
	if master.Network() != "tcp" {
		return nil, errors.New("redistest: a Sentinel monitors a master on TCP")
	}
	host, port, _ := net.SplitHostPort(master.Addr())
	ms := sentinelDownAfter.Milliseconds()
	conf := fmt.Sprintf("sentinel monitor %s %s %s 1\n", name, host, port) +
		fmt.Sprintf("sentinel down-after-milliseconds %s %d\n", name, ms) +
		// A failover that does not complete is tried again after this.
		fmt.Sprintf("sentinel failover-timeout %s %d\n", name, 10*ms)
	return newServer(cfg, sentinel, conf)
}

// StartSentinel is like NewSentinel but fails t if the Sentinel does not
// start, and closes it when t ends.
func StartSentinel(t testing.TB, name string, master *Server, cfg Config) *Server {
	t.Helper()
	s, err := NewSentinel(name, master, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeIn(t, s) })
	return s
}
