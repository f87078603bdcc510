package bench

import (
	"math"
	"math/bits"
	"time"
)

// The histogram is log-linear: values below 2^subBits nanoseconds have a
// bucket each, and every power of two above that is split into 2^(subBits-1)
// equal buckets, so a bucket is at most 1/32 (about 3%) of its values wide.
const (
	subBits  = 6
	subCount = 1 << (subBits - 1) // buckets per power of two
	buckets  = (64-subBits)*subCount + 2*subCount
)

// A hist is a latency histogram that records without allocating. The zero
// value is empty and ready to use. It is not safe for concurrent use: each
// goroutine of a run records into its own, and they are merged afterwards.
type hist struct {
	counts [buckets]uint64
	n      uint64
	max    time.Duration
}

// bucketOf returns the index of the bucket that holds v nanoseconds.
func bucketOf(v uint64) int {
	if v < 2*subCount {
		return int(v)
	}
	shift := bits.Len64(v) - subBits
	return shift*subCount + int(v>>shift)
}

// bucketRange returns the least and the greatest value bucket i holds.
func bucketRange(i int) (lo, hi uint64) {
	if i < 2*subCount {
		return uint64(i), uint64(i)
	}
	shift := i/subCount - 1
	sub := uint64(subCount + i%subCount)
	lo = sub << shift
	return lo, lo + (1 << shift) - 1
}

// record adds one observation; a negative duration counts as zero.
func (h *hist) record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[bucketOf(uint64(d))]++
	h.n++
	if d > h.max {
		h.max = d
	}
}

// merge adds the observations of o to h.
func (h *hist) merge(o *hist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// quantile returns the q-quantile (0 < q ≤ 1) of the recorded values: the
// middle of the bucket that holds the observation of rank ⌈q·n⌉, but never
// more than the largest value recorded, which is also the value of rank n.
// It returns 0 when h is empty.
func (h *hist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	if rank == h.n {
		return h.max
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, hi := bucketRange(i)
			return min(time.Duration(lo+(hi-lo)/2), h.max)
		}
	}
	return h.max
}

// latencies returns the percentiles of h that the report shows.
func (h *hist) latencies() latencies {
	return latencies{P50: h.quantile(0.50), P99: h.quantile(0.99), P999: h.quantile(0.999), Max: h.max}
}
