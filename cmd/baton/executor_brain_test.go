//go:build unix

package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/client/executor"
	"github.com/baton-engine/baton/client/executor/executortest"
	"github.com/baton-engine/baton/machine"
	"github.com/baton-engine/baton/provider/scripted"
)

// gatewayLog is what a fake model gateway saw.
type gatewayLog struct {
	mu       sync.Mutex
	requests []gatewayRequest
}

type gatewayRequest struct {
	Model     string          `json:"model"`
	MaxTokens int             `json:"max_tokens"`
	System    string          `json:"system"`
	Messages  []baton.Message `json:"messages"`
	Tools     []json.RawMessage
}

func (g *gatewayLog) all() []gatewayRequest {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]gatewayRequest(nil), g.requests...)
}

// scriptedGateway is a model gateway in front of Baton's scripted model:
// the Anthropic Messages API, authorized by the bearer token.
func scriptedGateway(token string, log *gatewayLog) http.Handler {
	model := scripted.New()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"type":"error","error":{"type":"authentication_error","message":"bad model token"}}`))
			return
		}
		var req gatewayRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		log.mu.Lock()
		log.requests = append(log.requests, req)
		log.mu.Unlock()
		res, err := model.Call(r.Context(), &baton.ProviderEntry{Name: "script", Provider: baton.ProviderScripted, Model: req.Model},
			"", &baton.ProviderRequest{Model: req.Model, MaxTokens: req.MaxTokens, System: req.System, Messages: req.Messages, Tools: req.Tools})
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]string{"type": "api_error", "message": err.Error()}})
			return
		}
		w.Write(res.Body)
	})
}

// agentEvent is a session.event of an agent turn.
type agentEvent struct {
	SessionID string                     `json:"session_id"`
	TurnID    string                     `json:"turn_id"`
	EventID   string                     `json:"event_id"`
	Sequence  int64                      `json:"sequence"`
	Event     map[string]json.RawMessage `json:"event"`
}

func (e agentEvent) typ() string {
	var s string
	json.Unmarshal(e.Event["type"], &s)
	return s
}

// field returns an event field as compact JSON text (strings unquoted).
func (e agentEvent) field(name string) string {
	var s string
	if json.Unmarshal(e.Event[name], &s) == nil {
		return s
	}
	return string(e.Event[name])
}

// turnEvents collects the turn's events up to session.status_idle,
// calling each (when set) as they come, and checks their sequence
// numbers follow from first.
func turnEvents(t *testing.T, c *executortest.Conn, turnID string, first int64, each func(agentEvent)) []agentEvent {
	t.Helper()
	var out []agentEvent
	for {
		var ev agentEvent
		executortest.Decode(t, c.Next(t, "session.event").Params, &ev)
		if ev.TurnID != turnID {
			t.Fatalf("event of turn %s, want %s", ev.TurnID, turnID)
		}
		if want := first + int64(len(out)); ev.Sequence != want {
			t.Errorf("event %s has sequence %d, want %d", ev.typ(), ev.Sequence, want)
		}
		out = append(out, ev)
		if each != nil {
			each(ev)
		}
		if ev.typ() == executor.EventStatusIdle {
			return out
		}
	}
}

// summary renders events as "type: field" lines for comparison.
func summary(evs []agentEvent) []string {
	var out []string
	for _, ev := range evs {
		line := ev.typ()
		switch ev.typ() {
		case executor.EventMessage:
			line += ": " + machine.BlocksText(ev.Event["content"])
		case executor.EventToolUse:
			line += ": " + ev.field("name") + " " + ev.field("input") + " " + ev.field("evaluated_permission")
		case executor.EventToolResult:
			line += ": " + machine.BlocksText(ev.Event["content"]) + " error=" + ev.field("is_error")
		case executor.EventCustomToolUse:
			line += ": " + ev.field("name") + " " + ev.field("input")
		case executor.EventError:
			line += ": " + ev.field("message")
		case executor.EventStatusIdle:
			line += ": " + ev.field("turn_outcome")
		}
		out = append(out, line)
	}
	return out
}

func startTurn(t *testing.T, c *executortest.Conn, h *executortest.Harness, session, turn, text string, custom ...executor.ToolDef) string {
	t.Helper()
	var res struct {
		Accepted bool   `json:"accepted"`
		Ref      string `json:"executor_session_ref"`
	}
	params := map[string]any{
		"session_id": session, "turn_id": turn,
		"input": []map[string]string{{"type": "text", "text": text}},
		"metadata": map[string]any{
			"model_base_url": h.URL() + "/v1/model", "model_token": "mtok_1",
			"model_token_expires_at": time.Now().Add(time.Hour).UTC(), "custom_tools": custom, "epoch": 1,
		},
	}
	c.Result(t, "turn.start", params, &res)
	if !res.Accepted {
		t.Fatalf("turn %s not accepted", turn)
	}
	return res.Ref
}

const machineConfig = `
[process]
max_sessions = 2

