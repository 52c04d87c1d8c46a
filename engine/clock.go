package engine

import (
	"context"
	"time"
)

// Clock is the engine's time source. A paused turn's abandonment deadline,
// the waits between provider retries, the provider call and subagent
// timeouts, registered-client call deadlines, the ttl sweep and client
// lifetimes all run on it. Options.Clock replaces it in tests.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has elapsed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc.
type Timer interface {
	// Stop prevents the call; it reports false when it already ran or
	// was stopped.
	Stop() bool
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

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
	if _, real := e.clk.(realClock); real {
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
