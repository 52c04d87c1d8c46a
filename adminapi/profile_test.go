package adminapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/httpx"
	"github.com/baton-engine/baton/internal/httpx/httpxtest"
	"github.com/google/go-cmp/cmp"
)

// createProfile creates a profile through the API and returns its id.
func (f *fixture) createProfile(t *testing.T, body string) string {
	t.Helper()
	var out struct{ ID string }
	if err := json.Unmarshal([]byte(f.do(t, "POST", "/admin/v1/profiles", body, 201)), &out); err != nil {
		t.Fatal(err)
	}
	return out.ID
}

// profileJSON is the exact ProfileView of the stored profile id.
func (f *fixture) profileJSON(t *testing.T, id string) string {
	t.Helper()
	p, err := f.db.Profile(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	list := func(v any) string {
		if s := marshal(t, v); s != "null" {
			return s
		}
		return "[]"
	}
	sp := "null"
	if p.SystemPrompt != "" {
		sp = marshal(t, p.SystemPrompt)
	}
	brain := `{"type":"server"}`
	if p.Brain.Executor() {
		brain = `{"type":"executor","machine_id":"` + p.Brain.MachineID + `"}`
	}
	return fmt.Sprintf(`{"id":"%s","name":"%s","primary_provider":"%s","fallback_providers":%s,"mcp_servers":%s,"allowed_tools":%s,"available_sandboxes":%s,"system_prompt":%s,"max_iterations":%d,"executor_environments":%s,"brain":%s,"created_at":"%s","updated_at":"%s"}`,
		p.ID, p.Name, p.PrimaryProvider, list(p.FallbackProviders), list(p.MCPServers), list(p.AllowedTools), list(p.AvailableSandboxes),
		sp, p.Iterations(), list(p.ExecutorEnvironments), brain, baton.FormatTime(p.CreatedAt), baton.FormatTime(p.UpdatedAt))
}

// marshal is json.Marshal without HTML escaping, as the wire has it.
func marshal(t *testing.T, v any) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// validationScenarios are the body checks POST and PUT share, in order.
func validationScenarios(method, path string) []httpxtest.Scenario {
	const shape = "Failed to deserialize the JSON body into the target type: "
	bad := func(name, body, detail string) httpxtest.Scenario {
		return httpxtest.Scenario{Name: name, Method: method, Path: path, Headers: admin(), Body: body,
			Status: 400, Problem: httpxtest.Problem(400, "bad_request", detail)}
	}
	frame := func(name, body string, status int, text string) httpxtest.Scenario {
		return httpxtest.Scenario{Name: name, Method: method, Path: path, Headers: admin(), Body: body, Status: status, Text: text}
	}
	ok := `"name":"n","primary_provider":"claude"`
	return []httpxtest.Scenario{
		{Name: "no content type", Method: method, Path: path, Headers: httpxtest.Auth("Bearer " + adminToken), Body: `{}`,
			Status: 415, Text: "Expected request with `Content-Type: application/json`"},
		frame("syntax", `{"name":`, 400, "Failed to parse the request body as JSON: "),
		frame("not an object", `["n"]`, 422, shape+"invalid type: sequence"),
		frame("missing name", `{"primary_provider":"claude"}`, 422, shape+"missing field `name`"),
		frame("name not a string", `{"name":5,"primary_provider":"claude"}`, 422, shape+"name: invalid type: integer `5`, expected a string"),
		frame("name null", `{"name":null,"primary_provider":"claude"}`, 422, shape+"name: invalid type: null"),
		frame("missing primary_provider", `{"name":"n"}`, 422, shape+"missing field `primary_provider`"),
		frame("primary_provider not a string", `{"name":"n","primary_provider":["a"]}`, 422, shape+"primary_provider: invalid type: sequence"),
		frame("shape before validation", `{"name":" ","primary_provider":5,"fallback_providers":1}`, 422, shape+"primary_provider"),
		{Name: "too large", Method: method, Path: path, Headers: admin(), Body: `{"name":"` + strings.Repeat("n", maxBody) + `"}`,
			Status: 413, Problem: httpxtest.Problem(413, "payload_too_large", "request body is larger than 4096 bytes")},
		bad("blank name", `{"name":"  ","primary_provider":"claude"}`, "name must not be empty"),
		bad("blank name first", `{"name":"","primary_provider":"","fallback_providers":1}`, "name must not be empty"),
		bad("blank primary_provider", `{"name":"n","primary_provider":"\t"}`, "primary_provider must not be empty"),
		bad("fallback_providers not an array", `{`+ok+`,"fallback_providers":"gpt"}`, "fallback_providers must be an array"),
		bad("fallback_providers element", `{`+ok+`,"fallback_providers":["gpt",7]}`, "fallback_providers[1] must be a string (a bae-config.toml registry name)"),
		bad("fallback_providers null element", `{`+ok+`,"fallback_providers":[null]}`, "fallback_providers[0] must be a string (a bae-config.toml registry name)"),
		bad("mcp_servers not an array", `{`+ok+`,"mcp_servers":{"fs":1}}`, "mcp_servers must be an array"),
		bad("mcp_servers element", `{`+ok+`,"mcp_servers":[true]}`, "mcp_servers[0] must be a string (a bae-config.toml registry name)"),
		bad("allowed_tools not an array", `{`+ok+`,"allowed_tools":"read"}`, "allowed_tools must be an array"),
		bad("available_sandboxes not an array", `{`+ok+`,"available_sandboxes":5}`, "available_sandboxes must be an array"),
		bad("available_sandboxes element", `{`+ok+`,"available_sandboxes":["a",{}]}`, "available_sandboxes[1] must be a string (a bae-config.toml registry name)"),
		bad("fallback before mcp", `{`+ok+`,"mcp_servers":1,"fallback_providers":1}`, "fallback_providers must be an array"),
		bad("system_prompt not a string", `{`+ok+`,"system_prompt":5}`, "system_prompt must be a string"),
		bad("max_iterations zero", `{`+ok+`,"max_iterations":0}`, "max_iterations must be a positive integer"),
		bad("max_iterations negative", `{`+ok+`,"max_iterations":-2}`, "max_iterations must be a positive integer"),
		bad("max_iterations fraction", `{`+ok+`,"max_iterations":1.5}`, "max_iterations must be a positive integer"),
		bad("max_iterations string", `{`+ok+`,"max_iterations":"8"}`, "max_iterations must be a positive integer"),
		bad("max_iterations huge", `{`+ok+`,"max_iterations":1e30}`, "max_iterations must be a positive integer"),
	}
}

func TestCreateProfileValidation(t *testing.T) {
	f := newFixture(t)
	run(t, f, validationScenarios("POST", "/admin/v1/profiles"))
	if _, n := f.images.last(); n != 0 {
		t.Errorf("invalid bodies provisioned %d times", n)
	}
}

// PUT validates the body before it looks the profile up.
func TestReplaceProfileValidation(t *testing.T) {
	f := newFixture(t)
	run(t, f, validationScenarios("PUT", "/admin/v1/profiles/pro_missing"))
}

func TestProfileLifecycle(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	r := httptest.NewRequest("POST", "/admin/v1/profiles", strings.NewReader(
		`{"name":"main","primary_provider":"claude","fallback_providers":["gpt"],"mcp_servers":["fs"],"allowed_tools":["read",{"x":1},3],"available_sandboxes":["ubuntu:24.04"],"system_prompt":"Be brief <ok>.","max_iterations":3,"unknown":true}`)).WithContext(ctx)
	for k, v := range admin() {
		r.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	f.srv.Handler().ServeHTTP(rec, r)
	cancel() // the request is over; provisioning must not be cancelled with it
	if rec.Code != 201 {
		t.Fatalf("create = %d %s", rec.Code, rec.Body)
	}
	var created map[string]string
	if err := json.Unmarshal(rec.Body.Bytes(), &created); err != nil {
		t.Fatal(err)
	}
	id := created["id"]
	p, err := f.db.Profile(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"id": id, "name": "main", "created_at": baton.FormatTime(p.CreatedAt)}, created); diff != "" || !strings.HasPrefix(id, "pro_") {
		t.Errorf("create body (-want +got):\n%s", diff)
	}
	call, n := f.images.last()
	if n != 1 || call.profile.ID != id || !cmp.Equal(call.profile.AvailableSandboxes, []string{"ubuntu:24.04"}) || call.ctx.Err() != nil {
		t.Errorf("provision: %d calls, last %+v, ctx err %v", n, call.profile, call.ctx.Err())
	}

	view := f.profileJSON(t, id)
	if !strings.Contains(view, `"allowed_tools":["read",{"x":1},3]`) || !strings.Contains(view, `"system_prompt":"Be brief <ok>.","max_iterations":3`) {
		t.Fatalf("stored profile renders as %s", view)
	}
	other := f.createProfile(t, `{"name":"other","primary_provider":"gpt","fallback_providers":null,"system_prompt":null,"max_iterations":null}`)
	run(t, f, []httpxtest.Scenario{
		{Name: "get", Method: "GET", Path: "/admin/v1/profiles/" + id, Headers: admin(), Status: 200, Want: view},
		{Name: "defaults", Method: "GET", Path: "/admin/v1/profiles/" + other, Headers: admin(), Status: 200,
			Check: func(t *testing.T, rec *httptest.ResponseRecorder) {
				if !strings.Contains(rec.Body.String(), `"fallback_providers":[],"mcp_servers":[],"allowed_tools":[],"available_sandboxes":[],"system_prompt":null,"max_iterations":8,"executor_environments":[],"brain":{"type":"server"},`) {
					t.Errorf("defaults render as %s", rec.Body)
				}
			}},
		{Name: "get unknown", Method: "GET", Path: "/admin/v1/profiles/pro_nope", Headers: admin(),
			Status: 404, Problem: httpxtest.Problem(404, "not_found", "no profile pro_nope")},
		{Name: "list", Method: "GET", Path: "/admin/v1/profiles", Headers: admin(), Status: 200,
			Want: `{"items":[` + view + `,` + f.profileJSON(t, other) + `],"next_cursor":null}`},
		{Name: "list page", Method: "GET", Path: "/admin/v1/profiles?limit=1", Headers: admin(), Status: 200,
			Check: func(t *testing.T, rec *httptest.ResponseRecorder) {
				if !strings.HasPrefix(rec.Body.String(), `{"items":[`+view+`],"next_cursor":"`) {
					t.Errorf("first page = %s", rec.Body)
				}
			}},
		{Name: "list zero limit", Method: "GET", Path: "/admin/v1/profiles?limit=0", Headers: admin(),
			Status: 400, Problem: httpxtest.Problem(400, "bad_request", "limit must be a positive integer")},
		{Name: "list non-integer limit", Method: "GET", Path: "/admin/v1/profiles?limit=ten", Headers: admin(),
			Status: 400, Text: "Failed to deserialize query string: limit: invalid digit found in string"},
		{Name: "list bad cursor", Method: "GET", Path: "/admin/v1/profiles?cursor=x", Headers: admin(),
			Status: 400, Problem: httpxtest.Problem(400, "bad_request", `invalid cursor: "x"`)},
		{Name: "duplicate name", Method: "POST", Path: "/admin/v1/profiles", Headers: admin(), Body: `{"name":"main","primary_provider":"gpt"}`,
			Status: 409, Problem: httpxtest.Problem(409, "duplicate_name", "a profile with that name already exists")},
		{Name: "replace unknown", Method: "PUT", Path: "/admin/v1/profiles/pro_nope", Headers: admin(), Body: `{"name":"x","primary_provider":"gpt"}`,
			Status: 404, Problem: httpxtest.Problem(404, "not_found", "no profile pro_nope")},
		{Name: "replace onto a taken name", Method: "PUT", Path: "/admin/v1/profiles/" + other, Headers: admin(), Body: `{"name":"main","primary_provider":"gpt"}`,
			Status: 409, Problem: httpxtest.Problem(409, "duplicate_name", "a profile with that name already exists")},
	})

	// PUT is a full replacement: omitted fields are reset.
	before, _ := f.db.Profile(context.Background(), id)
	body := f.do(t, "PUT", "/admin/v1/profiles/"+id, `{"name":"main2","primary_provider":"gpt","mcp_servers":["web"]}`, 200)
	if want := f.profileJSON(t, id); body != want {
		t.Errorf("replace body = %s, want %s", body, want)
	}
	after, _ := f.db.Profile(context.Background(), id)
	want := &baton.Profile{ID: id, Name: "main2", PrimaryProvider: "gpt", FallbackProviders: []string{}, MCPServers: []string{"web"},
		AllowedTools: []json.RawMessage{}, AvailableSandboxes: []string{}, ExecutorEnvironments: []string{},
		Brain: baton.Brain{Type: baton.BrainServer}, CreatedAt: before.CreatedAt, UpdatedAt: after.UpdatedAt}
	if diff := cmp.Diff(want, after); diff != "" {
		t.Errorf("replaced profile (-want +got):\n%s", diff)
	}
	if after.UpdatedAt.Before(before.UpdatedAt) {
		t.Errorf("updated_at went back: %v → %v", before.UpdatedAt, after.UpdatedAt)
	}
	if call, n := f.images.last(); n != 3 || call.profile.Name != "main2" || len(call.profile.AvailableSandboxes) != 0 {
		t.Errorf("replace provisioned: %d calls, last %+v", n, call.profile)
	}
}

func TestDeleteProfile(t *testing.T) {
	f := newFixture(t)
	id := f.createProfile(t, `{"name":"p","primary_provider":"claude"}`)
	busy := f.createProfile(t, `{"name":"busy","primary_provider":"claude"}`)
	f.do(t, "POST", "/admin/v1/keys", `{"name":"k","profile_id":"`+busy+`"}`, 201)
	run(t, f, []httpxtest.Scenario{
		{Name: "unknown", Method: "DELETE", Path: "/admin/v1/profiles/pro_nope", Headers: admin(),
			Status: 404, Problem: httpxtest.Problem(404, "not_found", "no profile pro_nope")},
		{Name: "in use", Method: "DELETE", Path: "/admin/v1/profiles/" + busy, Headers: admin(),
			Status: 409, Problem: httpxtest.Problem(409, "profile_in_use", "profile has 1 active client key(s); revoke them before deleting")},
		{Name: "deleted", Method: "DELETE", Path: "/admin/v1/profiles/" + id, Headers: admin(), Status: 204, Empty: true},
		{Name: "gone", Method: "GET", Path: "/admin/v1/profiles/" + id, Headers: admin(),
			Status: 404, Problem: httpxtest.Problem(404, "not_found", "no profile "+id)},
		{Name: "deleted twice", Method: "DELETE", Path: "/admin/v1/profiles/" + id, Headers: admin(),
			Status: 404, Problem: httpxtest.Problem(404, "not_found", "no profile "+id)},
		{Name: "replace deleted", Method: "PUT", Path: "/admin/v1/profiles/" + id, Headers: admin(), Body: `{"name":"q","primary_provider":"claude"}`,
			Status: 404, Problem: httpxtest.Problem(404, "not_found", "no profile "+id)},
		{Name: "name stays reserved", Method: "POST", Path: "/admin/v1/profiles", Headers: admin(), Body: `{"name":"p","primary_provider":"claude"}`,
			Status: 409, Problem: httpxtest.Problem(409, "duplicate_name", "a profile with that name already exists")},
		{Name: "list skips deleted", Method: "GET", Path: "/admin/v1/profiles", Headers: admin(), Status: 200,
			Want: `{"items":[` + f.profileJSON(t, busy) + `],"next_cursor":null}`},
	})
}

// FuzzDecodeProfile: any object body either is refused with a 400
// bad_request or a 422 rejection, or yields a profile with a non-blank
// name and primary provider, distinct non-blank executor environments and
// a known brain (an executor one naming a machine).
func FuzzDecodeProfile(f *testing.F) {
	f.Add([]byte(`{"name":"p","primary_provider":"claude"}`))
	f.Add([]byte(`{"name":"p","primary_provider":"a","fallback_providers":["b"],"mcp_servers":[],"allowed_tools":["x",{"n":1}],"available_sandboxes":["alpine:3"],"system_prompt":"s","max_iterations":3,"executor_environments":["env_1"],"brain":{"type":"executor","machine":"m"}}`))
	f.Add([]byte(`{"name":" ","primary_provider":"a"}`))
	f.Add([]byte(`{"name":"p","primary_provider":"a","max_iterations":2147483648}`))
	f.Add([]byte(`{"name":"p","primary_provider":"a","executor_environments":["e","e"]}`))
	f.Add([]byte(`{"name":"p","primary_provider":"a","brain":{"type":"server"},"scopes":["sessions"]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		obj, err := httpx.DecodeObject(body)
		if err != nil {
			return // FuzzDecodeObject's concern
		}
		if _, err := decodeScopes(obj); err != nil && baton.ErrorCode(err) != baton.ECodeBadRequest {
			t.Fatalf("decodeScopes: %v", err)
		}
		p, err := decodeProfile(obj)
		if err != nil {
			var rej *httpx.Rejection
			if baton.ErrorCode(err) != baton.ECodeBadRequest && !(errors.As(err, &rej) && rej.Status == 422) {
				t.Fatalf("decodeProfile: %T %v", err, err)
			}
			return
		}
		if strings.TrimSpace(p.Name) == "" || strings.TrimSpace(p.PrimaryProvider) == "" || p.AllowedTools == nil {
			t.Fatalf("accepted %+v", p)
		}
		seen := map[string]bool{}
		for _, env := range p.ExecutorEnvironments {
			if strings.TrimSpace(env) == "" || seen[env] {
				t.Fatalf("accepted executor environments %q", p.ExecutorEnvironments)
			}
			seen[env] = true
		}
		switch b := p.Brain; {
		case p.MaxIterations < 0,
			b.Type == baton.BrainServer && b.MachineID != "",
			b.Type == baton.BrainExecutor && strings.TrimSpace(b.MachineID) == "",
			b.Type != baton.BrainServer && b.Type != baton.BrainExecutor:
			t.Fatalf("accepted %+v", p)
		}
	})
}
