package store

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/baton-engine/baton"
	"github.com/google/go-cmp/cmp"
)

func testProfileRoundTrip(t *testing.T, db *DB) {
	ctx := context.Background()
	env, mch := mkEnvironment(t, db, "ci"), mkMachine(t, db, "laptop")
	full := &baton.Profile{
		Name:              "full",
		PrimaryProvider:   "claude",
		FallbackProviders: []string{"gpt", "local"},
		MCPServers:        []string{"fs"},
		// Elements are kept byte for byte, whatever their type.
		AllowedTools:       []json.RawMessage{json.RawMessage(`"bash"`), json.RawMessage(`{ "odd" : [1, 2] }`), json.RawMessage(`42`), json.RawMessage(`null`)},
		AvailableSandboxes: []string{"python:3.12"},
		SystemPrompt:       "be brief",
		MaxIterations:      12,
		// Baton's executor extensions.
		ExecutorEnvironments: []string{env.ID},
		Brain:                baton.Brain{Type: baton.BrainExecutor, MachineID: mch.ID},
	}
	if err := db.CreateProfile(ctx, full); err != nil {
		t.Fatal(err)
	}
	if full.ID == "" || full.CreatedAt.IsZero() || !full.UpdatedAt.Equal(full.CreatedAt) {
		t.Fatalf("CreateProfile did not fill id/timestamps: %+v", full)
	}
	got, err := db.Profile(ctx, full.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(full, got); diff != "" {
		t.Errorf("profile round trip (-want +got):\n%s", diff)
	}

	// Nil lists come back as empty lists.
	bare := &baton.Profile{Name: "bare", PrimaryProvider: "p"}
	if err := db.CreateProfile(ctx, bare); err != nil {
		t.Fatal(err)
	}
	got, err = db.Profile(ctx, bare.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := *bare
	want.FallbackProviders, want.MCPServers, want.AvailableSandboxes = []string{}, []string{}, []string{}
	want.AllowedTools = []json.RawMessage{}
	want.ExecutorEnvironments = []string{}
	if bare.Brain != (baton.Brain{Type: baton.BrainServer}) {
		t.Errorf("CreateProfile left the default brain as %+v, want type server", bare.Brain)
	}
	if diff := cmp.Diff(&want, got); diff != "" {
		t.Errorf("bare profile (-want +got):\n%s", diff)
	}
	if got.FallbackProviders == nil || got.MCPServers == nil || got.AllowedTools == nil || got.AvailableSandboxes == nil {
		t.Errorf("nil list came back nil: %+v", got)
	}

	// Invalid raw JSON is refused before anything is written.
	bad := &baton.Profile{Name: "bad", PrimaryProvider: "p", AllowedTools: []json.RawMessage{json.RawMessage(`{`)}}
	if err := db.CreateProfile(ctx, bad); err == nil {
		t.Error("CreateProfile accepted invalid allowed_tools JSON")
	}
}

func testProfileDuplicateName(t *testing.T, db *DB) {
	ctx := context.Background()
	first := mkProfile(t, db, "dup")
	err := db.CreateProfile(ctx, &baton.Profile{Name: "dup", PrimaryProvider: "p"})
	wantCode(t, err, baton.ECodeDuplicateName, "a profile with that name already exists")

	// A deleted profile keeps its name reserved.
	if err := db.DeleteProfile(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	err = db.CreateProfile(ctx, &baton.Profile{Name: "dup", PrimaryProvider: "p"})
	wantCode(t, err, baton.ECodeDuplicateName, "a profile with that name already exists")

	list, _, err := db.ListProfiles(ctx, baton.Page{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 0 {
		t.Errorf("failed creates left %d profiles", len(list))
	}
}

func testProfileNotFound(t *testing.T, db *DB) {
	ctx := context.Background()
	_, err := db.Profile(ctx, "pro_missing")
	wantCode(t, err, baton.ECodeNotFound, "no profile pro_missing")

	p := mkProfile(t, db, "gone")
	if err := db.DeleteProfile(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	_, err = db.Profile(ctx, p.ID)
	wantCode(t, err, baton.ECodeNotFound, "no profile "+p.ID)
}

func testProfileReplace(t *testing.T, db *DB) {
	ctx := context.Background()
	p := mkProfile(t, db, "orig")
	other := mkProfile(t, db, "other")

	repl := &baton.Profile{
		ID:              p.ID,
		Name:            "renamed",
		PrimaryProvider: "gpt",
		MCPServers:      []string{"git"},
		AllowedTools:    []json.RawMessage{json.RawMessage(`"read"`)},
		SystemPrompt:    "new",
		MaxIterations:   3,
	}
	// A read before the change must not be served after it (the cache),
	// and what a caller does to its copy stays its own.
	before, err := db.Profile(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	before.Name = "scribbled"
	if again, _ := db.Profile(ctx, p.ID); again == nil || again.Name != "orig" {
		t.Fatalf("profile after a caller changed its copy = %+v", again)
	}
	if err := db.ReplaceProfile(ctx, repl); err != nil {
		t.Fatal(err)
	}
	if !repl.CreatedAt.Equal(p.CreatedAt) || repl.UpdatedAt.Before(p.UpdatedAt) {
		t.Errorf("timestamps after replace: created %v (want %v), updated %v (not before %v)",
			repl.CreatedAt, p.CreatedAt, repl.UpdatedAt, p.UpdatedAt)
	}
	got, err := db.Profile(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := *repl
	want.FallbackProviders, want.AvailableSandboxes, want.ExecutorEnvironments = []string{}, []string{}, []string{}
	if diff := cmp.Diff(&want, got); diff != "" {
		t.Errorf("replaced profile (-want +got):\n%s", diff)
	}

	// Keeping its own name is fine; taking another's is not.
	same := *got
	same.SystemPrompt = "again"
	if err := db.ReplaceProfile(ctx, &same); err != nil {
		t.Errorf("replace keeping the name: %v", err)
	}
	taken := *got
	taken.Name = other.Name
	wantCode(t, db.ReplaceProfile(ctx, &taken), baton.ECodeDuplicateName, "a profile with that name already exists")

	wantCode(t, db.ReplaceProfile(ctx, &baton.Profile{ID: "pro_nope", Name: "x", PrimaryProvider: "p"}),
		baton.ECodeNotFound, "no profile pro_nope")
	if err := db.DeleteProfile(ctx, other.ID); err != nil {
		t.Fatal(err)
	}
	wantCode(t, db.ReplaceProfile(ctx, &baton.Profile{ID: other.ID, Name: "x", PrimaryProvider: "p"}),
		baton.ECodeNotFound, "no profile "+other.ID)
}

func testProfileDelete(t *testing.T, db *DB) {
	ctx := context.Background()
	p := mkProfile(t, db, "busy")
	k1 := mkKey(t, db, baton.RoleClient, p.ID)
	k2 := mkKey(t, db, baton.RoleClient, p.ID)
	mkSession(t, db, k1) // session keys do not count

	wantCode(t, db.DeleteProfile(ctx, p.ID), baton.ECodeProfileInUse,
		"profile has 2 active client key(s); revoke them before deleting")
	if _, err := db.RevokeClientKey(ctx, k1.ID, nil); err != nil {
		t.Fatal(err)
	}
	wantCode(t, db.DeleteProfile(ctx, p.ID), baton.ECodeProfileInUse,
		"profile has 1 active client key(s); revoke them before deleting")
	if _, err := db.RevokeClientKey(ctx, k2.ID, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Profile(ctx, p.ID); err != nil { // cached now
		t.Fatal(err)
	}
	if err := db.DeleteProfile(ctx, p.ID); err != nil {
		t.Fatalf("delete with no active keys: %v", err)
	}
	_, err := db.Profile(ctx, p.ID)
	wantCode(t, err, baton.ECodeNotFound, "no profile "+p.ID)
	wantCode(t, db.DeleteProfile(ctx, p.ID), baton.ECodeNotFound, "no profile "+p.ID)
	wantCode(t, db.DeleteProfile(ctx, "pro_nope"), baton.ECodeNotFound, "no profile pro_nope")
	list, _, err := db.ListProfiles(ctx, baton.Page{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 0 {
		t.Errorf("deleted profile still listed: %+v", list)
	}
}

func testProfileList(t *testing.T, db *DB) {
	ctx := context.Background()
	var ids []string
	for i := range 7 {
		ids = append(ids, mkProfile(t, db, fmt.Sprintf("p%d", i)).ID)
	}
	if err := db.DeleteProfile(ctx, ids[3]); err != nil {
		t.Fatal(err)
	}
	want := append(append([]string{}, ids[:3]...), ids[4:]...)

	var got []string
	var pages int
	cursor := ""
	for {
		items, next, err := db.ListProfiles(ctx, baton.Page{Cursor: cursor, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(items) > 2 {
			t.Fatalf("page of %d items, limit 2", len(items))
		}
		for _, p := range items {
			got = append(got, p.ID)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("paged ids (-want +got):\n%s", diff)
	}
	if pages != 3 {
		t.Errorf("6 profiles in pages of 2 took %d pages, want 3 (no empty trailing page)", pages)
	}

	// A non-positive limit means the default page size.
	items, next, err := db.ListProfiles(ctx, baton.Page{Limit: 0})
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 6 || next != "" {
		t.Errorf("default limit: %d items, next %q", len(items), next)
	}
}

func testBadCursor(t *testing.T, db *DB) {
	ctx := context.Background()
	_, _, err := db.ListProfiles(ctx, baton.Page{Cursor: "abc"})
	wantCode(t, err, baton.ECodeBadRequest, `invalid cursor: "abc"`)
	_, _, err = db.ListKeys(ctx, baton.RoleClient, baton.Page{Cursor: "1.5"})
	wantCode(t, err, baton.ECodeBadRequest, `invalid cursor: "1.5"`)
	_, _, err = db.ListSessions(ctx, "", baton.Page{Cursor: "x"})
	wantCode(t, err, baton.ECodeBadRequest, `invalid cursor: "x"`)
	_, _, err = db.Events(ctx, "ses_x", baton.Page{Cursor: " 1"})
	wantCode(t, err, baton.ECodeBadRequest, `invalid cursor: " 1"`)
}
