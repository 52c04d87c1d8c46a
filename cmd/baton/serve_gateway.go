package main

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/auth"
	"github.com/baton-engine/baton/engine"
	"github.com/baton-engine/baton/executor"
	"github.com/baton-engine/baton/gateway"
)

// brainAccess is a brain's way back into its session: the turn tokens,
// the credentials the executor hub sends with turn.start and issues again
// on model_token.refresh / tools_token.refresh, and the client-port routes
// of the model gateway and the session tools endpoint.
//
// The hub is opened before the engine, so the engine (asked whether a
// turn is active and whether a session offers tools) and the client
// listener's URL are set later, by attach; credentials are only asked for
// once turns start, after both.
type brainAccess struct {
	public string // BATON_PUBLIC_URL, or "" for the listener's URL
	tokens *auth.TurnTokens
	creds  *gateway.Credentials
	eng    *engine.Engine
	url    func() string
}

// openBrainAccess loads the turn token key (the executor token key, shared
// through the store). public is BATON_PUBLIC_URL, already checked: the
// client origin as executors reach it, e.g. "https://baton.example.com".
// Empty, it is the client listener's URL, which a remote executor can only
// use when the server listens on an address it can reach.
func openBrainAccess(ctx context.Context, store baton.SettingStore, public string) (*brainAccess, error) {
	b := &brainAccess{public: public}
	var err error
	b.tokens, err = auth.OpenTurnTokens(ctx, auth.TurnTokenOptions{Store: store, Turns: b})
	if err != nil {
		return nil, err
	}
	b.creds = gateway.NewCredentials(gateway.CredentialOptions{
		Issuer: b.tokens, Origin: gateway.Origin(b.public, b.listenerURL), Tools: b,
	})
	return b, nil
}

// attach sets the engine and the client listener's URL.
func (b *brainAccess) attach(eng *engine.Engine, clientURL func() string) {
	b.eng, b.url = eng, clientURL
}

func (b *brainAccess) listenerURL() string {
	if b.url == nil {
		return ""
	}
	return b.url()
}

// TurnActive asks the engine (baton.BrainTurns); before attach no turn
// is active.
func (b *brainAccess) TurnActive(ctx context.Context, sessionID, turnID string) (bool, error) {
	if b.eng == nil {
		return false, nil
	}
	return b.eng.TurnActive(ctx, sessionID, turnID)
}

// OffersTools asks the engine (gateway.ToolOffers).
func (b *brainAccess) OffersTools(ctx context.Context, sessionID string) (bool, error) {
	if b.eng == nil {
		return false, nil
	}
	return b.eng.OffersTools(ctx, sessionID)
}

// routes returns the client-port routes of the model gateway and the
// session tools endpoint, served by eng; hub tells the tools endpoint the
// current epoch of brain sessions.
func (b *brainAccess) routes(hub *executor.Hub, log *slog.Logger) func(*http.ServeMux) {
	g := gateway.New(gateway.Options{Tokens: b.tokens, Engine: b.eng, Epochs: hub, Logger: log, Version: baton.Version})
	return g.Routes
}
