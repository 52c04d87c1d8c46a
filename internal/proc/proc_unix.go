//go:build unix

package proc

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

func group(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	parentDeath(cmd.SysProcAttr)
	cmd.Cancel = func() error { return signalGroup(cmd, syscall.SIGTERM) }
}

func kill(cmd *exec.Cmd) { _ = signalGroup(cmd, syscall.SIGKILL) }

// signalGroup sends sig to cmd's process group; a group with no process
// left is os.ErrProcessDone.
func signalGroup(cmd *exec.Cmd, sig syscall.Signal) error {
	err := syscall.Kill(-cmd.Process.Pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

// ExitCode is how ps ended as a shell reports it: the exit code, or
// 128+signal for a process a signal ended.
func ExitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
