package main

import (
	"context"
	"errors"
	"sync"

	"github.com/baton-engine/baton/client/executor"
)

// errDraining refuses work that arrives once the executor drains.
var errDraining = errors.New("the executor is shutting down; the work was not started")

// drainGate counts the work in progress (tool calls, shell commands, agent
// turns) and, once shut, lets no new work in.
type drainGate struct {
	mu   sync.Mutex
	shot bool
	n    int
	idle chan struct{} // closed once shut with nothing running
}

func newDrainGate() *drainGate { return &drainGate{idle: make(chan struct{})} }

// enter counts one piece of work in; false once the gate is shut.
func (g *drainGate) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shot {
		return false
	}
	g.n++
	return true
}

// leave counts one piece of work out.
func (g *drainGate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n--
	if g.shot && g.n == 0 {
		close(g.idle)
	}
}

// shut lets no more work in and returns a channel closed once the work
// in progress has left.
func (g *drainGate) shut() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.shot {
		g.shot = true
		if g.n == 0 {
			close(g.idle)
		}
	}
	return g.idle
}

func (g *drainGate) running() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n
}

// gatedTool refuses calls once the gate is shut (an is_error result).
func gatedTool(t executor.Tool, g *drainGate) executor.Tool {
	h := t.Handle
	t.Handle = func(ctx context.Context, c executor.Call) (executor.Result, error) {
		if !g.enter() {
			return executor.ErrorResult(errDraining.Error()), nil
		}
		defer g.leave()
		return h(ctx, c)
	}
	return t
}

// gatedProcess refuses commands once the gate is shut.
type gatedProcess struct {
	executor.ProcessHandler
	g *drainGate
}

func (p gatedProcess) Exec(ctx context.Context, req executor.ExecRequest) (executor.ExecResult, error) {
	if !p.g.enter() {
		return executor.ExecResult{ExitCode: -1}, errDraining
	}
	defer p.g.leave()
	return p.ProcessHandler.Exec(ctx, req)
}

// gatedAgent refuses new sessions and turns once the gate is shut.
type gatedAgent struct {
	executor.Agent
	g *drainGate
}

func (a gatedAgent) Open(ctx context.Context, sessionID, ref string) (string, error) {
	if !a.g.enter() {
		return "", errDraining
	}
	defer a.g.leave()
	return a.Agent.Open(ctx, sessionID, ref)
}

func (a gatedAgent) Run(ctx context.Context, t *executor.Turn) error {
	if !a.g.enter() {
		return errDraining
	}
	defer a.g.leave()
	return a.Agent.Run(ctx, t)
}
