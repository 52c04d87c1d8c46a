package filearea

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/baton-engine/baton"
)

// PrefixArtifact starts every artifact id.
const PrefixArtifact = "art_"

// Default limits (BATON_MAX_FILE_BYTES, BATON_MAX_SESSION_FILE_BYTES,
// BATON_MAX_SESSION_FILES, BATON_MAX_ARTIFACT_BYTES).
const (
	DefaultMaxFileBytes     = 64 << 20
	DefaultMaxSessionBytes  = 1 << 30
	DefaultMaxSessionFiles  = 10_000
	DefaultMaxArtifactBytes = 64 << 20
)

// Limits cap what a session's file area and an artifact may hold. A
// value <= 0 means no limit in the store; servers fill in the defaults
// with WithDefaults.
type Limits struct {
	MaxFileBytes     int64 // one file
	MaxSessionBytes  int64 // all of a session's files together
	MaxSessionFiles  int64 // how many files a session may have
	MaxArtifactBytes int64 // one artifact
	// AfterClose accepts writes to a session that is no longer open: an
	// executor's flush at unmount, which comes after the session closed
	// and is authorized by a view token of the binding current at close.
	AfterClose bool
}

// WithDefaults returns l with every unset limit at its default.
func (l Limits) WithDefaults() Limits {
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = DefaultMaxFileBytes
	}
	if l.MaxSessionBytes <= 0 {
		l.MaxSessionBytes = DefaultMaxSessionBytes
	}
	if l.MaxSessionFiles <= 0 {
		l.MaxSessionFiles = DefaultMaxSessionFiles
	}
	if l.MaxArtifactBytes <= 0 {
		l.MaxArtifactBytes = DefaultMaxArtifactBytes
	}
	return l
}

// File is the record of one stored file; the content is kept apart.
type File struct {
	Path      string    `json:"path"`
	Size      int64     `json:"size"`
	SHA256    string    `json:"sha256"` // lower-case hex
	UpdatedAt time.Time `json:"updated_at"`
}

// Artifact is a blob an executor uploaded (or the server stored) for later
// download. It belongs to a session or to an environment: exactly one of
// SessionID and EnvironmentID is set.
type Artifact struct {
	ID            string
	SessionID     string
	EnvironmentID string
	Name          string
	MediaType     string
	Size          int64
	SHA256        string
	CreatedAt     time.Time
}

// Digest returns the lower-case hex SHA-256 of b.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// FileStore keeps the files of sessions. Paths are Clean paths; the
// store does not clean them again.
type FileStore interface {
	// PutFile stores content at path in the session's file area,
	// replacing a file already there, and returns the new record. The
	// session must exist (else ECodeNotFound) and be open (else
	// ECodeSessionClosed). A path below a file, or a path that is a
	// directory, is ECodeConflict. A file over lim.MaxFileBytes, or a
	// session that would hold more than lim.MaxSessionBytes or
	// lim.MaxSessionFiles, is ECodePayloadTooLarge.
	PutFile(ctx context.Context, sessionID, path string, content []byte, lim Limits) (*File, error)
	// StatFile returns the record of a file, or ECodeNotFound.
	StatFile(ctx context.Context, sessionID, path string) (*File, error)
	// ReadFile returns a file's record and content, or ECodeNotFound.
	ReadFile(ctx context.Context, sessionID, path string) (*File, []byte, error)
	// DeleteFile removes a file of an open session; a missing file is
	// ECodeNotFound, a closed session ECodeSessionClosed.
	DeleteFile(ctx context.Context, sessionID, path string, lim Limits) error
	// ListFiles returns the records of every file below the directory dir
	// ("" for all of them), sorted by path.
	ListFiles(ctx context.Context, sessionID, dir string) ([]*File, error)
}

// ArtifactStore keeps artifacts.
type ArtifactStore interface {
	// CreateArtifact stores a (filling ID, Size, SHA256 and CreatedAt)
	// with its content. Its owner must exist (ECodeNotFound). Content
	// over lim.MaxArtifactBytes is ECodePayloadTooLarge.
	CreateArtifact(ctx context.Context, a *Artifact, content []byte, lim Limits) error
	// SessionArtifact returns an artifact and its content as session
	// sessionID may read it: one the session owns, or one of an
	// environment that the session's profile lists in
	// executor_environments. Anything else is ECodeNotFound.
	SessionArtifact(ctx context.Context, sessionID, id string) (*Artifact, []byte, error)
}

// Store is both.
type Store interface {
	FileStore
	ArtifactStore
}

// ViewGrant is what a view token names.
type ViewGrant struct {
	SessionID string
	View      string // the {view} of the service URL
	Root      string // the cleaned directory of the file area the view shows
	Epoch     int64  // the binding epoch the token was minted for
	Readonly  bool
	ExpiresAt time.Time
}

// ViewTokens signs and verifies view tokens (auth.ViewTokens).
type ViewTokens interface {
	// Issue signs g; a zero ExpiresAt gets the service's TTL.
	Issue(g ViewGrant) (string, error)
	// Verify returns the grant of a well-formed, correctly signed,
	// unexpired token, or ECodeUnauthorized.
	Verify(token string) (*ViewGrant, error)
}

// Epochs reports the current binding epoch of a session, so that the file
// service refuses the tokens of an older binding. ok is false when the
// session is not bound here (the epoch is then not checked).
type Epochs interface {
	CurrentEpoch(sessionID string) (epoch int64, ok bool)
}

// EpochSet is an Epochs that knows every binding with the session's
// files mounted — a brain and a remote sandbox may have them at once, each
// at its own epoch — and answers for one token's epoch.
type EpochSet interface {
	Epochs
	// IsCurrentEpoch reports whether epoch is the current epoch of one of
	// the session's bindings; bound is false when none is here.
	IsCurrentEpoch(sessionID string, epoch int64) (current, bound bool)
}

// EpochCurrent reports whether e takes a token of session sessionID
// minted for epoch: an epoch that is not (one of) the session's current
// binding epochs is refused; a session bound nowhere is not checked.
func EpochCurrent(e Epochs, sessionID string, epoch int64) bool {
	if s, ok := e.(EpochSet); ok {
		current, bound := s.IsCurrentEpoch(sessionID, epoch)
		return current || !bound
	}
	cur, ok := e.CurrentEpoch(sessionID)
	return !ok || cur == epoch
}

// ErrNotFound is the error for a path that names nothing.
func ErrNotFound(path string) error {
	if path == "" {
		path = "/"
	}
	return baton.Errorf(baton.ECodeNotFound, "no file %s", path)
}
