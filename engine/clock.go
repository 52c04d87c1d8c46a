package engine

import (
	"context"
	"time"

	"github.com/baton-engine/baton"
)

// The engine's time is Options.Clock (baton.RealClock by default): a
// paused turn's abandonment deadline, the waits between provider retries,
// the provider call and subagent timeouts, registered-client call
// deadlines, the ttl sweep and client lifetimes all run on it.

// after returns a channel closed once d has elapsed on the engine's clock,
// and a stop that releases the timer early.
func (e *Engine) after(d time.Duration) (<-chan struct{}, func()) {
	fired := make(chan struct{})
	t := e.clk.AfterFunc(d, func() { close(fired) })
	return fired, func() { t.Stop() }
}

// withTimeout is context.WithTimeoutCause on the engine's clock. On real
// time it is exactly that, so the callee also sees the deadline; on
// another clock ctx ends with cause when the clock's timer fires.
func (e *Engine) withTimeout(ctx context.Context, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	if _, real := e.clk.(baton.RealClock); real {
		return context.WithTimeoutCause(ctx, d, cause)
	}
	if cause == nil {
		cause = context.DeadlineExceeded
	}
	ctx, cancel := context.WithCancelCause(ctx)
	t := e.clk.AfterFunc(d, func() { cancel(cause) })
	return ctx, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}
