package main

import (
	"slices"
	"time"
)

// quantile returns the q-quantile (0 ≤ q ≤ 1) of sorted by the
// nearest-rank method, or 0 for no samples.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(q*float64(len(sorted))+0.999999999) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// summary describes a set of latencies.
type summary struct {
	N                  int
	P50, P90, P99, Max time.Duration
}

func summarize(samples []time.Duration) summary {
	s := slices.Clone(samples)
	slices.Sort(s)
	out := summary{N: len(s), P50: quantile(s, 0.50), P90: quantile(s, 0.90), P99: quantile(s, 0.99)}
	if len(s) > 0 {
		out.Max = s[len(s)-1]
	}
	return out
}

// ms renders d in milliseconds with two decimals.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
