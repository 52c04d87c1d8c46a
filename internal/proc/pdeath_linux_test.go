package proc

import (
	"context"
	"os/exec"
	"syscall"
	"testing"
)

// TestGroupParentDeath: on Linux a grouped command has SIGKILL as its
// parent-death signal and leads its own group.
func TestGroupParentDeath(t *testing.T) {
	cmd := exec.CommandContext(context.Background(), "/bin/true")
	Group(cmd, 0)
	if a := cmd.SysProcAttr; a == nil || !a.Setpgid || a.Pdeathsig != syscall.SIGKILL {
		t.Errorf("SysProcAttr = %+v, want Setpgid and Pdeathsig SIGKILL", a)
	}
}
