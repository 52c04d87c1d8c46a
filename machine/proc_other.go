//go:build !unix

package machine

import (
	"os"
	"os/exec"
)

// setGroup leaves cmd as it is: without process groups only the child
// itself is killed.
func setGroup(*exec.Cmd) {}

func killGroup(*exec.Cmd) {}

func exitStatus(ps *os.ProcessState) int { return ps.ExitCode() }
