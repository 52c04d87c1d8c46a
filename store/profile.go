package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/baton-engine/baton"
)

const profileCols = `ord, id, name, primary_provider, fallback_providers, mcp_servers,
	allowed_tools, available_sandboxes, system_prompt, max_iterations, executor_environments, brain,
	created_at, updated_at`

// serverBrain is the stored form of the default brain.
const serverBrain = `{"type":"server"}`

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

func scanProfile(s scanner) (*baton.Profile, int64, error) {
	var (
		p                         baton.Profile
		ord                       int64
		fallback, mcp, tools, sbx string
		envs, brain               string
		created, updated          string
	)
	err := s.Scan(&ord, &p.ID, &p.Name, &p.PrimaryProvider, &fallback, &mcp, &tools, &sbx,
		&p.SystemPrompt, &p.MaxIterations, &envs, &brain, &created, &updated)
	if err != nil {
		return nil, 0, err
	}
	if p.FallbackProviders, err = decodeStrings(fallback); err != nil {
		return nil, 0, err
	}
	if p.MCPServers, err = decodeStrings(mcp); err != nil {
		return nil, 0, err
	}
	if p.AllowedTools, err = decodeRaw(tools); err != nil {
		return nil, 0, err
	}
	if p.AvailableSandboxes, err = decodeStrings(sbx); err != nil {
		return nil, 0, err
	}
	if p.ExecutorEnvironments, err = decodeStrings(envs); err != nil {
		return nil, 0, err
	}
	if p.Brain, err = decodeBrain(brain); err != nil {
		return nil, 0, err
	}
	if p.CreatedAt, err = parseTime(created); err != nil {
		return nil, 0, err
	}
	if p.UpdatedAt, err = parseTime(updated); err != nil {
		return nil, 0, err
	}
	return &p, ord, nil
}

// profileRow is the encoded, storable form of a profile's list fields.
type profileRow struct {
	fallback, mcp, tools, sbx string
	envs, brain               string
}

func encodeProfile(p *baton.Profile) (profileRow, error) {
	var r profileRow
	var err error
	if r.fallback, err = encodeStrings(p.FallbackProviders); err != nil {
		return r, err
	}
	if r.mcp, err = encodeStrings(p.MCPServers); err != nil {
		return r, err
	}
	if r.tools, err = encodeRaw(p.AllowedTools); err != nil {
		return r, err
	}
	if r.sbx, err = encodeStrings(p.AvailableSandboxes); err != nil {
		return r, err
	}
	if r.envs, err = encodeStrings(p.ExecutorEnvironments); err != nil {
		return r, err
	}
	if r.brain, err = encodeBrain(&p.Brain); err != nil {
		return r, err
	}
	return r, nil
}

// encodeBrain stores b, an empty type meaning the server; it fills the
// type in so that b reads back as it is stored.
func encodeBrain(b *baton.Brain) (string, error) {
	if b.Type == "" {
		b.Type = baton.BrainServer
	}
	switch {
	case b.Type == baton.BrainServer && b.MachineID == "":
		return serverBrain, nil
	case b.Type == baton.BrainExecutor && b.MachineID != "":
		raw, err := json.Marshal(b)
		return string(raw), err
	}
	return "", fmt.Errorf("store: invalid brain %+v", *b)
}

func decodeBrain(s string) (baton.Brain, error) {
	var b baton.Brain
	if err := json.Unmarshal([]byte(s), &b); err != nil {
		return b, fmt.Errorf("store: decode brain: %w", err)
	}
	return b, nil
}

func errDuplicateName() error {
	return baton.Errorf(baton.ECodeDuplicateName, "a profile with that name already exists")
}

func errNoProfile(id string) error { return baton.Errorf(baton.ECodeNotFound, "no profile %s", id) }

