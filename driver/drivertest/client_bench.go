package drivertest

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/redistest"
)

// BenchmarkClient measures an uncontended TryLock followed by Release
// through the adapter whose Dial is dial, on 1, 3 and 5 redis-server
// processes that it starts. Run it with -benchmem: the allocations it
// reports are the lock client's and the adapter's together.
func BenchmarkClient[N Node](b *testing.B, dial func(url string) (N, error)) {
	d := dialer(dial)
	for _, n := range []int{1, 3, 5} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			servers := redistest.StartN(b, n, redistest.Config{})
			nodes := make([]redlock.Node, n)
			for i, s := range servers {
				nodes[i] = d(b, s.URL())
			}
			// The servers are new: without this they would sit out one
			// TTL in restart quarantine.
			c, err := redlock.New(nodes, &redlock.Options{DisableQuarantine: true})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				l, err := c.TryLock(ctx, "bench:"+strconv.Itoa(i&1023), 10*time.Second)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Release(ctx); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
