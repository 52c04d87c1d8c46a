package engine

import (
	"context"

	"github.com/baton-engine/baton"
)

// reservedToolName is advertised by the server itself and cannot be
// declared by clients.
const reservedToolName = "remote_subagent_status"

// openPayload is the payload of session.open and session.join.
type openPayload struct {
	ClientVersion *string  `json:"client_version"`
	Tools         []string `json:"tools"`
	SandboxTools  []string `json:"sandbox_tools"`
	SubagentTools []string `json:"subagent_tools"`
}

func payloadOf(req *baton.OpenRequest) openPayload {
	p := openPayload{
		ClientVersion: req.ClientVersion,
		Tools:         make([]string, 0, len(req.Tools)),
		SandboxTools:  make([]string, 0, len(req.SandboxTools)),
		SubagentTools: make([]string, 0, len(req.SubagentTools)),
	}
	for _, t := range req.Tools {
		p.Tools = append(p.Tools, t.Name)
	}
	for _, t := range req.SandboxTools {
		p.SandboxTools = append(p.SandboxTools, t.Name)
	}
	for _, t := range req.SubagentTools {
		p.SubagentTools = append(p.SubagentTools, t.Name)
	}
	return p
}

// Open creates a session for clientKey, running the checks of
// BAE's client API in order.
func (e *Engine) Open(ctx context.Context, clientKey *baton.Key, req *baton.OpenRequest) (*baton.OpenResult, error) {
	prof, entry, err := e.resolveProfile(ctx, clientKey, req)
	if err != nil {
		return nil, err
	}
	if err := checkDeclarations(prof, req); err != nil {
		return nil, err
	}
	s := &baton.Session{
		ID:            baton.NewID(baton.PrefixSession),
		ClientKeyID:   clientKey.ID,
		ProfileID:     prof.ID,
		State:         baton.StateOpen,
		ClientVersion: req.ClientVersion,
		ClientTools:   map[string][]baton.ToolDef{clientKey.ID: nonNil(req.Tools)},
		SandboxTools:  map[string][]baton.ToolDef{clientKey.ID: nonNil(req.SandboxTools)},
		SubagentTools: map[string][]baton.SubagentToolDef{clientKey.ID: nonNil(req.SubagentTools)},
		CreatedAt:     baton.Now(),
	}
	key, plain := baton.MintKey(baton.RoleSession, s.ID, prof.ID, clientKey.ID)
	ev := baton.NewEvent(s.ID, clientKey.ID, baton.EventSessionOpen, payloadOf(req))
	if err := e.store.CreateSession(ctx, s, key, ev); err != nil {
		return nil, err
	}
	e.log.Info("session opened", "session_id", s.ID, "profile_id", prof.ID, "client_key_id", clientKey.ID)
	e.mcpTools(ctx, s.ID, prof) // connect now; failures are logged, never fail the open
	return &baton.OpenResult{SessionID: s.ID, SessionKey: plain, Profile: summary(prof, entry)}, nil
}

