package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/baton-engine/baton"
)

// runsAt is the "dispatch" field of session.sandbox.* and
// session.subagent.* events: whether the server runs the sandbox or
// subagent, or a client runs it and reports it. It is not a tool call's
// baton.Dispatch.
type runsAt string

const (
	runsRemote runsAt = "remote"
	runsLocal  runsAt = "local"
)

// remoteSandbox is a session's running remote sandbox.
type remoteSandbox struct {
	id    string
	image string
}

// errNoDriver is the start failure when the server has no driver that can
// run containers.
var errNoDriver = errors.New("this server has no sandbox driver that can start sandboxes")

func invalid(format string, args ...any) error {
	return baton.Errorf(baton.ECodeInvalidParams, "Invalid params: "+format, args...)
}

// StartRemoteSandbox starts the session's remote sandbox (BAE's client API):
// one per session, from an image the profile allows.
func (e *Engine) StartRemoteSandbox(ctx context.Context, key *baton.Key, params json.RawMessage) (any, error) {
	a, err := e.driverGate(key, "session.startRemoteSandbox")
	if err != nil {
		return nil, err
	}
	s, err := e.openSession(ctx, key.Name)
	if err != nil {
		return nil, err
	}
	var p struct {
		Image any `json:"image"`
	}
	_ = json.Unmarshal(params, &p)
	image, _ := p.Image.(string)
	if strings.TrimSpace(image) == "" {
		return nil, invalid(`missing "image"`)
	}
	prof, err := e.store.Profile(ctx, s.ProfileID)
	if baton.ErrorCode(err) == baton.ECodeNotFound {
		return nil, baton.Errorf(baton.ECodeSessionFailed, "profile_unavailable: the profile bound to this session is no longer available")
	} else if err != nil {
		return nil, err
	}
	allowed := false
	for _, img := range prof.AvailableSandboxes {
		allowed = allowed || img == image
	}
	if !allowed {
		return nil, baton.Errorf(baton.ECodeImageNotAllowed,
			"sandbox_image_not_allowed: image %q is not in this session profile's available_sandboxes", image)
	}
	a.mu.Lock()
	if a.sandbox != nil {
		a.mu.Unlock()
		return nil, baton.Errorf(baton.ECodeSessionFailed, "a remote sandbox is already running for this session; call session.stopRemoteSandbox first")
	}
	a.sandbox = &remoteSandbox{image: image} // reserved while starting
	a.mu.Unlock()

	actor := key.ClientID
	_ = e.store.Append(ctx, baton.NewEvent(s.ID, actor, baton.EventSandboxStart, map[string]any{"image": image, "dispatch": runsRemote}))
	id, err := e.startSandbox(ctx, s.ID, image)
	if err != nil {
		a.mu.Lock()
		a.sandbox = nil
		a.mu.Unlock()
		_ = e.store.Append(ctx, baton.NewEvent(s.ID, actor, baton.EventSandboxError, map[string]any{
			"image": image, "phase": "start", "detail": err.Error(), "dispatch": runsRemote, "unsandboxed": false,
		}))
		return nil, baton.Errorf(baton.ECodeSandboxStart, "sandbox_start_failed: %s", err)
	}
	a.mu.Lock()
	a.sandbox = &remoteSandbox{id: id, image: image}
	a.mu.Unlock()
	ev := baton.NewEvent(s.ID, actor, baton.EventSandboxRunning, map[string]any{
		"image": image, "sandbox_id": id, "dispatch": runsRemote, "unsandboxed": false,
	})
	var startedAt any
	if e.store.Append(ctx, ev) == nil {
		startedAt = baton.FormatTime(ev.CreatedAt)
	}
	return map[string]any{"sandbox_id": id, "image": image, "started_at": startedAt}, nil
}

func (e *Engine) startSandbox(ctx context.Context, sessionID, image string) (string, error) {
	if e.sandboxes == nil {
		return "", errNoDriver
	}
	if err := e.sandboxes.EnsureImage(ctx, image); err != nil {
		return "", err
	}
	if d, ok := e.sandboxes.(baton.SessionSandboxDriver); ok {
		return d.StartFor(ctx, sessionID, image)
	}
	return e.sandboxes.Start(ctx, image)
}

