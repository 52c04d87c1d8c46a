package store

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/baton-engine/baton"
	"github.com/google/go-cmp/cmp"
)

func TestExecutorStoreSQLite(t *testing.T) { testExecutorStore(t, openSQLite) }

func TestExecutorStorePostgres(t *testing.T) {
	if os.Getenv(pgEnv) == "" {
		t.Skipf("%s is not set; skipping the PostgreSQL run of the executor suite", pgEnv)
	}
	testExecutorStore(t, openPostgres)
}

// testExecutorStore is the executor part of the store conformance suite:
// environments, machines, credentials, settings and the profile columns
// that refer to them.
func testExecutorStore(t *testing.T, open func(t testing.TB) *DB) {
	runCases(t, open, []suiteCase{
		{"OwnerLifecycle", testOwnerLifecycle},
		{"OwnerList", testOwnerList},
		{"CredentialLifecycle", testCredentialLifecycle},
		{"CredentialList", testCredentialList},
		{"DeleteOwnerRevokes", testDeleteOwnerRevokes},
		{"ProfileRefs", testProfileRefs},
		{"OwnerInUse", testOwnerInUse},
		{"EnsureSetting", testEnsureSetting},
	})
}

func mkEnvironment(t testing.TB, db *DB, name string) *baton.Environment {
	t.Helper()
	e := &baton.Environment{Name: name}
	if err := db.CreateEnvironment(context.Background(), e); err != nil {
		t.Fatalf("create environment %s: %v", name, err)
	}
	return e
}

func mkMachine(t testing.TB, db *DB, name string) *baton.Machine {
	t.Helper()
	m := &baton.Machine{Name: name}
	if err := db.CreateMachine(context.Background(), m); err != nil {
		t.Fatalf("create machine %s: %v", name, err)
	}
	return m
}

func mkCredential(t testing.TB, db *DB, scope, owner string) *baton.ExecutorCredential {
	t.Helper()
	c, _ := baton.MintExecutorCredential(scope, owner)
	if err := db.CreateExecutorCredential(context.Background(), c); err != nil {
		t.Fatalf("create credential: %v", err)
	}
	return c
}

// ownerAPI runs the same checks against environments and machines.
type ownerAPI struct {
	scope, noun, article, prefix string
	create                       func(db *DB, name string) (id string, err error)
	get                          func(db *DB, id string) (*baton.Environment, error)
	list                         func(db *DB, page baton.Page) ([]*baton.Environment, string, error)
	del                          func(db *DB, id string) ([]string, error)
}

func ownerAPIs() []ownerAPI {
	ctx := context.Background()
	return []ownerAPI{
		{
			scope: baton.ExecutorScopeEnvironment, noun: "environment", article: "an", prefix: baton.PrefixEnvironment,
			create: func(db *DB, name string) (string, error) {
				e := &baton.Environment{Name: name}
				err := db.CreateEnvironment(ctx, e)
				return e.ID, err
			},
			get:  func(db *DB, id string) (*baton.Environment, error) { return db.Environment(ctx, id) },
			list: func(db *DB, p baton.Page) ([]*baton.Environment, string, error) { return db.ListEnvironments(ctx, p) },
			del:  func(db *DB, id string) ([]string, error) { return db.DeleteEnvironment(ctx, id) },
		},
		{
			scope: baton.ExecutorScopeMachine, noun: "machine", article: "a", prefix: baton.PrefixMachine,
			create: func(db *DB, name string) (string, error) {
				m := &baton.Machine{Name: name}
				err := db.CreateMachine(ctx, m)
				return m.ID, err
			},
			get: func(db *DB, id string) (*baton.Environment, error) {
				m, err := db.Machine(ctx, id)
				if err != nil {
					return nil, err
				}
				e := baton.Environment(*m)
				return &e, nil
			},
			list: func(db *DB, p baton.Page) ([]*baton.Environment, string, error) {
				ms, next, err := db.ListMachines(ctx, p)
				out := make([]*baton.Environment, len(ms))
				for i, m := range ms {
					e := baton.Environment(*m)
					out[i] = &e
				}
				return out, next, err
			},
			del: func(db *DB, id string) ([]string, error) { return db.DeleteMachine(ctx, id) },
		},
	}
}

