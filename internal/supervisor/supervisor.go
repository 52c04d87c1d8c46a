// Package supervisor ties a command's whole process tree to the life of
// the process that started it, on Linux.
//
// A parent-death signal (PR_SET_PDEATHSIG) reaches only a direct child, so
// the grandchildren of a command (`sh -c 'server &'`, npx and its node)
// would outlive a parent killed with SIGKILL. Wrap therefore makes the
// direct child a supervisor, the current binary re-executed (Reexec): it
// leads a new process group, starts the real command in that group and
// waits for it. Its own parent-death signal is caught; when its parent is
// really gone (the supervisor has been re-parented) it kills its whole
// process group with SIGKILL, itself included. Otherwise it is
// transparent: it exits as the command exited (the same code, or killed
// by the same SIGHUP, SIGINT, SIGTERM or SIGKILL; other signals become
// exit code 128+signal), and the command has the standard streams, the
// directory and the environment the caller gave (not cmd.ExtraFiles,
// which no wrapped command uses).
//
// What a command moves to a process group or session of its own escapes
// the kill, as it escapes a kill of the group. On other systems Wrap only
// puts the command in a process group of its own and Reexec does nothing.
package supervisor

import "os/exec"

// Wrap makes cmd start under a supervisor in a new process group (its
// process is the supervisor; the group holds the command and what it
// starts). The caller ends the command by signalling the group, as a
// context cancel does with cmd.Cancel set to kill -pid; a signal sent to
// the supervisor alone is not passed on. A command that cannot start
// (cmd.Err, a program that is not executable, a missing directory) is
// left as it is, so that Start reports it as before. The binary must call
// Reexec first thing in main.
func Wrap(cmd *exec.Cmd) { wrap(cmd, modeGroup) }

// WrapForward is Wrap for callers that signal cmd.Process alone (the MCP
// SDK's command transport does): the supervisor passes SIGTERM, SIGINT
// and SIGHUP on to the command, and a SIGKILL of the supervisor kills the
// command (its parent-death signal) but not what it started.
func WrapForward(cmd *exec.Cmd) { wrap(cmd, modeForward) }

// How a supervisor treats the signals it gets while its parent lives.
const (
	modeGroup   = "group"   // the command got them too: ignore
	modeForward = "forward" // pass them on to the command
)

// A supervisor is the current binary run with argument 0 arg0 and
// envMarker=1 (removed before the command starts); its arguments are the
// mode, the parent's pid, the command's path and its argv.
const (
	arg0      = "baton-supervisor"
	envMarker = "BATON_SUPERVISOR"
)
