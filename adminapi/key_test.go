package adminapi

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/httpx/httpxtest"
	"github.com/google/go-cmp/cmp"
)

func TestCreateKey(t *testing.T) {
	f := newFixture(t)
	pid := f.createProfile(t, `{"name":"p","primary_provider":"claude"}`)
	gone := f.createProfile(t, `{"name":"gone","primary_provider":"claude"}`)
	f.do(t, "DELETE", "/admin/v1/profiles/"+gone, "", 204)
	const path = "/admin/v1/keys"
	const shape = "Failed to deserialize the JSON body into the target type: "
	bad := func(name, body, detail string) httpxtest.Scenario {
		return httpxtest.Scenario{Name: name, Method: "POST", Path: path, Headers: admin(), Body: body,
			Status: 400, Problem: httpxtest.Problem(400, "bad_request", detail)}
	}
	created := func(scopes []string) func(t *testing.T, rec *httptest.ResponseRecorder) {
		return func(t *testing.T, rec *httptest.ResponseRecorder) {
			var got map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			plain, _ := got["key"].(string)
			k, err := f.db.KeyByHash(context.Background(), baton.RoleClient, baton.Digest(plain))
			if err != nil {
				t.Fatalf("the returned key does not authenticate: %v", err)
			}
			want := map[string]any{"id": k.ID, "name": "ci bot", "key": plain, "prefix": plain[:8], "profile_id": pid,
				"scopes": toAny(scopes), "created_at": baton.FormatTime(k.CreatedAt)}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("KeyCreated (-want +got):\n%s", diff)
			}
			if !strings.HasPrefix(plain, "bae_") || len(plain) != 52 || strings.HasPrefix(plain, "bae_ses_") {
				t.Errorf("plaintext %q is not a client key", plain)
			}
			if !cmp.Equal(k.Scopes, scopes) || k.ProfileID != pid || k.Role != baton.RoleClient {
				t.Errorf("stored key %+v", k)
			}
		}
	}
	run(t, f, []httpxtest.Scenario{
		{Name: "no content type", Method: "POST", Path: path, Headers: httpxtest.Auth("Bearer " + adminToken), Body: `{}`,
			Status: 415, Text: "Expected request with `Content-Type: application/json`"},
		{Name: "syntax", Method: "POST", Path: path, Headers: admin(), Body: `{"name"}`, Status: 400, Text: "Failed to parse the request body as JSON: "},
		{Name: "missing name", Method: "POST", Path: path, Headers: admin(), Body: `{"profile_id":"` + pid + `"}`,
			Status: 422, Text: shape + "missing field `name`"},
		{Name: "name not a string", Method: "POST", Path: path, Headers: admin(), Body: `{"name":1,"profile_id":"` + pid + `"}`,
			Status: 422, Text: shape + "name: invalid type: integer `1`"},
		{Name: "missing profile_id", Method: "POST", Path: path, Headers: admin(), Body: `{"name":"k"}`,
			Status: 422, Text: shape + "missing field `profile_id`"},
		{Name: "profile_id null", Method: "POST", Path: path, Headers: admin(), Body: `{"name":"k","profile_id":null}`,
			Status: 422, Text: shape + "profile_id: invalid type: null"},
		bad("blank name", `{"name":" ","profile_id":"`+pid+`"}`, "name must not be empty"),
		bad("name before profile", `{"name":"","profile_id":"pro_nope"}`, "name must not be empty"),
		bad("scopes not an array", `{"name":"k","profile_id":"`+pid+`","scopes":"session.manage"}`, "scopes must be an array of strings"),
		bad("scope not a string", `{"name":"k","profile_id":"`+pid+`","scopes":[1]}`, "scopes must be an array of strings"),
		bad("empty scope", `{"name":"k","profile_id":"`+pid+`","scopes":["session.manage",""]}`, "scopes must be an array of strings"),
		bad("scopes before profile", `{"name":"k","profile_id":"pro_nope","scopes":{}}`, "scopes must be an array of strings"),
		{Name: "unknown profile", Method: "POST", Path: path, Headers: admin(), Body: `{"name":"k","profile_id":"pro_nope"}`,
			Status: 422, Problem: httpxtest.Problem(422, "profile_unavailable", "no active profile pro_nope")},
		{Name: "deleted profile", Method: "POST", Path: path, Headers: admin(), Body: `{"name":"k","profile_id":"` + gone + `"}`,
			Status: 422, Problem: httpxtest.Problem(422, "profile_unavailable", "no active profile "+gone)},
		{Name: "default scopes", Method: "POST", Path: path, Headers: admin(), Body: `{"name":"ci bot","profile_id":"` + pid + `"}`,
			Status: 201, Check: created([]string{"session.manage"})},
		{Name: "null scopes", Method: "POST", Path: path, Headers: admin(), Body: `{"name":"ci bot","profile_id":"` + pid + `","scopes":null}`,
			Status: 201, Check: created([]string{"session.manage"})},
		{Name: "explicit scopes", Method: "POST", Path: path, Headers: admin(), Body: `{"name":"ci bot","profile_id":"` + pid + `","scopes":["session.manage","x.read"]}`,
			Status: 201, Check: created([]string{"session.manage", "x.read"})},
		{Name: "no scopes", Method: "POST", Path: path, Headers: admin(), Body: `{"name":"ci bot","profile_id":"` + pid + `","scopes":[]}`,
			Status: 201, Check: created([]string{})},
	})
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// keyJSON is the exact KeyView of a stored client key.
func keyJSON(k *baton.Key) string {
	last := "null"
	if k.LastUsedAt != nil {
		last = `"` + baton.FormatTime(*k.LastUsedAt) + `"`
	}
	scopes, _ := json.Marshal(k.Scopes)
	return `{"id":"` + k.ID + `","name":"` + k.Name + `","prefix":"` + k.Prefix + `","profile_id":"` + k.ProfileID +
		`","scopes":` + string(scopes) + `,"created_at":"` + baton.FormatTime(k.CreatedAt) + `","last_used_at":` + last + `}`
}

