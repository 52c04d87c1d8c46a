package store

import (
	"context"
	"testing"
	"time"

	"github.com/baton-engine/baton"
	"github.com/google/go-cmp/cmp"
)

func testKeyRoundTrip(t *testing.T, db *DB) {
	ctx := context.Background()
	p := mkProfile(t, db, "p")

	ck, plain := baton.MintKey(baton.RoleClient, "laptop", p.ID, "")
	if err := db.CreateKey(ctx, ck); err != nil {
		t.Fatal(err)
	}
	got, err := db.KeyByHash(ctx, baton.RoleClient, baton.Digest(plain))
	if err != nil {
		t.Fatal(err)
	}
	want := *ck
	want.Scopes = baton.DefaultScopes // client keys without scopes get the defaults
	if diff := cmp.Diff(&want, got); diff != "" {
		t.Errorf("client key (-want +got):\n%s", diff)
	}

	sk, splain := baton.MintKey(baton.RoleSession, "ses_1", p.ID, ck.ID)
	if err := db.CreateKey(ctx, sk); err != nil {
		t.Fatal(err)
	}
	got, err = db.KeyByHash(ctx, baton.RoleSession, baton.Digest(splain))
	if err != nil {
		t.Fatal(err)
	}
	if got.ClientID != ck.ID || got.Name != "ses_1" || got.Scopes == nil || len(got.Scopes) != 0 {
		t.Errorf("session key = %+v, want client %s, name ses_1, empty scopes", got, ck.ID)
	}

	explicit, _ := baton.MintKey(baton.RoleClient, "ro", p.ID, "")
	explicit.Scopes = []string{"read"}
	if err := db.CreateKey(ctx, explicit); err != nil {
		t.Fatal(err)
	}
	got, err = db.KeyByHash(ctx, baton.RoleClient, explicit.Hash)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"read"}, got.Scopes); diff != "" {
		t.Errorf("explicit scopes (-want +got):\n%s", diff)
	}

	// The role must match, and unknown digests are not found.
	if _, err := db.KeyByHash(ctx, baton.RoleSession, ck.Hash); baton.ErrorCode(err) != baton.ECodeNotFound {
		t.Errorf("KeyByHash with the wrong role: err = %v, want not_found", err)
	}
	if _, err := db.KeyByHash(ctx, baton.RoleClient, baton.Digest("nope")); baton.ErrorCode(err) != baton.ECodeNotFound {
		t.Errorf("KeyByHash miss: err = %v, want not_found", err)
	}

	// A duplicate id is a database error, not a domain error.
	dup := *ck
	dup.Hash = baton.Digest("other")
	if err := db.CreateKey(ctx, &dup); err == nil || baton.ErrorCode(err) != baton.ECodeInternal {
		t.Errorf("duplicate key id: err = %v, want an internal error", err)
	}
}

