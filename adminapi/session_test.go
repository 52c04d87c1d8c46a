package adminapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/httpx"
	"github.com/baton-engine/baton/internal/httpx/httpxtest"
)

// seedSessions stores an open session with two events, a closed one and an
// error-state audit row.
func seedSessions(t *testing.T, f *fixture) (open, closed, failed *baton.Session, events []*baton.Event) {
	t.Helper()
	ctx := context.Background()
	pid := f.createProfile(t, `{"name":"p","primary_provider":"claude"}`)
	var out struct{ ID string }
	if err := json.Unmarshal([]byte(f.do(t, "POST", "/admin/v1/keys", `{"name":"k","profile_id":"`+pid+`"}`, 201)), &out); err != nil {
		t.Fatal(err)
	}
	v := "sdk/1"
	open = &baton.Session{ClientKeyID: out.ID, ProfileID: pid, ClientVersion: &v}
	closed = &baton.Session{ClientKeyID: out.ID, ProfileID: pid}
	failed = &baton.Session{ClientKeyID: out.ID, ProfileID: pid, State: baton.StateError}
	for _, s := range []*baton.Session{open, closed, failed} {
		if err := f.db.CreateSession(ctx, s, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.db.EndSession(ctx, closed.ID, baton.StateClosed, baton.NewEvent(closed.ID, out.ID, baton.EventSessionClose, map[string]string{"reason": "client_close"})); err != nil {
		t.Fatal(err)
	}
	events = []*baton.Event{
		{SessionID: open.ID, ClientKeyID: out.ID, Type: "test.event", Payload: json.RawMessage(`{"html":"<b>&","n":0}`)},
		{SessionID: open.ID, Type: "test.event", Payload: json.RawMessage(`{"html":"<b>&","n":1}`)},
	}
	if err := f.db.Append(ctx, events...); err != nil {
		t.Fatal(err)
	}
	for _, s := range []**baton.Session{&open, &closed, &failed} {
		got, err := f.db.Session(ctx, (*s).ID)
		if err != nil {
			t.Fatal(err)
		}
		*s = got
	}
	return open, closed, failed, events
}

func sessionJSON(s *baton.Session) string {
	cv, closedAt := "null", "null"
	if s.ClientVersion != nil {
		cv = `"` + *s.ClientVersion + `"`
	}
	if s.ClosedAt != nil {
		closedAt = `"` + baton.FormatTime(*s.ClosedAt) + `"`
	}
	return fmt.Sprintf(`{"id":"%s","profile_id":"%s","state":"%s","client_version":%s,"created_at":"%s","closed_at":%s}`,
		s.ID, s.ProfileID, s.State, cv, baton.FormatTime(s.CreatedAt), closedAt)
}

// eventJSON is the exact EventView of a seeded event — the same bytes the
// client port's test expects.
func eventJSON(e *baton.Event, n int) string {
	key := "null"
	if e.ClientKeyID != "" {
		key = `"` + e.ClientKeyID + `"`
	}
	return fmt.Sprintf(`{"id":"%s","session_id":"%s","client_key_id":%s,"event_type":"test.event","payload":{"html":"<b>&","n":%d},"created_at":"%s"}`,
		e.ID, e.SessionID, key, n, baton.FormatTime(e.CreatedAt))
}

func TestListSessions(t *testing.T) {
	f := newFixture(t)
	open, closed, failed, _ := seedSessions(t, f)
	all := `{"items":[` + sessionJSON(open) + `,` + sessionJSON(closed) + `,` + sessionJSON(failed) + `],"next_cursor":null}`
	badState := func(x string) *httpx.Problem {
		return httpxtest.Problem(400, "bad_request", `invalid state filter "`+x+`"; expected one of open, closed, error`)
	}
	run(t, f, []httpxtest.Scenario{
		{Name: "all", Method: "GET", Path: "/admin/v1/sessions", Headers: admin(), Status: 200, Want: all},
		{Name: "empty state", Method: "GET", Path: "/admin/v1/sessions?state=", Headers: admin(), Status: 200, Want: all},
		{Name: "open", Method: "GET", Path: "/admin/v1/sessions?state=open", Headers: admin(), Status: 200,
			Want: `{"items":[` + sessionJSON(open) + `],"next_cursor":null}`},
		{Name: "closed", Method: "GET", Path: "/admin/v1/sessions?state=closed", Headers: admin(), Status: 200,
			Want: `{"items":[` + sessionJSON(closed) + `],"next_cursor":null}`},
		{Name: "error audit rows", Method: "GET", Path: "/admin/v1/sessions?state=error", Headers: admin(), Status: 200,
			Want: `{"items":[` + sessionJSON(failed) + `],"next_cursor":null}`},
		{Name: "bad state", Method: "GET", Path: "/admin/v1/sessions?state=running", Headers: admin(), Status: 400, Problem: badState("running")},
		{Name: "state is case-sensitive", Method: "GET", Path: "/admin/v1/sessions?state=OPEN", Headers: admin(), Status: 400, Problem: badState("OPEN")},
		// As BAE: the page is resolved before the state is checked.
		{Name: "limit before state", Method: "GET", Path: "/admin/v1/sessions?state=x&limit=0", Headers: admin(),
			Status: 400, Problem: httpxtest.Problem(400, "bad_request", "limit must be a positive integer")},
		{Name: "zero limit", Method: "GET", Path: "/admin/v1/sessions?state=open&limit=0", Headers: admin(),
			Status: 400, Problem: httpxtest.Problem(400, "bad_request", "limit must be a positive integer")},
		{Name: "repeated limit", Method: "GET", Path: "/admin/v1/sessions?limit=1&limit=2", Headers: admin(),
			Status: 400, Text: "Failed to deserialize query string: duplicate field `limit`"},
		{Name: "repeated state", Method: "GET", Path: "/admin/v1/sessions?state=open&state=open", Headers: admin(),
			Status: 400, Text: "Failed to deserialize query string: duplicate field `state`"},
		{Name: "repeated unknown parameter", Method: "GET", Path: "/admin/v1/sessions?x=1&x=2&state=open", Headers: admin(), Status: 200,
			Want: `{"items":[` + sessionJSON(open) + `],"next_cursor":null}`},
		{Name: "non-integer limit", Method: "GET", Path: "/admin/v1/sessions?state=x&limit=x", Headers: admin(),
			Status: 400, Text: "Failed to deserialize query string: limit: invalid digit found in string"},
		{Name: "page", Method: "GET", Path: "/admin/v1/sessions?limit=2", Headers: admin(), Status: 200,
			Check: func(t *testing.T, rec *httptest.ResponseRecorder) {
				if want := `{"items":[` + sessionJSON(open) + `,` + sessionJSON(closed) + `],"next_cursor":"`; !strings.HasPrefix(rec.Body.String(), want) {
					t.Errorf("page = %s", rec.Body)
				}
			}},
	})
}

func TestSessionEvents(t *testing.T) {
	f := newFixture(t)
	open, closed, _, events := seedSessions(t, f)
	path := "/admin/v1/sessions/" + open.ID + "/events"
	run(t, f, []httpxtest.Scenario{
		{Name: "unknown session before pagination", Method: "GET", Path: "/admin/v1/sessions/ses_nope/events?limit=0&cursor=x", Headers: admin(),
			Status: 404, Problem: httpxtest.Problem(404, "not_found", "no session ses_nope")},
		{Name: "non-integer limit", Method: "GET", Path: path + "?limit=many", Headers: admin(),
			Status: 400, Text: "Failed to deserialize query string: limit: invalid digit found in string"},
		{Name: "zero limit", Method: "GET", Path: path + "?limit=0", Headers: admin(),
			Status: 400, Problem: httpxtest.Problem(400, "bad_request", "limit must be a positive integer")},
		{Name: "bad cursor", Method: "GET", Path: path + "?cursor=zz", Headers: admin(),
			Status: 400, Problem: httpxtest.Problem(400, "bad_request", `invalid cursor: "zz"`)},
		{Name: "page", Method: "GET", Path: path, Headers: admin(), Status: 200,
			Want: `{"items":[` + eventJSON(events[0], 0) + `,` + eventJSON(events[1], 1) + `],"next_cursor":null}`},
		{Name: "first of two pages", Method: "GET", Path: path + "?limit=1", Headers: admin(), Status: 200,
			Check: func(t *testing.T, rec *httptest.ResponseRecorder) {
				var p struct {
					Items      []json.RawMessage
					NextCursor *string `json:"next_cursor"`
				}
				if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || len(p.Items) != 1 || p.NextCursor == nil {
					t.Fatalf("page = %s", rec.Body)
				}
				rest := f.do(t, "GET", path+"?cursor="+*p.NextCursor, "", 200)
				if want := `{"items":[` + eventJSON(events[1], 1) + `],"next_cursor":null}`; rest != want {
					t.Errorf("second page = %s, want %s", rest, want)
				}
			}},
		{Name: "closed sessions too", Method: "GET", Path: "/admin/v1/sessions/" + closed.ID + "/events", Headers: admin(), Status: 200,
			Check: func(t *testing.T, rec *httptest.ResponseRecorder) {
				if !json.Valid(rec.Body.Bytes()) || !strings.Contains(rec.Body.String(), `"event_type":"session.close"`) {
					t.Errorf("closed session events = %s", rec.Body)
				}
			}},
	})
}

// fakeLeases answers SessionOwners; the other lease calls are not used
// by the admin API.
type fakeLeases struct {
	baton.LeaseStore
	owners map[string]string
	asked  *[]string
}

func (l fakeLeases) SessionOwners(_ context.Context, ids []string) (map[string]string, error) {
	*l.asked = append(*l.asked, ids...)
	return l.owners, nil
}

// TestListSessionsOwners: in a cluster each session that has a live
// lease names its owner node; the others have no owner_node_id, and one
// lookup serves the whole page.
func TestListSessionsOwners(t *testing.T) {
	f := newFixture(t)
	open, closed, failed, _ := seedSessions(t, f)
	var asked []string
	srv := New(Options{Addr: "127.0.0.1:0", MaxBodyBytes: maxBody, Auth: f.auth, Store: f.db, Sessions: f.sessions,
		Leases: fakeLeases{owners: map[string]string{open.ID: "node-a"}, asked: &asked}})
	withOwner := strings.TrimSuffix(sessionJSON(open), "}") + `,"owner_node_id":"node-a"}`
	httpxtest.Run(t, srv.Handler(), nil, []httpxtest.Scenario{
		{Name: "owners", Method: "GET", Path: "/admin/v1/sessions", Headers: admin(), Status: 200,
			Want: `{"items":[` + withOwner + `,` + sessionJSON(closed) + `,` + sessionJSON(failed) + `],"next_cursor":null}`},
	})
	if len(asked) != 3 {
		t.Errorf("owners asked for %v, want the page's three sessions in one call", asked)
	}
}
