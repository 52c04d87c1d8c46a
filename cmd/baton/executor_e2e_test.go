//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton/client/executor"
	"github.com/baton-engine/baton/client/executor/executortest"
)

// logWatch is a stderr that tells when a text shows up in it.
type logWatch struct {
	mu    sync.Mutex
	b     bytes.Buffer
	waits map[string]chan struct{}
}

func (w *logWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	for text, ch := range w.waits {
		if strings.Contains(w.b.String(), text) {
			close(ch)
			delete(w.waits, text)
		}
	}
	return len(p), nil
}

func (w *logWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// seen returns a channel closed once text has been written.
func (w *logWatch) seen(text string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := make(chan struct{})
	if strings.Contains(w.b.String(), text) {
		close(ch)
		return ch
	}
	if w.waits == nil {
		w.waits = map[string]chan struct{}{}
	}
	w.waits[text] = ch
	return ch
}

// executorRun is `baton executor` running in-process; cancelling its
// context is the SIGTERM.
type executorRun struct {
	cancel context.CancelFunc
	done   chan int
	stdout *syncBuffer
	stderr *logWatch
	code   *int
}

func runExecutorCmd(t *testing.T, env map[string]string, args ...string) *executorRun {
	t.Helper()
	r := &executorRun{done: make(chan int, 1), stdout: &syncBuffer{}, stderr: &logWatch{}}
	c := &cli{getenv: envFunc(env), stdout: r.stdout, stderr: r.stderr, stdin: strings.NewReader("")}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- c.run(ctx, append([]string{"executor"}, args...)) }()
	t.Cleanup(func() {
		cancel()
		if r.code == nil {
			r.exit(t)
		}
	})
	return r
}

// conn waits for the executor's connection and for its registration to
// complete (a SIGTERM before that only stops the connecting).
func (r *executorRun) conn(t *testing.T, h *executortest.Harness) *executortest.Conn {
	t.Helper()
	c := h.Conn(t)
	waitClosed(t, r.stderr.seen("executor registered"), "the registration")
	return c
}