[agent]
max_sessions = 1
system = "be brief"

[[tools]]
name = "shout"
input_schema = '{"type":"object","properties":{"text":{"type":"string"}}}'
command = "printf %s {text} | tr a-z A-Z"
`

// TestExecutorCmdMachine runs `baton executor --machine` with a shell and
// the builtin brain against a fake harness whose model gateway is the
// scripted model: process.exec, turns with local tools, a custom tool
// and the session's close.
func TestExecutorCmdMachine(t *testing.T) {
	t.Parallel()
	h := executortest.New(t)
	var gw gatewayLog
	h.Handle("POST /v1/model/v1/messages", scriptedGateway("mtok_1", &gw))
	dir := t.TempDir()
	cfg := writeFile(t, filepath.Join(t.TempDir(), "executor.toml"), machineConfig)
	run := runExecutorCmd(t, executorCredEnv(), "--url", h.URL(), "--machine", "mch_e2e", "--config", cfg, "--work-dir", dir)
	c := run.conn(t, h)

	var reg struct {
		EnvironmentID string          `json:"environment_id"`
		Capabilities  json.RawMessage `json:"capabilities"`
	}
	executortest.Decode(t, c.Next(t, "executor.register").Params, &reg)
	if want := `{"process":{"max_sessions":2},"agent":{"max_sessions":1,"custom_tools":true}}`; string(reg.Capabilities) != want || reg.EnvironmentID != "" {
		t.Errorf("register %s %s, want capabilities %s", reg.EnvironmentID, reg.Capabilities, want)
	}
	if got := h.TokenRequests(); len(got) == 0 || got[0].Path != "/v1/machines/mch_e2e/token" {
		t.Errorf("token requests %+v", got)
	}

	// The shell: process.exec in the work directory.
	sendToolCall(t, c, "ses_sh", "exec_1", executor.ProcessExec, map[string]string{"command": "echo hi; echo oops >&2; pwd; exit 4"})
	var out executor.ExecResult
	r := nextToolResult(t, c, "exec_1")
	executortest.Decode(t, r.Content, &out)
	if want := (executor.ExecResult{Stdout: "hi\n" + dir + "\n", Stderr: "oops\n", ExitCode: 4}); out != want || r.IsError {
		t.Errorf("process.exec %+v (error %v), want %+v", out, r.IsError, want)
	}

	// The brain: run_command on the shell, then a [[tools]] command.
	if ref := startTurn(t, c, h, "ses_a", "turn_1", `call run_command {"command":"echo from-brain"}`); ref != "ses_a" {
		t.Errorf("executor_session_ref %q", ref)
	}
	got := summary(turnEvents(t, c, "turn_1", 1, nil))
	want := []string{
		"session.status_running",
		`agent.tool_use: run_command {"command":"echo from-brain"} allow`,
		"agent.tool_result: from-brain\n error=false",
		"agent.message: run_command returned: from-brain\n",
		"session.status_idle: completed",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("turn 1 events (-want +got):\n%s", diff)
	}
	startTurn(t, c, h, "ses_a", "turn_2", `call shout {"text":"quiet"}`)
	got = summary(turnEvents(t, c, "turn_2", 6, nil))
	want = []string{
		"session.status_running",
		`agent.tool_use: shout {"text":"quiet"} allow`,
		"agent.tool_result: QUIET error=false",
		"agent.message: shout returned: QUIET",
		"session.status_idle: completed",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("turn 2 events (-want +got):\n%s", diff)
	}

	// A client's custom tool: the platform answers it.
	lookup := executor.ToolDef{Name: "lookup", Description: "Look up", InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}
	startTurn(t, c, h, "ses_a", "turn_3", `call lookup {"q":"x"}`, lookup)
	got = summary(turnEvents(t, c, "turn_3", 11, func(ev agentEvent) {
		if ev.typ() != executor.EventCustomToolUse {
			return
		}
		var ack struct {
			Accepted bool `json:"accepted"`
		}
		c.Result(t, "agent.custom_tool_result", map[string]any{"session_id": "ses_a", "tool_use_id": ev.EventID,
			"content": []map[string]string{{"type": "text", "text": "found it"}}, "is_error": false}, &ack)
		if !ack.Accepted {
			t.Error("custom tool result refused")
		}
	}))
	want = []string{
		"session.status_running",
		`agent.custom_tool_use: lookup {"q":"x"}`,
		"agent.message: lookup returned: found it",
		"session.status_idle: completed",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("turn 3 events (-want +got):\n%s", diff)
	}

	// What the gateway saw: the configured model call shape, the whole
	// conversation, and the tools.
	reqs := gw.all()
	if len(reqs) != 6 {
		t.Fatalf("%d model calls, want 6", len(reqs))
	}
	last := reqs[5]
	if last.Model != defaultAgentModel || last.MaxTokens != defaultAgentTokens || last.System != "be brief" || len(last.Messages) != 11 {
		t.Errorf("last model call: model %q max_tokens %d system %q, %d messages", last.Model, last.MaxTokens, last.System, len(last.Messages))
	}
	var names []string
	for _, raw := range last.Tools {
		var d executor.ToolDef
		json.Unmarshal(raw, &d)
		names = append(names, d.Name)
	}
	if diff := cmp.Diff([]string{"shout", machine.RunCommand, "lookup"}, names); diff != "" {
		t.Errorf("tools offered (-want +got):\n%s", diff)
	}

	// session.close ends the session.
	var closed struct {
		Closed bool `json:"closed"`
	}
	c.Result(t, "session.close", map[string]string{"session_id": "ses_a"}, &closed)
	var ended struct {
		SessionID string `json:"session_id"`
	}
	executortest.Decode(t, c.Next(t, "session.ended").Params, &ended)
	if !closed.Closed || ended.SessionID != "ses_a" {
		t.Errorf("session.close %v, session.ended %+v", closed, ended)
	}

	run.cancel()
	c.Next(t, "executor.close")
	if code := run.exit(t); code != 0 {
		t.Errorf("exit code %d:\n%s", code, run.stderr)
	}
}

// TestExecutorCmdGatewayRefused fails the turn with the gateway's reason.
func TestExecutorCmdGatewayRefused(t *testing.T) {
	t.Parallel()
	h := executortest.New(t)
	var gw gatewayLog
	h.Handle("POST /v1/model/v1/messages", scriptedGateway("another-token", &gw))
	cfg := writeFile(t, filepath.Join(t.TempDir(), "executor.toml"), "[agent]\n")
	run := runExecutorCmd(t, executorCredEnv(), "--url", h.URL(), "--machine", "mch_e2e", "--config", cfg, "--work-dir", t.TempDir())
	c := run.conn(t, h)
	startTurn(t, c, h, "ses_a", "turn_1", "hello")
	got := summary(turnEvents(t, c, "turn_1", 1, nil))
	want := []string{
		"session.status_running",
		"agent.error: model gateway: HTTP 401: bad model token",
		"session.status_idle: failed",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestExecutorCmdCommandAgent runs a CLI agent per turn: the prompt on
// stdin, the gateway in its environment (never the credential), each
// stdout line an agent.message, a failure an agent.error.
func TestExecutorCmdCommandAgent(t *testing.T) {
	t.Setenv(envExecutorCredential, executortest.Credential) // children must not inherit it
	h := executortest.New(t)
	cfg := writeFile(t, filepath.Join(t.TempDir(), "executor.toml"), `
