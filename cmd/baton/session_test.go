package main

import (
	"fmt"
	"strings"
	"testing"
)

// openBody is a minimal valid open/join request.
var openBody = map[string]any{"client_version": "test/1", "tools": []any{map[string]any{"name": "get_time"}}}

func TestSessionLifecycleEndToEnd(t *testing.T) { testSessionLifecycle(t) }

// TestSessionLifecycleOnPostgres runs the same flow with the server on
// PostgreSQL (BATON_DATABASE_URL) when BATON_TEST_POSTGRES_DSN is set.
func TestSessionLifecycleOnPostgres(t *testing.T) {
	t.Parallel()
	dsn := postgresSchema(t)
	testSessionLifecycle(t, func(env map[string]string) { env["BATON_DATABASE_URL"] = dsn })
}

func testSessionLifecycle(t *testing.T, mutate ...func(map[string]string)) {
	s := startServer(t, mutate...)
	pro := s.profile(map[string]any{"name": "main", "primary_provider": "claude", "allowed_tools": []any{"get_time"}, "mcp_servers": []any{}})
	k1ID, k1 := s.clientKey("alice", pro)
	k2ID, k2 := s.clientKey("bob", pro)

	r := s.client("POST", "/api/v1/sessions", k1, openBody)
	mustStatus(t, r, 201)
	open := r.json(t)
	sid, sk1 := open["session_id"].(string), open["session_key"].(string)
	if !strings.HasPrefix(sid, "ses_") || !strings.HasPrefix(sk1, "bae_ses_") || len(sk1) != 56 {
		t.Fatalf("bad ids: %v", open)
	}
	prof := open["profile"].(map[string]any)
	if got := fmt.Sprint(prof["provider"]); got != "map[model:claude-test provider:anthropic]" {
		t.Fatalf("sanitized provider = %s", got)
	}
	if strings.Contains(string(r.body), "sk-test") || strings.Contains(string(r.body), "claude\"") {
		t.Fatalf("open response leaks the registry name or token: %s", r.body)
	}

	r = s.client("POST", "/api/v1/sessions/"+sid+"/join", k2, map[string]any{})
	mustStatus(t, r, 201)
	sk2 := r.json(t)["session_key"].(string)

	r = s.client("GET", "/api/v1/sessions/"+sid+"/participants", sk2, nil)
	mustStatus(t, r, 200)
	if string(r.body) != `{"drivers":[]}` && !strings.Contains(string(r.body), `"drivers":[]`) {
		t.Fatalf("participants before any registerDriver: %s", r.body)
	}

	// Events: page of 1, then the rest; the admin route is byte-identical.
	r = s.client("GET", "/api/v1/sessions/"+sid+"/events?limit=1", sk1, nil)
	mustStatus(t, r, 200)
	page := r.json(t)
	items := page["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["event_type"] != "session.open" || page["next_cursor"] == nil {
		t.Fatalf("first page: %s", r.body)
	}
	ev := items[0].(map[string]any)
	if ev["client_key_id"] != k1ID || ev["session_id"] != sid {
		t.Fatalf("open event attribution: %v", ev)
	}
	if fmt.Sprint(ev["payload"]) != "map[client_version:test/1 sandbox_tools:[] subagent_tools:[] tools:[get_time]]" {
		t.Fatalf("open payload: %v", ev["payload"])
	}
	r = s.client("GET", "/api/v1/sessions/"+sid+"/events?cursor="+page["next_cursor"].(string), sk1, nil)
	mustStatus(t, r, 200)
	rest := r.json(t)
	if items := rest["items"].([]any); len(items) != 1 || items[0].(map[string]any)["event_type"] != "session.join" ||
		items[0].(map[string]any)["client_key_id"] != k2ID || rest["next_cursor"] != nil {
		t.Fatalf("second page: %s", r.body)
	}
	cr := s.client("GET", "/api/v1/sessions/"+sid+"/events", sk1, nil)
	ar := s.admin("GET", "/admin/v1/sessions/"+sid+"/events", nil)
	if string(cr.body) != string(ar.body) {
		t.Fatalf("client and admin event pages differ:\n%s\n%s", cr.body, ar.body)
	}

	// A session key only works for its own session.
	r2 := s.client("POST", "/api/v1/sessions", k2, map[string]any{})
	mustStatus(t, r2, 201)
	other := r2.json(t)["session_id"].(string)
	mustStatus(t, s.client("GET", "/api/v1/sessions/"+other+"/events", sk1, nil), 401)
	mustStatus(t, s.client("GET", "/api/v1/sessions/ses_nope/events", sk1, nil), 401)
	// A session key is not a client key, and vice versa.
	mustStatus(t, s.client("POST", "/api/v1/sessions", sk1, map[string]any{}), 401)
	mustStatus(t, s.client("GET", "/api/v1/sessions/"+sid+"/events", k1, nil), 401)

	// Close: creator-attributed event, 409 the second time, key still reads.
	r = s.client("DELETE", "/api/v1/sessions/"+sid, sk2, nil)
	mustStatus(t, r, 200)
	if string(r.body) != fmt.Sprintf(`{"session_id":%q,"state":"closed"}`, sid) {
		t.Fatalf("close body: %s", r.body)
	}
	r = s.client("DELETE", "/api/v1/sessions/"+sid, sk1, nil)
	mustStatus(t, r, 409)
	if m := r.json(t); m["type"] != "session_closed" || m["detail"] != "session is already closed" {
		t.Fatalf("second close: %s", r.body)
	}
	r = s.client("GET", "/api/v1/sessions/"+sid+"/events", sk1, nil)
	mustStatus(t, r, 200)
	evs := r.json(t)["items"].([]any)
	last := evs[len(evs)-1].(map[string]any)
	if last["event_type"] != "session.close" || last["client_key_id"] != k1ID || fmt.Sprint(last["payload"]) != "map[reason:client_close]" {
		t.Fatalf("close event: %v", last)
	}
	r = s.client("POST", "/api/v1/sessions/"+sid+"/join", k2, map[string]any{})
	mustStatus(t, r, 409)

	r = s.admin("GET", "/admin/v1/sessions?state=closed", nil)
	mustStatus(t, r, 200)
	if !strings.Contains(string(r.body), sid) || strings.Contains(string(r.body), other) {
		t.Fatalf("closed filter: %s", r.body)
	}
}