// exit waits for the command to end and returns its exit code.
func (r *executorRun) exit(t *testing.T) int {
	t.Helper()
	if r.code != nil {
		return *r.code
	}
	select {
	case code := <-r.done:
		r.code = &code
		return code
	case <-time.After(executortest.Patience):
		t.Fatalf("baton executor did not exit:\n%s", r.stderr)
		return -1
	}
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(executortest.Patience):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func executorCredEnv() map[string]string {
	return map[string]string{envExecutorCredential: executortest.Credential}
}

// resultFrame is tool.result's params.
type resultFrame struct {
	SessionID  string          `json:"session_id"`
	ToolCallID string          `json:"tool_call_id"`
	Content    json.RawMessage `json:"content"`
	IsError    bool            `json:"is_error"`
}

func (r resultFrame) text(t *testing.T) string {
	t.Helper()
	return singleText(t, executor.Result{Content: r.Content})
}

// nextToolResult returns the next tool.result, which must be for id.
func nextToolResult(t *testing.T, c *executortest.Conn, id string) resultFrame {
	t.Helper()
	var r resultFrame
	executortest.Decode(t, c.Next(t, "tool.result").Params, &r)
	if r.ToolCallID != id {
		t.Fatalf("tool.result for %s, want %s", r.ToolCallID, id)
	}
	return r
}

func sendToolCall(t *testing.T, c *executortest.Conn, session, id, name string, input any) {
	t.Helper()
	var ack struct {
		Accepted bool `json:"accepted"`
	}
	c.Result(t, "tool.call", map[string]any{"session_id": session, "tool_call_id": id, "name": name, "input": input}, &ack)
	if !ack.Accepted {
		t.Fatalf("tool.call %s not accepted", id)
	}
}

const e2eTools = `
[[tools]]
name = "upper"
description = "Upper-case a text"
input_schema = '{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}'
command = "printf %s {text} | tr a-z A-Z"

[[tools]]
name = "hold"
description = "Wait until released"
command = "echo > started; read line < release; echo finished > finished; echo released"
`

// TestExecutorCmdEnvironment runs `baton executor --environment` against
// a fake harness over a real WebSocket: registration with the config's
// tools, tool calls, an unknown tool, and the drain on SIGTERM.
func TestExecutorCmdEnvironment(t *testing.T) {
	t.Parallel()
	h := executortest.New(t)
	dir := t.TempDir()
	cfg := writeFile(t, filepath.Join(t.TempDir(), "executor.toml"), e2eTools)
	makeFIFO(t, filepath.Join(dir, "started"))
	makeFIFO(t, filepath.Join(dir, "release"))
	run := runExecutorCmd(t, executorCredEnv(), "--url", h.URL(), "--environment", "env_e2e", "--config", cfg, "--work-dir", dir)
	c := run.conn(t, h)

	var reg struct {
		Protocol      string `json:"protocol"`
		EnvironmentID string `json:"environment_id"`
		Capabilities  struct {
			Tools   []executor.ToolDef `json:"tools"`
			Process json.RawMessage    `json:"process"`
			Agent   json.RawMessage    `json:"agent"`
		} `json:"capabilities"`
	}
	executortest.Decode(t, c.Next(t, "executor.register").Params, &reg)
	wantTools := []executor.ToolDef{
		{Name: "upper", Description: "Upper-case a text", InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)},
		{Name: "hold", Description: "Wait until released", InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)},
	}
	if diff := cmp.Diff(wantTools, reg.Capabilities.Tools); diff != "" {
		t.Errorf("registered tools (-want +got):\n%s", diff)
	}
	if reg.Protocol != executor.Protocol || reg.EnvironmentID != "env_e2e" || reg.Capabilities.Process != nil || reg.Capabilities.Agent != nil {
		t.Errorf("register %+v", reg)
	}
	if got := h.TokenRequests(); len(got) == 0 || got[0].Path != "/v1/environments/env_e2e/token" {
		t.Errorf("token requests %+v", got)
	}

	// A tool call round trip, its input never run as shell code.
	sendToolCall(t, c, "ses_1", "call_1", "upper", map[string]string{"text": "it's $(touch x); `touch y`"})
	if r := nextToolResult(t, c, "call_1"); r.IsError || r.text(t) != "IT'S $(TOUCH X); `TOUCH Y`" || r.SessionID != "ses_1" {
		t.Errorf("tool.result %+v %q", r, r.text(t))
	}
	if f := c.Call(t, "tool.call", map[string]any{"session_id": "ses_1", "tool_call_id": "call_x", "name": "nope", "input": map[string]any{}}); f.Error == nil || f.Error.Code != executor.CodeCapabilityMissing {
		t.Errorf("unknown tool answered %+v", f)
	}

	// SIGTERM while a call runs: new calls are refused, the running one
	// finishes and its result reaches the harness, then the executor says
	// goodbye and exits 0.
	sendToolCall(t, c, "ses_1", "call_2", "hold", nil)
	readFIFO(t, filepath.Join(dir, "started"))
	draining := run.stderr.seen("executor: draining") // logged once new work is refused
	run.cancel()
	waitClosed(t, draining, "the drain")
	f := c.Call(t, "tool.call", map[string]any{"session_id": "ses_1", "tool_call_id": "call_3", "name": "upper", "input": map[string]string{"text": "late"}})
	if f.Error == nil || f.Error.Code != executor.CodeOverCapacity || f.Error.Reason() != "draining" {
		t.Errorf("a call during the drain answered %+v, want -32009 draining", f)
	}
	if _, err := os.Stat(filepath.Join(dir, "finished")); !os.IsNotExist(err) {
		t.Fatalf("hold finished before it was released: %v", err)
	}
	writeFile(t, filepath.Join(dir, "release"), "go\n")
	last := c.Next(t, "tool.result", "executor.close")
	if last.Method != "tool.result" {
		t.Fatalf("the executor closed before delivering the running call's result")
	}
	var r resultFrame
	executortest.Decode(t, last.Params, &r)
	if r.ToolCallID != "call_2" || r.IsError || r.text(t) != "released\n" {
		t.Errorf("the running call's result: %+v %q", r, r.text(t))
	}
	c.Next(t, "executor.close")
	if code := c.Closed(t); code != 1000 {
		t.Errorf("close code %d, want 1000", code)
	}
	if code := run.exit(t); code != 0 {
		t.Errorf("exit code %d, want 0:\n%s", code, run.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "finished")); err != nil || string(b) != "finished\n" {
		t.Errorf("the running call was not let finish: %q %v", b, err)
	}
	logs := run.stderr.String()
	for _, want := range []string{"executor registered", "executor_id=exr_test", "executor draining", "executor stopped"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, executortest.Credential) {
		t.Error("the credential was logged")
	}
}

