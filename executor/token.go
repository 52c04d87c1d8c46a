package executor

import (
	"context"
	"fmt"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/executor/proto"
)

// Reasons of the -32012 answers of the token refreshes (bma.executor.v1.1).
const (
	ReasonModelTokenUnavailable = "model_token_unavailable"
	ReasonToolsTokenUnavailable = "tools_token_unavailable"
)

// model_token.refresh and tools_token.refresh (bma.executor.v1.1): a brain asks for
// fresh credentials of its running turn. A token is signed only while the
// turn is active, for a session routed to the asking executor's machine
// as its brain machine (its agent session on this executor), and — for
// tools tokens — from the turn's current epoch. Answers carry
// data.reason: turn_inactive (-32007: the turn is not active, or a tools
// token is asked for a superseded epoch), forbidden (-32001: the session
// or turn is unknown, belongs to another executor, or this executor has
// no agent capability), model_token_unavailable / tools_token_unavailable
// (-32012: the platform issues no such token, e.g. the session offers no
// server-side tools). Calls are not idempotent: each returns a new token.

func (c *conn) modelTokenRefresh(ctx context.Context, f *proto.Frame) (any, error) {
	var p proto.ModelTokenRefreshParams
	if e := f.Bind(&p); e != nil {
		return nil, e
	}
	md, e := c.turnCredentials(ctx, p.SessionID, p.TurnID, 0, ReasonModelTokenUnavailable)
	if e != nil {
		return nil, e
	}
	if md.ModelToken == "" {
		return nil, unavailable(ReasonModelTokenUnavailable, "the platform issues no model token for this turn")
	}
	return proto.ModelTokenRefreshResult{ModelToken: md.ModelToken, ExpiresAt: md.ModelTokenExpiresAt}, nil
}

func (c *conn) toolsTokenRefresh(ctx context.Context, f *proto.Frame) (any, error) {
	var p proto.ToolsTokenRefreshParams
	if e := f.Bind(&p); e != nil {
		return nil, e
	}
	if p.Epoch < 1 {
		return nil, proto.Errorf(proto.CodeInvalidParams, `Invalid params: missing "epoch"`)
	}
	md, e := c.turnCredentials(ctx, p.SessionID, p.TurnID, p.Epoch, ReasonToolsTokenUnavailable)
	if e != nil {
		return nil, e
	}
	if md.ToolsMCPToken == "" {
		return nil, unavailable(ReasonToolsTokenUnavailable, "the platform issues no tools token for this turn")
	}
	// A tools token lives as long as a model token issued with it.
	return proto.ToolsTokenRefreshResult{ToolsMCPToken: md.ToolsMCPToken, ExpiresAt: md.ModelTokenExpiresAt}, nil
}

// turnCredentials checks a refresh against the rules above and issues the
// turn's credentials. epoch is the tools refresh's (0 for a model token,
// which is issued under the current epoch). reason is the -32012 reason
// when this harness issues no credentials at all.
func (c *conn) turnCredentials(ctx context.Context, sessionID, turnID string, epoch int64, reason string) (baton.TurnMetadata, *proto.Error) {
	var none baton.TurnMetadata
	if sessionID == "" || turnID == "" {
		return none, proto.Errorf(proto.CodeInvalidParams, `Invalid params: "session_id" and "turn_id" are required`)
	}
	h := c.hub
	h.mu.Lock()
	h.ag.init()
	creds := h.creds
	rec := c.exec
	if rec == nil || rec.scope != baton.ExecutorScopeMachine || rec.caps.Agent == nil {
		h.mu.Unlock()
		return none, forbidden("this executor is not entitled to platform credentials: it is not a machine-scoped agent executor")
	}
	a, e := c.agentLocked(sessionID, 0)
	if e != nil {
		h.mu.Unlock()
		return none, e
	}
	known, running, current, machine := a.turns[turnID], a.running == turnID, a.epoch(), a.machineID
	closing := a.closing || a.ended
	h.mu.Unlock()
	switch {
	case !known:
		return none, forbidden(fmt.Sprintf("turn %s is unknown on session %s", turnID, sessionID))
	case !running || closing:
		return none, inactive(fmt.Sprintf("turn %s is not active", turnID))
	case epoch != 0 && epoch != current:
		return none, inactive(fmt.Sprintf("turn %s runs in epoch %d, not %d", turnID, current, epoch))
	case creds == nil:
		return none, unavailable(reason, "this harness issues no turn credentials")
	}
	md, err := creds.Issue(ctx, sessionID, turnID, machine, current)
	switch baton.ErrorCode(err) {
	case "":
		return md, nil
	case baton.ECodeForbidden, baton.ECodeNotOpen, baton.ECodeNotFound: // the engine no longer runs the turn
		return none, inactive(fmt.Sprintf("turn %s is not active: %s", turnID, baton.ErrorMessage(err)))
	case baton.ECodeUnavailable:
		return none, unavailable(reason, baton.ErrorMessage(err))
	}
	h.log.Error("executor: issue turn credentials", "session_id", sessionID, "turn_id", turnID, "err", err)
	return none, proto.Errorf(proto.CodeInternal, "Internal error")
}

func forbidden(msg string) *proto.Error {
	return proto.Errorf(proto.CodeForbidden, "%s", msg).WithData(proto.ErrorData{Reason: proto.ReasonForbidden})
}

func inactive(msg string) *proto.Error {
	return proto.Errorf(proto.CodeTurnInactive, "%s", msg).WithData(proto.ErrorData{Reason: proto.ReasonTurnInactive})
}

func unavailable(reason, msg string) *proto.Error {
	return proto.Errorf(proto.CodeCapabilityMissing, "%s", msg).WithData(proto.ErrorData{Reason: reason})
}

// BrainEpoch returns the current binding epoch of the session's agent
// session, or 0 when it has none: tools tokens of any other epoch are
// refused by the session tools endpoint.
func (h *Hub) BrainEpoch(sessionID string) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	a := h.ag.sessions[sessionID]
	if a == nil || a.ended {
		return 0
	}
	return a.epoch()
}
