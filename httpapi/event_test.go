package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/httpx/httpxtest"
	"github.com/baton-engine/baton/store"
)

// eventJSON is the exact wire form of a seeded event (see seedSession).
func eventJSON(e *baton.Event, n int) string {
	key := "null"
	if e.ClientKeyID != "" {
		key = `"` + e.ClientKeyID + `"`
	}
	return fmt.Sprintf(`{"id":"%s","session_id":"%s","client_key_id":%s,"event_type":"test.event","payload":{"html":"<b>&","n":%d},"created_at":"%s"}`,
		e.ID, e.SessionID, key, n, baton.FormatTime(e.CreatedAt))
}

// page decodes a page body.
func page(t *testing.T, rec *httptest.ResponseRecorder) (items []json.RawMessage, next *string) {
	t.Helper()
	var p struct {
		Items      []json.RawMessage `json:"items"`
		NextCursor *string           `json:"next_cursor"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatalf("page %q: %v", rec.Body, err)
	}
	return p.Items, p.NextCursor
}

func TestEvents(t *testing.T) {
	f := newFixture(t, 2)
	path := "/api/v1/sessions/" + f.sid + "/events"
	key := httpxtest.Auth("Bearer " + sessionToken)
	run(t, f, []httpxtest.Scenario{
		{Name: "no key", Method: "GET", Path: path, Status: 401, Problem: httpxtest.Problem(401, "unauthorized", "missing Authorization header")},
		{Name: "bad scheme", Method: "GET", Path: path, Headers: httpxtest.Auth("Token x"),
			Status: 401, Problem: httpxtest.Problem(401, "unauthorized", "Authorization header must be a Bearer token")},
		{Name: "unknown session is 401", Method: "GET", Path: "/api/v1/sessions/ses_nope/events", Headers: key,
			Status: 401, Problem: httpxtest.Problem(401, "unauthorized", "invalid session key")},
		{Name: "non-integer limit is a framework 400 before auth", Method: "GET", Path: path + "?limit=abc",
			Status: 400, Text: "Failed to deserialize query string: limit: invalid digit found in string"},
		{Name: "auth before limit validation", Method: "GET", Path: path + "?limit=0",
			Status: 401, Problem: httpxtest.Problem(401, "unauthorized", "missing Authorization header")},
		{Name: "zero limit", Method: "GET", Path: path + "?limit=0", Headers: key,
			Status: 400, Problem: httpxtest.Problem(400, "bad_request", "limit must be a positive integer")},
		{Name: "negative limit", Method: "GET", Path: path + "?limit=-5", Headers: key,
			Status: 400, Problem: httpxtest.Problem(400, "bad_request", "limit must be a positive integer")},
		{Name: "bad cursor", Method: "GET", Path: path + "?cursor=abc", Headers: key,
			Status: 400, Problem: httpxtest.Problem(400, "bad_request", `invalid cursor: "abc"`)},
		{Name: "page", Method: "GET", Path: path, Headers: key, Status: 200,
			Want: `{"items":[` + eventJSON(f.events[0], 0) + "," + eventJSON(f.events[1], 1) + `],"next_cursor":null}`},
		{Name: "authenticator failure", Method: "GET", Path: path, Headers: key, Status: 500, Check: httpxtest.Internal,
			Setup: func() { f.auth.err = fmt.Errorf("lookup: %w", errors.New("secret failure")) }},
	})
}

func TestEventsStoreFailure(t *testing.T) {
	f := newFixture(t, 1)
	f.db.Close()
	r := httptest.NewRequest("GET", "/api/v1/sessions/"+f.sid+"/events", nil)
	r.Header.Set("Authorization", "Bearer "+sessionToken)
	rec := httptest.NewRecorder()
	f.srv.Handler().ServeHTTP(rec, r)
	if rec.Code != 500 {
		t.Fatalf("status = %d %s", rec.Code, rec.Body)
	}
	httpxtest.Internal(t, rec)
}

func TestEventsPaging(t *testing.T) {
	f := newFixture(t, 205)
	path := "/api/v1/sessions/" + f.sid + "/events"
	get := func(query string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		r := httptest.NewRequest("GET", path+query, nil)
		r.Header.Set("Authorization", "Bearer "+sessionToken)
		f.srv.Handler().ServeHTTP(rec, r)
		if rec.Code != 200 {
			t.Fatalf("GET %s = %d %s", query, rec.Code, rec.Body)
		}
		return rec
	}
	items, next := page(t, get(""))
	if len(items) != 50 || next == nil {
		t.Fatalf("default page: %d items, next %v", len(items), next)
	}
	items, next = page(t, get("?limit=500"))
	if len(items) != 200 || next == nil {
		t.Fatalf("clamped page: %d items, next %v", len(items), next)
	}
	if !strings.Contains(string(items[199]), f.events[199].ID) {
		t.Errorf("item 199 = %s, want %s", items[199], f.events[199].ID)
	}
	items, next2 := page(t, get("?limit=200&cursor="+*next))
	if len(items) != 5 || next2 != nil {
		t.Fatalf("last page: %d items, next %v", len(items), next2)
	}
	if string(items[0]) != eventJSON(f.events[200], 200) {
		t.Errorf("first item of the last page = %s, want %s", items[0], eventJSON(f.events[200], 200))
	}
}

// TestEventsPageBytes: large events end a page early, under the store's
// byte budget, with a next_cursor that continues after the last event
// sent; following the cursors yields every event once.
func TestEventsPageBytes(t *testing.T) {
	db, err := store.Open(context.Background(), store.Options{URL: filepath.Join(t.TempDir(), "db"), EventPageBytes: 3000})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	sid, _ := seedSession(t, db, 0)
	big := json.RawMessage(`"` + strings.Repeat("x", 1000) + `"`)
	for range 10 {
		if err := db.Append(context.Background(), &baton.Event{SessionID: sid, Type: "provider.request", Payload: big}); err != nil {
			t.Fatal(err)
		}
	}
	key := &baton.Key{ID: "key_session", Role: baton.RoleSession, Name: sid, ClientID: "key_client"}
	srv := New(Options{Addr: "127.0.0.1:0", Auth: &fakeAuth{sessions: map[string]*baton.Key{sid + " " + sessionToken: key}}, Events: db})
	var got, pages int
	cursor := ""
	for {
		req := httptest.NewRequest("GET", "/api/v1/sessions/"+sid+"/events?limit=200&cursor="+cursor, nil)
		req.Header.Set("Authorization", "Bearer "+sessionToken)
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		if rec.Code != 200 {
			t.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
		items, next := page(t, rec)
		pages++
		if len(items) == 0 || len(items) > 2 {
			t.Fatalf("page %d holds %d events of 1002 payload bytes under a 3000-byte budget, want 1 or 2", pages, len(items))
		}
		got += len(items)
		if next == nil {
			break
		}
		cursor = *next
	}
	if got != 10 || pages != 5 {
		t.Errorf("%d events in %d pages, want 10 in 5", got, pages)
	}
}