// TestExecutorCmdDrainTimeout: work still running when the drain times
// out is stopped (its process killed) and the executor still exits 0.
func TestExecutorCmdDrainTimeout(t *testing.T) {
	t.Parallel()
	h := executortest.New(t)
	dir := t.TempDir()
	cfg := writeFile(t, filepath.Join(t.TempDir(), "executor.toml"), e2eTools)
	makeFIFO(t, filepath.Join(dir, "started"))
	makeFIFO(t, filepath.Join(dir, "release"))
	run := runExecutorCmd(t, executorCredEnv(), "--url", h.URL(), "--environment", "env_e2e", "--config", cfg,
		"--work-dir", dir, "--drain-timeout", "50ms")
	c := run.conn(t, h)
	sendToolCall(t, c, "ses_1", "call_1", "hold", nil)
	readFIFO(t, filepath.Join(dir, "started"))
	run.cancel()
	c.Next(t, "executor.close")
	if code := run.exit(t); code != 0 {
		t.Errorf("exit code %d, want 0:\n%s", code, run.stderr)
	}
	if !strings.Contains(run.stderr.String(), "executor drain timed out; stopping the work still running") {
		t.Errorf("log lacks the drain timeout:\n%s", run.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "finished")); !os.IsNotExist(err) {
		t.Errorf("the held call ran on after the drain timed out: %v", err)
	}
}

// TestExecutorCmdRefusedCredential exits 1 with a clear message when the
// server refuses the credential, without printing it.
func TestExecutorCmdRefusedCredential(t *testing.T) {
	t.Parallel()
	h := executortest.New(t)
	cfg := writeFile(t, filepath.Join(t.TempDir(), "executor.toml"), e2eTools)
	const wrong = "bae_exc_ffffffffffffffffffffffffffffffffffffffffffffffff"
	run := runExecutorCmd(t, map[string]string{envExecutorCredential: wrong}, "--url", h.URL(), "--environment", "env_e2e", "--config", cfg, "--work-dir", t.TempDir())
	if code := run.exit(t); code != exitRuntime {
		t.Errorf("exit code %d, want %d", code, exitRuntime)
	}
	out := run.stderr.String()
	if !strings.Contains(out, "refused the executor credential for environment env_e2e") || !strings.Contains(out, "HTTP 401") {
		t.Errorf("stderr lacks the reason:\n%s", out)
	}
	if strings.Contains(out, wrong) {
		t.Error("the credential was printed")
	}
}

