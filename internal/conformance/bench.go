package conformance

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/internal/redistest"
)

// Benchmark measures an uncontended TryLock followed by Release through the
// adapter that dial creates, on 1, 3 and 5 real redis-server processes.
// Run it with -benchmem: the allocations it reports are the client's and
// the adapter's together.
func Benchmark(b *testing.B, dial Dialer) {
	for _, n := range []int{1, 3, 5} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			servers := redistest.StartN(b, n, redistest.Config{})
			nodes := make([]redlock.Node, n)
			for i, s := range servers {
				nodes[i] = dial(b, s.URL())
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