// StopRemoteSandbox stops the session's remote sandbox.
func (e *Engine) StopRemoteSandbox(ctx context.Context, key *baton.Key) (any, error) {
	a, err := e.driverGate(key, "session.stopRemoteSandbox")
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	sb := a.sandbox
	if sb != nil && sb.id != "" {
		a.sandbox = nil // removed before the driver call
	}
	a.mu.Unlock()
	if sb == nil || sb.id == "" {
		return nil, errNoSandbox()
	}
	if err := e.stopSandbox(ctx, key.Name, key.ClientID, sb, "explicit"); err != nil {
		return nil, baton.Errorf(baton.ECodeSessionFailed, "sandbox stop failed: %s", err)
	}
	return map[string]any{"stopped": true, "image": sb.image, "sandbox_id": sb.id}, nil
}

// stopSandbox stops sb and logs stop and stopped (or error) events. The
// subagents running in sb end first (as failed, exit code -1), so the
// driver's stop cannot leave one without an end.
func (e *Engine) stopSandbox(ctx context.Context, sessionID, actor string, sb *remoteSandbox, reason string) error {
	base := map[string]any{"image": sb.image, "sandbox_id": sb.id, "reason": reason, "dispatch": runsRemote}
	_ = e.store.Append(ctx, baton.NewEvent(sessionID, actor, baton.EventSandboxStop, base))
	e.subs.sandboxStopped(sessionID, sb.id)
	err := errNoDriver
	if e.sandboxes != nil {
		err = e.sandboxes.Stop(ctx, sb.id)
	}
	if err != nil {
		_ = e.store.Append(ctx, baton.NewEvent(sessionID, actor, baton.EventSandboxError, map[string]any{
			"image": sb.image, "sandbox_id": sb.id, "phase": "stop", "detail": err.Error(), "dispatch": runsRemote, "unsandboxed": false,
		}))
		return err
	}
	stopped := map[string]any{"unsandboxed": false}
	for k, v := range base {
		stopped[k] = v
	}
	_ = e.store.Append(ctx, baton.NewEvent(sessionID, actor, baton.EventSandboxStopped, stopped))
	return nil
}

func errNoSandbox() error {
	return baton.Errorf(baton.ECodeNoSandbox, "sandbox_not_running: no remote sandbox is running for this session")
}

// ExecRemoteSandbox runs a command in the session's remote sandbox.
func (e *Engine) ExecRemoteSandbox(ctx context.Context, key *baton.Key, params json.RawMessage) (any, error) {
	a, err := e.driverGate(key, "session.execRemoteSandbox")
	if err != nil {
		return nil, err
	}
	var p struct {
		Command any `json:"command"`
	}
	_ = json.Unmarshal(params, &p)
	command, ok := p.Command.(string)
	if !ok {
		return nil, invalid(`missing "command"`)
	}
	sb := a.runningSandbox()
	if sb == nil {
		return nil, errNoSandbox()
	}
	res, err := e.execSandbox(ctx, sb.id, command)
	if err != nil {
		_ = e.store.Append(ctx, baton.NewEvent(key.Name, key.ClientID, baton.EventSandboxError, map[string]any{
			"image": sb.image, "sandbox_id": sb.id, "phase": "exec", "detail": err.Error(), "dispatch": runsRemote, "unsandboxed": false,
		}))
		return nil, baton.Errorf(baton.ECodeSessionFailed, "sandbox exec failed: %s", err)
	}
	return res, nil
}

// execSandbox runs command in sandbox id under the driver's own output
// cap, which notes a cut in the stream it cut (with how many bytes are
// missing), within the cap.
func (e *Engine) execSandbox(ctx context.Context, id, command string) (baton.ExecResult, error) {
	return e.sandboxes.Exec(ctx, id, command, baton.ExecOptions{})
}

