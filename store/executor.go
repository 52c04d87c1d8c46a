package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/baton-engine/baton"
)

var _ baton.ExecutorStore = (*DB)(nil)

// Environments and machines share one shape (id, name, created_at,
// deleted_at) and one implementation; owner names the table.
type owner struct {
	table  string // environments | machines
	scope  string // the credential scope they own
	noun   string // for messages
	a      string // the noun with its article
	prefix string // id prefix
}

func ownerOf(scope string) (owner, bool) {
	switch scope {
	case baton.ExecutorScopeEnvironment:
		return owner{"environments", scope, "environment", "an environment", baton.PrefixEnvironment}, true
	case baton.ExecutorScopeMachine:
		return owner{"machines", scope, "machine", "a machine", baton.PrefixMachine}, true
	}
	return owner{}, false
}

func mustOwner(scope string) owner {
	o, ok := ownerOf(scope)
	if !ok {
		panic("store: unknown executor scope " + scope)
	}
	return o
}

// ownerRow is a stored environment or machine.
type ownerRow struct {
	ID        string
	Name      string
	CreatedAt time.Time
}

func scanOwner(s scanner) (ownerRow, int64, error) {
	var (
		o       ownerRow
		ord     int64
		created string
	)
	if err := s.Scan(&ord, &o.ID, &o.Name, &created); err != nil {
		return o, 0, err
	}
	t, err := parseTime(created)
	o.CreatedAt = t
	return o, ord, err
}

func (o owner) errNotFound(id string) error {
	return baton.Errorf(baton.ECodeNotFound, "no %s %s", o.noun, id)
}

// createOwner inserts an active row named name, filling *id and *created when
// empty.
func (db *DB) createOwner(ctx context.Context, o owner, id *string, name string, created *time.Time) error {
	if *id == "" {
		*id = baton.NewID(o.prefix)
	}
	if created.IsZero() {
		*created = baton.Now()
	}
	dup := baton.Errorf(baton.ECodeDuplicateName, "%s with that name already exists", o.a)
	return db.w.do(ctx, func(t *wtx) error {
		var n int64
		if err := t.get(`SELECT COUNT(*) FROM `+o.table+` WHERE name = $1 AND deleted_at IS NULL`, []any{name}, &n); err != nil {
			return fmt.Errorf("create %s: %w", o.noun, err)
		}
		if n > 0 {
			return dup
		}
		_, err := t.exec(`INSERT INTO `+o.table+` (id, name, created_at) VALUES ($1, $2, $3)`, *id, name, formatTime(*created))
		if isUnique(err) {
			return dup // raced with another node
		}
		if err != nil {
			return fmt.Errorf("create %s: %w", o.noun, err)
		}
		return nil
	})
}

func (db *DB) getOwner(ctx context.Context, o owner, id string) (ownerRow, error) {
	row := db.read.QueryRowContext(ctx, `SELECT ord, id, name, created_at FROM `+o.table+` WHERE id = $1 AND deleted_at IS NULL`, id)
	r, _, err := scanOwner(row)
	if errors.Is(err, sql.ErrNoRows) {
		return r, o.errNotFound(id)
	}
	if err != nil {
		return r, fmt.Errorf("get %s: %w", o.noun, err)
	}
	return r, nil
}

func (db *DB) listOwners(ctx context.Context, o owner, page baton.Page) ([]ownerRow, string, error) {
	after, err := parseCursor(page.Cursor)
	if err != nil {
		return nil, "", err
	}
	limit := pageLimit(page.Limit)
	items, next, err := list(ctx, db.read, scanOwner, limit,
		`SELECT ord, id, name, created_at FROM `+o.table+` WHERE deleted_at IS NULL AND ord > $1 ORDER BY ord LIMIT $2`,
		after, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("list %ss: %w", o.noun, err)
	}
	return items, next, nil
}

