package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/baton-engine/baton"
)

// The engine side of a brain's access to the server (bma.executor.v1.1,
// Brain): a brain executor runs its own agent loop on its machine and
// reaches back for model calls (the model gateway) and for the session's
// server-side tools (over MCP). Both run as part of the brain's turn:
// their events are the session's, attributed to the turn's acting client,
// exactly as a server turn records them. Whether the turn is active is the
// caller's check (the token and the brain turn's state); the engine checks
// that the session is open.

// sideTurn returns a turn context for one piece of work a brain turn asks
// of the server, with ctx also ended by the engine's Close. done releases
// it: it commits whatever is still held.
func (e *Engine) sideTurn(ctx context.Context, sessionID, actor string) (tc *turnCtx, s *baton.Session, done func() error, err error) {
	s, err = e.openSession(ctx, sessionID)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(e.turnCtx, cancel)
	tc = &turnCtx{e: e, a: e.actorFor(s.ID), t: &turnRun{actor: actor, ctx: ctx, cancel: cancel}, wctx: e.ctx}
	return tc, s, func() error {
		stop()
		cancel()
		return tc.emit()
	}, nil
}

// internal strips the session-loop code from a failure to record events
// (errLoop), which a side turn's caller must not read as a session state.
func internal(err error) error {
	if errors.Is(err, errLoop) {
		return errors.New("recording the session's events failed")
	}
	return err
}

// ModelCall runs one model call of a brain turn (the model gateway)
// through the session profile's provider chain exactly like a server
// turn's call — per-call timeout, retries with backoff, failover — and
// records its provider.request and provider.response events attributed to
// actor. req.Model is ignored: each entry calls its own model. A positive
// req.MaxTokens is used, capped by the entry's max_tokens; otherwise the
// entry's applies (4096 when it has none). req.OnDelta is ignored.
//
// A session that is not open fails with ECodeNotOpen (ECodeSessionFailed
// when it no longer exists); a chain whose every provider failed with
// ECodeUnavailable; a failure to record the events is an internal error.
func (e *Engine) ModelCall(ctx context.Context, sessionID, actor string, req *baton.ProviderRequest) (*baton.ProviderResponse, error) {
	tc, s, done, err := e.sideTurn(ctx, sessionID, actor)
	if err != nil {
		return nil, err
	}
	prof, err := e.store.Profile(tc.t.ctx, s.ProfileID)
	if baton.ErrorCode(err) == baton.ECodeNotFound {
		_ = done()
		return nil, baton.Errorf(baton.ECodeUnavailable, "the profile bound to this session is no longer available")
	}
	if err != nil {
		_ = done()
		return nil, err
	}
	chain, ok := e.chainFor(s.ID, prof)
	if !ok {
		_ = done()
		return nil, baton.Errorf(baton.ECodeUnavailable, "primary provider %q is not configured", prof.PrimaryProvider)
	}
	r := &baton.ProviderRequest{System: req.System, Messages: req.Messages, Tools: req.Tools}
	if r.Tools == nil {
		r.Tools = []json.RawMessage{}
	}
	want := req.MaxTokens
	resp, attempts, err := tc.walk(chain, r, r.Messages, func(entry *baton.ProviderEntry) int {
		if want > 0 && (entry.MaxTokens <= 0 || want < entry.MaxTokens) {
			return want
		}
		return entryMaxTokens(entry)
	})
	cancelled := tc.t.ctx.Err()
	if derr := done(); err == nil {
		err = derr
	}
	switch {
	case err != nil:
		return nil, internal(err)
	case resp != nil:
		return resp, nil
	case cancelled != nil:
		return nil, fmt.Errorf("model call: %w", cancelled)
	}
	return nil, baton.Errorf(baton.ECodeUnavailable, "all providers failed (%d attempts)", attempts)
}

// OffersTools reports whether a brain of the session gets a tools
// credential: whether its profile names MCP servers or executor
// environments, or one of its clients declared Auto-mode sandbox tools.
// It reads declarations only; which tools are live is decided per call.
func (e *Engine) OffersTools(ctx context.Context, sessionID string) (bool, error) {
	s, err := e.sessionRow(ctx, sessionID)
	if err != nil {
		return false, err
	}
	prof, err := e.store.Profile(ctx, s.ProfileID)
	if err != nil {
		return false, err
	}
	if len(prof.MCPServers) > 0 || len(prof.ExecutorEnvironments) > 0 {
		return true, nil
	}
	for _, tools := range s.SandboxTools {
		if len(tools) > 0 {
			return true, nil
		}
	}
	return false, nil
}

// brainToolset is sideTurn with the session's brain tools.
func (e *Engine) brainToolset(ctx context.Context, sessionID, actor string) (*turnCtx, *toolset, func() error, error) {
	tc, s, done, err := e.sideTurn(ctx, sessionID, actor)
	if err != nil {
		return nil, nil, nil, err
	}
	prof, err := e.store.Profile(tc.t.ctx, s.ProfileID)
	if err != nil {
		_ = done()
		return nil, nil, nil, err
	}
	return tc, tc.brainTools(s, prof), done, nil
}

// SessionTools lists the server-side tools the session offers a brain
// turn acting for actor (see brainTools), in the order a server turn
// would advertise them.
func (e *Engine) SessionTools(ctx context.Context, sessionID, actor string) ([]baton.ToolDef, error) {
	_, ts, done, err := e.brainToolset(ctx, sessionID, actor)
	if err != nil {
		return nil, err
	}
	defer done()
	out := make([]baton.ToolDef, len(ts.defs))
	for i, raw := range ts.defs {
		if err := json.Unmarshal(raw, &out[i]); err != nil {
			return nil, fmt.Errorf("session tools: %w", err)
		}
	}
	return out, nil
}

// CallSessionTool runs one server-side tool for a brain turn acting for
// actor and returns the tool_result's content (canonical blocks) and its
// error flag. It records what a server turn records for the call — a
// tool.call (id "toolu_…", dispatch and, for MCP, server_name), the
// dispatcher's request and response events and the tool.result —
// attributed to actor. A tool the session does not offer is
// ECodeNotFound; a failing tool is an error result, not an error.
func (e *Engine) CallSessionTool(ctx context.Context, sessionID, actor, name string, input json.RawMessage) (json.RawMessage, bool, error) {
	tc, ts, done, err := e.brainToolset(ctx, sessionID, actor)
	if err != nil {
		return nil, false, err
	}
	kind, ok := ts.offers(name)
	if !ok {
		_ = done()
		return nil, false, baton.Errorf(baton.ECodeNotFound, "the session offers no tool named %q", name)
	}
	if len(input) == 0 || string(input) == "null" {
		input = json.RawMessage(`{}`)
	}
	u := toolUse{ID: baton.NewID("toolu_"), Name: name, Input: input}
	p := map[string]any{"id": u.ID, "name": name, "input": input, "dispatch": kind}
	if kind == baton.DispatchMCP {
		p["server_name"] = ts.mcp[name]
	}
	tc.hold(baton.NewEvent(sessionID, actor, baton.EventToolCall, p)) // committed with the dispatcher's first event
	result, err := tc.dispatch(kind, u, ts)
	if derr := done(); err == nil {
		err = derr
	}
	if err != nil {
		return nil, false, internal(err)
	}
	var b struct {
		Content json.RawMessage `json:"content"`
		IsError bool            `json:"is_error"`
	}
	if err := json.Unmarshal(result, &b); err != nil {
		return nil, false, fmt.Errorf("session tool result: %w", err)
	}
	return b.Content, b.IsError, nil
}