// CreateProfile inserts p, filling ID, CreatedAt and UpdatedAt when they are
// empty. A name taken by any profile, deleted or not, is ECodeDuplicateName.
func (db *DB) CreateProfile(ctx context.Context, p *baton.Profile) error {
	enc, err := encodeProfile(p)
	if err != nil {
		return fmt.Errorf("create profile: %w", err)
	}
	if p.ID == "" {
		p.ID = baton.NewID(baton.PrefixProfile)
	}
	if p.CreatedAt.IsZero() {
		p.CreatedAt = baton.Now()
	}
	if p.UpdatedAt.IsZero() {
		p.UpdatedAt = p.CreatedAt
	}
	return db.w.do(ctx, func(t *wtx) error {
		if err := t.checkProfileRefs(p); err != nil {
			return err
		}
		var n int64
		if err := t.get(`SELECT COUNT(*) FROM profiles WHERE name = $1`, []any{p.Name}, &n); err != nil {
			return fmt.Errorf("create profile: %w", err)
		}
		if n > 0 {
			return errDuplicateName()
		}
		_, err := t.exec(`INSERT INTO profiles (id, name, primary_provider, fallback_providers, mcp_servers,
	allowed_tools, available_sandboxes, system_prompt, max_iterations, executor_environments, brain,
	created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
			p.ID, p.Name, p.PrimaryProvider, enc.fallback, enc.mcp, enc.tools, enc.sbx,
			p.SystemPrompt, p.MaxIterations, enc.envs, enc.brain, formatTime(p.CreatedAt), formatTime(p.UpdatedAt))
		if isUnique(err) {
			return errDuplicateName() // raced with another node
		}
		if err != nil {
			return fmt.Errorf("create profile: %w", err)
		}
		return nil
	})
}

// profileTTL bounds how long Profile serves a cached profile: this node's
// own changes drop it at once; another node's are seen within the TTL.
const profileTTL = time.Second

// cachedProfile is one entry of the profile cache.
type cachedProfile struct {
	p  *baton.Profile
	at time.Time
}

// Profile returns an active profile or ECodeNotFound. Every turn reads its
// profile, so recent reads are served from memory (see profileTTL); the
// caller gets its own copy of the struct.
func (db *DB) Profile(ctx context.Context, id string) (*baton.Profile, error) {
	if v, ok := db.profiles.Load(id); ok {
		if c := v.(cachedProfile); time.Since(c.at) < profileTTL {
			cp := *c.p
			return &cp, nil
		}
	}
	gen := db.profileGen.Load()
	row := db.queryRow(ctx, `SELECT `+profileCols+` FROM profiles WHERE id = $1 AND deleted_at IS NULL`, id)
	p, _, err := scanProfile(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errNoProfile(id)
	}
	if err != nil {
		return nil, fmt.Errorf("get profile: %w", err)
	}
	if db.profileGen.Load() == gen { // no change committed meanwhile
		cp := *p
		db.profiles.Store(id, cachedProfile{p: &cp, at: time.Now()})
	}
	return p, nil
}

// forgetProfile drops a changed profile from the cache.
func (db *DB) forgetProfile(id string) {
	db.profileGen.Add(1)
	db.profiles.Delete(id)
}

// ListProfiles returns active profiles in creation order.
func (db *DB) ListProfiles(ctx context.Context, page baton.Page) ([]*baton.Profile, string, error) {
	after, err := parseCursor(page.Cursor)
	if err != nil {
		return nil, "", err
	}
	limit := pageLimit(page.Limit)
	items, next, err := list(ctx, db.read, scanProfile, limit,
		`SELECT `+profileCols+` FROM profiles WHERE deleted_at IS NULL AND ord > $1 ORDER BY ord LIMIT $2`,
		after, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("list profiles: %w", err)
	}
	return items, next, nil
}

// ReplaceProfile overwrites every field of the active profile p.ID and
// bumps UpdatedAt; on success p carries the stored CreatedAt and the new
// UpdatedAt.
func (db *DB) ReplaceProfile(ctx context.Context, p *baton.Profile) error {
	enc, err := encodeProfile(p)
	if err != nil {
		return fmt.Errorf("replace profile: %w", err)
	}
	var created, updated time.Time
	err = db.w.do(ctx, func(t *wtx) error {
		var c string
		err := t.get(`SELECT created_at FROM profiles WHERE id = $1 AND deleted_at IS NULL`, []any{p.ID}, &c)
		if errors.Is(err, sql.ErrNoRows) {
			return errNoProfile(p.ID)
		}
		if err != nil {
			return fmt.Errorf("replace profile: %w", err)
		}
		if created, err = parseTime(c); err != nil {
			return err
		}
		if err := t.checkProfileRefs(p); err != nil {
			return err
		}
		var n int64
		if err := t.get(`SELECT COUNT(*) FROM profiles WHERE name = $1 AND id <> $2`, []any{p.Name, p.ID}, &n); err != nil {
			return fmt.Errorf("replace profile: %w", err)
		}
		if n > 0 {
			return errDuplicateName()
		}
		updated = baton.Now()
		_, err = t.exec(`UPDATE profiles SET name = $2, primary_provider = $3, fallback_providers = $4,
	mcp_servers = $5, allowed_tools = $6, available_sandboxes = $7, system_prompt = $8,
	max_iterations = $9, executor_environments = $10, brain = $11, updated_at = $12
WHERE id = $1`,
			p.ID, p.Name, p.PrimaryProvider, enc.fallback, enc.mcp, enc.tools, enc.sbx,
			p.SystemPrompt, p.MaxIterations, enc.envs, enc.brain, formatTime(updated))
		if isUnique(err) {
			return errDuplicateName()
		}
		if err != nil {
			return fmt.Errorf("replace profile: %w", err)
		}
		return nil
	})
	db.forgetProfile(p.ID)
	if err != nil {
		return err
	}
	db.notifyForgotten(ctx, p.ID)
	p.CreatedAt, p.UpdatedAt = created, updated
	return nil
}

// DeleteProfile soft-deletes an active profile unless active client keys
// are bound to it (ECodeProfileInUse); the check and the delete are one
// transaction.
func (db *DB) DeleteProfile(ctx context.Context, id string) error {
	defer db.forgetProfile(id)
	defer db.notifyForgotten(ctx, id)
	return db.w.do(ctx, func(t *wtx) error {
		var found string
		err := t.get(`SELECT id FROM profiles WHERE id = $1 AND deleted_at IS NULL`+t.w.lock, []any{id}, &found)
		if errors.Is(err, sql.ErrNoRows) {
			return errNoProfile(id)
		}
		if err != nil {
			return fmt.Errorf("delete profile: %w", err)
		}
		var n int64
		if err := t.get(`SELECT COUNT(*) FROM keys
WHERE profile_id = $1 AND role = 'client' AND deleted_at IS NULL`, []any{id}, &n); err != nil {
			return fmt.Errorf("delete profile: %w", err)
		}
		if n > 0 {
			return baton.Errorf(baton.ECodeProfileInUse,
				"profile has %d active client key(s); revoke them before deleting", n)
		}
		if _, err := t.exec(`UPDATE profiles SET deleted_at = $2 WHERE id = $1`, id, formatTime(baton.Now())); err != nil {
			return fmt.Errorf("delete profile: %w", err)
		}
		return nil
	})
}

// list runs a page query whose rows start with the ordering column and
// returns up to limit items plus the next cursor.
func list[T any](ctx context.Context, db *sql.DB, scan func(scanner) (T, int64, error), limit int, query string, args ...any) ([]T, string, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	items := make([]T, 0, min(limit+1, 256))
	var ords []int64
	for rows.Next() {
		item, ord, err := scan(rows)
		if err != nil {
			return nil, "", err
		}
		items = append(items, item)
		ords = append(ords, ord)
	}
	if err := rows.Err(); err != nil {
		return nil, "", err
	}
	items, next := pageNext(items, ords, limit)
	return items, next, nil
}
