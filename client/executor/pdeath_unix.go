//go:build unix && !linux

package executor

import "syscall"

// parentDeath does nothing: there is no parent-death signal here.
func parentDeath(*syscall.SysProcAttr) {}