// runningSandbox returns the session's started remote sandbox, if any.
func (a *actor) runningSandbox() *remoteSandbox {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sandbox == nil || a.sandbox.id == "" || a.e.sandboxes == nil {
		return nil
	}
	return a.sandbox
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

// ReportLocalSandbox records a client-side sandbox lifecycle report.
func (e *Engine) ReportLocalSandbox(ctx context.Context, key *baton.Key, params json.RawMessage) error {
	if _, err := e.driverGate(key, "session.reportLocalSandbox"); err != nil {
		return err
	}
	m := map[string]json.RawMessage{}
	_ = json.Unmarshal(params, &m)
	var state string
	_ = json.Unmarshal(m["state"], &state)
	typ := localSandboxEvent(state)
	if typ == "" {
		return invalid(`"state" must be "running", "stopped", or "error"`)
	}
	unsandboxed := false
	if raw, ok := m["unsandboxed"]; ok && json.Unmarshal(raw, &unsandboxed) != nil {
		return invalid(`"unsandboxed" must be a boolean`)
	}
	image, hasImage := m["image"]
	isNull := !hasImage || string(image) == "null"
	var img any
	if unsandboxed {
		if !isNull {
			return invalid(`"image" must be null when "unsandboxed" is true`)
		}
	} else {
		var s string
		switch {
		case isNull:
			return invalid(`missing "image"`)
		case json.Unmarshal(image, &s) != nil:
			return invalid(`"image" must be a string or null`)
		}
		img = s
	}
	return e.store.Append(ctx, baton.NewEvent(key.Name, key.ClientID, typ, map[string]any{
		"dispatch": runsLocal, "image": img, "unsandboxed": unsandboxed,
		"container_id": rawOrNull(m["container_id"]), "detail": rawOrNull(m["detail"]),
	}))
}

// ReportLocalSubagent records a client-side subagent lifecycle report.
func (e *Engine) ReportLocalSubagent(ctx context.Context, key *baton.Key, params json.RawMessage) error {
	if _, err := e.driverGate(key, "session.reportLocalSubagent"); err != nil {
		return err
	}
	m := map[string]json.RawMessage{}
	_ = json.Unmarshal(params, &m)
	var state string
	_ = json.Unmarshal(m["state"], &state)
	typ := localSubagentEvent(state)
	if typ == "" {
		return invalid(`"state" must be "start", "running", "completed", "failed", or "cancelled"`)
	}
	fields := map[string]string{}
	for _, f := range []string{"subagent_id", "harness", "model"} {
		v, ok := stringValue(m[f])
		if !ok || strings.TrimSpace(v) == "" {
			return invalid(`"subagent_id", "harness", and "model" must be non-empty strings`)
		}
		fields[f] = v
	}
	for _, f := range []string{"detail", "reason"} {
		if raw, ok := m[f]; ok && string(raw) != "null" {
			var s string
			if json.Unmarshal(raw, &s) != nil {
				return invalid(`%q must be a string or null`, f)
			}
		}
	}
	var exit any
	if raw, ok := m["exit_code"]; ok {
		var n int64
		if json.Unmarshal(raw, &n) != nil || string(raw) == "null" {
			return invalid(`"exit_code" must be an integer`)
		}
		exit = n
	}
	p := map[string]any{
		"dispatch": runsLocal, "subagent_id": fields["subagent_id"], "harness": fields["harness"],
		"model": fields["model"], "detail": rawOrNull(m["detail"]),
	}
	switch state {
	case "completed":
		p["exit_code"] = exit
	case "failed":
		p["reason"], p["exit_code"] = rawOrNull(m["reason"]), exit
	case "cancelled":
		p["reason"] = rawOrNull(m["reason"])
	}
	return e.store.Append(ctx, baton.NewEvent(key.Name, key.ClientID, typ, p))
}

// localSandboxEvent is the event type of a local sandbox's reported
// state, or "" for a state a client may not report.
func localSandboxEvent(state string) string {
	switch state {
	case "running":
		return baton.EventSandboxRunning
	case "stopped":
		return baton.EventSandboxStopped
	case "error":
		return baton.EventSandboxError
	}
	return ""
}

// localSubagentEvent is the event type of a local subagent's reported
// state, or "" for a state a client may not report.
func localSubagentEvent(state string) string {
	switch state {
	case "start":
		return baton.EventSubagentStart
	case "running":
		return baton.EventSubagentRunning
	case "completed":
		return baton.EventSubagentCompleted
	case "failed":
		return baton.EventSubagentFailed
	case "cancelled":
		return baton.EventSubagentCancelled
	}
	return ""
}

// CancelSubagent cancels a running remote subagent of the session
// (BAE's client API); a finished one stays tracked until it is reported.
func (e *Engine) CancelSubagent(_ context.Context, key *baton.Key, params json.RawMessage) (any, error) {
	if _, err := e.driverGate(key, "session.cancelSubagent"); err != nil {
		return nil, err
	}
	var p struct {
		ID any `json:"subagent_id"`
	}
	_ = json.Unmarshal(params, &p)
	id, _ := p.ID.(string)
	if strings.TrimSpace(id) == "" {
		return nil, invalid(`missing "subagent_id"`)
	}
	return e.cancelSubagent(key.Name, key.ClientID, id)
}

// rawOrNull returns raw as a JSON value, or nil (null) when absent.
func rawOrNull(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	return raw
}
