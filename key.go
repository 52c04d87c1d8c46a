package baton

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// KeyRole says what a credential may do.
type KeyRole string

const (
	RoleClient  KeyRole = "client"  // opens and joins sessions of one profile
	RoleSession KeyRole = "session" // acts inside one session
	RoleAdmin   KeyRole = "admin"   // the admin port
)

// Key plaintext prefixes (BAE's client API).
const (
	ClientKeyPrefix  = "bae_"
	SessionKeyPrefix = "bae_ses_"
	AdminKeyPrefix   = "bae_admin_"
)

// Scopes a client key may carry. Keys created without scopes get
// DefaultScopes.
const ScopeSessionManage = "session.manage"

// DefaultScopes are given to client keys created without explicit scopes.
var DefaultScopes = []string{ScopeSessionManage}

// Key is one stored credential. The plaintext is never stored: client and
// session keys keep a SHA-256 digest ("sha256:<hex>"), admin keys an Argon2id
// PHC string.
type Key struct {
	ID         string
	Name       string // client: label; session: the session id; admin: row name
	Hash       string
	Prefix     string // display prefix, the first 8 characters
	Role       KeyRole
	ProfileID  string // client and session keys
	ClientID   string // session keys: the client key they were minted for
	Scopes     []string
	CreatedAt  time.Time
	LastUsedAt *time.Time
}

// HasScope reports whether k carries scope.
func (k *Key) HasScope(scope string) bool {
	for _, s := range k.Scopes {
		if s == scope {
			return true
		}
	}
	return false
}

// KeyStore persists credentials. Revocation is a soft delete.
type KeyStore interface {
	// CreateKey inserts k.
	CreateKey(ctx context.Context, k *Key) error
	// KeyByHash returns the active key of role with the given digest, or
	// ECodeNotFound.
	KeyByHash(ctx context.Context, role KeyRole, hash string) (*Key, error)
	// ListKeys returns active keys of role in creation order.
	ListKeys(ctx context.Context, role KeyRole, page Page) (items []*Key, next string, err error)
	// RevokeClientKey soft-deletes an active client key and every session
	// key minted for it, and closes (appending closeEvent-shaped
	// session.close events built by mkClose) every open session left with
	// no active session key — all in one transaction. It returns the ids of
	// the sessions it closed; an unknown or inactive id is ECodeNotFound.
	RevokeClientKey(ctx context.Context, id string, mkClose func(sessionID string) *Event) (closed []string, err error)
	// RevokeAdminKeys soft-deletes every active admin key.
	RevokeAdminKeys(ctx context.Context) error
	// TouchKeys records last-use times in one write.
	TouchKeys(ctx context.Context, used map[string]time.Time) error
}

// Authenticator checks bearer tokens. Implementations compare digests in
// constant time and never write on the request path.
type Authenticator interface {
	// ClientKey returns the active client key for token (ECodeUnauthorized).
	ClientKey(ctx context.Context, token string) (*Key, error)
	// SessionKey returns the active session key for token bound to
	// sessionID (ECodeUnauthorized).
	SessionKey(ctx context.Context, sessionID, token string) (*Key, error)
	// AdminKey checks an admin token (ECodeUnauthorized).
	AdminKey(ctx context.Context, token string) error
	// Forget drops cached state for revoked keys so they stop working at
	// once on this node.
	Forget(keyIDs ...string)
}

// NewSecret returns a new key plaintext: prefix followed by 48 lowercase hex
// characters (24 CSPRNG bytes).
func NewSecret(prefix string) string {
	var b [24]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error.
	buf := make([]byte, len(prefix)+48)
	copy(buf, prefix)
	hex.Encode(buf[len(prefix):], b[:])
	return string(buf)
}

// DigestPrefix marks a SHA-256 key digest.
const DigestPrefix = "sha256:"

// Digest returns the stored form of a client or session key plaintext:
// "sha256:" followed by the hex SHA-256 of it. Keys carry 192 random bits,
// so a fast hash is enough; no per-request key stretching is needed.
func Digest(plaintext string) string {
	sum := sha256.Sum256([]byte(plaintext))
	return DigestPrefix + hex.EncodeToString(sum[:])
}

// MintKey creates a new key of role with a fresh secret and returns it with
// the plaintext, which is never stored.
func MintKey(role KeyRole, name, profileID, clientID string) (*Key, string) {
	prefix := ClientKeyPrefix
	switch role {
	case RoleSession:
		prefix = SessionKeyPrefix
	case RoleAdmin:
		prefix = AdminKeyPrefix
	}
	plain := NewSecret(prefix)
	k := &Key{
		ID:        NewID(PrefixKey),
		Name:      name,
		Hash:      Digest(plain),
		Prefix:    plain[:8],
		Role:      role,
		ProfileID: profileID,
		ClientID:  clientID,
		CreatedAt: Now(),
	}
	return k, plain
}
