package rueidisnode_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/quorumlock/redlock/internal/redistest"
	"github.com/quorumlock/redlock/rueidisnode"
	"github.com/redis/rueidis"
)

// floodScript publishes ARGV[1] empty messages on KEYS[1] in one go, so
// that a subscriber's connection gets them back to back, ahead of any
// reply the server gives it after the script.
const floodScript = "for i = 1, tonumber(ARGV[1]) do redis.call('PUBLISH', KEYS[1], '') end return 0"

// TestNotifyUnderFlood subscribes, and ends the subscription, round after
// round on one Node while another client keeps publishing bursts of
// messages on the channel, as the releases of a contended lock do, and
// then checks that a message still wakes a new subscriber.
//
// rueidis's Client.Receive, which Notify used to subscribe with, ended a
// subscription only in the client when its context was done: the
// connection stayed subscribed, and the server kept sending it the
// channel's messages. The next Receive on that connection registered a
// 16-message buffer before it sent SUBSCRIBE, and read the buffer only
// once SUBSCRIBE was answered; a burst of more than 16 messages ahead of
// that answer filled the buffer, and the connection's reader blocked on
// the 17th, never reaching the answer. Notify then waited for its
// context, and every command on that connection with it.
func TestNotifyUnderFlood(t *testing.T) {
	t.Parallel()
	t.Run("Server", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t, redistest.Config{})
		c := newClient(t, srv, 0)
		defer c.Close()
		pub := newClient(t, srv, 0)
		defer pub.Close()
		n := rueidisnode.New(c, "")
		defer n.Close()
		testNotifyUnderFlood(t, n, pub)
	})
	t.Run("Cluster", func(t *testing.T) {
		t.Parallel()
		cl := redistest.StartCluster(t, 3, redistest.Config{})
		n, err := rueidisnode.Dial(cl.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		pub, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: cl.Addrs(), DisableCache: true, DisableRetry: true})
		if err != nil {
			t.Fatal(err)
		}
		defer pub.Close()
		testNotifyUnderFlood(t, n, pub)
	})
}

func testNotifyUnderFlood(t *testing.T, n *rueidisnode.Node, pub rueidis.Client) {
	const (
		channel = "redlock:released:{flood}"
		rounds  = 40
		burst   = "200" // messages per script call, well over rueidis's buffer of 16
	)
	// hang bounds every wait of the test, so that a Notify that never
	// returns fails the test instead of hanging it; it is no timing
	// requirement.
	const hang = 20 * time.Second

	flood, stopFlood := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for flood.Err() == nil {
			cmd := pub.B().Eval().Script(floodScript).Numkeys(1).Key(channel).Arg(burst).Build()
			if err := pub.Do(flood, cmd).Error(); err != nil && flood.Err() == nil {
				t.Errorf("publishing: %v", err)
				return
			}
		}
	}()
	defer wg.Wait()
	defer stopFlood()

	// The first round subscribes a connection that has no subscription
	// yet; the later ones find it subscribed, unless Notify unsubscribed.
	for i := range rounds {
		ctx, cancel := context.WithTimeout(context.Background(), hang)
		wake := make(chan struct{}, 1)
		err := n.Notify(ctx, channel, wake)
		if err != nil {
			cancel()
			t.Fatalf("round %d: Notify: %v", i, err)
		}
		select {
		case <-wake:
		case <-ctx.Done():
			cancel()
			t.Fatalf("round %d: no message during the flood: %v", i, ctx.Err())
		}
		cancel()
	}
	stopFlood()
	wg.Wait()

	// Messages still flow: one message wakes a new subscriber.
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	wake := make(chan struct{}, 1)
	if err := n.Notify(ctx, channel, wake); err != nil {
		t.Fatalf("Notify after the flood: %v", err)
	}
	for len(wake) > 0 { // wakes of the flood's last messages
		<-wake
	}
	if err := pub.Do(ctx, pub.B().Publish().Channel(channel).Message("").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	case <-ctx.Done():
		t.Fatal("a message published after the flood woke no one")
	}
}
