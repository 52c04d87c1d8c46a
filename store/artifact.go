package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/filearea"
)

// errNoArtifact is the one answer for an artifact a session may not read,
// whether or not it exists.
func errNoArtifact(id string) error { return baton.Errorf(baton.ECodeNotFound, "no artifact %s", id) }

// CreateArtifact stores an artifact with its content
// (filearea.ArtifactStore).
func (db *DB) CreateArtifact(ctx context.Context, a *filearea.Artifact, content []byte, lim filearea.Limits) error {
	if (a.SessionID == "") == (a.EnvironmentID == "") {
		return fmt.Errorf("create artifact: exactly one of SessionID and EnvironmentID must be set")
	}
	if lim.MaxArtifactBytes > 0 && int64(len(content)) > lim.MaxArtifactBytes {
		return errTooLarge("artifact is larger than %d bytes", lim.MaxArtifactBytes)
	}
	if a.ID == "" {
		a.ID = baton.NewID(filearea.PrefixArtifact)
	}
	if a.CreatedAt.IsZero() {
		a.CreatedAt = baton.Now()
	}
	if a.MediaType == "" {
		a.MediaType = "application/octet-stream"
	}
	a.Size, a.SHA256 = int64(len(content)), filearea.Digest(content)
	return db.w.do(ctx, func(t *wtx) error {
		var err error
		if a.SessionID != "" {
			var state string
			err = t.get(`SELECT state FROM sessions WHERE id = $1`, []any{a.SessionID}, &state)
			if errors.Is(err, sql.ErrNoRows) {
				return errNoSession(a.SessionID)
			}
		} else {
			err = t.lockOwner(mustOwner(baton.ExecutorScopeEnvironment), a.EnvironmentID)
		}
		if err != nil {
			return fmt.Errorf("create artifact: %w", err)
		}
		_, err = t.exec(`INSERT INTO artifacts (id, session_id, environment_id, name, media_type, size, sha256, created_at, content)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
			a.ID, nullString(a.SessionID), nullString(a.EnvironmentID), a.Name, a.MediaType, a.Size, a.SHA256,
			formatTime(a.CreatedAt), content)
		if err != nil {
			return fmt.Errorf("create artifact: %w", err)
		}
		return nil
	})
}

// SessionArtifact returns an artifact session sessionID may read
// (filearea.ArtifactStore): its own, or one of an environment its profile
// lists. The profile is read even when deleted, since the session keeps
// the profile it was opened with. The content is read only once the
// artifact is known to be readable.
func (db *DB) SessionArtifact(ctx context.Context, sessionID, id string) (*filearea.Artifact, []byte, error) {
	var (
		a          filearea.Artifact
		sess, env  sql.NullString
		created    string
		profileEnv string
	)
	err := db.read.QueryRowContext(ctx, `SELECT a.id, a.session_id, a.environment_id, a.name, a.media_type, a.size, a.sha256,
	a.created_at, COALESCE(p.executor_environments, '[]')
FROM artifacts a
JOIN sessions s ON s.id = $1
LEFT JOIN profiles p ON p.id = s.profile_id
WHERE a.id = $2`, sessionID, id).Scan(&a.ID, &sess, &env, &a.Name, &a.MediaType, &a.Size, &a.SHA256, &created, &profileEnv)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil, errNoArtifact(id)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read artifact: %w", err)
	}
	a.SessionID, a.EnvironmentID = sess.String, env.String
	if a.SessionID != "" && a.SessionID != sessionID {
		return nil, nil, errNoArtifact(id)
	}
	if a.EnvironmentID != "" {
		envs, err := decodeStrings(profileEnv)
		if err != nil {
			return nil, nil, fmt.Errorf("read artifact: %w", err)
		}
		if !slices.Contains(envs, a.EnvironmentID) {
			return nil, nil, errNoArtifact(id)
		}
	}
	if a.CreatedAt, err = parseTime(created); err != nil {
		return nil, nil, err
	}
	var content []byte
	err = db.read.QueryRowContext(ctx, `SELECT content FROM artifacts WHERE id = $1`, id).Scan(&content)
	if err != nil {
		return nil, nil, fmt.Errorf("read artifact: %w", err)
	}
	if content == nil {
		content = []byte{}
	}
	return &a, content, nil
}
