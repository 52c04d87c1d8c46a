package baton

import (
	"context"
	"time"
)

// Executor scopes: what an executor credential and its tokens stand for.
const (
	ExecutorScopeEnvironment = "environment" // a pool of interchangeable tool executors
	ExecutorScopeMachine     = "machine"     // one host serving a shell and/or a brain
)

// Executor credential and token plaintext prefixes (bma.executor.v1.1).
const (
	ExecutorCredentialPrefix = "bae_exc_"
	ExecutorTokenPrefix      = "bae_ext_"
)

// Environment is an admin-managed pool of environment-scoped executors.
type Environment struct {
	ID        string    `json:"id"` // env_…
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// Machine is an admin-managed host for machine-scoped executors.
type Machine struct {
	ID        string    `json:"id"` // mch_…
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// ExecutorCredential is a long-lived executor secret bound to one
// environment or machine. Only its SHA-256 digest is stored.
type ExecutorCredential struct {
	ID        string     `json:"id"`
	Scope     string     `json:"scope"`    // ExecutorScopeEnvironment or ExecutorScopeMachine
	OwnerID   string     `json:"owner_id"` // the environment or machine id
	Hash      string     `json:"-"`
	Prefix    string     `json:"prefix"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// ExecutorGrant is what a valid executor token names: the scope it may
// register for, the credential it was exchanged for, and its deadline.
type ExecutorGrant struct {
	Scope         string
	EnvironmentID string // set for ExecutorScopeEnvironment
	MachineID     string // set for ExecutorScopeMachine
	CredentialID  string
	ExpiresAt     time.Time
}

// SameExecutor reports whether g and o name the same executor scope and
// credential (the rule of executor.token.refresh).
func (g *ExecutorGrant) SameExecutor(o *ExecutorGrant) bool {
	return g.Scope == o.Scope && g.EnvironmentID == o.EnvironmentID &&
		g.MachineID == o.MachineID && g.CredentialID == o.CredentialID
}

// ExecutorTokens exchanges executor credentials for short-lived executor
// tokens and verifies them.
type ExecutorTokens interface {
	// Issue checks secret (a credential plaintext) against scope and owner
	// id and returns a fresh token. A wrong, revoked or foreign credential
	// is ECodeUnauthorized; an unknown environment or machine ECodeNotFound.
	Issue(ctx context.Context, secret, scope, ownerID string) (string, *ExecutorGrant, error)
	// Verify returns the grant of a token that is well formed, unexpired,
	// and whose credential is not revoked; otherwise ECodeUnauthorized.
	Verify(ctx context.Context, token string) (*ExecutorGrant, error)
}

// ExecutorRevoker is told when a credential is revoked so that its live
// connections can be closed.
type ExecutorRevoker interface {
	RevokeCredential(credentialID string)
}
