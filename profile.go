package baton

import (
	"context"
	"encoding/json"
	"time"
)

// DefaultMaxIterations is the provider round-trip cap of a turn when the
// profile does not set one (BAE's fixed value).
const DefaultMaxIterations = 8

// Profile is an admin-managed bundle of providers, MCP servers, tool and
// sandbox allowlists that client keys are bound to.
type Profile struct {
	ID                 string
	Name               string
	PrimaryProvider    string
	FallbackProviders  []string
	MCPServers         []string
	AllowedTools       []json.RawMessage // element types are not validated (BAE)
	AvailableSandboxes []string
	SystemPrompt       string // Baton extension; empty means none
	MaxIterations      int    // Baton extension; 0 means DefaultMaxIterations
	// ExecutorEnvironments lists the environments whose tool executors
	// serve the profile's sessions (Baton extension; bma.executor.v1.1).
	ExecutorEnvironments []string
	// Brain says who runs the profile's turns (Baton extension); the zero
	// value is the server's own provider loop.
	Brain     Brain
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Brain types: who runs a profile's turns.
const (
	BrainServer   = "server"   // the server's provider loop (the default)
	BrainExecutor = "executor" // the agent loop of a machine-scoped executor
)

// Brain is a profile's brain: {"type":"server"} or {"type":"executor",
// "machine_id":"mch_…"}. An empty Type means BrainServer.
type Brain struct {
	Type      string `json:"type"`
	MachineID string `json:"machine_id,omitempty"`
}

// Executor reports whether an executor's agent loop runs the turns.
func (b Brain) Executor() bool { return b.Type == BrainExecutor }

// Allows reports whether tool name is in the profile's allowed_tools list.
// Non-string entries never match.
func (p *Profile) Allows(name string) bool {
	for _, raw := range p.AllowedTools {
		var s string
		if json.Unmarshal(raw, &s) == nil && s == name {
			return true
		}
	}
	return false
}

// Iterations returns the effective iteration cap.
func (p *Profile) Iterations() int {
	if p.MaxIterations > 0 {
		return p.MaxIterations
	}
	return DefaultMaxIterations
}

// Page selects one page of a list: Cursor is the opaque value a previous
// page returned (empty for the first page) and Limit the page size.
type Page struct {
	Cursor string
	Limit  int
}

// ProfileStore persists profiles. Deleted profiles are soft-deleted: they
// disappear from every read, but their names stay reserved.
type ProfileStore interface {
	// CreateProfile inserts p. A taken name (even by a deleted profile)
	// fails with ECodeDuplicateName.
	CreateProfile(ctx context.Context, p *Profile) error
	// Profile returns an active profile or ECodeNotFound.
	Profile(ctx context.Context, id string) (*Profile, error)
	// ListProfiles returns active profiles in creation order.
	ListProfiles(ctx context.Context, page Page) (items []*Profile, next string, err error)
	// ReplaceProfile overwrites every field of the active profile p.ID and
	// bumps UpdatedAt (ECodeNotFound, ECodeDuplicateName).
	ReplaceProfile(ctx context.Context, p *Profile) error
	// DeleteProfile soft-deletes an active profile; it fails with
	// ECodeProfileInUse while active client keys are bound to it.
	DeleteProfile(ctx context.Context, id string) error
}
