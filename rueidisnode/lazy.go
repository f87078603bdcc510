package rueidisnode

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/quorumlock/redlock/driver"
	"github.com/redis/rueidis"
)

// errClosed is what a Node that was closed before it had a client returns.
var errClosed = errors.New("rueidisnode: node closed")

// A lazyClient makes a rueidis client on first use, for a cluster:
// rueidis.NewClient connects to the cluster at once to learn its slots,
// and fails when it cannot, while Dial must neither connect nor fail for a
// node that is down. Until a client is made, every use tries anew.
type lazyClient struct {
	opt rueidis.ClientOption

	mu     sync.Mutex
	c      rueidis.Client
	making chan struct{} // closed when the attempt under way ends; nil when none is
	err    error         // why the last attempt failed
	closed bool
}

// get returns the client, making it first if need be. It waits for an
// attempt to make it until ctx is done; the attempt goes on in the
// background, for the next call.
func (l *lazyClient) get(ctx context.Context) (rueidis.Client, error) {
	l.mu.Lock()
	switch {
	case l.c != nil:
		c := l.c
		l.mu.Unlock()
		return c, nil
	case l.closed:
		l.mu.Unlock()
		return nil, errClosed
	case l.making == nil:
		done := make(chan struct{})
		l.making = done
		go l.make(done)
	}
	done := l.making
	l.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.c != nil {
		return l.c, nil
	}
	if l.closed {
		return nil, errClosed
	}
	return nil, l.err
}

// make makes a client, and closes done when it is through.
func (l *lazyClient) make(done chan struct{}) {
	c, err := rueidis.NewClient(l.opt)
	l.mu.Lock()
	defer l.mu.Unlock()
	defer close(done)
	l.making = nil
	switch {
	case err != nil:
		if c != nil {
			c.Close()
		}
		l.err = newClientError(err)
	case l.closed:
		c.Close()
	default:
		l.c = c
	}
}

// newClientError returns the error of rueidis.NewClient: an error reply,
// such as that of a server without cluster support, as a
// *driver.ReplyError, so that the lock client sees a node that refuses.
// rueidis drops the "ERR " that begins most such replies, and the message
// of the *driver.ReplyError has it back: every error reply begins with an
// upper-case code.
func newClientError(err error) error {
	rerr, ok := rueidis.IsRedisErr(err)
	if !ok {
		return fmt.Errorf("rueidisnode: %w", err)
	}
	reply := &driver.ReplyError{Msg: rerr.Error(), Err: rerr}
	if reply.Code() == "" {
		reply.Msg = "ERR " + reply.Msg
	}
	return reply
}

// close closes the client, once an attempt under way to make it is over.
func (l *lazyClient) close() {
	l.mu.Lock()
	l.closed = true
	done := l.making
	l.mu.Unlock()
	if done != nil {
		<-done
	}
	l.mu.Lock()
	c := l.c
	l.c = nil
	l.mu.Unlock()
	if c != nil {
		c.Close()
	}
}
