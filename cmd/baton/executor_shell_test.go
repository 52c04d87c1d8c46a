package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton"
	exsdk "github.com/baton-engine/baton/client/executor"
)

// TestExecutorShellEndToEnd runs the remote sandbox RPCs and an
// Auto-mode sandbox tool on an SDK executor's shell, for a profile that
// allows the image executor:<machine_id>.
func TestExecutorShellEndToEnd(t *testing.T) {
	t.Parallel()
	onlySingleNode(t, "executor shells serve only the sessions of the node they are connected to")
	s := startServer(t)
	mch, secret := s.machine("shell-host")
	image := "executor:" + mch
	pro := loopProfile(t, s, map[string]any{
		"primary_provider": "script", "available_sandboxes": []string{image}, "allowed_tools": []string{"shell"},
	})
	_, key := s.clientKey("k", pro)
	r := s.client("POST", "/api/v1/sessions", key, map[string]any{
		"sandbox_tools": []any{map[string]any{"name": "shell", "description": "run a command", "input_schema": map[string]any{"type": "object"}}},
	})
	mustStatus(t, r, 201)
	sid, sk := r.json(t)["session_id"].(string), r.json(t)["session_key"].(string)
	rpcResult(t, s, sid, sk, "session.registerDriver", map[string]any{})

	// Without a connected executor the start fails and says why.
	frames := rpcAll(t, s, sid, sk, `{"jsonrpc":"2.0","id":1,"method":"session.startRemoteSandbox","params":{"image":"`+image+`"}}`)
	if last := frames[len(frames)-1]; last.Error == nil || !strings.Contains(string(last.raw), "no executor of machine "+mch+" with a shell") {
		t.Fatalf("start without an executor: %s", last.raw)
	}

	dir := t.TempDir()
	n := newExecNet(t, s)
	startSDKExecutor(t, n, exsdk.Config{
		Credential: secret, Scope: exsdk.Machine(mch), ExecutorID: "exe_shell",
		Capabilities: exsdk.Capabilities{Process: &exsdk.ProcessCapability{MaxSessions: 2}},
		Process:      &exsdk.Shell{Dir: dir},
	})

	res, _ := rpcResult(t, s, sid, sk, "session.startRemoteSandbox", map[string]any{"image": image})
	var started struct {
		SandboxID string `json:"sandbox_id"`
		Image     string `json:"image"`
	}
	json.Unmarshal(res, &started)
	if started.Image != image || !strings.HasPrefix(started.SandboxID, "sbx_") {
		t.Fatalf("start result %s", res)
	}
	if !strings.Contains(n.read(), `"method":"session.assign","params":{"session_id":"`+started.SandboxID+`"`) {
		t.Error("the executor was not assigned the sandbox's session")
	}

	res, _ = rpcResult(t, s, sid, sk, "session.execRemoteSandbox", map[string]any{"command": "pwd; echo err >&2; exit 3"})
	var ex baton.ExecResult
	json.Unmarshal(res, &ex)
	if diff := cmp.Diff(baton.ExecResult{Stdout: dir + "\n", Stderr: "err\n", ExitCode: 3}, ex); diff != "" {
		t.Errorf("exec result (-want +got):\n%s", diff)
	}

	// An Auto-mode sandbox tool runs on the executor without pausing.
	res, _ = rpcResult(t, s, sid, sk, "session.sendMessage", map[string]any{"message": map[string]any{"content": `call shell {"command":"echo from-tool"}`}})
	var tr turnResult
	if err := json.Unmarshal(res, &tr); err != nil {
		t.Fatal(err)
	}
	results := ofType(tr.Events, "tool.result")
	if len(results) != 1 {
		t.Fatalf("events %v", types(tr.Events))
	}
	want := map[string]any{"dispatch": "sandbox", "is_error": false, "content": []any{map[string]any{"type": "text", "text": "from-tool\n"}}}
	got := payload(t, results[0])
	delete(got, "tool_use_id")
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("tool.result (-want +got):\n%s", d)
	}
	if strings.Count(n.read(), `"name":"process.exec"`) != 2 {
		t.Errorf("process.exec calls seen by the executor: %d, want 2", strings.Count(n.read(), `"name":"process.exec"`))
	}

	res, _ = rpcResult(t, s, sid, sk, "session.stopRemoteSandbox", map[string]any{})
	if !strings.Contains(string(res), `"stopped":true`) {
		t.Errorf("stop result %s", res)
	}
	if !strings.Contains(n.read(), `"method":"session.stop","params":{"session_id":"`+started.SandboxID+`"`) {
		t.Error("the executor was not told to stop the sandbox")
	}
	if d := cmp.Diff([]string{
		`session.sandbox.start {"dispatch":"remote","image":"` + image + `"}`,
		`session.sandbox.running {"dispatch":"remote","image":"` + image + `","sandbox_id":"ID","unsandboxed":false}`,
		`session.sandbox.stop {"dispatch":"remote","image":"` + image + `","reason":"explicit","sandbox_id":"ID"}`,
		`session.sandbox.stopped {"dispatch":"remote","image":"` + image + `","reason":"explicit","sandbox_id":"ID","unsandboxed":false}`,
	}, sandboxEvents(t, s, sid, sk, started.SandboxID)[2:]); d != "" { // [0:2] are the failed start
		t.Errorf("sandbox events (-want +got):\n%s", d)
	}
}

