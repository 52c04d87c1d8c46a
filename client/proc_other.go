//go:build !unix

package client

import "os/exec"

// ownGroup leaves cmd as is: without process groups a cancel kills only
// the process itself (exec.CommandContext's default).
func ownGroup(*exec.Cmd) {}
