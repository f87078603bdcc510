package rueidisnode

import (
	"context"
	"errors"
	"sync"

	"github.com/redis/rueidis"
)

// Notify implements [driver.Notifier]: it subscribes to channel and sends
// on wake, without blocking, for each message, until ctx is done. It
// returns once the server has confirmed the subscription.
//
// All subscriptions of a Node share one connection of their own, taken
// from the client's pool of dedicated connections on first use and kept
// until Close; with a cluster client, that connection is to one of the
// cluster's nodes, and Redis Cluster delivers what is published on any
// node to every node. A channel is subscribed while it has waiters, and
// unsubscribed when the last one's context is done. When the connection
// breaks, every waiter is woken (a release may have gone unannounced) and
// its subscription ends; the next Notify opens a new connection.
//
// Notify does not use rueidis's Client.Receive: a Receive whose context
// is done ends the subscription only in the client, and the next one on
// the same connection and channel can block that connection's reader
// (see TestNotifyUnderFlood).
func (n *Node) Notify(ctx context.Context, channel string, wake chan<- struct{}) error {
	c, err := n.client(ctx)
	if err != nil {
		return err
	}
	return n.hub.notify(ctx, c, channel, wake)
}

// errSubLost is why the subscriptions ended when their connection ended
// without an error of its own.
var errSubLost = errors.New("rueidisnode: subscription connection closed")

// A hub keeps the subscriptions of a Node on one dedicated connection and
// fans the messages out to the waiters of each channel.
//
// Only the connection's goroutine (subConn.run) sends SUBSCRIBE and
// UNSUBSCRIBE, one batch at a time, so they reach the server in the order
// in which it decided them: it compares the channels that have waiters
// with those the connection is subscribed to, and sends the difference.
type hub struct {
	mu     sync.Mutex
	conn   *subConn          // nil until a subscription needs it, and after it ends
	topics map[string]*topic // the channels that have waiters, all on conn
	closed bool
}

// A topic is one channel's waiters.
type topic struct {
	wakes map[chan<- struct{}]int // with counts
	ready chan struct{}           // closed once the subscription is confirmed, or failed
	err   error                   // why it failed; set before ready is closed
	done  bool                    // ready is closed
}

// finish closes t.ready, with the error err, unless it is closed.
func (t *topic) finish(err error) {
	if !t.done {
		t.done, t.err = true, err
		close(t.ready)
	}
}

// wakeAll sends on the wake channels of t, without blocking.
func (t *topic) wakeAll() {
	for wake := range t.wakes {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
}

// A subConn is the hub's connection and what it has asked the server.
// Its maps are guarded by hub.mu.
type subConn struct {
	kick      chan struct{}   // cap 1: the hub's topics changed
	stop      chan struct{}   // closed by hub.close
	done      chan struct{}   // closed when run returns
	sent      map[string]bool // channels whose last command sent was SUBSCRIBE
	confirmed map[string]bool // those of them whose SUBSCRIBE was answered
}

func (h *hub) notify(ctx context.Context, c rueidis.Client, channel string, wake chan<- struct{}) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return errClosed
	}
	if h.conn == nil {
		sc := &subConn{
			kick:      make(chan struct{}, 1),
			stop:      make(chan struct{}),
			done:      make(chan struct{}),
			sent:      make(map[string]bool),
			confirmed: make(map[string]bool),
		}
		h.conn = sc
		h.topics = make(map[string]*topic)
		go sc.run(h, c)
	}
	sc := h.conn
	t := h.topics[channel]
	if t == nil {
		t = &topic{wakes: make(map[chan<- struct{}]int), ready: make(chan struct{})}
		h.topics[channel] = t
		if sc.confirmed[channel] {
			// Still subscribed, for waiters that have just left.
			t.finish(nil)
		} else {
			sc.poke()
		}
	}
	t.wakes[wake]++
	h.mu.Unlock()

	context.AfterFunc(ctx, func() { h.leave(channel, t, wake) })
	select {
	case <-t.ready:
		return t.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// leave removes one waiter from t, the topic of channel, and t from the
// hub with its last waiter.
func (h *hub) leave(channel string, t *topic, wake chan<- struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t.wakes[wake]--; t.wakes[wake] <= 0 {
		delete(t.wakes, wake)
	}
	if len(t.wakes) == 0 && h.topics[channel] == t {
		delete(h.topics, channel)
		h.conn.poke()
	}
}

// deliver hands a message on channel, received on sc, to its waiters.
func (h *hub) deliver(sc *subConn, channel string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conn != sc {
		return
	}
	if t := h.topics[channel]; t != nil {
		t.wakeAll()
	}
}

// close ends the hub's connection, if it has one, and waits until it is
// given back to the client's pool.
func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	sc := h.conn
	h.mu.Unlock()
	if sc != nil {
		close(sc.stop)
		<-sc.done
	}
}

