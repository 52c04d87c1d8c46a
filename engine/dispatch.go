package engine

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/baton-engine/baton"
)

// dispatch runs one server-side tool call and returns its tool_result
// block. Tool failures are results, never turn errors; only a failure to
// persist events stops the turn.
func (tc *turnCtx) dispatch(kind baton.Dispatch, u toolUse, ts *toolset) (json.RawMessage, error) {
	switch kind {
	case baton.DispatchRegistered:
		return tc.dispatchRegisteredCall(u, ts.registered[u.Name])
	case baton.DispatchSandbox:
		return tc.dispatchSandbox(u)
	case baton.DispatchSubagent:
		return tc.dispatchSubagent(u, ts)
	case baton.DispatchExecutor:
		return tc.dispatchExecutor(u, ts.executor[u.Name])
	default:
		return tc.dispatchMCP(u, ts)
	}
}

// dispatchSandbox runs an Auto-mode sandbox tool: input.command in the
// session's remote sandbox, never pausing the turn (BAE's engine).
func (tc *turnCtx) dispatchSandbox(u toolUse) (json.RawMessage, error) {
	id, actor := tc.a.id, tc.t.actor
	var in struct {
		Command any `json:"command"`
	}
	_ = json.Unmarshal(u.Input, &in)
	command, isString := in.Command.(string)
	var cmd any
	if isString {
		cmd = command
	}
	if err := tc.emit(baton.NewEvent(id, actor, baton.EventSandboxReq, map[string]any{"tool": u.Name, "input": u.Input, "command": cmd})); err != nil {
		return nil, err
	}
	var (
		resp    map[string]any
		extra   *baton.Event
		content json.RawMessage
		isErr   = true
	)
	sb := tc.a.runningSandbox()
	switch {
	case sb == nil:
		msg := fmt.Sprintf("no remote sandbox is running for tool '%s'; call session.startRemoteSandbox first", u.Name)
		resp = map[string]any{"sandbox_id": nil, "ok": false, "error": msg}
		content = textContent("sandbox error: " + msg)
	case !isString:
		msg := fmt.Sprintf("sandbox tool '%s' input is missing the required string \"command\"", u.Name)
		resp = map[string]any{"sandbox_id": nil, "ok": false, "error": msg}
		content = textContent("sandbox error: " + msg)
	default:
		res, err := tc.e.execSandbox(tc.t.ctx, sb.id, command)
		if err != nil {
			resp = map[string]any{"sandbox_id": sb.id, "ok": false, "error": err.Error()}
			extra = baton.NewEvent(id, actor, baton.EventSandboxError, map[string]any{
				"image": sb.image, "sandbox_id": sb.id, "phase": "exec", "detail": err.Error(), "dispatch": runsRemote, "unsandboxed": false,
			})
			content = textContent("sandbox error: " + err.Error())
		} else {
			isErr = res.ExitCode != 0
			resp = map[string]any{"sandbox_id": sb.id, "ok": !isErr, "result": res}
			content = textContent(renderExec(res))
		}
	}
	evs := []*baton.Event{baton.NewEvent(id, actor, baton.EventSandboxResp, resp)}
	if extra != nil {
		evs = append(evs, extra)
	}
	evs = append(evs, baton.NewEvent(id, actor, baton.EventToolResult, map[string]any{
		"tool_use_id": u.ID, "dispatch": baton.DispatchSandbox, "is_error": isErr, "content": content,
	}))
	return toolResult(u.ID, content, isErr), tc.emit(evs...)
}

// renderExec renders a command's outcome as the model sees it: stdout,
// then stderr and a non-zero exit code, each on its own line.
func renderExec(r baton.ExecResult) string {
	var b strings.Builder
	b.WriteString(r.Stdout)
	newline := func() {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
	}
	if strings.TrimSpace(r.Stderr) != "" {
		newline()
		b.WriteString("[stderr]\n" + r.Stderr)
	}
	if r.ExitCode != 0 {
		newline()
		fmt.Fprintf(&b, "[exit_code: %d]", r.ExitCode)
	}
	return b.String()
}
