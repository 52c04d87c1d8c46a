package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/store"
)

// fakeAuth knows a fixed set of tokens. err, when set, is what every
// lookup returns (e.g. a database failure).
type fakeAuth struct {
	clients  map[string]*baton.Key // token → client key
	sessions map[string]*baton.Key // session id + " " + token → session key
	err      error
}

func (a *fakeAuth) ClientKey(_ context.Context, token string) (*baton.Key, error) {
	if a.err != nil {
		return nil, a.err
	}
	if k, ok := a.clients[token]; ok {
		return k, nil
	}
	return nil, baton.Errorf(baton.ECodeUnauthorized, "no such key")
}

func (a *fakeAuth) SessionKey(_ context.Context, sessionID, token string) (*baton.Key, error) {
	if a.err != nil {
		return nil, a.err
	}
	if k, ok := a.sessions[sessionID+" "+token]; ok {
		return k, nil
	}
	return nil, baton.Errorf(baton.ECodeUnauthorized, "no such key")
}

func (a *fakeAuth) AdminKey(context.Context, string) error {
	return baton.Errorf(baton.ECodeUnauthorized, "no admin keys here")
}

func (a *fakeAuth) Forget(...string) {}

// fakeSessions records what the handlers pass it. err, when set, is what
// every method returns (the domain checks live in the real service).
type fakeSessions struct {
	mu      sync.Mutex
	err     error
	key     *baton.Key // last caller
	id      string     // last session id
	req     *baton.OpenRequest
	closed  map[string]bool
	drivers []string
}

func (s *fakeSessions) result(id string) *baton.OpenResult {
	return &baton.OpenResult{
		SessionID:  id,
		SessionKey: "bae_ses_new",
		Profile: baton.ProfileSummary{ID: "pro_1", Name: "main",
			Provider: baton.ProviderSummary{Provider: "anthropic", Model: "claude"}},
	}
}

func (s *fakeSessions) Open(_ context.Context, key *baton.Key, req *baton.OpenRequest) (*baton.OpenResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	s.key, s.req, s.id = key, req, ""
	return s.result("ses_new"), nil
}

func (s *fakeSessions) Join(_ context.Context, key *baton.Key, id string, req *baton.OpenRequest) (*baton.OpenResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	s.key, s.req, s.id = key, req, id
	return s.result(id), nil
}

func (s *fakeSessions) CloseSession(_ context.Context, key *baton.Key) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	if s.closed[key.Name] {
		return baton.Errorf(baton.ECodeSessionClosed, "session is already closed")
	}
	if s.closed == nil {
		s.closed = map[string]bool{}
	}
	s.closed[key.Name] = true
	s.key = key
	return nil
}

func (s *fakeSessions) Participants(_ context.Context, id string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return nil, s.err
	}
	s.id = id
	return s.drivers, nil
}

func (s *fakeSessions) RevokeClientKey(context.Context, string) error { return nil }

// openStore opens a real SQLite store in a temp directory.
func openStore(t testing.TB) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), store.Options{URL: filepath.Join(t.TempDir(), "db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// seedSession creates a profile, a client key and an open session with n
// events; it returns the session id and the events as stored.
func seedSession(t testing.TB, db *store.DB, n int) (string, []*baton.Event) {
	t.Helper()
	ctx := context.Background()
	p := &baton.Profile{ID: baton.NewID(baton.PrefixProfile), Name: baton.NewID("p"), PrimaryProvider: "main",
		CreatedAt: baton.Now(), UpdatedAt: baton.Now()}
	if err := db.CreateProfile(ctx, p); err != nil {
		t.Fatal(err)
	}
	ck, _ := baton.MintKey(baton.RoleClient, "c", p.ID, "")
	if err := db.CreateKey(ctx, ck); err != nil {
		t.Fatal(err)
	}
	s := &baton.Session{ClientKeyID: ck.ID, ProfileID: p.ID}
	if err := db.CreateSession(ctx, s, nil); err != nil {
		t.Fatal(err)
	}
	events := make([]*baton.Event, n)
	for i := range events {
		// A raw payload: the wire must not HTML-escape what the store holds.
		events[i] = &baton.Event{SessionID: s.ID, ClientKeyID: ck.ID, Type: "test.event",
			Payload: json.RawMessage(fmt.Sprintf(`{"html":"<b>&","n":%d}`, i))}
	}
	if i := n - 1; i >= 0 {
		events[i].ClientKeyID = "" // one unattributed event
	}
	if n > 0 {
		if err := db.Append(ctx, events...); err != nil {
			t.Fatal(err)
		}
	}
	return s.ID, events
}

// mustJSON marshals v for expected bodies.
func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
