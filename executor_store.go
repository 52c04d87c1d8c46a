package baton

import "context"

// ID prefixes of the executor resources.
const (
	PrefixEnvironment        = "env_"
	PrefixMachine            = "mch_"
	PrefixExecutorCredential = "ecr_"
)

// EnvironmentStore persists environments. Deleted environments are
// soft-deleted: they vanish from every read and free their name.
type EnvironmentStore interface {
	// CreateEnvironment inserts e, filling ID and CreatedAt when empty. A
	// name taken by an active environment is ECodeDuplicateName.
	CreateEnvironment(ctx context.Context, e *Environment) error
	// Environment returns an active environment or ECodeNotFound.
	Environment(ctx context.Context, id string) (*Environment, error)
	// ListEnvironments returns active environments in creation order.
	ListEnvironments(ctx context.Context, page Page) (items []*Environment, next string, err error)
	// DeleteEnvironment soft-deletes an active environment and revokes its
	// active credentials in one transaction, and returns their ids. It is
	// ECodeNotFound for an unknown id and ECodeConflict while an active
	// profile lists the environment in ExecutorEnvironments.
	DeleteEnvironment(ctx context.Context, id string) (revoked []string, err error)
}

// MachineStore persists machines, with the rules of EnvironmentStore; a
// machine is in use while an active profile names it as its brain.
type MachineStore interface {
	CreateMachine(ctx context.Context, m *Machine) error
	Machine(ctx context.Context, id string) (*Machine, error)
	ListMachines(ctx context.Context, page Page) (items []*Machine, next string, err error)
	DeleteMachine(ctx context.Context, id string) (revoked []string, err error)
}

// ExecutorCredentialStore persists executor credentials. Revocation is
// permanent and keeps the row.
type ExecutorCredentialStore interface {
	// CreateExecutorCredential inserts c, filling ID and CreatedAt when
	// empty. Its owner (c.Scope, c.OwnerID) must be an active environment
	// or machine, else ECodeNotFound.
	CreateExecutorCredential(ctx context.Context, c *ExecutorCredential) error
	// ExecutorCredential returns a credential, revoked or not, or
	// ECodeNotFound.
	ExecutorCredential(ctx context.Context, id string) (*ExecutorCredential, error)
	// ExecutorCredentialByHash returns the credential, revoked or not, whose
	// secret has the given Digest, or ECodeNotFound.
	ExecutorCredentialByHash(ctx context.Context, hash string) (*ExecutorCredential, error)
	// ListExecutorCredentials returns the credentials of one owner, revoked
	// ones included, in creation order.
	ListExecutorCredentials(ctx context.Context, scope, ownerID string, page Page) (items []*ExecutorCredential, next string, err error)
	// RevokeExecutorCredential revokes the active credential id of the
	// owner (scope, ownerID); anything else is ECodeNotFound.
	RevokeExecutorCredential(ctx context.Context, scope, ownerID, id string) error
}

// SettingStore keeps installation-wide values every node shares, such as
// the key executor tokens are signed with.
type SettingStore interface {
	// EnsureSetting stores value under name unless a value is stored there
	// already, and returns the stored value: the first writer wins.
	EnsureSetting(ctx context.Context, name, value string) (string, error)
}

// ExecutorStore is what executor administration and executor tokens
// persist.
type ExecutorStore interface {
	EnvironmentStore
	MachineStore
	ExecutorCredentialStore
	SettingStore
}

// ExecutorCredentialPrefixLen is the length of a credential's display
// prefix: ExecutorCredentialPrefix and four hex digits.
const ExecutorCredentialPrefixLen = len(ExecutorCredentialPrefix) + 4

// MintExecutorCredential creates a credential for the owner (scope,
// ownerID) with a fresh secret and returns it with the plaintext
// ("bae_exc_" and 48 hex digits), which is never stored.
func MintExecutorCredential(scope, ownerID string) (*ExecutorCredential, string) {
	plain := NewSecret(ExecutorCredentialPrefix)
	return &ExecutorCredential{
		ID:        NewID(PrefixExecutorCredential),
		Scope:     scope,
		OwnerID:   ownerID,
		Hash:      Digest(plain),
		Prefix:    plain[:ExecutorCredentialPrefixLen],
		CreatedAt: Now(),
	}, plain
}