[agent]
type = "command"
model = "m1"
command = ["sh", "-c", '''
read -r line
echo "model=$1 prompt=$line"
case "$line" in fail*) echo oops >&2; exit 3;; esac
echo "base=$ANTHROPIC_BASE_URL key=$ANTHROPIC_API_KEY"
echo "cred=${BATON_EXECUTOR_CREDENTIAL:-none} session=$BATON_SESSION_ID turn=$BATON_TURN_ID dir=$PWD"
''', "agent", "{model}"]
`)
	dir := t.TempDir()
	run := runExecutorCmd(t, executorCredEnv(), "--url", h.URL(), "--machine", "mch_e2e", "--config", cfg, "--work-dir", dir)
	c := run.conn(t, h)
	var reg struct {
		Capabilities json.RawMessage `json:"capabilities"`
	}
	executortest.Decode(t, c.Next(t, "executor.register").Params, &reg)
	if want := `{"agent":{"max_sessions":0,"custom_tools":false}}`; string(reg.Capabilities) != want {
		t.Errorf("capabilities %s, want %s", reg.Capabilities, want)
	}

	startTurn(t, c, h, "ses_c", "turn_1", "hello there")
	got := summary(turnEvents(t, c, "turn_1", 1, nil))
	want := []string{
		"session.status_running",
		"agent.message: model=m1 prompt=hello there",
		"agent.message: base=" + h.URL() + "/v1/model key=mtok_1",
		"agent.message: cred=none session=ses_c turn=turn_1 dir=" + dir,
		"session.status_idle: completed",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("turn 1 events (-want +got):\n%s", diff)
	}
	startTurn(t, c, h, "ses_c", "turn_2", "fail now")
	got = summary(turnEvents(t, c, "turn_2", 6, nil))
	want = []string{
		"session.status_running",
		"agent.message: model=m1 prompt=fail now",
		"agent.error: agent command exited with status 3: oops",
		"session.status_idle: failed",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("turn 2 events (-want +got):\n%s", diff)
	}
	run.cancel()
	if code := run.exit(t); code != 0 {
		t.Errorf("exit code %d:\n%s", code, run.stderr)
	}
	if strings.Contains(run.stderr.String(), executortest.Credential) {
		t.Error("the credential was logged")
	}
}
