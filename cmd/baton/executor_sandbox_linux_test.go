package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/baton-engine/baton/client/executor"
	"github.com/baton-engine/baton/client/executor/executortest"
)

// TestExecutorCmdIsolatedShell runs process.exec in real process-driver
// sandboxes (busybox rootfs): a session's commands share its sandbox,
// another session gets its own, and the host's work dir stays out.
func TestExecutorCmdIsolatedShell(t *testing.T) {
	t.Parallel()
	rootfs := busyboxRootfs(t)
	h := executortest.New(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "host-secret"), "x")
	cfg := writeFile(t, filepath.Join(t.TempDir(), "executor.toml"),
		"[process]\nisolate = true\nimage = \"busybox\"\nrootfs_dir = \""+rootfs+"\"\n")
	run := runExecutorCmd(t, executorCredEnv(), "--url", h.URL(), "--machine", "mch_iso", "--config", cfg, "--work-dir", dir)
	c := run.conn(t, h)
	c.Next(t, "executor.register")

	exec := func(session, id, command string) executor.ExecResult {
		t.Helper()
		sendToolCall(t, c, session, id, executor.ProcessExec, map[string]string{"command": command})
		var out executor.ExecResult
		r := nextToolResult(t, c, id)
		executortest.Decode(t, r.Content, &out)
		if r.IsError {
			t.Fatalf("%s: %s", id, r.Content)
		}
		return out
	}
	if out := exec("ses_1", "x1", "echo kept > /work/f; hostname; ls /work; ls host-secret"); out.Stdout != "sandbox\nf\n" || out.ExitCode == 0 {
		t.Errorf("first exec %+v", out)
	}
	if out := exec("ses_1", "x2", "cat /work/f"); out.Stdout != "kept\n" || out.ExitCode != 0 {
		t.Errorf("same session %+v", out)
	}
	if out := exec("ses_2", "x3", "cat /work/f"); out.ExitCode == 0 {
		t.Errorf("another session sees the first one's file: %+v", out)
	}
	run.cancel()
	if code := run.exit(t); code != 0 {
		t.Errorf("exit code %d:\n%s", code, run.stderr)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, ".sandboxes")); len(entries) != 0 {
		t.Errorf("sandbox state left behind: %v", entries)
	}
}
