//go:build linux

package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/baton-engine/baton/sandbox/sandboxtest"
)

// TestProcessSandboxEndToEnd runs the remote sandbox RPCs and an
// Auto-mode sandbox tool through a real server with the process driver
// over a busybox rootfs.
func TestProcessSandboxEndToEnd(t *testing.T) {
	t.Parallel()
	onlySingleNode(t, "it checks sandbox state on the first node's disk; the sandbox runs on the node that owns the session")
	rootfs := busyboxRootfs(t)
	var leftover string
	s := startServer(t, func(env map[string]string) {
		env["BAE_SANDBOX_DRIVER"] = "process"
		env["BATON_SANDBOX_ROOTFS_DIR"] = rootfs
		// As if a crashed run had left a sandbox's state behind.
		leftover = filepath.Join(filepath.Dir(env["BAE_DB_PATH"]), "sandboxes", "0123456789abcdef0123456789abcdef")
		if err := os.MkdirAll(filepath.Join(leftover, "work"), 0o700); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("leftover state after start: %v", err)
	}

	pro := loopProfile(t, s, map[string]any{
		"primary_provider": "script", "available_sandboxes": []string{"busybox"}, "allowed_tools": []string{"shell"},
	})
	_, key := s.clientKey("k", pro)
	r := s.client("POST", "/api/v1/sessions", key, map[string]any{
		"sandbox_tools": []any{map[string]any{"name": "shell", "description": "run a command", "input_schema": map[string]any{"type": "object"}}},
	})
	mustStatus(t, r, 201)
	sid, sk := r.json(t)["session_id"].(string), r.json(t)["session_key"].(string)
	rpcResult(t, s, sid, sk, "session.registerDriver", map[string]any{})

	res, _ := rpcResult(t, s, sid, sk, "session.startRemoteSandbox", map[string]any{"image": "busybox"})
	var started struct {
		SandboxID string `json:"sandbox_id"`
		Image     string `json:"image"`
	}
	json.Unmarshal(res, &started)
	state := filepath.Join(s.dir, "sandboxes", started.SandboxID)
	if started.Image != "busybox" || started.SandboxID == "" {
		t.Fatalf("start result %s", res)
	}
	if _, err := os.Stat(state); err != nil {
		t.Fatalf("sandbox state: %v", err)
	}

	res, _ = rpcResult(t, s, sid, sk, "session.execRemoteSandbox", map[string]any{"command": "echo hi; hostname; ls /; echo oops >&2; exit 2"})
	if string(res) != `{"stdout":"hi\nsandbox\nbin\ndev\netc\nproc\ntmp\nwork\n","stderr":"oops\n","exit_code":2}` {
		t.Errorf("exec result %s", res)
	}

	// An Auto-mode sandbox tool runs in the same sandbox: its file stays.
	res, _ = rpcResult(t, s, sid, sk, "session.sendMessage", map[string]any{"message": map[string]any{"content": `call shell {"command":"echo from-tool > /work/f; cat /work/f"}`}})
	var tr turnResult
	if err := json.Unmarshal(res, &tr); err != nil {
		t.Fatal(err)
	}
	if got := tr.Message.Text(); !strings.Contains(got, "from-tool") {
		t.Errorf("reply %q", got)
	}
	res, _ = rpcResult(t, s, sid, sk, "session.execRemoteSandbox", map[string]any{"command": "cat /work/f"})
	if string(res) != `{"stdout":"from-tool\n","stderr":"","exit_code":0}` {
		t.Errorf("exec after the tool %s", res)
	}
	if b, err := os.ReadFile(filepath.Join(state, "work", "f")); err != nil || string(b) != "from-tool\n" {
		t.Errorf("/work/f on the host: %q %v", b, err)
	}

	res, _ = rpcResult(t, s, sid, sk, "session.stopRemoteSandbox", map[string]any{})
	if !strings.Contains(string(res), `"stopped":true`) {
		t.Errorf("stop result %s", res)
	}
	if _, err := os.Stat(state); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state after stop: %v", err)
	}

	// Closing the session stops a running sandbox.
	res, _ = rpcResult(t, s, sid, sk, "session.startRemoteSandbox", map[string]any{"image": "busybox"})
	json.Unmarshal(res, &started)
	state = filepath.Join(s.dir, "sandboxes", started.SandboxID)
	mustStatus(t, s.client("DELETE", "/api/v1/sessions/"+sid, sk, nil), 200)
	if _, err := os.Stat(state); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state after close: %v", err)
	}
}

// busyboxRootfs returns a BATON_SANDBOX_ROOTFS_DIR holding the image
// "busybox", skipping t where the process driver cannot run.
func busyboxRootfs(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the process driver needs root: namespaces, cgroups and pivot_root")
	}
	probe := exec.Command("/bin/true")
	probe.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET}
	if err := probe.Run(); err != nil {
		t.Skipf("Linux namespaces unavailable here: %v", err)
	}
	rootfs := t.TempDir()
	sandboxtest.Rootfs(t, rootfs, "busybox")
	return rootfs
}
