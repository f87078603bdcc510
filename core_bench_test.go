package redlock

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkCore measures the client's own cost of one Lock and Release,
// with nodes that answer at once from memory (gatedNode without a gate):
// no network, no server. It is the core's share of the cost model in
// BENCHMARKS.md; the real thing is measured by bench/cmd/lockbench.
func BenchmarkCore(b *testing.B) {
	for _, n := range []int{1, 3, 5} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			nodes := make([]Node, n)
			for i := range nodes {
				nodes[i] = gatedNode{name: fmt.Sprint(i)}
			}
			c, err := New(nodes, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				l, err := c.Lock(ctx, "k", 10e9)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
