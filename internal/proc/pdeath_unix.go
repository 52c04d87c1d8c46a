//go:build unix && !linux

package proc

import "syscall"

// parentDeath does nothing: there is no parent-death signal here.
func parentDeath(*syscall.SysProcAttr) {}
