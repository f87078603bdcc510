package bench

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
)

// This file holds lockbench -net realistic: a redistest.Proxy in front of
// each server whose hold (Proxy.SetHold) sleeps for a round trip drawn as
// NetConfig says, with nanosleep (see preciseSleep): a Go timer in a
// process whose processors are idle fires no sooner than a whole
// millisecond, which would blur round trips of a fraction of one. The
// proxies share the process, and its cores, with the clients.

// NetConfig describes the simulated network: a proxy in front of each
// server holds each command that a client sends for a round trip, and one
// server stalls now and then.
type NetConfig struct {
	// MinRTT and MaxRTT are the base round trips of the first and the
	// last server; those of the servers between are spread evenly.
	MinRTT, MaxRTT time.Duration
	// Jitter is the mean of the random part of a round trip: each
	// command a client sends is held its server's base round trip plus an
	// exponentially distributed extra of mean Jitter. Commands stay in
	// order on a connection, each held after the one before it, so a
	// pipeline of k commands is held k times. Replies are relayed as they
	// come.
	Jitter time.Duration
	// StallNode is the server that stalls, counted from 1; 0 is none.
	StallNode int
	// StallMin and StallMax bound how long a stall lasts, drawn
	// uniformly. While a server stalls nothing reaches it: what its
	// clients send meanwhile is delivered when the stall ends, as a
	// server blocked in fork or fsync reads it only then. Its replies
	// already on their way still arrive.
	StallMin, StallMax time.Duration
	// StallEvery is the mean time from the end of one stall to the start
	// of the next; the gaps are exponentially distributed. 0 is no
	// stalls.
	StallEvery time.Duration
}

// DefaultNetConfig returns the network of lockbench -net realistic: round
// trips of 200µs to 1ms plus a jitter of mean 100µs, and the first server
// stalling for 5–20ms after gaps of one second on average. The first
// server has the shortest round trip, so it is in the quorum of nearly
// every round until it stalls.
func DefaultNetConfig() NetConfig {
	return NetConfig{
		MinRTT:     200 * time.Microsecond,
		MaxRTT:     time.Millisecond,
		Jitter:     100 * time.Microsecond,
		StallNode:  1,
		StallMin:   5 * time.Millisecond,
		StallMax:   20 * time.Millisecond,
		StallEvery: time.Second,
	}
}

// RTT returns the base round trip of server i (from 0) of n.
func (nc NetConfig) RTT(i, n int) time.Duration {
	if n <= 1 {
		return nc.MinRTT
	}
	return nc.MinRTT + (nc.MaxRTT-nc.MinRTT)*time.Duration(i)/time.Duration(n-1)
}

// stalls reports whether a server stalls.
func (nc NetConfig) stalls() bool { return nc.StallNode > 0 && nc.StallEvery > 0 }

// Describe says what the network of n servers is, for a report.
func (nc NetConfig) Describe(n int) string {
	rtts := make([]string, n)
	for i := range n {
		rtts[i] = fmtDur(nc.RTT(i, n))
	}
	s := fmt.Sprintf("each server behind a delay proxy (redistest.Proxy, in the benchmark's process) that holds what clients send for a round trip: "+
		"base round trips %s (servers 1 to %d), plus an exponentially distributed jitter of mean %s",
		strings.Join(rtts, ", "), n, fmtDur(nc.Jitter))
	if nc.stalls() {
		s += fmt.Sprintf("; server %d stalls for %s–%s (uniform) after gaps of mean %v (exponential)",
			nc.StallNode, fmtDur(nc.StallMin), fmtDur(nc.StallMax), nc.StallEvery)
	} else {
		s += "; no stalls"
	}
	return s
}

// A Network is the proxies of a simulated network, one per server.
type Network struct {
	cfg     NetConfig
	proxies []*redistest.Proxy
	stop    chan struct{}
	wg      sync.WaitGroup
}

// StartNetwork starts a delay proxy in front of each server, as cfg says.
func StartNetwork(servers []*redistest.Server, cfg NetConfig) (*Network, error) {
	if cfg.StallNode < 0 || cfg.StallNode > len(servers) || cfg.StallMax < cfg.StallMin {
		return nil, fmt.Errorf("no server %d to stall among %d, or stalls of %v–%v", cfg.StallNode, len(servers), cfg.StallMin, cfg.StallMax)
	}
	n := &Network{cfg: cfg, stop: make(chan struct{})}
	for i, s := range servers {
		p, err := redistest.NewProxy(s)
		if err != nil {
			n.Close()
			return nil, err
		}
		n.proxies = append(n.proxies, p)
		var stalledUntil atomic.Int64 // time.Now().UnixNano() at which the stall ends
		if cfg.stalls() && i == cfg.StallNode-1 {
			n.wg.Go(func() { n.stallLoop(&stalledUntil) })
		}
		rtt := cfg.RTT(i, len(servers))
		p.SetHold(func() {
			due := time.Now().Add(rtt + time.Duration(rand.ExpFloat64()*float64(cfg.Jitter)))
			preciseSleep(time.Until(due))
			// What reaches a stalled server is delivered when it ends.
			for until := stalledUntil.Load(); time.Now().UnixNano() < until; until = stalledUntil.Load() {
				preciseSleep(time.Duration(until - time.Now().UnixNano()))
			}
		})
	}
	return n, nil
}

// stallLoop stalls a server now and then until the network closes.
func (n *Network) stallLoop(until *atomic.Int64) {
	cfg := n.cfg
	for {
		gap := time.Duration(rand.ExpFloat64() * float64(cfg.StallEvery))
		d := cfg.StallMin + time.Duration(rand.Int64N(int64(cfg.StallMax-cfg.StallMin)+1))
		select {
		case <-n.stop:
			return
		case <-time.After(gap):
		}
		until.Store(time.Now().Add(d).UnixNano())
		select {
		case <-n.stop:
			return
		case <-time.After(d):
		}
	}
}

// Addrs returns the proxies' addresses, one per server, in order.
func (n *Network) Addrs() []string {
	var a []string
	for _, p := range n.proxies {
		a = append(a, p.Addr())
	}
	return a
}

// Describe says what the network is, for a report.
func (n *Network) Describe() string { return n.cfg.Describe(len(n.proxies)) }

// Close stops the stalls and the proxies.
func (n *Network) Close() error {
	close(n.stop)
	n.wg.Wait()
	var errs []error
	for _, p := range n.proxies {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}
