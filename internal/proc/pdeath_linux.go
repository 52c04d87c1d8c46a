package proc

import "syscall"

// parentDeath has the child killed when the thread that started it
// exits, which includes the death of this process.
func parentDeath(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