func testKeyList(t *testing.T, db *DB) {
	ctx := context.Background()
	p := mkProfile(t, db, "p")
	var clients []string
	for range 5 {
		clients = append(clients, mkKey(t, db, baton.RoleClient, p.ID).ID)
	}
	admin := mkKey(t, db, baton.RoleAdmin, "")
	mkSession(t, db, &baton.Key{ID: clients[0], ProfileID: p.ID})
	if _, err := db.RevokeClientKey(ctx, clients[1], nil); err != nil {
		t.Fatal(err)
	}
	want := []string{clients[0], clients[2], clients[3], clients[4]}

	var got []string
	cursor := ""
	for {
		items, next, err := db.ListKeys(ctx, baton.RoleClient, baton.Page{Cursor: cursor, Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range items {
			if k.Role != baton.RoleClient {
				t.Errorf("ListKeys(client) returned a %s key", k.Role)
			}
			got = append(got, k.ID)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("client keys (-want +got):\n%s", diff)
	}

	admins, next, err := db.ListKeys(ctx, baton.RoleAdmin, baton.Page{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(admins) != 1 || admins[0].ID != admin.ID || next != "" {
		t.Errorf("admin keys = %v, next %q", admins, next)
	}
}

func testTouchKeys(t *testing.T, db *DB) {
	ctx := context.Background()
	p := mkProfile(t, db, "p")
	a, b := mkKey(t, db, baton.RoleClient, p.ID), mkKey(t, db, baton.RoleClient, p.ID)
	t1 := time.Date(2030, 1, 2, 3, 4, 5, 6_000_000, time.UTC)
	if err := db.TouchKeys(ctx, map[string]time.Time{a.ID: t1, b.ID: t1.Add(time.Second), "key_unknown": t1}); err != nil {
		t.Fatal(err)
	}
	// An older time does not move last_used_at back.
	if err := db.TouchKeys(ctx, map[string]time.Time{a.ID: t1.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := db.TouchKeys(ctx, nil); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]time.Time{a.ID: t1, b.ID: t1.Add(time.Second)} {
		k := keyByID(t, db, baton.RoleClient, id)
		if k.LastUsedAt == nil || !k.LastUsedAt.Equal(want) {
			t.Errorf("key %s last used %v, want %v", id, k.LastUsedAt, want)
		}
	}
}

func keyByID(t *testing.T, db *DB, role baton.KeyRole, id string) *baton.Key {
	t.Helper()
	items, _, err := db.ListKeys(context.Background(), role, baton.Page{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range items {
		if k.ID == id {
			return k
		}
	}
	t.Fatalf("no active %s key %s", role, id)
	return nil
}

func testRevokeAdminKeys(t *testing.T, db *DB) {
	ctx := context.Background()
	p := mkProfile(t, db, "p")
	a1, a2 := mkKey(t, db, baton.RoleAdmin, ""), mkKey(t, db, baton.RoleAdmin, "")
	ck := mkKey(t, db, baton.RoleClient, p.ID)
	if err := db.RevokeAdminKeys(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range []*baton.Key{a1, a2} {
		if _, err := db.KeyByHash(ctx, baton.RoleAdmin, k.Hash); baton.ErrorCode(err) != baton.ECodeNotFound {
			t.Errorf("revoked admin key %s still found (err %v)", k.ID, err)
		}
	}
	if _, err := db.KeyByHash(ctx, baton.RoleClient, ck.Hash); err != nil {
		t.Errorf("client key affected by RevokeAdminKeys: %v", err)
	}
	if err := db.RevokeAdminKeys(ctx); err != nil {
		t.Errorf("second RevokeAdminKeys: %v", err)
	}
}

func testRevokeClientKey(t *testing.T, db *DB) {
	ctx := context.Background()
	p := mkProfile(t, db, "p")
	a := mkKey(t, db, baton.RoleClient, p.ID)
	b := mkKey(t, db, baton.RoleClient, p.ID)

	s1, sa1 := mkSession(t, db, a) // only a: closes
	s2, sa2 := mkSession(t, db, a) // a and b: stays open
	sb2, _ := baton.MintKey(baton.RoleSession, s2.ID, p.ID, b.ID)
	if err := db.JoinSession(ctx, s2.ID, baton.Participant{ClientKeyID: b.ID}, sb2, newEvent(s2.ID, baton.EventSessionJoin)); err != nil {
		t.Fatal(err)
	}
	s3, sb3 := mkSession(t, db, b) // only b: untouched
	s4, sa4 := mkSession(t, db, a) // already closed: untouched
	s5, sa5 := mkSession(t, db, a) // only a, second victim
	ended, err := db.EndSession(ctx, s4.ID, baton.StateClosed, newEvent(s4.ID, baton.EventSessionClose))
	if err != nil || !ended {
		t.Fatalf("EndSession = %v, %v", ended, err)
	}
	s4Before := allEvents(t, db, s4.ID)

	var asked []string
	mkClose := func(sid string) *baton.Event {
		asked = append(asked, sid)
		return baton.NewEvent(sid, a.ID, baton.EventSessionClose, map[string]string{"reason": "client_key_revoked"})
	}
	closed, err := db.RevokeClientKey(ctx, a.ID, mkClose)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{s1.ID, s5.ID}, closed); diff != "" {
		t.Errorf("closed sessions (-want +got):\n%s", diff)
	}

	for _, sid := range []string{s1.ID, s5.ID} {
		s, err := db.Session(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		if s.State != baton.StateClosed || s.ClosedAt == nil {
			t.Errorf("session %s: state %s, closed_at %v; want closed with a time", sid, s.State, s.ClosedAt)
		}
		evs := allEvents(t, db, sid)
		if diff := cmp.Diff([]int64{1, 2}, seqs(evs)); diff != "" {
			t.Errorf("session %s seqs (-want +got):\n%s", sid, diff)
		}
		last := evs[len(evs)-1]
		if last.Type != baton.EventSessionClose || last.ClientKeyID != a.ID ||
			string(last.Payload) != `{"reason":"client_key_revoked"}` {
			t.Errorf("session %s close event = %+v", sid, last)
		}
	}
	for _, sid := range []string{s2.ID, s3.ID} {
		s, err := db.Session(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		if s.State != baton.StateOpen || s.ClosedAt != nil {
			t.Errorf("session %s: state %s, want open", sid, s.State)
		}
	}
	if diff := cmp.Diff(s4Before, allEvents(t, db, s4.ID)); diff != "" {
		t.Errorf("already-closed session got events (-before +after):\n%s", diff)
	}

	// Every key of a is gone; b's keys still work.
	for _, k := range []*baton.Key{sa1, sa2, sa4, sa5} {
		if _, err := db.KeyByHash(ctx, baton.RoleSession, k.Hash); baton.ErrorCode(err) != baton.ECodeNotFound {
			t.Errorf("session key %s of the revoked client still active (err %v)", k.ID, err)
		}
	}
	if _, err := db.KeyByHash(ctx, baton.RoleClient, a.Hash); baton.ErrorCode(err) != baton.ECodeNotFound {
		t.Errorf("revoked client key still active (err %v)", err)
	}
	for _, k := range []*baton.Key{sb2, sb3} {
		if _, err := db.KeyByHash(ctx, baton.RoleSession, k.Hash); err != nil {
			t.Errorf("other participant's session key %s revoked: %v", k.ID, err)
		}
	}
	if _, err := db.KeyByHash(ctx, baton.RoleClient, b.Hash); err != nil {
		t.Errorf("other client key revoked: %v", err)
	}

	// Revoking again: it is no longer an active client key.
	_, err = db.RevokeClientKey(ctx, a.ID, mkClose)
	wantCode(t, err, baton.ECodeNotFound, "no active client key "+a.ID)

	// The event's payload was the callback's; a nil callback closes
	// without events.
	c := mkKey(t, db, baton.RoleClient, p.ID)
	s6, _ := mkSession(t, db, c)
	closed, err = db.RevokeClientKey(ctx, c.ID, nil)
	if err != nil || len(closed) != 1 || closed[0] != s6.ID {
		t.Fatalf("RevokeClientKey(nil callback) = %v, %v", closed, err)
	}
	if n := len(allEvents(t, db, s6.ID)); n != 1 {
		t.Errorf("nil callback appended events: %d events", n)
	}
}

func testRevokeClientKeyNotFound(t *testing.T, db *DB) {
	ctx := context.Background()
	p := mkProfile(t, db, "p")
	ck := mkKey(t, db, baton.RoleClient, p.ID)
	_, sk := mkSession(t, db, ck)
	admin := mkKey(t, db, baton.RoleAdmin, "")
	for _, id := range []string{"key_unknown", sk.ID, admin.ID} {
		_, err := db.RevokeClientKey(ctx, id, nil)
		wantCode(t, err, baton.ECodeNotFound, "no active client key "+id)
	}
	if _, err := db.KeyByHash(ctx, baton.RoleSession, sk.Hash); err != nil {
		t.Errorf("session key revoked by a failed RevokeClientKey: %v", err)
	}
}
