package engine

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/store"
)

// Helpers shared by the engine's internal tests and, exported here, its
// external ones (package engine_test).

// StoreWithSession opens a store in a temp dir with o (URL set here) and
// creates one session on a profile, for client key "key_1". The store is
// closed when the test ends.
func StoreWithSession(t *testing.T, o store.Options) (*store.DB, *baton.Session) {
	t.Helper()
	ctx := context.Background()
	o.URL = filepath.Join(t.TempDir(), "b.db")
	db, err := store.Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	p := &baton.Profile{Name: "p", PrimaryProvider: "x"}
	if err := db.CreateProfile(ctx, p); err != nil {
		t.Fatal(err)
	}
	s := &baton.Session{ProfileID: p.ID, ClientKeyID: "key_1"}
	if err := db.CreateSession(ctx, s, nil); err != nil {
		t.Fatal(err)
	}
	return db, s
}
