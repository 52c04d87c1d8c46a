// Package proc runs a command as one process group that lives and ends as
// a unit. Every place Baton starts a command for a tool call, a builtin
// tool of the Go SDK, a remote shell or an agent command uses it, so they
// all end the same way:
//
//   - The command leads a process group of its own (Unix), which what it
//     starts joins unless it moves itself elsewhere.
//   - On Linux its parent-death signal is SIGKILL: it dies with the
//     process that started it. Linux sends that signal when the thread
//     that started the child exits, so Run, and Start with Wait, keep the
//     calling goroutine locked to its thread until the command has been
//     waited for.
//   - Cancelling the command's context (exec.CommandContext) sends SIGTERM
//     to the whole group. The grace period later (cmd.WaitDelay, set by
//     Group), a command still running is killed with SIGKILL and its
//     output pipes are closed; the same bound applies to descendants that
//     hold the pipes after the command exited.
//   - A group with nothing left in it is "already gone": the cancel
//     returns os.ErrProcessDone, so Wait reports the command's own exit
//     status rather than the context's error.
//   - Once a cancelled command has ended, Run and Wait send SIGKILL to
//     what is left of its group: nothing a cancelled command started
//     outlives it. What a command that ended on its own left running in
//     the background keeps running; a caller whose commands must not
//     leave anything behind calls Kill.
//
// Elsewhere (no process groups) a cancel kills the command alone, as
// exec.CommandContext does by default.
//
// The package imports only the standard library, so the standard-library-
// only Go SDK (package client and below) may use it: an internal package
// of this module is importable from any package of the module.
package proc

import (
	"context"
	"os/exec"
	"runtime"
	"time"
)

// DefaultGrace is the grace period Group uses when given none.
const DefaultGrace = 2 * time.Second

// Group prepares cmd, made with exec.CommandContext and not yet started,
// to run as a process group as the package comment describes; grace <= 0
// means DefaultGrace. It replaces cmd.SysProcAttr, cmd.Cancel and
// cmd.WaitDelay; a caller that wraps the command (a supervisor) does so
// after Group.
func Group(cmd *exec.Cmd, grace time.Duration) {
	if grace <= 0 {
		grace = DefaultGrace
	}
	cmd.WaitDelay = grace
	group(cmd)
}

// Run is cmd.Run on a locked thread; when ctx, the context cmd was made
// with, has ended, it is followed by Kill.
func Run(ctx context.Context, cmd *exec.Cmd) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	err := cmd.Run()
	if ctx.Err() != nil {
		Kill(cmd)
	}
	return err
}

// Start is cmd.Start that locks the calling goroutine to its thread until
// Wait, which the same goroutine must call once Start succeeded.
func Start(cmd *exec.Cmd) error {
	runtime.LockOSThread()
	if err := cmd.Start(); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	return nil
}

// Wait is cmd.Wait for a command begun with Start, followed by Kill when
// ctx, the context cmd was made with, has ended; it unlocks the thread
// Start locked.
func Wait(ctx context.Context, cmd *exec.Cmd) error {
	defer runtime.UnlockOSThread()
	err := cmd.Wait()
	if ctx.Err() != nil {
		Kill(cmd)
	}
	return err
}

// Kill sends SIGKILL to whatever is left of cmd's process group (the
// command itself where there are no groups). It does nothing before cmd
// has started.
func Kill(cmd *exec.Cmd) {
	if cmd.Process != nil {
		kill(cmd)
	}
}