// TestExecutorCmdUsageErrors: bad flags and config files exit 2 before any
// connection; --check validates without connecting.
func TestExecutorCmdUsageErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := writeFile(t, filepath.Join(dir, "good.toml"), e2eTools)
	bad := writeFile(t, filepath.Join(dir, "bad.toml"), "[[tools]]\nname = \"t\"\ncommand = [\"true\"]\nshell = 1\n")
	credFile := writeFile(t, filepath.Join(dir, "cred"), executortest.Credential+"\n")
	notCred := writeFile(t, filepath.Join(dir, "notcred"), "secret-value-123\n")
	noRootfs := writeFile(t, filepath.Join(dir, "iso.toml"), "[process]\nisolate = true\nimage = \"busybox\"\nrootfs_dir = \""+filepath.Join(dir, "none")+"\"\n")
	cases := []struct {
		name string
		env  map[string]string
		args []string
		code int
		want string
	}{
		{"both scopes", executorCredEnv(), []string{"--environment", "env_a", "--machine", "mch_a"}, exitUsage, "pass either --environment or --machine, not both"},
		{"no scope", executorCredEnv(), nil, exitUsage, "pass --environment env_… (a tool executor) or --machine mch_…"},
		{"bad environment id", executorCredEnv(), []string{"--environment", "mch_a", "--config", good}, exitUsage, `--environment "mch_a" is not an environment id`},
		{"no credential", nil, []string{"--environment", "env_a", "--config", good}, exitUsage, "no executor credential: pass --credential-file or set BATON_EXECUTOR_CREDENTIAL"},
		{"not a credential", nil, []string{"--environment", "env_a", "--config", good, "--credential-file", notCred}, exitUsage, "the executor credential is not a bae_exc_… secret"},
		{"missing credential file", nil, []string{"--machine", "mch_a", "--credential-file", filepath.Join(dir, "none")}, exitUsage, "--credential-file: open"},
		{"environment without config", executorCredEnv(), []string{"--environment", "env_a"}, exitUsage, "an environment executor needs --config with its [[tools]]"},
		{"config error", executorCredEnv(), []string{"--environment", "env_a", "--config", bad}, exitUsage, bad + `:4:1: unknown key "tools.shell"`},
		{"config for the wrong scope", executorCredEnv(), []string{"--machine", "mch_a", "--config", good}, exitUsage, good + ":2:3: [[tools]] on a machine"},
		{"bad url", executorCredEnv(), []string{"--machine", "mch_a", "--url", "ftp://x"}, exitUsage, `--url "ftp://x" must be an http:// or https:// URL`},
		{"bad log level", executorCredEnv(), []string{"--machine", "mch_a", "--log-level", "loud"}, exitUsage, `--log-level "loud" must be debug, info, warn or error`},
		{"bad log format", executorCredEnv(), []string{"--machine", "mch_a", "--log-format", "xml"}, exitUsage, `--log-format "xml" must be text or json`},
		{"unknown flag", executorCredEnv(), []string{"--machine", "mch_a", "--nope"}, exitUsage, "unknown flag: --nope"},
		{"check", nil, []string{"--environment", "env_a", "--config", good, "--check"}, exitOK, ""},
		{"check a missing image", nil, []string{"--machine", "mch_a", "--config", noRootfs, "--check"}, exitUsage, `process.image "busybox"`},
		{"check machine", nil, []string{"--machine", "mch_a", "--check", "--credential-file", credFile}, exitOK, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			run := runExecutorCmd(t, tc.env, tc.args...)
			if code := run.exit(t); code != tc.code {
				t.Errorf("exit code %d, want %d:\n%s", code, tc.code, run.stderr)
			}
			if !strings.Contains(run.stderr.String(), tc.want) {
				t.Errorf("stderr\n  %s\nlacks\n  %s", run.stderr, tc.want)
			}
			if strings.Contains(run.stderr.String(), "secret-value-123") {
				t.Error("a credential was printed")
			}
		})
	}
	run := runExecutorCmd(t, nil, "--environment", "env_a", "--config", good, "--check")
	run.exit(t)
	if got, want := run.stdout.String(), "configuration ok: 2 tool(s) [upper, hold]\n"; got != want {
		t.Errorf("--check printed %q, want %q", got, want)
	}
}
