//go:build !unix

package proc

import (
	"os"
	"os/exec"
)

// group leaves cmd as exec.CommandContext made it: without process groups
// a cancel kills the command alone.
func group(*exec.Cmd) {}

func kill(cmd *exec.Cmd) { _ = cmd.Process.Kill() }

// ExitCode is ps's exit code.
func ExitCode(ps *os.ProcessState) int { return ps.ExitCode() }
