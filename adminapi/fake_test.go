package adminapi

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/store"
)

const adminToken = "bae_admin_token"

// fakeAuth accepts one admin token; err, when set, is what AdminKey
// returns for every token (a lookup failure).
type fakeAuth struct{ err error }

func (a *fakeAuth) ClientKey(context.Context, string) (*baton.Key, error) {
	return nil, baton.Errorf(baton.ECodeUnauthorized, "no")
}

func (a *fakeAuth) SessionKey(context.Context, string, string) (*baton.Key, error) {
	return nil, baton.Errorf(baton.ECodeUnauthorized, "no")
}

func (a *fakeAuth) AdminKey(_ context.Context, token string) error {
	if a.err != nil {
		return a.err
	}
	if token != adminToken {
		return baton.Errorf(baton.ECodeUnauthorized, "unknown admin token")
	}
	return nil
}

func (a *fakeAuth) Forget(...string) {}

// fakeSessions revokes through the real store, as the session service
// does, and records what it revoked.
type fakeSessions struct {
	db      *store.DB
	mu      sync.Mutex
	revoked []string
}

func (s *fakeSessions) Open(context.Context, *baton.Key, *baton.OpenRequest) (*baton.OpenResult, error) {
	panic("not used by the admin port")
}

func (s *fakeSessions) Join(context.Context, *baton.Key, string, *baton.OpenRequest) (*baton.OpenResult, error) {
	panic("not used by the admin port")
}

func (s *fakeSessions) CloseSession(context.Context, *baton.Key) error {
	panic("not used by the admin port")
}

func (s *fakeSessions) Participants(context.Context, string) ([]string, error) {
	panic("not used by the admin port")
}

func (s *fakeSessions) RevokeClientKey(ctx context.Context, id string) error {
	_, err := s.db.RevokeClientKey(ctx, id, func(sessionID string) *baton.Event {
		return baton.NewEvent(sessionID, id, baton.EventSessionClose, map[string]string{"reason": "client_key_revoked"})
	})
	if err == nil {
		s.mu.Lock()
		s.revoked = append(s.revoked, id)
		s.mu.Unlock()
	}
	return err
}

// provisioned is one recorded Provision call.
type provisioned struct {
	ctx     context.Context
	profile baton.Profile
}

// fakeImages records Provision calls and reports a fixed status.
type fakeImages struct {
	mu     sync.Mutex
	calls  []provisioned
	status []baton.ProfileImages
}

func (f *fakeImages) Provision(ctx context.Context, p *baton.Profile) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, provisioned{ctx: ctx, profile: *p})
}

func (f *fakeImages) Status() []baton.ProfileImages { return f.status }

func (f *fakeImages) Images(string) []baton.ImageStatus { return nil }

func (f *fakeImages) last() (provisioned, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) == 0 {
		return provisioned{}, 0
	}
	return f.calls[len(f.calls)-1], len(f.calls)
}

// fakeRevoker records the credentials it is told were revoked.
type fakeRevoker struct {
	mu  sync.Mutex
	ids []string
}

func (r *fakeRevoker) RevokeCredential(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids = append(r.ids, id)
}

// take returns the recorded ids and forgets them.
func (r *fakeRevoker) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := r.ids
	r.ids = nil
	return ids
}

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
