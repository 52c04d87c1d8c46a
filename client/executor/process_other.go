//go:build !unix

package executor

import "os/exec"

// ownGroup leaves cmd as exec.CommandContext made it: cancellation
// kills the process itself (no process groups here).
func ownGroup(*exec.Cmd) {}

// killGroup kills cmd's process.
func killGroup(cmd *exec.Cmd) { _ = cmd.Process.Kill() }

func exitCode(ee *exec.ExitError) int { return ee.ExitCode() }
