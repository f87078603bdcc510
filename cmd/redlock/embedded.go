package main

import (
	"fmt"
	"sync"

	"github.com/alicebob/miniredis/v2"
)

// embeddedNodes are in-process Redis-protocol servers (miniredis) for the
// demo, so that it runs on a machine with nothing but Go.
type embeddedNodes struct {
	mu      sync.Mutex
	servers []*miniredis.Miniredis
	stopped []bool
}

// startEmbedded starts n servers on free loopback ports and returns them
// with their URLs.
func startEmbedded(n int) (*embeddedNodes, []string, error) {
	e := &embeddedNodes{}
	var urls []string
	for i := 0; i < n; i++ {
		m := miniredis.NewMiniRedis()
		// miniredis leaves TTLs alone unless told to count them down with
		// the clock, as Redis does.
		m.ClockTTL(true)
		if err := m.StartAddr("127.0.0.1:0"); err != nil {
			e.close()
			return nil, nil, fmt.Errorf("starting embedded node %d: %w", i+1, err)
		}
		e.servers = append(e.servers, m)
		e.stopped = append(e.stopped, false)
		urls = append(urls, "redis://"+m.Addr())
	}
	return e, urls, nil
}

// stop stops server i: it closes its listener and every connection, and
// the node is unreachable from then on.
func (e *embeddedNodes) stop(i int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.stopped[i] {
		e.stopped[i] = true
		e.servers[i].Close()
	}
}

// close stops every server.
func (e *embeddedNodes) close() {
	for i := range e.servers {
		e.stop(i)
	}
}