// Join adds clientKey to an open session (BAE's client API).
func (e *Engine) Join(ctx context.Context, clientKey *baton.Key, sessionID string, req *baton.OpenRequest) (*baton.OpenResult, error) {
	s, err := e.store.Session(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	if s.State != baton.StateOpen {
		return nil, baton.Errorf(baton.ECodeSessionClosed, "session is already %s", s.State)
	}
	if clientKey.ProfileID != s.ProfileID {
		return nil, baton.Errorf(baton.ECodeProfileMismatch, "the client key's profile does not match this session's profile")
	}
	prof, entry, err := e.resolveProfile(ctx, clientKey, req)
	if err != nil {
		return nil, err
	}
	if err := checkDeclarations(prof, req); err != nil {
		return nil, err
	}
	p := baton.Participant{
		ClientKeyID:   clientKey.ID,
		ClientVersion: req.ClientVersion,
		Tools:         nonNil(req.Tools),
		SandboxTools:  nonNil(req.SandboxTools),
		SubagentTools: nonNil(req.SubagentTools),
	}
	key, plain := baton.MintKey(baton.RoleSession, s.ID, prof.ID, clientKey.ID)
	ev := baton.NewEvent(s.ID, clientKey.ID, baton.EventSessionJoin, payloadOf(req))
	defer e.dropRow(s.ID)
	if err := e.store.JoinSession(ctx, s.ID, p, key, ev); err != nil {
		return nil, err
	}
	e.log.Info("session joined", "session_id", s.ID, "client_key_id", clientKey.ID)
	return &baton.OpenResult{SessionID: s.ID, SessionKey: plain, Profile: summary(prof, entry)}, nil
}

// resolveProfile loads the client key's profile and its primary provider.
// Either failing records an audit session in state error (BAE's client API
// checks 2 and 3).
func (e *Engine) resolveProfile(ctx context.Context, clientKey *baton.Key, req *baton.OpenRequest) (*baton.Profile, *baton.ProviderEntry, error) {
	prof, err := e.store.Profile(ctx, clientKey.ProfileID)
	if baton.ErrorCode(err) == baton.ECodeNotFound {
		e.audit(ctx, clientKey, req, map[string]any{"reason": "profile_unavailable", "profile_id": clientKey.ProfileID})
		return nil, nil, baton.Errorf(baton.ECodeProfileUnavailable, "the profile bound to this client key is no longer available")
	}
	if err != nil {
		return nil, nil, err
	}
	entry, ok := e.registry.Provider(prof.PrimaryProvider)
	if !ok {
		e.log.Error("profile's primary provider is not configured", "profile_id", prof.ID, "primary_provider", prof.PrimaryProvider)
		e.audit(ctx, clientKey, req, map[string]any{
			"reason": "primary_provider_unavailable", "profile_id": prof.ID, "primary_provider": prof.PrimaryProvider,
		})
		return nil, nil, baton.Errorf(baton.ECodePrimaryProviderUnavailable,
			"the profile's primary provider %q is not configured in bae-config.toml", prof.PrimaryProvider)
	}
	return prof, entry, nil
}

// audit records a failed open as a session in state error with one
// session.error event, so operators can see it in the admin API.
func (e *Engine) audit(ctx context.Context, clientKey *baton.Key, req *baton.OpenRequest, payload map[string]any) {
	names := make([]baton.ToolDef, 0, len(req.Tools))
	for _, t := range req.Tools {
		names = append(names, baton.ToolDef{Name: t.Name})
	}
	now := baton.Now()
	s := &baton.Session{
		ID:            baton.NewID(baton.PrefixSession),
		ClientKeyID:   clientKey.ID,
		ProfileID:     clientKey.ProfileID,
		State:         baton.StateError,
		ClientVersion: req.ClientVersion,
		ClientTools:   map[string][]baton.ToolDef{clientKey.ID: names},
		SandboxTools:  map[string][]baton.ToolDef{},
		SubagentTools: map[string][]baton.SubagentToolDef{},
		CreatedAt:     now,
	}
	ev := baton.NewEvent(s.ID, clientKey.ID, baton.EventSessionError, payload)
	if err := e.store.CreateSession(ctx, s, nil, ev); err != nil {
		e.log.Error("record failed open", "err", err, "client_key_id", clientKey.ID)
	}
}

// CloseSession closes the session bound to sessionKey (BAE's client API). The
// session.close event is attributed to the session's creator.
func (e *Engine) CloseSession(ctx context.Context, sessionKey *baton.Key) error {
	id := sessionKey.Name
	s, err := e.store.Session(ctx, id)
	if err != nil {
		return err
	}
	ev := baton.NewEvent(id, s.ClientKeyID, baton.EventSessionClose, map[string]string{"reason": "client_close"})
	ended, err := e.store.EndSession(ctx, id, baton.StateClosed, ev)
	if err != nil {
		return err
	}
	e.forget(ctx, id, s.ClientKeyID) // cleanup is unconditional and idempotent
	if !ended {
		if s, err = e.store.Session(ctx, id); err != nil {
			return err
		}
		return baton.Errorf(baton.ECodeSessionClosed, "session is already %s", s.State)
	}
	e.log.Info("session closed", "session_id", id, "reason", "client_close")
	return nil
}

// RevokeClientKey revokes a client key and its session keys, closing every
// open session left without an active participant (BAE's admin API).
func (e *Engine) RevokeClientKey(ctx context.Context, id string) error {
	closed, err := e.store.RevokeClientKey(ctx, id, func(sessionID string) *baton.Event {
		return baton.NewEvent(sessionID, id, baton.EventSessionClose, map[string]string{"reason": "client_key_revoked"})
	})
	if err != nil {
		return err
	}
	if e.auth != nil {
		e.auth.Forget(id)
	}
	for _, sid := range closed {
		e.forget(ctx, sid, id)
	}
	e.log.Info("client key revoked", "key_id", id, "sessions_closed", len(closed))
	return nil
}

func summary(p *baton.Profile, entry *baton.ProviderEntry) baton.ProfileSummary {
	return baton.ProfileSummary{
		ID:           p.ID,
		Name:         p.Name,
		AllowedTools: nonNil(p.AllowedTools),
		MCPServers:   nonNil(p.MCPServers),
		Provider:     baton.ProviderSummary{Provider: entry.Provider, Model: entry.Model},
	}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