func TestListAndRevokeKeys(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	pid := f.createProfile(t, `{"name":"p","primary_provider":"claude"}`)
	var keys []*baton.Key
	var plains []string
	for _, name := range []string{"a", "b"} {
		var out struct{ Key string }
		if err := json.Unmarshal([]byte(f.do(t, "POST", "/admin/v1/keys", `{"name":"`+name+`","profile_id":"`+pid+`"}`, 201)), &out); err != nil {
			t.Fatal(err)
		}
		k, err := f.db.KeyByHash(ctx, baton.RoleClient, baton.Digest(out.Key))
		if err != nil {
			t.Fatal(err)
		}
		keys, plains = append(keys, k), append(plains, out.Key)
	}
	// A session whose only participant is key a: revoking a closes it.
	sk, _ := baton.MintKey(baton.RoleSession, "", pid, keys[0].ID)
	ses := &baton.Session{ID: baton.NewID(baton.PrefixSession), ClientKeyID: keys[0].ID, ProfileID: pid}
	sk.Name = ses.ID
	if err := f.db.CreateSession(ctx, ses, sk); err != nil {
		t.Fatal(err)
	}

	run(t, f, []httpxtest.Scenario{
		{Name: "list", Method: "GET", Path: "/admin/v1/keys", Headers: admin(), Status: 200,
			Want: `{"items":[` + keyJSON(keys[0]) + `,` + keyJSON(keys[1]) + `],"next_cursor":null}`,
			Check: func(t *testing.T, rec *httptest.ResponseRecorder) {
				for _, p := range plains {
					if strings.Contains(rec.Body.String(), p) || strings.Contains(rec.Body.String(), "sha256:") {
						t.Errorf("list leaks a secret: %s", rec.Body)
					}
				}
			}},
		{Name: "page", Method: "GET", Path: "/admin/v1/keys?limit=1", Headers: admin(), Status: 200,
			Check: func(t *testing.T, rec *httptest.ResponseRecorder) {
				if !strings.HasPrefix(rec.Body.String(), `{"items":[`+keyJSON(keys[0])+`],"next_cursor":"`) {
					t.Errorf("page = %s", rec.Body)
				}
			}},
		{Name: "zero limit", Method: "GET", Path: "/admin/v1/keys?limit=0", Headers: admin(),
			Status: 400, Problem: httpxtest.Problem(400, "bad_request", "limit must be a positive integer")},
		{Name: "bad limit", Method: "GET", Path: "/admin/v1/keys?limit=1x", Headers: admin(),
			Status: 400, Text: "Failed to deserialize query string: limit: "},
		{Name: "revoke unknown", Method: "DELETE", Path: "/admin/v1/keys/key_nope", Headers: admin(),
			Status: 404, Problem: httpxtest.Problem(404, "not_found", "no active client key key_nope")},
		{Name: "revoke a session key id", Method: "DELETE", Path: "/admin/v1/keys/" + sk.ID, Headers: admin(),
			Status: 404, Problem: httpxtest.Problem(404, "not_found", "no active client key "+sk.ID)},
		{Name: "revoke", Method: "DELETE", Path: "/admin/v1/keys/" + keys[0].ID, Headers: admin(), Status: 204, Empty: true,
			Check: func(t *testing.T, _ *httptest.ResponseRecorder) {
				got, err := f.db.Session(ctx, ses.ID)
				if err != nil || got.State != baton.StateClosed {
					t.Errorf("session after revocation: %+v, %v", got, err)
				}
				if !cmp.Equal(f.sessions.revoked, []string{keys[0].ID}) {
					t.Errorf("revoked %v", f.sessions.revoked)
				}
			}},
		{Name: "revoke twice", Method: "DELETE", Path: "/admin/v1/keys/" + keys[0].ID, Headers: admin(),
			Status: 404, Problem: httpxtest.Problem(404, "not_found", "no active client key "+keys[0].ID)},
		{Name: "list after revoke", Method: "GET", Path: "/admin/v1/keys", Headers: admin(), Status: 200,
			Want: `{"items":[` + keyJSON(keys[1]) + `],"next_cursor":null}`},
	})
}

