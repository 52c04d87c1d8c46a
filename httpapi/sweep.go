package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/baton-engine/baton"
)

// Receipt sweep defaults: receipts are kept at least seven days after
// completion and swept hourly.
const (
	DefaultSweepInterval = time.Hour
	MinRetention         = 7 * 24 * time.Hour
)

// SweeperOptions configure a ReceiptSweeper.
type SweeperOptions struct {
	Receipts  baton.ReceiptStore
	Interval  time.Duration    // between sweeps; <= 0 means DefaultSweepInterval
	Retention time.Duration    // how long a done receipt is kept; <= 0 means MinRetention
	Logger    *slog.Logger     // nil discards
	Now       func() time.Time // nil means time.Now
}

// ReceiptSweeper deletes idempotency receipts completed more than
// Retention ago, once at Open and then every Interval, until Close.
type ReceiptSweeper struct {
	opts   SweeperOptions
	log    *slog.Logger
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// NewReceiptSweeper returns a sweeper for opts; it does nothing until Open.
func NewReceiptSweeper(opts SweeperOptions) *ReceiptSweeper {
	if opts.Interval <= 0 {
		opts.Interval = DefaultSweepInterval
	}
	if opts.Retention <= 0 {
		opts.Retention = MinRetention
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &ReceiptSweeper{opts: opts, log: discardNil(opts.Logger)}
}

// Open starts the sweep loop; it stops at Close or when ctx ends.
func (s *ReceiptSweeper) Open(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done != nil {
		return errors.New("receipt sweeper: already open")
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	go s.loop(ctx, s.done)
	return nil
}

// Close stops the loop and waits for a sweep in progress to end.
func (s *ReceiptSweeper) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		return nil
	}
	s.cancel()
	<-s.done
	s.done = nil
	return nil
}

func (s *ReceiptSweeper) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(s.opts.Interval)
	defer t.Stop()
	for {
		if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("idempotency receipt sweep failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sweep deletes the receipts completed more than Retention ago now.
func (s *ReceiptSweeper) Sweep(ctx context.Context) (int, error) {
	n, err := s.opts.Receipts.SweepReceipts(ctx, s.opts.Now().Add(-s.opts.Retention))
	if err == nil && n > 0 {
		s.log.Info("idempotency receipts swept", "deleted", n)
	}
	return n, err
}
