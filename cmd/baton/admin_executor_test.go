package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func noContent(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }

// The environment and machine commands are the same on their own routes.
var ownerKinds = []struct{ cmd, path, noun, id string }{
	{"environments", "/admin/v1/environments", "environment", "env_1"},
	{"machines", "/admin/v1/machines", "machine", "mch_1"},
}

func TestAdminOwnerCommands(t *testing.T) {
	t.Parallel()
	for _, k := range ownerKinds {
		t.Run(k.cmd, func(t *testing.T) {
			view := `{"id":"` + k.id + `","name":"ci","created_at":"2025-01-01T00:00:00.000Z"}`
			f := newFakeAdmin(t)
			f.handle("POST "+k.path, reply(201, view))
			f.handle("GET "+k.path+"/{id}", reply(200, view))
			f.handle("DELETE "+k.path+"/{id}", noContent)
			f.handle("GET "+k.path, paged(1, view, `{"id":"`+k.id+`2","name":"gpu","created_at":"2025-01-02T00:00:00.000Z"}`))
			env := tokenEnv(f)

			code, out, errs := runAdmin(t, env, k.cmd, "create", "ci")
			mustOK(t, code, errs)
			if want := "created " + k.noun + " " + k.id + " (ci)\n"; out != want {
				t.Errorf("create stdout %q, want %q", out, want)
			}
			code, out, errs = runAdmin(t, env, "--json", k.cmd, "create", "ci")
			mustOK(t, code, errs)
			jsonEqual(t, out, view)

			code, out, errs = runAdmin(t, env, k.cmd, "list")
			mustOK(t, code, errs)
			wantCells := []string{"ID", "NAME", "CREATED_AT", k.id, "ci", "2025-01-01T00:00:00.000Z", k.id + "2", "gpu", "2025-01-02T00:00:00.000Z"}
			if got := strings.Fields(out); !cmp.Equal(got, wantCells) || !strings.HasPrefix(out, "ID ") {
				t.Errorf("list stdout:\n%s\nwant the cells %v", out, wantCells)
			}
			code, out, errs = runAdmin(t, env, k.cmd, "get", k.id)
			mustOK(t, code, errs)
			if got := strings.Fields(out); !cmp.Equal(got, []string{"ID:", k.id, "NAME:", "ci", "CREATED_AT:", "2025-01-01T00:00:00.000Z"}) {
				t.Errorf("get stdout %q", out)
			}
			code, out, errs = runAdmin(t, env, k.cmd, "delete", k.id)
			mustOK(t, code, errs)
			if out != "deleted "+k.noun+" "+k.id+"\n" {
				t.Errorf("delete stdout %q", out)
			}

			var got []string
			for _, r := range f.requests() {
				got = append(got, r.Method+" "+r.Path+"?"+r.Query+" "+r.Body)
			}
			wantReqs := []string{
				"POST " + k.path + `? {"name":"ci"}`,
				"POST " + k.path + `? {"name":"ci"}`,
				"GET " + k.path + "? ",
				"GET " + k.path + "?cursor=1 ",
				"GET " + k.path + "/" + k.id + "? ",
				"DELETE " + k.path + "/" + k.id + "? ",
			}
			if diff := cmp.Diff(wantReqs, got); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAdminCredentialCommands(t *testing.T) {
	t.Parallel()
	for _, k := range ownerKinds {
		t.Run(k.cmd, func(t *testing.T) {
			f := newFakeAdmin(t)
			created := `{"id":"ecr_1","secret":"bae_exc_` + strings.Repeat("ab", 24) + `","prefix":"bae_exc_abab","scope":"` + k.noun +
				`","owner_id":"` + k.id + `","created_at":"2025-01-01T00:00:00.000Z"}`
			f.handle("POST "+k.path+"/{id}/credentials", reply(201, created))
			f.handle("GET "+k.path+"/{id}/credentials", paged(10,
				`{"id":"ecr_1","prefix":"bae_exc_abab","scope":"`+k.noun+`","owner_id":"`+k.id+`","created_at":"2025-01-01T00:00:00.000Z","revoked_at":"2025-01-03T00:00:00.000Z"}`,
				`{"id":"ecr_2","prefix":"bae_exc_cdcd","scope":"`+k.noun+`","owner_id":"`+k.id+`","created_at":"2025-01-02T00:00:00.000Z","revoked_at":null}`))
			f.handle("DELETE "+k.path+"/{id}/credentials/{cred}", noContent)
			env := tokenEnv(f)

			code, out, errs := runAdmin(t, env, k.cmd, "credentials", "create", k.id)
			mustOK(t, code, errs)
			for _, want := range []string{"ID:", "ecr_1", "SCOPE:", k.noun, "OWNER_ID:", k.id, "SECRET:", "bae_exc_" + strings.Repeat("ab", 24)} {
				if !strings.Contains(out, want) {
					t.Errorf("credential create stdout lacks %q:\n%s", want, out)
				}
			}
			if !strings.Contains(errs, "copy the secret now") {
				t.Errorf("no copy-now warning: %q", errs)
			}
			code, out, errs = runAdmin(t, env, "--json", k.cmd, "creds", "create", k.id)
			mustOK(t, code, errs)
			jsonEqual(t, out, created)

			code, out, errs = runAdmin(t, env, k.cmd, "credentials", "list", k.id)
			mustOK(t, code, errs)
			wantCells := []string{"ID", "PREFIX", "CREATED_AT", "REVOKED_AT",
				"ecr_1", "bae_exc_abab", "2025-01-01T00:00:00.000Z", "2025-01-03T00:00:00.000Z",
				"ecr_2", "bae_exc_cdcd", "2025-01-02T00:00:00.000Z", "-"}
			if got := strings.Fields(out); !cmp.Equal(got, wantCells) {
				t.Errorf("credentials list:\n%s", out)
			}
			code, out, errs = runAdmin(t, env, k.cmd, "credentials", "revoke", k.id, "ecr_2")
			mustOK(t, code, errs)
			if out != "revoked credential ecr_2\n" {
				t.Errorf("revoke stdout %q", out)
			}
			reqs := f.requests()
			if len(reqs) != 4 {
				t.Fatalf("requests %+v", reqs)
			}
			if r := reqs[0]; r.Method != "POST" || r.Path != k.path+"/"+k.id+"/credentials" || r.Body != "" {
				t.Errorf("create request %+v, want a POST without a body", r)
			}
			if r := reqs[3]; r.Method != "DELETE" || r.Path != k.path+"/"+k.id+"/credentials/ecr_2" {
				t.Errorf("revoke request %+v", r)
			}
		})
	}
}

func TestAdminOwnerErrors(t *testing.T) {
	t.Parallel()
	f := newFakeAdmin(t)
	f.handle("DELETE /admin/v1/environments/{id}", problemReply(409, "conflict",
		"environment env_1 is used by profile(s) pro_1; remove it from their executor_environments first"))
	f.handle("GET /admin/v1/machines/{id}/credentials", problemReply(404, "not_found", "no machine mch_x"))
	f.handle("GET /admin/v1/environments", reply(200, `{"items":[],"next_cursor":null}`))
	env := tokenEnv(f)
	for _, c := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"environments", "delete", "env_1"}, exitRuntime, "",
			"baton: environment env_1 is used by profile(s) pro_1; remove it from their executor_environments first\n"},
		{[]string{"machines", "credentials", "list", "mch_x"}, exitRuntime, "", "baton: no machine mch_x\n"},
		{[]string{"env", "list"}, exitOK, "no environments found\n", ""},
		{[]string{"machines", "create"}, exitUsage, "", "accepts 1 arg(s)"},
		{[]string{"machines", "credentials", "revoke", "mch_1"}, exitUsage, "", "accepts 2 arg(s)"},
	} {
		code, out, errs := runAdmin(t, env, c.args...)
		if code != c.code || out != c.stdout || !strings.Contains(errs, c.stderr) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", c.args, code, out, errs)
		}
	}
}

