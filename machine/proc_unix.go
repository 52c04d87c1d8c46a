//go:build unix

package machine

import (
	"errors"
	"os"
	"os/exec"
	"syscall"

	"github.com/baton-engine/baton/internal/supervisor"
)

// setGroup starts cmd in a process group of its own, under a supervisor
// that kills the group when this process dies (Linux); cancelling its
// context sends SIGTERM to the whole group.
func setGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM); errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		return nil
	}
	supervisor.Wrap(cmd)
}

// killGroup sends SIGKILL to whatever is left of cmd's process group.
func killGroup(cmd *exec.Cmd) { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }

// exitStatus is the exit code, or 128+signal for a signalled process.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