// forEachOwner runs fn once for environments and once for machines (in
// the same store: the two live in separate tables).
func forEachOwner(t *testing.T, db *DB, fn func(t *testing.T, db *DB, o ownerAPI)) {
	for _, o := range ownerAPIs() {
		t.Run(o.noun, func(t *testing.T) { fn(t, db, o) })
	}
}

func testOwnerLifecycle(t *testing.T, db *DB) {
	forEachOwner(t, db, func(t *testing.T, db *DB, o ownerAPI) {
		id, err := o.create(db, "box-"+o.noun)
		if err != nil {
			t.Fatal(err)
		}
		if len(id) != len(o.prefix)+32 || id[:len(o.prefix)] != o.prefix {
			t.Errorf("id %q, want %s and 32 hex digits", id, o.prefix)
		}
		got, err := o.get(db, id)
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != id || got.Name != "box-"+o.noun || got.CreatedAt.IsZero() {
			t.Errorf("get = %+v", got)
		}
		_, err = o.create(db, "box-"+o.noun)
		wantCode(t, err, baton.ECodeDuplicateName, o.article+" "+o.noun+" with that name already exists")

		revoked, err := o.del(db, id)
		if err != nil || len(revoked) != 0 {
			t.Fatalf("delete = %v, %v", revoked, err)
		}
		_, err = o.get(db, id)
		wantCode(t, err, baton.ECodeNotFound, "no "+o.noun+" "+id)
		_, err = o.del(db, id)
		wantCode(t, err, baton.ECodeNotFound, "no "+o.noun+" "+id)
		_, err = o.del(db, o.prefix+"missing")
		wantCode(t, err, baton.ECodeNotFound, "no "+o.noun+" "+o.prefix+"missing")

		// A deleted one frees its name.
		again, err := o.create(db, "box-"+o.noun)
		if err != nil || again == id {
			t.Fatalf("recreate after delete: %q, %v", again, err)
		}
	})
}

