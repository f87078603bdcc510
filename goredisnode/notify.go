package goredisnode

import (
	"context"
	"errors"
	"sync"

	"github.com/redis/go-redis/v9"
)

// subscriber is what a go-redis client needs to carry subscriptions.
type subscriber interface {
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
}

// Notify implements [driver.Notifier]: it subscribes to channel and sends
// on wake, without blocking, for each message, until ctx is done. It
// returns once the server has confirmed the subscription.
//
// All subscriptions of a Node share one go-redis PubSub, which holds one
// connection of its own, opened on first use; go-redis re-subscribes on
// it after a reconnection. With a cluster client, that connection is to
// one of the cluster's nodes, and Redis Cluster delivers what is published
// on any node to every node. A client given to New that cannot subscribe
// (it has no Subscribe method) makes Notify fail, and the lock client
// polls instead.
func (n *Node) Notify(ctx context.Context, channel string, wake chan<- struct{}) error {
	s, ok := n.c.(subscriber)
	if !ok {
		return errors.New("goredisnode: the client cannot subscribe")
	}
	return n.hub.notify(ctx, s, channel, wake)
}

// A hub fans the messages of one PubSub out to the waiters of each
// channel.
type hub struct {
	mu      sync.Mutex
	ps      *redis.PubSub
	waiters map[string]map[chan<- struct{}]int // per channel, with counts
	ready   map[string][]chan struct{}         // closed when a subscription is confirmed
}

func (h *hub) notify(ctx context.Context, s subscriber, channel string, wake chan<- struct{}) error {
	ready := make(chan struct{})
	h.mu.Lock()
	if h.ps == nil {
		h.ps = s.Subscribe(context.Background())
		h.waiters = make(map[string]map[chan<- struct{}]int)
		h.ready = make(map[string][]chan struct{})
		go h.run(h.ps)
	}
	if len(h.waiters[channel]) == 0 {
		// SUBSCRIBE and UNSUBSCRIBE are sent under h.mu, so that they
		// reach the server in the order the waiters came and went.
		if err := h.ps.Subscribe(ctx, channel); err != nil {
			h.mu.Unlock()
			return err
		}
		h.waiters[channel] = make(map[chan<- struct{}]int)
		h.ready[channel] = append(h.ready[channel], ready)
	} else {
		close(ready)
	}
	h.waiters[channel][wake]++
	h.mu.Unlock()

	context.AfterFunc(ctx, func() { h.leave(channel, wake) })
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// leave removes one waiter, and the subscription with the last one.
func (h *hub) leave(channel string, wake chan<- struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.waiters[channel]
	if w[wake]--; w[wake] == 0 {
		delete(w, wake)
	}
	if len(w) == 0 {
		delete(h.waiters, channel)
		h.ps.Unsubscribe(context.Background(), channel)
	}
}

// run delivers the PubSub's messages and confirmations until it is closed.
func (h *hub) run(ps *redis.PubSub) {
	for m := range ps.ChannelWithSubscriptions() {
		h.mu.Lock()
		switch m := m.(type) {
		case *redis.Message:
			for wake := range h.waiters[m.Channel] {
				select {
				case wake <- struct{}{}:
				default:
				}
			}
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				for _, r := range h.ready[m.Channel] {
					close(r)
				}
				delete(h.ready, m.Channel)
			}
		}
		h.mu.Unlock()
	}
}

// close ends the hub's PubSub, if it has one.
func (h *hub) close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ps == nil {
		return nil
	}
	return h.ps.Close()
}
