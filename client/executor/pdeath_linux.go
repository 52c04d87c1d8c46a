package executor

import "syscall"

// parentDeath has the child killed when the thread that started it exits
// (see run), which includes the death of the executor's process.
func parentDeath(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
