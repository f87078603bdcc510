package main

import (
	"math"
	"math/bits"
	"time"
)

// A latency histogram keeps every value below 128ns exactly and splits each
// power of two above that into 64 equal buckets, so a bucket is at most
// 1/64 of its values wide. Recording does not allocate, which keeps the
// harness out of the allocations counted per pair.
const (
	exactBelow  = 128 // values below this have a bucket each
	perOctave   = 64  // buckets per power of two above it
	histBuckets = 58*perOctave + exactBelow
)

// A hist counts durations. The zero value is empty and ready to use.
type hist struct {
	counts [histBuckets]uint64
	n      uint64
}

// bucket returns the index of the bucket of v nanoseconds.
func bucket(v uint64) int {
	if v < exactBelow {
		return int(v)
	}
	shift := bits.Len64(v) - 7 // v>>shift is in [64, 128)
	return shift*perOctave + int(v>>shift)
}

// bounds returns the least value of bucket i and the bucket's width.
func bounds(i int) (lo, width uint64) {
	if i < exactBelow {
		return uint64(i), 1
	}
	shift := i/perOctave - 1
	mantissa := uint64(i - shift*perOctave)
	return mantissa << shift, 1 << shift
}

// add records d; a negative d counts as 0.
func (h *hist) add(d time.Duration) {
	h.counts[bucket(uint64(max(d, 0)))]++
	h.n++
}

// merge adds the values of o to h.
func (h *hist) merge(o *hist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
}

// reset empties h.
func (h *hist) reset() { *h = hist{} }

// quantile returns the q-quantile (0 < q ≤ 1): the middle of the bucket
// that holds the value of rank ⌈q·n⌉; 0 for an empty histogram.
func (h *hist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := max(uint64(math.Ceil(q*float64(h.n))), 1)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, w := bounds(i)
			return time.Duration(lo + (w-1)/2)
		}
	}
	return 0 // not reached: the counts add up to n
}
