package executor

import "context"

// Drain stops taking new work and waits until the work in progress is
// done and delivered: it refuses new tool.call, session.assign and
// turn.start of a new agent session with -32009 (data.reason
// "draining"), then returns nil once no tool call and no turn runs and
// the harness has acknowledged every held result, event and
// session.ended. Repeated calls, turns of sessions already held here and
// everything else are still served. It returns ctx's error when ctx ends
// first, and ErrClosed once the executor has stopped. The executor keeps
// draining after Drain returns, until Close.
func (e *Executor) Drain(ctx context.Context) error {
	e.mu.Lock()
	first := !e.draining
	e.draining = true
	stopped := e.state == stateStopped
	e.mu.Unlock()
	if stopped {
		return ErrClosed
	}
	if first {
		e.log.Info("executor: draining", "reason", "local")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(e.life, cancel)()
	err := e.out.waitUntil(ctx, func() bool { return !e.working() && e.out.held() == 0 })
	if err != nil && e.life.Err() != nil {
		return ErrClosed
	}
	return err
}

// drainingLocked reports whether new work is refused: Drain was called
// or c (nil: none) was asked to drain. e.mu is held.
func (e *Executor) drainingLocked(c *conn) bool {
	return e.draining || c != nil && c.isDraining()
}

// errDraining is the -32009 answer to new work while draining.
func errDraining() *RPCError {
	return rpcErr(CodeOverCapacity, "executor is draining", map[string]string{"reason": "draining"})
}

// startLocked counts in a piece of work Drain waits for: a tool call, a
// turn or a session's end. e.mu is held.
func (e *Executor) startLocked() { e.busy++ }

// finish counts it out once its last request is held in the outbox, and
// wakes Drain.
func (e *Executor) finish() {
	e.mu.Lock()
	e.busy--
	e.mu.Unlock()
	e.out.poke()
}

// goCounted runs f like goWork as counted work, started with
// startLocked: the count ends when f returns, or at once when the
// executor is stopping (it then reports false and f does not run).
func (e *Executor) goCounted(f func()) bool {
	if !e.goWork(func() {
		defer e.finish()
		f()
	}) {
		e.finish()
		return false
	}
	return true
}

func (e *Executor) working() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.busy > 0
}
