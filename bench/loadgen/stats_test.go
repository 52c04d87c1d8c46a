package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSummarize(t *testing.T) {
	var in []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		in = append(in, time.Duration(i)*time.Millisecond)
	}
	got := summarize(in)
	want := summary{N: 100, P50: 50 * time.Millisecond, P90: 90 * time.Millisecond, P99: 99 * time.Millisecond, Max: 100 * time.Millisecond}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("summary (-want +got):\n%s", diff)
	}
	if in[0] != 100*time.Millisecond {
		t.Fatal("summarize sorted its input in place")
	}
	if got := summarize(nil); got != (summary{}) {
		t.Fatalf("empty: %+v", got)
	}
	one := []time.Duration{7}
	if got := summarize(one); got.P50 != 7 || got.P99 != 7 || got.Max != 7 {
		t.Fatalf("one sample: %+v", got)
	}
}
