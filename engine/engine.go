// Package engine runs Baton's sessions: the lifecycle checks of opening,
// joining and closing a session, the revocation cascade, and (from the
// session-loop work on) one actor per open session that owns its turns.
//
// The engine orchestrates through the root package's interfaces only; it
// never imports an adapter. cmd/baton hands it a store, a registry and an
// authenticator.
package engine

import (
	"context"
	"io"
	"log/slog"
	"sort"
	"sync"

	"github.com/baton-engine/baton"
)

// Options configure an Engine.
type Options struct {
	Store    baton.Store
	Registry *baton.Registry
	// Auth, when set, is told about revoked keys so its caches drop them.
	Auth   baton.Authenticator
	Logger *slog.Logger
}

// Engine implements baton.SessionService.
type Engine struct {
	store    baton.Store
	registry *baton.Registry
	auth     baton.Authenticator
	log      *slog.Logger

	mu      sync.Mutex
	drivers map[string]map[string]struct{} // session id → registered driver key ids
}

var _ baton.SessionService = (*Engine)(nil)

// New returns an Engine; it owns no goroutines until sessions run.
func New(opts Options) *Engine {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	reg := opts.Registry
	if reg == nil {
		reg = &baton.Registry{}
	}
	return &Engine{
		store:    opts.Store,
		registry: reg,
		auth:     opts.Auth,
		log:      log,
		drivers:  make(map[string]map[string]struct{}),
	}
}

// Close releases in-memory session state.
func (e *Engine) Close() error {
	e.mu.Lock()
	e.drivers = make(map[string]map[string]struct{})
	e.mu.Unlock()
	return nil
}

// Participants returns the sorted key ids of the session's registered
// drivers. Registrations live in memory: a restart or a close clears them.
func (e *Engine) Participants(_ context.Context, sessionID string) ([]string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ids := make([]string, 0, len(e.drivers[sessionID]))
	for id := range e.drivers[sessionID] {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids, nil
}

// forget drops a session's runtime state (drivers; later: gate, parked
// turn, subscribers, MCP connections). It is idempotent.
func (e *Engine) forget(sessionID string) {
	e.mu.Lock()
	delete(e.drivers, sessionID)
	e.mu.Unlock()
}