// fakeMachines is a baton.MachineStore knowing a fixed set of machines.
type fakeMachines struct {
	baton.MachineStore
	ids map[string]bool
}

func (f fakeMachines) Machine(_ context.Context, id string) (*baton.Machine, error) {
	if !f.ids[id] {
		return nil, baton.Errorf(baton.ECodeNotFound, "machine not found")
	}
	return &baton.Machine{ID: id}, nil
}

// fakeRunner records which driver calls reached the local driver.
type fakeRunner struct{ calls []string }

func (f *fakeRunner) EnsureImage(_ context.Context, image string) error {
	f.calls = append(f.calls, "ensure "+image)
	return nil
}

func (f *fakeRunner) Start(_ context.Context, image string) (string, error) {
	f.calls = append(f.calls, "start "+image)
	return "c1", nil
}

func (f *fakeRunner) Exec(_ context.Context, id, command string, _ baton.ExecOptions) (baton.ExecResult, error) {
	f.calls = append(f.calls, "exec "+id+" "+command)
	return baton.ExecResult{}, nil
}

func (f *fakeRunner) Stop(_ context.Context, id string) error {
	f.calls = append(f.calls, "stop "+id)
	return nil
}

func (f *fakeRunner) Cleanup(context.Context) (int, error) { return 0, nil }

// TestSandboxRouter: executor images are available when their machine
// exists (sandbox-status shows why not), and every other image goes to
// the local driver.
func TestSandboxRouter(t *testing.T) {
	t.Parallel()
	local := &fakeRunner{}
	r := &sandboxRouter{base: local, images: local, machines: fakeMachines{ids: map[string]bool{"mch_1": true}}}
	ctx := context.Background()
	if err := r.EnsureImage(ctx, "executor:mch_1"); err != nil {
		t.Errorf("known machine: %v", err)
	}
	err := r.EnsureImage(ctx, "executor:mch_2")
	if err == nil || !strings.Contains(err.Error(), "machine mch_2 does not exist") {
		t.Errorf("unknown machine: %v", err)
	}
	if _, err := r.Start(ctx, "executor:mch_1"); err == nil {
		t.Error("started an executor sandbox without executor shells")
	}
	_ = r.EnsureImage(ctx, "alpine:3")
	id, _ := r.Start(ctx, "alpine:3")
	_, _ = r.Exec(ctx, id, "ls", baton.ExecOptions{})
	_ = r.Stop(ctx, id)
	if d := cmp.Diff([]string{"ensure alpine:3", "start alpine:3", "exec c1 ls", "stop c1"}, local.calls); d != "" {
		t.Errorf("local driver calls (-want +got):\n%s", d)
	}
	none := &sandboxRouter{machines: fakeMachines{}}
	if _, err := none.Start(ctx, "alpine:3"); err == nil || errors.Is(err, context.Canceled) {
		t.Errorf("no local driver: %v", err)
	}
}