func TestOpenAndJoinChecks(t *testing.T) {
	t.Parallel()
	onlySingleNode(t, "a profile change reaches the other nodes' caches by notification, milliseconds later")
	s := startServer(t)
	pro := s.profile(map[string]any{"name": "main", "primary_provider": "script", "allowed_tools": []any{"get_time", 7}})
	proB := s.profile(map[string]any{"name": "other", "primary_provider": "script"})
	ghost := s.profile(map[string]any{"name": "ghost", "primary_provider": "not-configured"})
	_, k := s.clientKey("a", pro)
	_, kb := s.clientKey("b", proB)
	ghostID, kg := s.clientKey("g", ghost)
	r := s.client("POST", "/api/v1/sessions", k, map[string]any{})
	mustStatus(t, r, 201)
	sid := r.json(t)["session_id"].(string)

	sub := func(mut func(m map[string]any)) map[string]any {
		def := map[string]any{"harness": "claude", "command_template": "claude -p --model {model}"}
		tool := map[string]any{"name": "launch", "image": "img", "subagents": []any{def}}
		mut(def)
		mut(tool)
		return map[string]any{"subagent_tools": []any{tool}}
	}
	tests := []struct {
		name   string
		path   string
		token  string
		body   any
		status int
		typ    string
		detail string
	}{
		{"no auth header", "/api/v1/sessions", "", map[string]any{}, 401, "unauthorized", "missing Authorization header"},
		{"unknown client key", "/api/v1/sessions", "bae_" + strings.Repeat("0", 48), map[string]any{}, 401, "unauthorized", "invalid client key"},
		{"primary provider missing", "/api/v1/sessions", kg, map[string]any{}, 422, "primary_provider_unavailable", `the profile's primary provider "not-configured" is not configured in bae-config.toml`},
		{"reserved tool", "/api/v1/sessions", k, map[string]any{"sandbox_tools": []any{map[string]any{"name": "remote_subagent_status"}}}, 422, "reserved_tool_name", "remote_subagent_status is reserved"},
		{"tool not allowed", "/api/v1/sessions", k, map[string]any{"tools": []any{map[string]any{"name": "rm"}}}, 403, "tool_not_allowed", `tool "rm" is not in the profile's allowlist`},
		{"non-string allowlist entries never match", "/api/v1/sessions", k, map[string]any{"tools": []any{map[string]any{"name": "7"}}}, 403, "tool_not_allowed", ""},
		{"subagent prompt placeholder with stdin", "/api/v1/sessions", k, sub(func(m map[string]any) {
			if _, ok := m["harness"]; ok {
				m["command_template"] = "x {prompt}"
			}
		}), 422, "invalid_subagent_tools", "invalid command_template placeholders"},
		{"subagent zero timeout", "/api/v1/sessions", k, sub(func(m map[string]any) {
			if _, ok := m["harness"]; ok {
				m["timeout_secs"] = 0
			}
		}), 422, "invalid_subagent_tools", ""},
		{"subagent without image", "/api/v1/sessions", k, sub(func(m map[string]any) {
			if _, ok := m["image"]; ok {
				m["image"] = " "
			}
		}), 422, "invalid_subagent_tools", ""},
		{"join unknown session", "/api/v1/sessions/ses_missing/join", k, map[string]any{}, 404, "not_found", "no session ses_missing"},
		{"join other profile", "/api/v1/sessions/" + sid + "/join", kb, map[string]any{}, 403, "profile_mismatch", "the client key's profile does not match this session's profile"},
		{"join disallowed tool", "/api/v1/sessions/" + sid + "/join", k, map[string]any{"tools": []any{map[string]any{"name": "rm"}}}, 403, "tool_not_allowed", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := s.client("POST", tc.path, tc.token, tc.body)
			mustStatus(t, r, tc.status)
			m := r.json(t)
			if m["type"] != tc.typ || (tc.detail != "" && m["detail"] != tc.detail) || m["status"] != float64(tc.status) {
				t.Fatalf("body %s, want type %s detail %q", r.body, tc.typ, tc.detail)
			}
		})
	}

	// The failed open left an audit row in state error with its reason.
	r = s.admin("GET", "/admin/v1/sessions?state=error", nil)
	mustStatus(t, r, 200)
	items := r.json(t)["items"].([]any)
	if len(items) != 1 {
		t.Fatalf("audit rows: %s", r.body)
	}
	audit := items[0].(map[string]any)
	if v, ok := audit["closed_at"]; !ok || v != nil { // never open, so never closed (as BAE)
		t.Errorf("audit row closed_at = %v (present %v), want null", v, ok)
	}
	r = s.admin("GET", "/admin/v1/sessions/"+audit["id"].(string)+"/events", nil)
	evs := r.json(t)["items"].([]any)
	if len(evs) != 1 {
		t.Fatalf("audit events: %s", r.body)
	}
	ev := evs[0].(map[string]any)
	want := fmt.Sprintf("map[primary_provider:not-configured profile_id:%s reason:primary_provider_unavailable]", ghost)
	if ev["event_type"] != "session.error" || fmt.Sprint(ev["payload"]) != want || ev["client_key_id"] != ghostID {
		t.Fatalf("audit event: %v", ev)
	}
}