// TestListKeysMergesPendingUses: the list shows the later of the store's
// last_used_at and the use auth has not written yet.
func TestListKeysMergesPendingUses(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	pid := f.createProfile(t, `{"name":"p","primary_provider":"claude"}`)
	t1 := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	t2 := t1.Add(time.Minute)
	var keys []*baton.Key
	for _, name := range []string{"stored newer", "pending newer", "pending only", "never used"} {
		k, _ := baton.MintKey(baton.RoleClient, name, pid, "")
		if err := f.db.CreateKey(ctx, k); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	if err := f.db.TouchKeys(ctx, map[string]time.Time{keys[0].ID: t2, keys[1].ID: t1}); err != nil {
		t.Fatal(err)
	}
	f.pending = map[string]time.Time{keys[0].ID: t1, keys[1].ID: t2, keys[2].ID: t1, "key_gone": t2}
	for i, at := range []*time.Time{&t2, &t2, &t1, nil} {
		keys[i].LastUsedAt = at
	}
	run(t, f, []httpxtest.Scenario{
		{Name: "list", Method: "GET", Path: "/admin/v1/keys", Headers: admin(), Status: 200,
			Want: `{"items":[` + keyJSON(keys[0]) + `,` + keyJSON(keys[1]) + `,` + keyJSON(keys[2]) + `,` + keyJSON(keys[3]) + `],"next_cursor":null}`},
	})
}