func testOwnerList(t *testing.T, db *DB) {
	forEachOwner(t, db, func(t *testing.T, db *DB, o ownerAPI) {
		var ids []string
		for i := range 5 {
			id, err := o.create(db, fmt.Sprintf("%s-%d", o.noun, i))
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		if _, err := o.del(db, ids[1]); err != nil {
			t.Fatal(err)
		}
		want := []string{ids[0], ids[2], ids[3], ids[4]}
		var got []string
		cursor, pages := "", 0
		for {
			items, next, err := o.list(db, baton.Page{Cursor: cursor, Limit: 2})
			if err != nil {
				t.Fatal(err)
			}
			pages++
			for _, e := range items {
				got = append(got, e.ID)
			}
			if next == "" {
				break
			}
			cursor = next
		}
		if diff := cmp.Diff(want, got); diff != "" || pages != 2 {
			t.Errorf("paged ids in %d pages (-want +got):\n%s", pages, diff)
		}
		_, _, err := o.list(db, baton.Page{Cursor: "x"})
		wantCode(t, err, baton.ECodeBadRequest, `invalid cursor: "x"`)
	})
}

func testCredentialLifecycle(t *testing.T, db *DB) {
	ctx := context.Background()
	env := mkEnvironment(t, db, "ci")
	c, plain := baton.MintExecutorCredential(baton.ExecutorScopeEnvironment, env.ID)
	if err := db.CreateExecutorCredential(ctx, c); err != nil {
		t.Fatal(err)
	}
	if c.Prefix != plain[:12] || c.Hash != baton.Digest(plain) {
		t.Errorf("minted credential %+v for %q", c, plain)
	}
	byID, err := db.ExecutorCredential(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(c, byID); diff != "" {
		t.Errorf("by id (-want +got):\n%s", diff)
	}
	byHash, err := db.ExecutorCredentialByHash(ctx, baton.Digest(plain))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(c, byHash); diff != "" {
		t.Errorf("by hash (-want +got):\n%s", diff)
	}
	_, err = db.ExecutorCredential(ctx, "ecr_missing")
	wantCode(t, err, baton.ECodeNotFound, "no credential ecr_missing")
	_, err = db.ExecutorCredentialByHash(ctx, baton.Digest("bae_exc_other"))
	wantCode(t, err, baton.ECodeNotFound, "no credential with that hash")

	// The owner must exist, be active and be of the credential's scope.
	for _, bad := range []struct{ scope, owner, msg string }{
		{baton.ExecutorScopeEnvironment, "env_missing", "no environment env_missing"},
		{baton.ExecutorScopeMachine, env.ID, "no machine " + env.ID},
	} {
		orphan, _ := baton.MintExecutorCredential(bad.scope, bad.owner)
		wantCode(t, db.CreateExecutorCredential(ctx, orphan), baton.ECodeNotFound, bad.msg)
	}
	if err := db.CreateExecutorCredential(ctx, &baton.ExecutorCredential{Scope: "galaxy", OwnerID: env.ID}); err == nil {
		t.Error("a credential with an unknown scope was stored")
	}

	// Revocation: only the active credential of its own owner.
	wrongOwner := mkEnvironment(t, db, "other")
	wantCode(t, db.RevokeExecutorCredential(ctx, baton.ExecutorScopeEnvironment, wrongOwner.ID, c.ID),
		baton.ECodeNotFound, "no active credential "+c.ID)
	wantCode(t, db.RevokeExecutorCredential(ctx, baton.ExecutorScopeMachine, env.ID, c.ID),
		baton.ECodeNotFound, "no active credential "+c.ID)
	if err := db.RevokeExecutorCredential(ctx, baton.ExecutorScopeEnvironment, env.ID, c.ID); err != nil {
		t.Fatal(err)
	}
	wantCode(t, db.RevokeExecutorCredential(ctx, baton.ExecutorScopeEnvironment, env.ID, c.ID),
		baton.ECodeNotFound, "no active credential "+c.ID)
	got, err := db.ExecutorCredentialByHash(ctx, c.Hash)
	if err != nil {
		t.Fatal(err)
	}
	if got.RevokedAt == nil || got.RevokedAt.Before(c.CreatedAt) {
		t.Errorf("revoked credential reads back with revoked_at %v", got.RevokedAt)
	}

	// Deleting the owner of a deleted environment's credentials: gone.
	if _, err := db.DeleteEnvironment(ctx, wrongOwner.ID); err != nil {
		t.Fatal(err)
	}
	late, _ := baton.MintExecutorCredential(baton.ExecutorScopeEnvironment, wrongOwner.ID)
	wantCode(t, db.CreateExecutorCredential(ctx, late), baton.ECodeNotFound, "no environment "+wrongOwner.ID)
}

func testCredentialList(t *testing.T, db *DB) {
	ctx := context.Background()
	mch := mkMachine(t, db, "m")
	other := mkMachine(t, db, "other")
	var want []string
	for range 5 {
		want = append(want, mkCredential(t, db, baton.ExecutorScopeMachine, mch.ID).ID)
		mkCredential(t, db, baton.ExecutorScopeMachine, other.ID)
	}
	if err := db.RevokeExecutorCredential(ctx, baton.ExecutorScopeMachine, mch.ID, want[2]); err != nil {
		t.Fatal(err)
	}
	var got []string
	var revoked []string
	cursor := ""
	for {
		items, next, err := db.ListExecutorCredentials(ctx, baton.ExecutorScopeMachine, mch.ID, baton.Page{Cursor: cursor, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range items {
			got = append(got, c.ID)
			if c.RevokedAt != nil {
				revoked = append(revoked, c.ID)
			}
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("listed credentials (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{want[2]}, revoked); diff != "" {
		t.Errorf("revoked in the list (-want +got):\n%s", diff)
	}
	// The scope is part of the owner.
	items, _, err := db.ListExecutorCredentials(ctx, baton.ExecutorScopeEnvironment, mch.ID, baton.Page{})
	if err != nil || len(items) != 0 {
		t.Errorf("listing under the wrong scope: %d items, %v", len(items), err)
	}
}

func testDeleteOwnerRevokes(t *testing.T, db *DB) {
	ctx := context.Background()
	env := mkEnvironment(t, db, "e")
	keep := mkEnvironment(t, db, "keep")
	a := mkCredential(t, db, baton.ExecutorScopeEnvironment, env.ID)
	b := mkCredential(t, db, baton.ExecutorScopeEnvironment, env.ID)
	gone := mkCredential(t, db, baton.ExecutorScopeEnvironment, env.ID)
	kept := mkCredential(t, db, baton.ExecutorScopeEnvironment, keep.ID)
	if err := db.RevokeExecutorCredential(ctx, baton.ExecutorScopeEnvironment, env.ID, gone.ID); err != nil {
		t.Fatal(err)
	}
	revoked, err := db.DeleteEnvironment(ctx, env.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{a.ID, b.ID}, revoked); diff != "" {
		t.Errorf("revoked by delete (-want +got):\n%s", diff)
	}
	for _, id := range []string{a.ID, b.ID, gone.ID} {
		c, err := db.ExecutorCredential(ctx, id)
		if err != nil || c.RevokedAt == nil {
			t.Errorf("credential %s after its environment's delete: %+v, %v", id, c, err)
		}
	}
	if c, err := db.ExecutorCredential(ctx, kept.ID); err != nil || c.RevokedAt != nil {
		t.Errorf("another environment's credential: %+v, %v", c, err)
	}

	mch := mkMachine(t, db, "m")
	mc := mkCredential(t, db, baton.ExecutorScopeMachine, mch.ID)
	revoked, err = db.DeleteMachine(ctx, mch.ID)
	if err != nil || len(revoked) != 1 || revoked[0] != mc.ID {
		t.Errorf("DeleteMachine = %v, %v; want [%s]", revoked, err, mc.ID)
	}
}

func testProfileRefs(t *testing.T, db *DB) {
	ctx := context.Background()
	env := mkEnvironment(t, db, "e")
	mch := mkMachine(t, db, "m")
	gone := mkEnvironment(t, db, "gone")
	if _, err := db.DeleteEnvironment(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		name  string
		envs  []string
		brain baton.Brain
		msg   string
	}{
		{"unknown environment", []string{env.ID, "env_nope"}, baton.Brain{}, "executor_environments[1]: no environment env_nope"},
		{"deleted environment", []string{gone.ID}, baton.Brain{}, "executor_environments[0]: no environment " + gone.ID},
		{"machine as environment", []string{mch.ID}, baton.Brain{}, "executor_environments[0]: no environment " + mch.ID},
		{"unknown machine", nil, baton.Brain{Type: baton.BrainExecutor, MachineID: "mch_nope"}, "brain.machine_id: no machine mch_nope"},
		{"environment as machine", nil, baton.Brain{Type: baton.BrainExecutor, MachineID: env.ID}, "brain.machine_id: no machine " + env.ID},
	}
	for _, c := range bad {
		p := &baton.Profile{Name: c.name, PrimaryProvider: "p", ExecutorEnvironments: c.envs, Brain: c.brain}
		wantCode(t, db.CreateProfile(ctx, p), baton.ECodeUnprocessable, c.msg)
	}
	if items, _, _ := db.ListProfiles(ctx, baton.Page{}); len(items) != 0 {
		t.Fatalf("rejected profiles were stored: %d", len(items))
	}

	p := &baton.Profile{Name: "ok", PrimaryProvider: "p", ExecutorEnvironments: []string{env.ID},
		Brain: baton.Brain{Type: baton.BrainExecutor, MachineID: mch.ID}}
	if err := db.CreateProfile(ctx, p); err != nil {
		t.Fatal(err)
	}
	// Replace checks the same way, after the profile's own existence.
	for _, c := range bad {
		r := *p
		r.ExecutorEnvironments, r.Brain = c.envs, c.brain
		wantCode(t, db.ReplaceProfile(ctx, &r), baton.ECodeUnprocessable, c.msg)
	}
	wantCode(t, db.ReplaceProfile(ctx, &baton.Profile{ID: "pro_nope", Name: "x", PrimaryProvider: "p", ExecutorEnvironments: []string{"env_nope"}}),
		baton.ECodeNotFound, "no profile pro_nope")
	got, err := db.Profile(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(p.ExecutorEnvironments, got.ExecutorEnvironments); diff != "" || got.Brain != p.Brain {
		t.Errorf("rejected replaces changed the profile: %+v", got)
	}
	// A reference check does not make a taken name pass.
	mkProfile(t, db, "taken")
	r := *p
	r.Name = "taken"
	wantCode(t, db.ReplaceProfile(ctx, &r), baton.ECodeDuplicateName, "a profile with that name already exists")
}

func testOwnerInUse(t *testing.T, db *DB) {
	ctx := context.Background()
	env := mkEnvironment(t, db, "e")
	env2 := mkEnvironment(t, db, "e2")
	mch := mkMachine(t, db, "m")
	cred := mkCredential(t, db, baton.ExecutorScopeEnvironment, env.ID)
	p1 := &baton.Profile{Name: "p1", PrimaryProvider: "p", ExecutorEnvironments: []string{env2.ID, env.ID}}
	p2 := &baton.Profile{Name: "p2", PrimaryProvider: "p", ExecutorEnvironments: []string{env.ID},
		Brain: baton.Brain{Type: baton.BrainExecutor, MachineID: mch.ID}}
	for _, p := range []*baton.Profile{p1, p2} {
		if err := db.CreateProfile(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	_, err := db.DeleteEnvironment(ctx, env.ID)
	wantCode(t, err, baton.ECodeConflict, fmt.Sprintf(
		"environment %s is used by profile(s) %s, %s; remove it from their executor_environments first", env.ID, p1.ID, p2.ID))
	_, err = db.DeleteMachine(ctx, mch.ID)
	wantCode(t, err, baton.ECodeConflict, fmt.Sprintf(
		"machine %s is used by profile(s) %s; remove it from their brain first", mch.ID, p2.ID))
	if c, err := db.ExecutorCredential(ctx, cred.ID); err != nil || c.RevokedAt != nil {
		t.Fatalf("a refused delete revoked the credential: %+v, %v", c, err)
	}

	// Dropping the references, or deleting the profile, frees them.
	p1.ExecutorEnvironments = []string{env2.ID}
	if err := db.ReplaceProfile(ctx, p1); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteProfile(ctx, p2.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.DeleteEnvironment(ctx, env.ID); err != nil {
		t.Errorf("delete an unused environment: %v", err)
	}
	if _, err := db.DeleteMachine(ctx, mch.ID); err != nil {
		t.Errorf("delete an unused machine: %v", err)
	}
	_, err = db.DeleteEnvironment(ctx, env2.ID)
	wantCode(t, err, baton.ECodeConflict, fmt.Sprintf(
		"environment %s is used by profile(s) %s; remove it from their executor_environments first", env2.ID, p1.ID))
}

func testEnsureSetting(t *testing.T, db *DB) {
	ctx := context.Background()
	got, err := db.EnsureSetting(ctx, "k", "first")
	if err != nil || got != "first" {
		t.Fatalf("first EnsureSetting = %q, %v", got, err)
	}
	if got, err = db.EnsureSetting(ctx, "k", "second"); err != nil || got != "first" {
		t.Errorf("second EnsureSetting = %q, %v; want the first value", got, err)
	}
	// Concurrent first writers all see the one winner.
	const n = 8
	vals := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { vals[i], errs[i] = db.EnsureSetting(ctx, "race", fmt.Sprint(i)) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || vals[i] != vals[0] {
			t.Fatalf("concurrent EnsureSetting: %q (%v) vs %q", vals[i], errs[i], vals[0])
		}
	}
	// Settings survive a reopen.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	again := openURL(t, db.url)
	if got, err = again.EnsureSetting(ctx, "k", "third"); err != nil || got != "first" {
		t.Errorf("after reopen = %q, %v; want first", got, err)
	}
}