func TestFrameworkRejections(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	pro := s.profile(map[string]any{"name": "main", "primary_provider": "script"})
	_, k := s.clientKey("a", pro)
	raw := func(ct, body string) *response {
		return rawCall(t, "POST", s.clientURL+"/api/v1/sessions", k, ct, body)
	}
	if r := raw("", `{}`); r.status != 415 {
		t.Fatalf("no content type: %d", r.status)
	}
	if r := raw("application/json", `{"tools":`); r.status != 400 {
		t.Fatalf("syntax error: %d", r.status)
	}
	if r := raw("application/json", `{"tools":{}}`); r.status != 422 {
		t.Fatalf("tools not an array: %d", r.status)
	}
	if r := raw("application/json", `{"tools":[{"description":"x"}]}`); r.status != 422 {
		t.Fatalf("tool without name: %d", r.status)
	}
	if r := raw("application/json", `{"tools":[], "x-unknown": 1}`); r.status != 201 {
		t.Fatalf("unknown fields must be ignored: %d %s", r.status, r.body)
	}
	big := `{"client_version":"` + strings.Repeat("a", 2<<20) + `"}`
	if r := raw("application/json", big); r.status != 413 {
		t.Fatalf("oversize body: %d", r.status)
	}
	// The default limit is BAE's, 2 MiB: what BAE takes, Baton takes.
	fits := `{"client_version":"` + strings.Repeat("a", 2<<20-64) + `"}`
	if r := raw("application/json", fits); r.status != 201 {
		t.Fatalf("a body just under 2 MiB: %d %.200s", r.status, r.body)
	}
	if r := call(t, "GET", s.clientURL+"/admin/v1/profiles", s.adminKey, nil); r.status != 404 {
		t.Fatalf("admin route on client port: %d", r.status)
	}
	if r := call(t, "GET", s.clientURL+"/api/v1/sessions", k, nil); r.status != 405 {
		t.Fatalf("wrong method: %d", r.status)
	}
	r := call(t, "GET", s.clientURL+"/api/v1/meta", "", nil)
	if r.status != 200 || string(r.body) != `{"version":"0.1.0","api_versions":["v1"]}` {
		t.Fatalf("meta: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", s.clientURL+"/healthz", "", nil); r.status != 200 || len(r.body) != 0 {
		t.Fatalf("healthz: %d %q", r.status, r.body)
	}
}

func TestRevocationCascade(t *testing.T) {
	t.Parallel()
	onlySingleNode(t, "a revocation reaches the other nodes' key caches by notification, milliseconds later")
	s := startServer(t)
	pro := s.profile(map[string]any{"name": "main", "primary_provider": "script"})
	aID, a := s.clientKey("a", pro)
	bID, b := s.clientKey("b", pro)
	open := func(key string) (string, string) {
		r := s.client("POST", "/api/v1/sessions", key, map[string]any{})
		mustStatus(t, r, 201)
		m := r.json(t)
		return m["session_id"].(string), m["session_key"].(string)
	}
	shared, sharedKeyA := open(a)
	r := s.client("POST", "/api/v1/sessions/"+shared+"/join", b, map[string]any{})
	mustStatus(t, r, 201)
	sharedKeyB := r.json(t)["session_key"].(string)
	solo, soloKey := open(a)

	mustStatus(t, s.admin("DELETE", "/admin/v1/profiles/"+pro, nil), 409)
	mustStatus(t, s.admin("DELETE", "/admin/v1/keys/"+aID, nil), 204)
	mustStatus(t, s.admin("DELETE", "/admin/v1/keys/"+aID, nil), 404)

	// a's keys stop working at once; b keeps the shared session open.
	mustStatus(t, s.client("POST", "/api/v1/sessions", a, map[string]any{}), 401)
	mustStatus(t, s.client("GET", "/api/v1/sessions/"+shared+"/events", sharedKeyA, nil), 401)
	mustStatus(t, s.client("GET", "/api/v1/sessions/"+solo+"/events", soloKey, nil), 401)
	r = s.client("GET", "/api/v1/sessions/"+shared+"/events", sharedKeyB, nil)
	mustStatus(t, r, 200)
	if strings.Contains(string(r.body), "client_key_revoked") {
		t.Fatalf("shared session was closed: %s", r.body)
	}
	r = s.admin("GET", "/admin/v1/sessions/"+solo+"/events", nil)
	evs := r.json(t)["items"].([]any)
	last := evs[len(evs)-1].(map[string]any)
	if last["event_type"] != "session.close" || last["client_key_id"] != aID || fmt.Sprint(last["payload"]) != "map[reason:client_key_revoked]" {
		t.Fatalf("solo session close event: %v", last)
	}
	r = s.admin("GET", "/admin/v1/sessions?state=open", nil)
	if !strings.Contains(string(r.body), shared) || strings.Contains(string(r.body), solo) {
		t.Fatalf("open sessions after revocation: %s", r.body)
	}
	mustStatus(t, s.admin("DELETE", "/admin/v1/keys/"+bID, nil), 204)
	mustStatus(t, s.admin("DELETE", "/admin/v1/profiles/"+pro, nil), 204)
	r = s.admin("POST", "/admin/v1/profiles", map[string]any{"name": "main", "primary_provider": "script"})
	mustStatus(t, r, 409)
}
