package rueidisnode

import (
	"context"

	"github.com/redis/rueidis"
)

// Notify implements [driver.Notifier]: it subscribes to channel on the
// client's own connection (rueidis carries subscriptions alongside other
// commands), to one of its nodes for a cluster, which delivers what is
// published on any node to every node, and sends on wake, without
// blocking, for each message, until ctx is done. It returns once the
// server has confirmed the subscription.
func (n *Node) Notify(ctx context.Context, channel string, wake chan<- struct{}) error {
	c, err := n.client(ctx)
	if err != nil {
		return err
	}
	ready := make(chan struct{})
	failed := make(chan error, 1)
	hooked := rueidis.WithOnSubscriptionHook(ctx, func(s rueidis.PubSubSubscription) {
		if s.Kind == "subscribe" && s.Channel == channel {
			select {
			case <-ready:
			default:
				close(ready)
			}
		}
	})
	go func() {
		failed <- c.Receive(hooked, c.B().Subscribe().Channel(channel).Build(), func(rueidis.PubSubMessage) {
			select {
			case wake <- struct{}{}:
			default:
			}
		})
	}()
	select {
	case <-ready:
		return nil
	case err := <-failed:
		if err == nil {
			err = context.Canceled // unsubscribed before it was confirmed
		}
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
