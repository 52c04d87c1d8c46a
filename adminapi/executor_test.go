package adminapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/httpx/httpxtest"
	"github.com/google/go-cmp/cmp"
)

// ownerCase names one kind of credential owner for the shared tests.
type ownerCase struct {
	path, noun, article, prefix, scope string
}

var ownerCases = []ownerCase{
	{"environments", "environment", "an", baton.PrefixEnvironment, baton.ExecutorScopeEnvironment},
	{"machines", "machine", "a", baton.PrefixMachine, baton.ExecutorScopeMachine},
}

// createOwner creates an environment or machine through the API and
// returns its id.
func (f *fixture) createOwner(t *testing.T, path, name string) string {
	t.Helper()
	var out struct{ ID string }
	if err := json.Unmarshal([]byte(f.do(t, "POST", "/admin/v1/"+path, `{"name":"`+name+`"}`, 201)), &out); err != nil {
		t.Fatal(err)
	}
	return out.ID
}

// ownerJSON is the exact view of a stored environment or machine.
func (f *fixture) ownerJSON(t *testing.T, scope, id string) string {
	t.Helper()
	ctx := context.Background()
	var name string
	var created string
	if scope == baton.ExecutorScopeMachine {
		m, err := f.db.Machine(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		name, created = m.Name, baton.FormatTime(m.CreatedAt)
	} else {
		e, err := f.db.Environment(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		name, created = e.Name, baton.FormatTime(e.CreatedAt)
	}
	return fmt.Sprintf(`{"id":"%s","name":"%s","created_at":"%s"}`, id, name, created)
}

// credentialJSON is the exact list view of a stored credential.
func (f *fixture) credentialJSON(t *testing.T, id string) string {
	t.Helper()
	c, err := f.db.ExecutorCredential(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	revoked := "null"
	if c.RevokedAt != nil {
		revoked = `"` + baton.FormatTime(*c.RevokedAt) + `"`
	}
	return fmt.Sprintf(`{"id":"%s","prefix":"%s","scope":"%s","owner_id":"%s","created_at":"%s","revoked_at":%s}`,
		c.ID, c.Prefix, c.Scope, c.OwnerID, baton.FormatTime(c.CreatedAt), revoked)
}

// createCredential creates a credential through the API and returns its
// id and secret.
func (f *fixture) createCredential(t *testing.T, path, owner string) (string, string) {
	t.Helper()
	var out struct{ ID, Secret string }
	if err := json.Unmarshal([]byte(f.do(t, "POST", "/admin/v1/"+path+"/"+owner+"/credentials", "", 201)), &out); err != nil {
		t.Fatal(err)
	}
	return out.ID, out.Secret
}

func TestExecutorOwners(t *testing.T) {
	for _, oc := range ownerCases {
		t.Run(oc.noun, func(t *testing.T) {
			f := newFixture(t)
			base := "/admin/v1/" + oc.path
			const shape = "Failed to deserialize the JSON body into the target type: "
			run(t, f, []httpxtest.Scenario{
				{Name: "no content type", Method: "POST", Path: base, Headers: httpxtest.Auth("Bearer " + adminToken), Body: `{}`,
					Status: 415, Text: "Expected request with `Content-Type: application/json`"},
				{Name: "syntax", Method: "POST", Path: base, Headers: admin(), Body: `{"name":`,
					Status: 400, Text: "Failed to parse the request body as JSON: "},
				{Name: "not an object", Method: "POST", Path: base, Headers: admin(), Body: `"ci"`,
					Status: 422, Text: shape + "invalid type: string"},
				{Name: "missing name", Method: "POST", Path: base, Headers: admin(), Body: `{}`,
					Status: 422, Text: shape + "missing field `name`"},
				{Name: "name not a string", Method: "POST", Path: base, Headers: admin(), Body: `{"name":7}`,
					Status: 422, Text: shape + "name: invalid type: integer `7`, expected a string"},
				{Name: "blank name", Method: "POST", Path: base, Headers: admin(), Body: `{"name":" "}`,
					Status: 400, Problem: httpxtest.Problem(400, "bad_request", "name must not be empty")},
				{Name: "too large", Method: "POST", Path: base, Headers: admin(), Body: `{"name":"` + strings.Repeat("n", maxBody) + `"}`,
					Status: 413, Problem: httpxtest.Problem(413, "payload_too_large", "request body is larger than 4096 bytes")},
				{Name: "unauthenticated", Method: "POST", Path: base, Headers: httpxtest.JSONHeaders(""), Body: `{"name":"x"}`,
					Status: 401, Problem: httpxtest.Problem(401, "unauthorized", "missing Authorization header")},
			})
			envs, _, _ := f.db.ListEnvironments(context.Background(), baton.Page{})
			machines, _, _ := f.db.ListMachines(context.Background(), baton.Page{})
			if len(envs)+len(machines) != 0 {
				t.Fatalf("rejected bodies created %d environments and %d machines", len(envs), len(machines))
			}

			body := f.do(t, "POST", base, `{"name":"ci","extra":1}`, 201)
			var created struct{ ID string }
			if err := json.Unmarshal([]byte(body), &created); err != nil {
				t.Fatal(err)
			}
			if !regexp.MustCompile(`^` + oc.prefix + `[0-9a-f]{32}$`).MatchString(created.ID) {
				t.Errorf("id %q", created.ID)
			}
			view := f.ownerJSON(t, oc.scope, created.ID)
			if body != view {
				t.Errorf("create body %s, want %s", body, view)
			}
			second := f.createOwner(t, oc.path, "gpu")
			secondView := f.ownerJSON(t, oc.scope, second)
			missing := oc.prefix + "nope"
			run(t, f, []httpxtest.Scenario{
				{Name: "duplicate name", Method: "POST", Path: base, Headers: admin(), Body: `{"name":"ci"}`,
					Status: 409, Problem: httpxtest.Problem(409, "duplicate_name", oc.article+" "+oc.noun+" with that name already exists")},
				{Name: "get", Method: "GET", Path: base + "/" + created.ID, Headers: admin(), Status: 200, Want: view},
				{Name: "get unknown", Method: "GET", Path: base + "/" + missing, Headers: admin(),
					Status: 404, Problem: httpxtest.Problem(404, "not_found", "no "+oc.noun+" "+missing)},
				{Name: "list", Method: "GET", Path: base, Headers: admin(), Status: 200,
					Want: `{"items":[` + view + `,` + secondView + `],"next_cursor":null}`},
				{Name: "list page", Method: "GET", Path: base + "?limit=1", Headers: admin(), Status: 200,
					Check: func(t *testing.T, rec *httptest.ResponseRecorder) {
						if !strings.HasPrefix(rec.Body.String(), `{"items":[`+view+`],"next_cursor":"`) {
							t.Errorf("first page = %s", rec.Body)
						}
					}},
				{Name: "list zero limit", Method: "GET", Path: base + "?limit=0", Headers: admin(),
					Status: 400, Problem: httpxtest.Problem(400, "bad_request", "limit must be a positive integer")},
				{Name: "list bad cursor", Method: "GET", Path: base + "?cursor=x", Headers: admin(),
					Status: 400, Problem: httpxtest.Problem(400, "bad_request", `invalid cursor: "x"`)},
				{Name: "list unauthenticated", Method: "GET", Path: base,
					Status: 401, Problem: httpxtest.Problem(401, "unauthorized", "missing Authorization header")},
				{Name: "get unauthenticated", Method: "GET", Path: base + "/" + created.ID, Headers: httpxtest.Auth("Bearer bae_admin_nope"),
					Status: 401, Problem: httpxtest.Problem(401, "unauthorized", "invalid admin key")},
				{Name: "delete unauthenticated", Method: "DELETE", Path: base + "/" + created.ID,
					Status: 401, Problem: httpxtest.Problem(401, "unauthorized", "missing Authorization header")},
				{Name: "delete unknown", Method: "DELETE", Path: base + "/" + missing, Headers: admin(),
					Status: 404, Problem: httpxtest.Problem(404, "not_found", "no "+oc.noun+" "+missing)},
				{Name: "delete", Method: "DELETE", Path: base + "/" + created.ID, Headers: admin(), Status: 204, Empty: true},
				{Name: "get deleted", Method: "GET", Path: base + "/" + created.ID, Headers: admin(),
					Status: 404, Problem: httpxtest.Problem(404, "not_found", "no "+oc.noun+" "+created.ID)},
				{Name: "delete again", Method: "DELETE", Path: base + "/" + created.ID, Headers: admin(),
					Status: 404, Problem: httpxtest.Problem(404, "not_found", "no "+oc.noun+" "+created.ID)},
				{Name: "list after delete", Method: "GET", Path: base, Headers: admin(), Status: 200,
					Want: `{"items":[` + secondView + `],"next_cursor":null}`},
				{Name: "name freed", Method: "POST", Path: base, Headers: admin(), Body: `{"name":"ci"}`, Status: 201},
				{Name: "wrong method", Method: "PUT", Path: base + "/" + second, Headers: admin(), Status: 405, Empty: true},
			})
		})
	}
}

var secretRE = regexp.MustCompile(`^bae_exc_[0-9a-f]{48}$`)

func TestExecutorCredentials(t *testing.T) {
	for _, oc := range ownerCases {
		t.Run(oc.noun, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			owner := f.createOwner(t, oc.path, "o")
			other := f.createOwner(t, oc.path, "other")
			base := "/admin/v1/" + oc.path + "/" + owner + "/credentials"
			missing := oc.prefix + "nope"

			// Create: the secret is shown once; only its digest is stored.
			body := f.do(t, "POST", base, "", 201)
			var got credentialCreated
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatal(err)
			}
			c, err := f.db.ExecutorCredential(ctx, got.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := credentialCreated{ID: c.ID, Secret: got.Secret, Prefix: got.Secret[:12], Scope: oc.scope, OwnerID: owner,
				CreatedAt: baton.FormatTime(c.CreatedAt)}
			if diff := cmp.Diff(want, got); diff != "" || !secretRE.MatchString(got.Secret) || c.Hash != baton.Digest(got.Secret) {
				t.Errorf("created credential (-want +got):\n%s\nstored %+v", diff, c)
			}
			if strings.Contains(f.credentialJSON(t, c.ID), got.Secret) {
				t.Error("the list view shows the secret")
			}
			// A body is not needed, and one sent is not read.
			second, _ := f.createCredential(t, oc.path, owner)
			third := f.do(t, "POST", base, `{"ignored":true}`, 201)
			var thirdID struct{ ID string }
			_ = json.Unmarshal([]byte(third), &thirdID)

			run(t, f, []httpxtest.Scenario{
				{Name: "create for unknown owner", Method: "POST", Path: "/admin/v1/" + oc.path + "/" + missing + "/credentials", Headers: admin(),
					Status: 404, Problem: httpxtest.Problem(404, "not_found", "no "+oc.noun+" "+missing)},
				{Name: "create unauthenticated", Method: "POST", Path: base,
					Status: 401, Problem: httpxtest.Problem(401, "unauthorized", "missing Authorization header")},
				{Name: "list", Method: "GET", Path: base, Headers: admin(), Status: 200,
					Want: `{"items":[` + f.credentialJSON(t, c.ID) + `,` + f.credentialJSON(t, second) + `,` + f.credentialJSON(t, thirdID.ID) + `],"next_cursor":null}`},
				{Name: "list page", Method: "GET", Path: base + "?limit=2", Headers: admin(), Status: 200,
					Check: func(t *testing.T, rec *httptest.ResponseRecorder) {
						if !strings.HasPrefix(rec.Body.String(), `{"items":[`+f.credentialJSON(t, c.ID)+`,`+f.credentialJSON(t, second)+`],"next_cursor":"`) {
							t.Errorf("first page = %s", rec.Body)
						}
					}},
				{Name: "list of another owner", Method: "GET", Path: "/admin/v1/" + oc.path + "/" + other + "/credentials", Headers: admin(),
					Status: 200, Want: `{"items":[],"next_cursor":null}`},
				{Name: "list unknown owner before the limit", Method: "GET", Path: "/admin/v1/" + oc.path + "/" + missing + "/credentials?limit=0", Headers: admin(),
					Status: 404, Problem: httpxtest.Problem(404, "not_found", "no "+oc.noun+" "+missing)},
				{Name: "list zero limit", Method: "GET", Path: base + "?limit=0", Headers: admin(),
					Status: 400, Problem: httpxtest.Problem(400, "bad_request", "limit must be a positive integer")},
				{Name: "list non-integer limit", Method: "GET", Path: base + "?limit=x", Headers: admin(),
					Status: 400, Text: "Failed to deserialize query string: limit: invalid digit found in string"},
				{Name: "list unauthenticated", Method: "GET", Path: base,
					Status: 401, Problem: httpxtest.Problem(401, "unauthorized", "missing Authorization header")},
				{Name: "revoke under another owner", Method: "DELETE", Path: "/admin/v1/" + oc.path + "/" + other + "/credentials/" + c.ID, Headers: admin(),
					Status: 404, Problem: httpxtest.Problem(404, "not_found", "no active credential "+c.ID)},
				{Name: "revoke under an unknown owner", Method: "DELETE", Path: "/admin/v1/" + oc.path + "/" + missing + "/credentials/" + c.ID, Headers: admin(),
					Status: 404, Problem: httpxtest.Problem(404, "not_found", "no "+oc.noun+" "+missing)},
				{Name: "revoke unknown", Method: "DELETE", Path: base + "/ecr_nope", Headers: admin(),
					Status: 404, Problem: httpxtest.Problem(404, "not_found", "no active credential ecr_nope")},
				{Name: "revoke unauthenticated", Method: "DELETE", Path: base + "/" + c.ID,
					Status: 401, Problem: httpxtest.Problem(401, "unauthorized", "missing Authorization header")},
			})
			if ids := f.revoker.take(); len(ids) != 0 {
				t.Fatalf("failed requests told the revoker %v", ids)
			}

			// Revoke: 204, the revoker hears of it, the list shows revoked_at.
			f.do(t, "DELETE", base+"/"+c.ID, "", 204)
			if diff := cmp.Diff([]string{c.ID}, f.revoker.take()); diff != "" {
				t.Errorf("revoker (-want +got):\n%s", diff)
			}
			if after, _ := f.db.ExecutorCredential(ctx, c.ID); after.RevokedAt == nil {
				t.Fatal("not revoked in the store")
			}
			run(t, f, []httpxtest.Scenario{
				{Name: "revoke again", Method: "DELETE", Path: base + "/" + c.ID, Headers: admin(),
					Status: 404, Problem: httpxtest.Problem(404, "not_found", "no active credential "+c.ID)},
				{Name: "listed as revoked", Method: "GET", Path: base + "?limit=1", Headers: admin(), Status: 200,
					Check: func(t *testing.T, rec *httptest.ResponseRecorder) {
						if v := f.credentialJSON(t, c.ID); !strings.Contains(v, `"revoked_at":"`) || !strings.HasPrefix(rec.Body.String(), `{"items":[`+v+`]`) {
							t.Errorf("list after revoke = %s", rec.Body)
						}
					}},
			})

			// Deleting the owner revokes the rest and tells the revoker.
			f.do(t, "DELETE", "/admin/v1/"+oc.path+"/"+owner, "", 204)
			if diff := cmp.Diff([]string{second, thirdID.ID}, f.revoker.take()); diff != "" {
				t.Errorf("revoked by deleting the owner (-want +got):\n%s", diff)
			}
			run(t, f, []httpxtest.Scenario{
				{Name: "credentials of a deleted owner", Method: "GET", Path: base, Headers: admin(),
					Status: 404, Problem: httpxtest.Problem(404, "not_found", "no "+oc.noun+" "+owner)},
				{Name: "create for a deleted owner", Method: "POST", Path: base, Headers: admin(),
					Status: 404, Problem: httpxtest.Problem(404, "not_found", "no "+oc.noun+" "+owner)},
			})
		})
	}
}

func TestProfileExecutorFields(t *testing.T) {
	f := newFixture(t)
	env := f.createOwner(t, "environments", "ci")
	env2 := f.createOwner(t, "environments", "gpu")
	mch := f.createOwner(t, "machines", "laptop")
	const ok = `"name":"n","primary_provider":"claude"`
	bad := func(name, body, detail string) httpxtest.Scenario {
		return httpxtest.Scenario{Name: name, Method: "POST", Path: "/admin/v1/profiles", Headers: admin(), Body: body,
			Status: 400, Problem: httpxtest.Problem(400, "bad_request", detail)}
	}
	unavailable := func(name, body, detail string) httpxtest.Scenario {
		return httpxtest.Scenario{Name: name, Method: "POST", Path: "/admin/v1/profiles", Headers: admin(), Body: body,
			Status: 422, Problem: httpxtest.Problem(422, "unprocessable_entity", detail)}
	}
	scenarios := []httpxtest.Scenario{
		bad("environments not an array", `{`+ok+`,"executor_environments":"`+env+`"}`, "executor_environments must be an array"),
		bad("environment not a string", `{`+ok+`,"executor_environments":[1]}`, "executor_environments[0] must be an environment id (env_…)"),
		bad("environment blank", `{`+ok+`,"executor_environments":["`+env+`",""]}`, "executor_environments[1] must be an environment id (env_…)"),
		bad("environment repeated", `{`+ok+`,"executor_environments":["`+env+`","`+env2+`","`+env+`"]}`, "executor_environments[2] repeats "+env),
		bad("brain not an object", `{`+ok+`,"brain":"server"}`, "brain must be an object"),
		bad("brain without type", `{`+ok+`,"brain":{}}`, `brain.type must be "server" or "executor"`),
		bad("brain unknown type", `{`+ok+`,"brain":{"type":"cloud"}}`, `brain.type must be "server" or "executor"`),
		bad("brain type not a string", `{`+ok+`,"brain":{"type":1}}`, `brain.type must be "server" or "executor"`),
		bad("executor brain without machine", `{`+ok+`,"brain":{"type":"executor"}}`, "brain.machine_id must be a machine id (mch_…)"),
		bad("executor brain machine null", `{`+ok+`,"brain":{"type":"executor","machine_id":null}}`, "brain.machine_id must be a machine id (mch_…)"),
		bad("executor brain machine blank", `{`+ok+`,"brain":{"type":"executor","machine_id":" "}}`, "brain.machine_id must be a machine id (mch_…)"),
		bad("executor brain machine not a string", `{`+ok+`,"brain":{"type":"executor","machine_id":["`+mch+`"]}}`, "brain.machine_id must be a machine id (mch_…)"),
		bad("server brain with a machine", `{`+ok+`,"brain":{"type":"server","machine_id":"`+mch+`"}}`, `brain.machine_id is only allowed with type "executor"`),
		// BAE's fields are checked first, then Baton's, in order.
		bad("max_iterations before environments", `{`+ok+`,"max_iterations":0,"executor_environments":1}`, "max_iterations must be a positive integer"),
		bad("environments before brain", `{`+ok+`,"brain":1,"executor_environments":1}`, "executor_environments must be an array"),
		bad("shape before references", `{`+ok+`,"executor_environments":["env_nope"],"brain":5}`, "brain must be an object"),
		unavailable("unknown environment", `{`+ok+`,"executor_environments":["`+env+`","env_nope"]}`, "executor_environments[1]: no environment env_nope"),
		unavailable("machine as environment", `{`+ok+`,"executor_environments":["`+mch+`"]}`, "executor_environments[0]: no environment "+mch),
		unavailable("unknown brain machine", `{`+ok+`,"brain":{"type":"executor","machine_id":"mch_nope"}}`, "brain.machine_id: no machine mch_nope"),
	}
	run(t, f, scenarios)
	if items, _, _ := f.db.ListProfiles(context.Background(), baton.Page{}); len(items) != 0 {
		t.Fatalf("rejected bodies created %d profiles", len(items))
	}

	id := f.createProfile(t, `{`+ok+`,"executor_environments":["`+env2+`","`+env+`"],"brain":{"type":"executor","machine_id":"`+mch+`","note":"ignored"}}`)
	view := f.profileJSON(t, id)
	if !strings.Contains(view, `"executor_environments":["`+env2+`","`+env+`"],"brain":{"type":"executor","machine_id":"`+mch+`"}`) {
		t.Fatalf("profile view %s", view)
	}
	nullBrain := f.createProfile(t, `{"name":"nulls","primary_provider":"claude","executor_environments":null,"brain":null}`)
	explicit := f.createProfile(t, `{"name":"explicit","primary_provider":"claude","brain":{"type":"server","machine_id":null}}`)
	for _, pid := range []string{nullBrain, explicit} {
		if v := f.profileJSON(t, pid); !strings.Contains(v, `"executor_environments":[],"brain":{"type":"server"}`) {
			t.Errorf("default view %s", v)
		}
	}

	// PUT checks the same way: the body, then the profile, then references.
	put := func(sc httpxtest.Scenario) httpxtest.Scenario {
		sc.Method, sc.Path = "PUT", "/admin/v1/profiles/"+id
		return sc
	}
	var puts []httpxtest.Scenario
	for _, sc := range scenarios {
		puts = append(puts, put(sc))
	}
	puts = append(puts,
		httpxtest.Scenario{Name: "unknown profile before references", Method: "PUT", Path: "/admin/v1/profiles/pro_nope", Headers: admin(),
			Body: `{` + ok + `,"executor_environments":["env_nope"]}`, Status: 404, Problem: httpxtest.Problem(404, "not_found", "no profile pro_nope")},
		httpxtest.Scenario{Name: "get", Method: "GET", Path: "/admin/v1/profiles/" + id, Headers: admin(), Status: 200, Want: view},
		httpxtest.Scenario{Name: "environment in use", Method: "DELETE", Path: "/admin/v1/environments/" + env, Headers: admin(),
			Status: 409, Problem: httpxtest.Problem(409, "conflict",
				fmt.Sprintf("environment %s is used by profile(s) %s; remove it from their executor_environments first", env, id))},
		httpxtest.Scenario{Name: "machine in use", Method: "DELETE", Path: "/admin/v1/machines/" + mch, Headers: admin(),
			Status: 409, Problem: httpxtest.Problem(409, "conflict",
				fmt.Sprintf("machine %s is used by profile(s) %s; remove it from their brain first", mch, id))},
	)
	run(t, f, puts)

	// A PUT without the fields resets them (full replacement), which frees
	// the environment and the machine.
	body := f.do(t, "PUT", "/admin/v1/profiles/"+id, `{"name":"n","primary_provider":"claude"}`, 200)
	if !strings.Contains(body, `"executor_environments":[],"brain":{"type":"server"}`) {
		t.Errorf("replace body %s", body)
	}
	f.do(t, "DELETE", "/admin/v1/environments/"+env, "", 204)
	f.do(t, "DELETE", "/admin/v1/machines/"+mch, "", 204)
}

// Without an executor store the routes do not exist.
func TestExecutorRoutesOff(t *testing.T) {
	db := openStore(t)
	srv := New(Options{Addr: "127.0.0.1:0", Store: db, Sessions: &fakeSessions{db: db}})
	httpxtest.Run(t, srv.Handler(), nil, []httpxtest.Scenario{
		{Name: "environments", Method: "GET", Path: "/admin/v1/environments", Status: 404, Empty: true},
		{Name: "machines", Method: "POST", Path: "/admin/v1/machines", Headers: httpxtest.JSONHeaders(""), Body: `{"name":"m"}`, Status: 404, Empty: true},
	})
}

// A failing store is a 500 with a generic detail, and no credential is
// reported revoked.
func TestExecutorStoreFailure(t *testing.T) {
	f := newFixture(t)
	env := f.createOwner(t, "environments", "ci")
	cred, _ := f.createCredential(t, "environments", env)
	if err := f.db.Close(); err != nil {
		t.Fatal(err)
	}
	internal := func(t *testing.T, rec *httptest.ResponseRecorder) { httpxtest.Internal(t, rec) }
	run(t, f, []httpxtest.Scenario{
		{Name: "create", Method: "POST", Path: "/admin/v1/machines", Headers: admin(), Body: `{"name":"m"}`, Status: 500, Check: internal},
		{Name: "list", Method: "GET", Path: "/admin/v1/environments", Headers: admin(), Status: 500, Check: internal},
		{Name: "get", Method: "GET", Path: "/admin/v1/environments/" + env, Headers: admin(), Status: 500, Check: internal},
		{Name: "delete", Method: "DELETE", Path: "/admin/v1/environments/" + env, Headers: admin(), Status: 500, Check: internal},
		{Name: "create credential", Method: "POST", Path: "/admin/v1/environments/" + env + "/credentials", Headers: admin(), Status: 500, Check: internal},
		{Name: "list credentials", Method: "GET", Path: "/admin/v1/environments/" + env + "/credentials", Headers: admin(), Status: 500, Check: internal},
		{Name: "revoke credential", Method: "DELETE", Path: "/admin/v1/environments/" + env + "/credentials/" + cred, Headers: admin(), Status: 500, Check: internal},
	})
	if ids := f.revoker.take(); len(ids) != 0 {
		t.Errorf("failed requests told the revoker %v", ids)
	}
}
