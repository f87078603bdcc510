package otelredlock_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/quorumlock/redlock"
	"github.com/quorumlock/redlock/goredisnode"
	"github.com/quorumlock/redlock/otelredlock"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func Example() {
	// A program would use its exporters' providers, or leave out the
	// options to use the global ones; here the SDK keeps what is recorded
	// in memory, to print it.
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(context.Background())

	obs, err := otelredlock.New(otelredlock.WithMeterProvider(mp), otelredlock.WithTracerProvider(tp))
	if err != nil {
		log.Fatal(err)
	}
	defer obs.Close()

	// exampleURLs holds the URLs of three independent Redis masters.
	var nodes []redlock.Node
	for _, url := range exampleURLs {
		node, err := goredisnode.Dial(url)
		if err != nil {
			log.Fatal(err)
		}
		defer node.Close()
		nodes = append(nodes, node)
	}
	locks, err := redlock.New(nodes, &redlock.Options{
		Observer: obs,
		// The example's servers have just started and nothing was
		// locked on them before; real nodes need no such option.
		DisableQuarantine: true,
	})
	if err != nil {
		log.Fatal(err)
	}

	ctx := context.Background()
	l, err := locks.Lock(ctx, "example:invoice:42", 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		log.Fatal(err)
	}

	for _, s := range spans.Ended() {
		fmt.Println("span", s.Name())
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		log.Fatal(err)
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "redlock.operations" {
			for _, p := range sum.DataPoints {
				op, _ := p.Attributes.Value("redlock.operation")
				out, _ := p.Attributes.Value("redlock.outcome")
				fmt.Printf("%s{%s, %s} %d\n", m.Name, op.Emit(), out.Emit(), p.Value)
			}
		}
	}
	// Unordered output:
	// span redlock.acquire
	// span redlock.release
	// redlock.operations{acquire, ok} 1
	// redlock.operations{release, ok} 1
}