func TestAdminProfileExecutorFlags(t *testing.T) {
	t.Parallel()
	f := newFakeAdmin(t)
	f.handle("POST /admin/v1/profiles", reply(201, `{"id":"pro_9","name":"p","created_at":"2025-01-01T00:00:00.000Z"}`))
	code, _, errs := runAdmin(t, tokenEnv(f), "profiles", "create", "p", "prov",
		"--executor-environment", "env_a", "--executor-environment", "env_b", "--brain-machine", "mch_1")
	mustOK(t, code, errs)
	jsonEqual(t, f.requests()[0].Body, `{"name":"p","primary_provider":"prov","fallback_providers":[],"mcp_servers":[],
		"allowed_tools":[],"available_sandboxes":[],"executor_environments":["env_a","env_b"],
		"brain":{"type":"executor","machine_id":"mch_1"}}`)

	const current = `{"id":"pro_1","name":"old","primary_provider":"p1","fallback_providers":[],"mcp_servers":[],
		"allowed_tools":[],"available_sandboxes":[],"system_prompt":null,"max_iterations":8,
		"executor_environments":["env_a"],"brain":{"type":"executor","machine_id":"mch_1"},
		"created_at":"2025-01-01T00:00:00.000Z","updated_at":"2025-01-02T00:00:00.000Z"}`
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"kept when not mentioned", nil,
			`{"name":"old","primary_provider":"p2","fallback_providers":[],"mcp_servers":[],"allowed_tools":[],"available_sandboxes":[],
			"executor_environments":["env_a"],"brain":{"type":"executor","machine_id":"mch_1"}}`},
		{"replaced", []string{"--executor-environment", "env_c", "--brain-machine", "mch_2"},
			`{"name":"old","primary_provider":"p2","fallback_providers":[],"mcp_servers":[],"allowed_tools":[],"available_sandboxes":[],
			"executor_environments":["env_c"],"brain":{"type":"executor","machine_id":"mch_2"}}`},
		{"cleared", []string{"--executor-environment", "", "--brain-machine", ""},
			`{"name":"old","primary_provider":"p2","fallback_providers":[],"mcp_servers":[],"allowed_tools":[],"available_sandboxes":[],
			"brain":{"type":"server"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAdmin(t)
			f.handle("GET /admin/v1/profiles/{id}", reply(200, current))
			f.handle("PUT /admin/v1/profiles/{id}", reply(200, current))
			code, out, errs := runAdmin(t, tokenEnv(f), append([]string{"profiles", "update", "pro_1", "p2"}, tt.args...)...)
			mustOK(t, code, errs)
			jsonEqual(t, f.requests()[1].Body, tt.want)
			for _, want := range []string{"EXECUTOR_ENVIRONMENTS:", "env_a", "BRAIN:", "executor (mch_1)"} {
				if !strings.Contains(out, want) {
					t.Errorf("stdout lacks %q:\n%s", want, out)
				}
			}
		})
	}
}
