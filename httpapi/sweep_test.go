package httpapi

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// sweepRecorder records sweep cutoffs.
type sweepRecorder struct {
	memReceipts
	cuts chan time.Time
}

func (s *sweepRecorder) SweepReceipts(_ context.Context, before time.Time) (int, error) {
	s.cuts <- before
	return 1, nil
}

func TestReceiptSweeper(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent()) // other tests of the package leave idle HTTP connections
	now := time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC)
	rec := &sweepRecorder{cuts: make(chan time.Time)}
	s := NewReceiptSweeper(SweeperOptions{Receipts: rec, Interval: time.Millisecond, Now: func() time.Time { return now }})
	if err := s.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	// One sweep at Open and more on every tick, each with the default
	// seven-day retention.
	for range 3 {
		if cut := <-rec.cuts; !cut.Equal(now.Add(-7 * 24 * time.Hour)) {
			t.Fatalf("cutoff %v, want seven days before %v", cut, now)
		}
	}
	done := make(chan error)
	go func() { done <- s.Close() }()
	for {
		select {
		case <-rec.cuts: // a tick raced Close
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			return
		}
	}
}

func TestReceiptSweeperRetention(t *testing.T) {
	now := time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC)
	rec := &sweepRecorder{cuts: make(chan time.Time, 1)}
	s := NewReceiptSweeper(SweeperOptions{Receipts: rec, Retention: 10 * 24 * time.Hour, Now: func() time.Time { return now }})
	if n, err := s.Sweep(context.Background()); n != 1 || err != nil {
		t.Fatalf("Sweep = %d, %v", n, err)
	}
	if cut := <-rec.cuts; !cut.Equal(now.Add(-10 * 24 * time.Hour)) {
		t.Fatalf("cutoff %v", cut)
	}
}
