package httpapi

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/httpx"
	"github.com/baton-engine/baton/internal/httpx/httpxtest"
	"github.com/baton-engine/baton/store"
	"go.uber.org/goleak"
)

// Tokens the fixture's fake authenticator knows.
const (
	clientToken  = "bae_client_token"
	sessionToken = "bae_ses_token"
	maxBody      = 4096
)

type fixture struct {
	db       *store.DB
	auth     *fakeAuth
	sessions *fakeSessions
	srv      *Server
	sid      string         // a stored session the session token is bound to
	events   []*baton.Event // its events
	clientK  *baton.Key
	sessionK *baton.Key
}

func newFixture(t *testing.T, nEvents int) *fixture {
	t.Helper()
	f := &fixture{db: openStore(t), sessions: &fakeSessions{}}
	f.sid, f.events = seedSession(t, f.db, nEvents)
	f.clientK = &baton.Key{ID: "key_client", Role: baton.RoleClient, ProfileID: "pro_1"}
	f.sessionK = &baton.Key{ID: "key_session", Role: baton.RoleSession, Name: f.sid, ClientID: "key_client"}
	f.auth = &fakeAuth{
		clients:  map[string]*baton.Key{clientToken: f.clientK},
		sessions: map[string]*baton.Key{f.sid + " " + sessionToken: f.sessionK},
	}
	f.srv = New(Options{Addr: "127.0.0.1:0", MaxBodyBytes: maxBody, Auth: f.auth, Sessions: f.sessions, Events: f.db})
	return f
}

// run runs scenarios against f's handler, resetting the fakes' errors
// before each.
func run(t *testing.T, f *fixture, scenarios []httpxtest.Scenario) {
	t.Helper()
	httpxtest.Run(t, f.srv.Handler(), func() { f.sessions.err, f.auth.err = nil, nil }, scenarios)
}

func TestRoutes(t *testing.T) {
	f := newFixture(t, 0)
	run(t, f, []httpxtest.Scenario{
		{Name: "healthz", Method: "GET", Path: "/healthz", Status: 200, Empty: true},
		{Name: "healthz wrong method", Method: "POST", Path: "/healthz", Status: 405, Empty: true},
		{Name: "meta", Method: "GET", Path: "/api/v1/meta", Status: 200,
			Want: `{"version":"` + baton.Version + `","api_versions":` + mustJSON(t, baton.APIVersions) + `}`},
		{Name: "meta needs no key even with a bad one", Method: "GET", Path: "/api/v1/meta", Headers: httpxtest.Auth("Basic x"), Status: 200,
			Want: `{"version":"` + baton.Version + `","api_versions":["v1"]}`},
		{Name: "unknown route", Method: "GET", Path: "/nope", Status: 404, Empty: true},
		{Name: "unknown api route", Method: "GET", Path: "/api/v1/nope", Status: 404, Empty: true},
		{Name: "admin routes are not served", Method: "GET", Path: "/admin/v1/profiles", Status: 404, Empty: true},
		{Name: "list sessions is not a route", Method: "GET", Path: "/api/v1/sessions", Status: 405, Empty: true},
		{Name: "get session is not a route", Method: "GET", Path: "/api/v1/sessions/" + f.sid, Status: 405, Empty: true},
		{Name: "join wrong method", Method: "GET", Path: "/api/v1/sessions/x/join", Status: 405, Empty: true},
		{Name: "events wrong method", Method: "POST", Path: "/api/v1/sessions/x/events", Status: 405, Empty: true},
	})
}

func TestRequestID(t *testing.T) {
	f := newFixture(t, 0)
	rec := httptest.NewRecorder()
	f.srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/meta", nil))
	if id := rec.Header().Get(httpx.RequestIDHeader); !strings.HasPrefix(id, "req_") {
		t.Errorf("request id header = %q", id)
	}
}

// One test over a real listener: the server binds 127.0.0.1:0, answers over
// HTTP and stops without leaking goroutines.
func TestListener(t *testing.T) {
	f := newFixture(t, 0)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent()) // the store's goroutines end at cleanup
	ctx := context.Background()
	if err := f.srv.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer f.srv.Close()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()

	resp, err := client.Get(f.srv.URL() + "/api/v1/meta")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"api_versions":["v1"]`) {
		t.Errorf("meta = %d %s", resp.StatusCode, b)
	}

	req, _ := http.NewRequest("POST", f.srv.URL()+"/api/v1/sessions", strings.NewReader(`{"tools":[]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+clientToken)
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 || !strings.Contains(string(b), `"session_id":"ses_new"`) {
		t.Errorf("open = %d %s", resp.StatusCode, b)
	}
	if err := f.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}
