package executortest_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/baton-engine/baton/client/executor"
	"github.com/baton-engine/baton/client/executor/executortest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(t *testing.T, h *executortest.Harness, cred string) (*executor.Executor, error) {
	t.Helper()
	e, err := executor.New(executor.Config{
		BaseURL: h.URL(), Credential: cred, Scope: executor.Environment("env_1"),
		Tools: []executor.Tool{{
			Def: executor.ToolDef{Name: "echo"},
			Handle: func(_ context.Context, c executor.Call) (executor.Result, error) {
				return executor.TextResult(string(c.Input)), nil
			},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), executortest.Patience)
	defer cancel()
	return e, e.Open(ctx)
}

// TestHarness drives the SDK through the fake harness: token exchange,
// register, a tool call round trip and a clean close.
func TestHarness(t *testing.T) {
	h := executortest.New(t)
	e, err := open(t, h, executortest.Credential)
	if err != nil {
		t.Fatal(err)
	}
	c := h.Conn(t)
	var reg struct {
		Protocol      string `json:"protocol"`
		EnvironmentID string `json:"environment_id"`
		Capabilities  struct {
			Tools []executor.ToolDef `json:"tools"`
		} `json:"capabilities"`
	}
	executortest.Decode(t, c.Next(t, "executor.register").Params, &reg)
	if reg.Protocol != executor.Protocol || reg.EnvironmentID != "env_1" || len(reg.Capabilities.Tools) != 1 || reg.Capabilities.Tools[0].Name != "echo" {
		t.Errorf("register %+v", reg)
	}
	if got := h.TokenRequests(); len(got) != 1 || got[0].Path != "/v1/environments/env_1/token" || got[0].Authorization != "Bearer "+executortest.Credential {
		t.Errorf("token requests %+v", got)
	}

	var ack struct {
		Accepted bool `json:"accepted"`
	}
	c.Result(t, "tool.call", map[string]any{"session_id": "ses_1", "tool_call_id": "call_1", "name": "echo", "input": map[string]int{"n": 1}}, &ack)
	if !ack.Accepted {
		t.Error("tool.call not accepted")
	}
	var res struct {
		ToolCallID string          `json:"tool_call_id"`
		Content    json.RawMessage `json:"content"`
		IsError    bool            `json:"is_error"`
	}
	executortest.Decode(t, c.Next(t, "tool.result").Params, &res)
	if diff := cmp.Diff(`[{"text":"{\"n\":1}","type":"text"}]`, string(res.Content)); diff != "" || res.ToolCallID != "call_1" || res.IsError {
		t.Errorf("tool.result %+v (-want +got):\n%s", res, diff)
	}
	if f := c.Call(t, "no.such", nil); f.Error == nil || f.Error.Code != executor.CodeMethodNotFound {
		t.Errorf("unknown method answered %+v", f)
	}

	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.Next(t, "executor.close")
	if code := c.Closed(t); code != 1000 {
		t.Errorf("close code %d, want 1000", code)
	}
	if m := c.Malformed(); len(m) != 0 {
		t.Errorf("malformed frames %q", m)
	}
}

// TestHarnessRefusesCredential answers a wrong credential with 401.
func TestHarnessRefusesCredential(t *testing.T) {
	h := executortest.New(t)
	_, err := open(t, h, "bae_exc_wrong")
	var he *executor.HTTPError
	if !errors.As(err, &he) || he.Status != 401 {
		t.Fatalf("Open: %v, want HTTP 401", err)
	}
}
