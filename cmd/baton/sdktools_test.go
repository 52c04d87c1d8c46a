package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton/client"
	"github.com/baton-engine/baton/sandbox/sandboxtest"
)

// End-to-end tests of the Go SDK's builtin tools (file, shell, subagent)
// against the real server and the scripted model.

// sessionEvents returns every persisted event of sess.
func sessionEvents(t *testing.T, ctx context.Context, sess *client.Session) []client.Event {
	t.Helper()
	var out []client.Event
	cursor := ""
	for {
		page, err := sess.Events(ctx, cursor, 200)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page.Items...)
		if page.NextCursor == "" {
			return out
		}
		cursor = page.NextCursor
	}
}

// eventLines renders the events whose type starts with prefix as "type
// payload", with each of the replace pairs applied.
func eventLines(t *testing.T, evs []client.Event, prefix string, replace ...string) []string {
	t.Helper()
	r := strings.NewReplacer(replace...)
	var out []string
	for _, ev := range evs {
		if strings.HasPrefix(ev.Type, prefix) && ev.Type != "session.sandbox.available" {
			out = append(out, ev.Type+" "+r.Replace(string(ev.Payload)))
		}
	}
	return out
}

func TestSDKFileAndHostShellTools(t *testing.T) {
	t.Parallel()
	ctx := loopCtx(t)
	s := startServer(t)
	pro := loopProfile(t, s, map[string]any{"primary_provider": "script",
		"allowed_tools": []string{"read_file", "write_file", "explore_files", "run_shell_command"}})
	h, _ := loopHarness(t, s, pro)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("buy milk"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.RegisterTools(client.FileTools(client.FileToolsConfig{Dirs: []string{dir}})...)
	if err := h.AddShellTool(client.ShellConfig{}); err != nil {
		t.Fatal(err)
	}
	sess, err := h.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(context.Background())

	path := filepath.Join(dir, "notes.txt")
	r, err := sess.Send(ctx, `call read_file {"path":`+quoteJSON(path)+`}`)
	mustReply(t, sent{r, err}, `read_file returned: {"path":`+quoteJSON(path)+`,"content":"buy milk"}`)
	r, err = sess.Send(ctx, `call read_file {"path":"/etc/passwd"}`)
	mustReply(t, sent{r, err}, "read_file returned: {\"error\":\"path not permitted: `/etc/passwd` is not under any allowed directory\"}")
	r, err = sess.Send(ctx, `call run_shell_command {"command":"echo hi; exit 2"}`)
	mustReply(t, sent{r, err}, `run_shell_command returned: {"stdout":"hi\n","stderr":"","exit_code":2}`)

	want := []string{
		`session.sandbox.running {"container_id":null,"detail":null,"dispatch":"local","image":null,"unsandboxed":true}`,
		`session.sandbox.stopped {"container_id":null,"detail":null,"dispatch":"local","image":null,"unsandboxed":true}`,
	}
	if d := cmp.Diff(want, eventLines(t, sessionEvents(t, ctx, sess), "session.sandbox.")); d != "" {
		t.Errorf("sandbox events (-want +got):\n%s", d)
	}
}

func quoteJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestSDKRemoteShellTools(t *testing.T) {
	t.Parallel()
	ctx := loopCtx(t)
	eng := &sandboxtest.Engine{Images: []string{"alpine:3"}}
	sock := eng.Start(t)
	s := startServer(t, func(env map[string]string) { env["BATON_DOCKER_SOCKET"] = sock })
	pro := loopProfile(t, s, map[string]any{"primary_provider": "script",
		"allowed_tools": []string{"say"}, "available_sandboxes": []string{"alpine:3"}})
	h, _ := loopHarness(t, s, pro)
	if err := h.AddShellTool(client.ShellConfig{Target: client.TargetRemote}); err != nil { // Auto
		t.Fatal(err)
	}
	err := h.AddShellTool(client.ShellConfig{Name: "say", Description: "say a word", Template: "echo {word}",
		Target: client.TargetRemote, Mode: client.RemoteManual, Transform: func(r client.ExecResult) (any, error) {
			return "said " + strings.TrimSpace(r.Stdout), nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := h.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(context.Background())

	sb, err := sess.StartRemoteSandbox(ctx, "alpine:3")
	if err != nil {
		t.Fatal(err)
	}
	if sb.Image != "alpine:3" || sb.SandboxID == "" || sb.StartedAt.IsZero() {
		t.Errorf("started %+v", sb)
	}
	// Auto: the server runs it, the turn does not pause.
	r, err := sess.Send(ctx, `call run_shell_command {"command":"echo auto"}`)
	reply := mustReply(t, sent{r, err}, "run_shell_command returned: auto\n")
	if res := ofType(reply.Events, "tool.result"); len(res) != 1 || payload(t, res[0])["dispatch"] != "sandbox" {
		t.Errorf("tool.result %v", types(reply.Events))
	}
	// Manual: the client runs it through execRemoteSandbox.
	r, err = sess.Send(ctx, `call say {"word":"manual"}`)
	reply = mustReply(t, sent{r, err}, "say returned: said 'manual'")
	if res := ofType(reply.Events, "tool.result"); len(res) != 1 || payload(t, res[0])["dispatch"] != "client" {
		t.Errorf("tool.result %v", types(reply.Events))
	}
	stopped, err := sess.StopRemoteSandbox(ctx)
	if err != nil || stopped.SandboxID != sb.SandboxID {
		t.Fatalf("stop %+v, %v", stopped, err)
	}
	_, err = sess.ExecRemoteSandbox(ctx, "echo x")
	var rpcErr *client.RPCError
	if !errors.As(err, &rpcErr) || rpcErr.Code != -32013 {
		t.Errorf("exec after stop: %v", err)
	}
}

func TestSDKLocalSubagent(t *testing.T) {
	t.Parallel()
	ctx := loopCtx(t)
	s := startServer(t)
	pro := loopProfile(t, s, map[string]any{"primary_provider": "script",
		"allowed_tools": []string{client.LaunchSubagentTool, client.LocalSubagentStatusTool}})
	h, _ := loopHarness(t, s, pro)
	script := filepath.Join(t.TempDir(), "agent.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nprintf 'model %s: ' \"$1\"; cat\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := h.AddSubagentTool(client.SubagentConfig{Subagents: []client.SubagentDef{
		{Harness: "echo", Command: "sh '" + script + "' {model}"},
	}}); err != nil {
		t.Fatal(err)
	}
	sess, err := h.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(context.Background())
	sub, err := sess.Subscribe(ctx, client.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	// Not declared before a launch.
	r, err := sess.Send(ctx, `call local_subagent_status {}`)
	mustReply(t, sent{r, err}, "I don't have a tool named local_subagent_status.")

	r, err = sess.Send(ctx, `call launch_subagent {"harness":"echo","model":"m1","prompt":"hello"}`)
	if err != nil {
		t.Fatal(err)
	}
	var started struct {
		SubagentID string `json:"subagent_id"`
		Status     string `json:"status"`
	}
	text, _ := strings.CutPrefix(r.Message.Text(), "launch_subagent returned: ")
	if err := json.Unmarshal([]byte(text), &started); err != nil || started.Status != "started" {
		t.Fatalf("launch reply %q", r.Message.Text())
	}
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type == "session.subagent.completed" {
			break
		}
	}

	r, err = sess.Send(ctx, `call local_subagent_status {}`)
	want := `local_subagent_status returned: {"subagents":[{"subagent_id":"` + started.SubagentID + `","harness":"echo","model":"m1",` +
		`"status":"completed","exit_code":0,"stdout":"model m1: hello","stderr":"","truncated":false,"reason":null,"detail":null}]}`
	mustReply(t, sent{r, err}, want)
	// Read once: the status tool is withdrawn from the next turn.
	r, err = sess.Send(ctx, `call local_subagent_status {}`)
	mustReply(t, sent{r, err}, "I don't have a tool named local_subagent_status.")

	wantEvents := []string{
		`session.subagent.start {"detail":null,"dispatch":"local","harness":"echo","model":"m1","subagent_id":"ID"}`,
		`session.subagent.running {"detail":null,"dispatch":"local","harness":"echo","model":"m1","subagent_id":"ID"}`,
		`session.subagent.completed {"detail":null,"dispatch":"local","exit_code":0,"harness":"echo","model":"m1","subagent_id":"ID"}`,
	}
	got := eventLines(t, sessionEvents(t, ctx, sess), "session.subagent.", started.SubagentID, "ID")
	if d := cmp.Diff(wantEvents, got); d != "" {
		t.Errorf("subagent events (-want +got):\n%s", d)
	}
}
