package main

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/baton-engine/baton/client/executor"
)

// closeTimeout bounds executor.close and the wait for the handlers that
// Close cancels.
const closeTimeout = 30 * time.Second

// drainAndClose is `baton executor`'s SIGTERM: the executor takes no new
// work (tool calls, sessions and new agent sessions are refused with
// -32009 draining, so the server can place them elsewhere), lets the
// running calls and turns finish and waits until the server has
// acknowledged their results and events, for up to timeout; then it
// closes, cancelling whatever still runs.
func drainAndClose(ctx context.Context, e *executor.Executor, timeout time.Duration, log *slog.Logger) {
	log.Info("executor draining", "timeout", timeout)
	dctx, cancel := context.WithTimeout(ctx, timeout)
	err := e.Drain(dctx)
	cancel()
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		log.Warn("executor drain timed out; stopping the work still running")
	case err != nil && !errors.Is(err, executor.ErrClosed):
		log.Warn("executor drain", "err", err)
	}
	cctx, cancel := context.WithTimeout(ctx, closeTimeout)
	defer cancel()
	if err := e.Close(cctx); err != nil {
		log.Warn("executor close", "err", err)
	}
	log.Info("executor stopped")
}