// poke tells sc's goroutine that the topics changed.
func (sc *subConn) poke() {
	select {
	case sc.kick <- struct{}{}:
	default:
	}
}

// run holds a dedicated connection of c for h until it breaks or h is
// closed, keeping its subscriptions in step with h's topics; then it
// ends them all.
func (sc *subConn) run(h *hub, c rueidis.Client) {
	defer close(sc.done)
	err := sc.serve(h, c)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conn != sc {
		return
	}
	h.conn = nil
	if h.closed {
		err = errClosed
	}
	for _, t := range h.topics {
		t.wakeAll()
		t.finish(err)
	}
	h.topics = nil
}

// serve is run's work while it has the connection: it returns why it
// ended.
func (sc *subConn) serve(h *hub, c rueidis.Client) error {
	dc, release, err := dedicate(c)
	if err != nil {
		return err
	}
	defer release() // unsubscribes the connection and gives it back, or closes it if it broke
	ended := dc.SetPubSubHooks(rueidis.PubSubHooks{
		OnMessage: func(m rueidis.PubSubMessage) { h.deliver(sc, m.Channel) },
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-sc.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		select {
		case err, ok := <-ended:
			if ok && err != nil {
				return err
			}
			return errSubLost
		case <-sc.stop:
			return errClosed
		case <-sc.kick:
		}
		if err := sc.sync(ctx, h, dc); err != nil {
			return err
		}
	}
}

// sync sends the SUBSCRIBE commands of the channels that got waiters and
// the UNSUBSCRIBE commands of those that lost them, and waits for the
// answers, as long as there are any to send.
func (sc *subConn) sync(ctx context.Context, h *hub, dc rueidis.DedicatedClient) error {
	for {
		var subs, unsubs []string
		h.mu.Lock()
		for ch := range h.topics {
			if !sc.sent[ch] {
				sc.sent[ch] = true
				subs = append(subs, ch)
			}
		}
		for ch := range sc.sent {
			if h.topics[ch] == nil {
				delete(sc.sent, ch)
				delete(sc.confirmed, ch)
				unsubs = append(unsubs, ch)
			}
		}
		h.mu.Unlock()
		if len(subs)+len(unsubs) == 0 {
			return nil
		}
		cmds := make(rueidis.Commands, 0, len(subs)+len(unsubs))
		for _, ch := range subs {
			cmds = append(cmds, dc.B().Subscribe().Channel(ch).Build())
		}
		for _, ch := range unsubs {
			cmds = append(cmds, dc.B().Unsubscribe().Channel(ch).Build())
		}
		resps := dc.DoMulti(ctx, cmds...)
		for _, r := range resps {
			if err := r.Error(); err != nil {
				if _, ok := rueidis.IsRedisErr(err); !ok {
					return err // the connection broke, or h is closing
				}
			}
		}
		h.mu.Lock()
		for i, ch := range subs {
			t := h.topics[ch]
			if err := resps[i].Error(); err != nil {
				// An error reply, such as NOPERM: the channel's
				// waiters are told, and the channel is forgotten.
				delete(sc.sent, ch)
				if t != nil {
					delete(h.topics, ch)
					t.finish(err)
				}
				continue
			}
			sc.confirmed[ch] = true
			if t != nil {
				t.finish(nil)
			}
		}
		h.mu.Unlock()
	}
}

// dedicate takes a dedicated connection of c: of one of its nodes for a
// cluster client, whose own dedicated connections must first send a
// command with a key.
func dedicate(c rueidis.Client) (rueidis.DedicatedClient, func(), error) {
	if c.Mode() != rueidis.ClientModeCluster {
		dc, release := c.Dedicate()
		return dc, release, nil
	}
	for _, nc := range c.Nodes() { // in random order
		dc, release := nc.Dedicate()
		return dc, release, nil
	}
	return nil, nil, errors.New("rueidisnode: the cluster client knows no node")
}
