package engine

import (
	"encoding/json"
	"fmt"

	"github.com/baton-engine/baton"
)

// dispatch runs one server-side tool call and returns its tool_result
// block. Tool failures are results, never turn errors; only a failure to
// persist events stops the turn.
func (tc *turnCtx) dispatch(kind string, u toolUse) (json.RawMessage, error) {
	switch kind {
	case dispatchSandbox:
		return tc.dispatchSandbox(u)
	case dispatchSubagent:
		return tc.dispatchSubagent(u)
	default:
		return tc.dispatchMCP(u)
	}
}

// dispatchMCP answers a call routed to MCP. The session has no MCP
// connection for it, so the result is the documented error.
func (tc *turnCtx) dispatchMCP(u toolUse) (json.RawMessage, error) {
	id, actor := tc.a.id, tc.t.actor
	msg := fmt.Sprintf("no MCP server is configured for tool '%s'", u.Name)
	content := textContent("MCP error: " + msg)
	err := tc.emit(
		baton.NewEvent(id, actor, baton.EventMCPRequest, map[string]any{
			"method": "tools/call", "server_name": nil, "tool": u.Name, "input": u.Input,
		}),
		baton.NewEvent(id, actor, baton.EventMCPResponse, map[string]any{"server_name": nil, "ok": false, "error": msg}),
		baton.NewEvent(id, actor, baton.EventToolResult, map[string]any{
			"tool_use_id": u.ID, "dispatch": dispatchMCP, "server_name": nil, "is_error": true, "content": content,
		}),
	)
	return toolResult(u.ID, content, true), err
}

// dispatchSandbox runs an Auto-mode sandbox tool. Without a running remote
// sandbox for the session it answers with the documented error.
func (tc *turnCtx) dispatchSandbox(u toolUse) (json.RawMessage, error) {
	id, actor := tc.a.id, tc.t.actor
	var in struct {
		Command any `json:"command"`
	}
	_ = json.Unmarshal(u.Input, &in)
	command, _ := in.Command.(string)
	var cmd any
	if _, ok := in.Command.(string); ok {
		cmd = command
	}
	msg := fmt.Sprintf("no remote sandbox is running for tool '%s'; call session.startRemoteSandbox first", u.Name)
	content := textContent("sandbox error: " + msg)
	err := tc.emit(
		baton.NewEvent(id, actor, baton.EventSandboxReq, map[string]any{"tool": u.Name, "input": u.Input, "command": cmd}),
		baton.NewEvent(id, actor, baton.EventSandboxResp, map[string]any{"sandbox_id": nil, "ok": false, "error": msg}),
		baton.NewEvent(id, actor, baton.EventToolResult, map[string]any{
			"tool_use_id": u.ID, "dispatch": dispatchSandbox, "is_error": true, "content": content,
		}),
	)
	return toolResult(u.ID, content, true), err
}

// dispatchSubagent handles launch and status calls. Launches need the
// session's remote sandbox; without one they fail in-band.
func (tc *turnCtx) dispatchSubagent(u toolUse) (json.RawMessage, error) {
	var text string
	if u.Name == reservedToolName {
		text = string(mustJSON(map[string]any{"subagents": []any{}}))
	} else {
		var in struct {
			Harness, Model, Prompt string
		}
		_ = json.Unmarshal(u.Input, &in)
		msg := fmt.Sprintf("no remote sandbox is running for tool '%s'; call session.startRemoteSandbox first", u.Name)
		if in.Harness == "" || in.Model == "" || in.Prompt == "" {
			msg = `launch_subagent requires string "harness", "model", and "prompt"`
		}
		text = string(mustJSON(map[string]string{"error": msg}))
	}
	isErr := u.Name != reservedToolName
	content := textContent(text)
	err := tc.emit(baton.NewEvent(tc.a.id, tc.t.actor, baton.EventToolResult, map[string]any{
		"tool_use_id": u.ID, "dispatch": dispatchSubagent, "is_error": isErr, "content": content,
	}))
	return toolResult(u.ID, content, isErr), err
}
