//go:build !unix

package supervisor

import "os/exec"

// setGroup does nothing: no process groups here.
func setGroup(*exec.Cmd) {}