// deleteOwner soft-deletes the active row id unless an active profile
// refers to it, and revokes its active credentials, in one transaction.
func (db *DB) deleteOwner(ctx context.Context, o owner, id string) ([]string, error) {
	var revoked []string
	err := db.w.do(ctx, func(t *wtx) error {
		revoked = nil
		if err := t.lockOwner(o, id); err != nil {
			return err
		}
		users, err := t.profilesUsing(o, id)
		if err != nil {
			return fmt.Errorf("delete %s: %w", o.noun, err)
		}
		if len(users) > 0 {
			field := "executor_environments"
			if o.scope == baton.ExecutorScopeMachine {
				field = "brain"
			}
			return baton.Errorf(baton.ECodeConflict, "%s %s is used by profile(s) %s; remove it from their %s first",
				o.noun, id, strings.Join(users, ", "), field)
		}
		now := formatTime(baton.Now())
		if _, err := t.exec(`UPDATE `+o.table+` SET deleted_at = $2 WHERE id = $1`, id, now); err != nil {
			return fmt.Errorf("delete %s: %w", o.noun, err)
		}
		if revoked, err = t.column(`SELECT id FROM executor_credentials
WHERE scope = $1 AND owner_id = $2 AND revoked_at IS NULL ORDER BY ord`, o.scope, id); err != nil {
			return fmt.Errorf("delete %s: %w", o.noun, err)
		}
		if _, err := t.exec(`UPDATE executor_credentials SET revoked_at = $3
WHERE scope = $1 AND owner_id = $2 AND revoked_at IS NULL`, o.scope, id, now); err != nil {
			return fmt.Errorf("revoke credentials: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return revoked, nil
}

// lockOwner checks that id is an active row of o, locking it against a
// concurrent delete on other nodes until the transaction ends.
func (t *wtx) lockOwner(o owner, id string) error {
	var found string
	err := t.get(`SELECT id FROM `+o.table+` WHERE id = $1 AND deleted_at IS NULL`+t.w.lock, []any{id}, &found)
	if errors.Is(err, sql.ErrNoRows) {
		return o.errNotFound(id)
	}
	if err != nil {
		return fmt.Errorf("look up %s: %w", o.noun, err)
	}
	return nil
}

// profilesUsing returns the ids of the active profiles that refer to the
// environment or machine id: by executor_environments or by brain. The
// lists are JSON, so they are matched here rather than in SQL, the same
// way on both dialects.
func (t *wtx) profilesUsing(o owner, id string) ([]string, error) {
	query := `SELECT id, executor_environments FROM profiles WHERE deleted_at IS NULL AND executor_environments <> '[]' ORDER BY ord`
	if o.scope == baton.ExecutorScopeMachine {
		query = `SELECT id, brain FROM profiles WHERE deleted_at IS NULL AND brain <> '` + serverBrain + `' ORDER BY ord`
	}
	rows, err := t.tx.QueryContext(t.ctx, query)
	if err != nil {
		t.dirty = true
		return nil, err
	}
	defer rows.Close()
	var users []string
	for rows.Next() {
		var pid, ref string
		if err := rows.Scan(&pid, &ref); err != nil {
			t.dirty = true
			return nil, err
		}
		var uses bool
		if o.scope == baton.ExecutorScopeMachine {
			b, err := decodeBrain(ref)
			if err != nil {
				return nil, err
			}
			uses = b.MachineID == id
		} else {
			envs, err := decodeStrings(ref)
			if err != nil {
				return nil, err
			}
			uses = slices.Contains(envs, id)
		}
		if uses {
			users = append(users, pid)
		}
	}
	if err := rows.Err(); err != nil {
		t.dirty = true
		return nil, err
	}
	return users, nil
}

// checkProfileRefs fails with ECodeUnprocessable unless every environment
// and the brain machine p refers to is active; the rows stay locked until
// the transaction ends.
func (t *wtx) checkProfileRefs(p *baton.Profile) error {
	unavailable := func(err error, field string) error {
		if baton.ErrorCode(err) == baton.ECodeNotFound {
			return baton.Errorf(baton.ECodeUnprocessable, "%s: %s", field, baton.ErrorMessage(err))
		}
		return err
	}
	env := mustOwner(baton.ExecutorScopeEnvironment)
	for i, id := range p.ExecutorEnvironments {
		if err := t.lockOwner(env, id); err != nil {
			return unavailable(err, fmt.Sprintf("executor_environments[%d]", i))
		}
	}
	if p.Brain.Executor() {
		if err := t.lockOwner(mustOwner(baton.ExecutorScopeMachine), p.Brain.MachineID); err != nil {
			return unavailable(err, "brain.machine_id")
		}
	}
	return nil
}

// CreateEnvironment inserts e, filling ID and CreatedAt when empty.
func (db *DB) CreateEnvironment(ctx context.Context, e *baton.Environment) error {
	return db.createOwner(ctx, mustOwner(baton.ExecutorScopeEnvironment), &e.ID, e.Name, &e.CreatedAt)
}

// Environment returns an active environment or ECodeNotFound.
func (db *DB) Environment(ctx context.Context, id string) (*baton.Environment, error) {
	r, err := db.getOwner(ctx, mustOwner(baton.ExecutorScopeEnvironment), id)
	if err != nil {
		return nil, err
	}
	e := baton.Environment(r)
	return &e, nil
}

// ListEnvironments returns active environments in creation order.
func (db *DB) ListEnvironments(ctx context.Context, page baton.Page) ([]*baton.Environment, string, error) {
	rows, next, err := db.listOwners(ctx, mustOwner(baton.ExecutorScopeEnvironment), page)
	if err != nil {
		return nil, "", err
	}
	out := make([]*baton.Environment, len(rows))
	for i, r := range rows {
		e := baton.Environment(r)
		out[i] = &e
	}
	return out, next, nil
}

// DeleteEnvironment soft-deletes an unused environment and revokes its
// credentials; it returns the ids of the credentials it revoked.
func (db *DB) DeleteEnvironment(ctx context.Context, id string) ([]string, error) {
	return db.deleteOwner(ctx, mustOwner(baton.ExecutorScopeEnvironment), id)
}

// CreateMachine inserts m, filling ID and CreatedAt when empty.
func (db *DB) CreateMachine(ctx context.Context, m *baton.Machine) error {
	return db.createOwner(ctx, mustOwner(baton.ExecutorScopeMachine), &m.ID, m.Name, &m.CreatedAt)
}

// Machine returns an active machine or ECodeNotFound.
func (db *DB) Machine(ctx context.Context, id string) (*baton.Machine, error) {
	r, err := db.getOwner(ctx, mustOwner(baton.ExecutorScopeMachine), id)
	if err != nil {
		return nil, err
	}
	m := baton.Machine(r)
	return &m, nil
}

// ListMachines returns active machines in creation order.
func (db *DB) ListMachines(ctx context.Context, page baton.Page) ([]*baton.Machine, string, error) {
	rows, next, err := db.listOwners(ctx, mustOwner(baton.ExecutorScopeMachine), page)
	if err != nil {
		return nil, "", err
	}
	out := make([]*baton.Machine, len(rows))
	for i, r := range rows {
		m := baton.Machine(r)
		out[i] = &m
	}
	return out, next, nil
}

// DeleteMachine soft-deletes a machine no profile uses as its brain and
// revokes its credentials; it returns the ids of the credentials it
// revoked.
func (db *DB) DeleteMachine(ctx context.Context, id string) ([]string, error) {
	return db.deleteOwner(ctx, mustOwner(baton.ExecutorScopeMachine), id)
}

const credentialCols = `ord, id, scope, owner_id, secret_hash, prefix, created_at, revoked_at`

func scanCredential(s scanner) (*baton.ExecutorCredential, int64, error) {
	var (
		c       baton.ExecutorCredential
		ord     int64
		created string
		revoked sql.NullString
	)
	if err := s.Scan(&ord, &c.ID, &c.Scope, &c.OwnerID, &c.Hash, &c.Prefix, &created, &revoked); err != nil {
		return nil, 0, err
	}
	var err error
	if c.CreatedAt, err = parseTime(created); err != nil {
		return nil, 0, err
	}
	if c.RevokedAt, err = parseNullTime(revoked); err != nil {
		return nil, 0, err
	}
	return &c, ord, nil
}

func errNoCredential(id string) error {
	return baton.Errorf(baton.ECodeNotFound, "no credential %s", id)
}

// CreateExecutorCredential inserts c for its active owner, filling ID and
// CreatedAt when empty.
func (db *DB) CreateExecutorCredential(ctx context.Context, c *baton.ExecutorCredential) error {
	o, ok := ownerOf(c.Scope)
	if !ok {
		return fmt.Errorf("store: invalid executor scope %q", c.Scope)
	}
	if c.ID == "" {
		c.ID = baton.NewID(baton.PrefixExecutorCredential)
	}
	if c.CreatedAt.IsZero() {
		c.CreatedAt = baton.Now()
	}
	return db.w.do(ctx, func(t *wtx) error {
		if err := t.lockOwner(o, c.OwnerID); err != nil {
			return err
		}
		_, err := t.exec(`INSERT INTO executor_credentials (id, scope, owner_id, secret_hash, prefix, created_at, revoked_at)
VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			c.ID, c.Scope, c.OwnerID, c.Hash, c.Prefix, formatTime(c.CreatedAt), nullTime(c.RevokedAt))
		if err != nil {
			return fmt.Errorf("create credential: %w", err)
		}
		return nil
	})
}

func (db *DB) credentialWhere(ctx context.Context, where, arg, notFound string) (*baton.ExecutorCredential, error) {
	row := db.read.QueryRowContext(ctx, `SELECT `+credentialCols+` FROM executor_credentials WHERE `+where+` = $1`, arg)
	c, _, err := scanCredential(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errNoCredential(notFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get credential: %w", err)
	}
	return c, nil
}

// ExecutorCredential returns a credential, revoked or not.
func (db *DB) ExecutorCredential(ctx context.Context, id string) (*baton.ExecutorCredential, error) {
	return db.credentialWhere(ctx, "id", id, id)
}

// ExecutorCredentialByHash returns the credential, revoked or not, whose
// secret digest is hash.
func (db *DB) ExecutorCredentialByHash(ctx context.Context, hash string) (*baton.ExecutorCredential, error) {
	return db.credentialWhere(ctx, "secret_hash", hash, "with that hash")
}

// ListExecutorCredentials returns an owner's credentials, revoked ones
// included, in creation order.
func (db *DB) ListExecutorCredentials(ctx context.Context, scope, ownerID string, page baton.Page) ([]*baton.ExecutorCredential, string, error) {
	after, err := parseCursor(page.Cursor)
	if err != nil {
		return nil, "", err
	}
	limit := pageLimit(page.Limit)
	items, next, err := list(ctx, db.read, scanCredential, limit, `SELECT `+credentialCols+` FROM executor_credentials
WHERE scope = $1 AND owner_id = $2 AND ord > $3 ORDER BY ord LIMIT $4`, scope, ownerID, after, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("list credentials: %w", err)
	}
	return items, next, nil
}

// RevokeExecutorCredential revokes the active credential id of the owner
// (scope, ownerID).
func (db *DB) RevokeExecutorCredential(ctx context.Context, scope, ownerID, id string) error {
	return db.w.do(ctx, func(t *wtx) error {
		n, err := t.execAffected(`UPDATE executor_credentials SET revoked_at = $4
WHERE id = $1 AND scope = $2 AND owner_id = $3 AND revoked_at IS NULL`, id, scope, ownerID, formatTime(baton.Now()))
		if err != nil {
			return fmt.Errorf("revoke credential: %w", err)
		}
		if n == 0 {
			return baton.Errorf(baton.ECodeNotFound, "no active credential %s", id)
		}
		return nil
	})
}

// EnsureSetting stores value under name unless one is stored already and
// returns the stored value. Concurrent callers, on any node, all get the
// first committed value.
func (db *DB) EnsureSetting(ctx context.Context, name, value string) (string, error) {
	var stored string
	err := db.w.do(ctx, func(t *wtx) error {
		if _, err := t.exec(`INSERT INTO settings (name, value, created_at) VALUES ($1, $2, $3)
ON CONFLICT (name) DO NOTHING`, name, value, formatTime(baton.Now())); err != nil {
			return fmt.Errorf("ensure setting: %w", err)
		}
		if err := t.get(`SELECT value FROM settings WHERE name = $1`, []any{name}, &stored); err != nil {
			return fmt.Errorf("ensure setting: %w", err)
		}
		return nil
	})
	return stored, err
}
