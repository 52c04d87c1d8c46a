//go:build !linux

package supervisor

import "os/exec"

func wrap(cmd *exec.Cmd, _ string) { setGroup(cmd) }

// Reexec does nothing here: Wrap starts no supervisor.
func Reexec() {}
