package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton/adminapi/adminclient"
)

// recorded is one request the fake admin API received.
type recorded struct {
	Method, Path, Query, Auth, Body string
}

// fakeAdmin is a hand-written stand-in for the admin API: each test
// registers the routes it calls; every request is recorded.
type fakeAdmin struct {
	mux  *http.ServeMux
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []recorded
}

func newFakeAdmin(t *testing.T) *fakeAdmin {
	t.Helper()
	f := &fakeAdmin{mux: http.NewServeMux()}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, recorded{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Get("Authorization"), string(body)})
		f.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		f.mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAdmin) handle(pattern string, h http.HandlerFunc) { f.mux.HandleFunc(pattern, h) }

// addr is the fake's host:port.
func (f *fakeAdmin) addr() string { return strings.TrimPrefix(f.srv.URL, "http://") }

func (f *fakeAdmin) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

// reply answers with a status and a JSON body.
func reply(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// problemReply answers with an RFC 7807 body.
func problemReply(status int, typ, detail string) http.HandlerFunc {
	return reply(status, fmt.Sprintf(`{"type":%q,"title":%q,"status":%d,"detail":%q}`,
		typ, http.StatusText(status), status, detail))
}

// paged serves items like the admin API paginates: cursor is the index of
// the next item, limit defaults to size.
func paged(size int, items ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start, limit := 0, size
		if c := r.URL.Query().Get("cursor"); c != "" {
			start, _ = strconv.Atoi(c)
		}
		if l := r.URL.Query().Get("limit"); l != "" {
			limit, _ = strconv.Atoi(l)
		}
		end := min(start+limit, len(items))
		next := "null"
		if end < len(items) {
			next = strconv.Quote(strconv.Itoa(end))
		}
		reply(200, `{"items":[`+strings.Join(items[start:end], ",")+`],"next_cursor":`+next+`}`)(w, r)
	}
}

// runAdmin runs `baton admin args…` in-process with the given environment.
func runAdmin(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	c := &cli{
		getenv: func(k string) string { return env[k] },
		stdout: &out,
		stderr: &errb,
		stdin:  strings.NewReader(""),
	}
	code = c.run(t.Context(), append([]string{"admin"}, args...))
	return code, out.String(), errb.String()
}

// tokenEnv points at f with a token from the environment.
func tokenEnv(f *fakeAdmin) map[string]string {
	return map[string]string{"BAE_ADMIN_ADDR": f.addr(), "BAE_ADMIN_TOKEN": "bae_admin_test"}
}

// jsonEqual compares two JSON texts by value.
func jsonEqual(t *testing.T, got, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("got is not JSON: %v\n%s", err, got)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want is not JSON: %v", err)
	}
	if d := cmp.Diff(w, g); d != "" {
		t.Errorf("JSON mismatch (-want +got):\n%s", d)
	}
}

func mustOK(t *testing.T, code int, stderr string) {
	t.Helper()
	if code != exitOK {
		t.Fatalf("exit %d, stderr: %s", code, stderr)
	}
}

const profileJSON = `{"id":"pro_1","name":"old","primary_provider":"p1",
	"fallback_providers":["f1","f2"],"mcp_servers":["m1"],"allowed_tools":["t1",{"odd":1}],
	"available_sandboxes":["img:1"],"system_prompt":"be brief","max_iterations":5,
	"created_at":"2025-01-01T00:00:00.000Z","updated_at":"2025-01-02T00:00:00.000Z"}`

func TestAdminProfileCreate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"lists always sent", []string{"p", "prov"},
			`{"name":"p","primary_provider":"prov","fallback_providers":[],"mcp_servers":[],"allowed_tools":[],"available_sandboxes":[]}`},
		{"every flag", []string{"p", "prov", "--fallback", "b", "--fallback", "a", "--mcp-server", "fs",
			"--allowed-tool", "read", "--sandbox", "alpine:3", "--system-prompt", "hi", "--max-iterations", "12"},
			`{"name":"p","primary_provider":"prov","fallback_providers":["b","a"],"mcp_servers":["fs"],
			"allowed_tools":["read"],"available_sandboxes":["alpine:3"],"system_prompt":"hi","max_iterations":12}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAdmin(t)
			f.handle("POST /admin/v1/profiles", reply(201, `{"id":"pro_9","name":"p","created_at":"2025-01-01T00:00:00.000Z"}`))
			code, out, errs := runAdmin(t, tokenEnv(f), append([]string{"profiles", "create"}, tt.args...)...)
			mustOK(t, code, errs)
			reqs := f.requests()
			if len(reqs) != 1 {
				t.Fatalf("requests = %d, want 1", len(reqs))
			}
			jsonEqual(t, reqs[0].Body, tt.want)
			if reqs[0].Auth != "Bearer bae_admin_test" {
				t.Errorf("Authorization = %q", reqs[0].Auth)
			}
			if out != "created profile pro_9 (p)\n" {
				t.Errorf("stdout = %q", out)
			}
		})
	}
}

func TestAdminProfileCreateJSON(t *testing.T) {
	t.Parallel()
	f := newFakeAdmin(t)
	body := `{"id":"pro_9","name":"p","created_at":"2025-01-01T00:00:00.000Z"}`
	f.handle("POST /admin/v1/profiles", reply(201, body))
	code, out, errs := runAdmin(t, tokenEnv(f), "--json", "profiles", "create", "p", "prov")
	mustOK(t, code, errs)
	jsonEqual(t, out, body)
	if !strings.Contains(out, "\n  \"id\"") {
		t.Errorf("JSON not pretty-printed: %q", out)
	}
}

func TestAdminProfileUpdatePreserves(t *testing.T) {
	t.Parallel()
	const bare = `{"id":"pro_1","name":"old","primary_provider":"p1","fallback_providers":[],"mcp_servers":[],
		"allowed_tools":[],"available_sandboxes":[],"system_prompt":null,"max_iterations":8}`
	tests := []struct {
		name    string
		current string
		args    []string
		want    string
	}{
		{"only primary", profileJSON, nil,
			`{"name":"old","primary_provider":"p2","fallback_providers":["f1","f2"],"mcp_servers":["m1"],
			"allowed_tools":["t1",{"odd":1}],"available_sandboxes":["img:1"],"system_prompt":"be brief","max_iterations":5}`},
		{"replace some", profileJSON, []string{"--name", "new", "--mcp-server", "m2", "--mcp-server", "m3", "--max-iterations", "9"},
			`{"name":"new","primary_provider":"p2","fallback_providers":["f1","f2"],"mcp_servers":["m2","m3"],
			"allowed_tools":["t1",{"odd":1}],"available_sandboxes":["img:1"],"system_prompt":"be brief","max_iterations":9}`},
		{"clear lists and extensions", profileJSON,
			[]string{"--fallback", "", "--sandbox=", "--allowed-tool", "", "--system-prompt", "", "--max-iterations", "0"},
			`{"name":"old","primary_provider":"p2","fallback_providers":[],"mcp_servers":["m1"],
			"allowed_tools":[],"available_sandboxes":[]}`},
		{"null prompt and default cap not sent back", bare, nil,
			`{"name":"old","primary_provider":"p2","fallback_providers":[],"mcp_servers":[],"allowed_tools":[],"available_sandboxes":[]}`},
		{"BAE profile without extensions", `{"id":"pro_1","name":"old","primary_provider":"p1","fallback_providers":null,
			"mcp_servers":["m"],"allowed_tools":[],"created_at":"t","updated_at":"t"}`, []string{"--allowed-tool", "x"},
			`{"name":"old","primary_provider":"p2","fallback_providers":[],"mcp_servers":["m"],"allowed_tools":["x"],"available_sandboxes":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAdmin(t)
			f.handle("GET /admin/v1/profiles/{id}", reply(200, tt.current))
			f.handle("PUT /admin/v1/profiles/{id}", reply(200, profileJSON))
			code, _, errs := runAdmin(t, tokenEnv(f), append([]string{"profiles", "update", "pro_1", "p2"}, tt.args...)...)
			mustOK(t, code, errs)
			reqs := f.requests()
			if len(reqs) != 2 || reqs[0].Method != "GET" || reqs[1].Method != "PUT" || reqs[1].Path != "/admin/v1/profiles/pro_1" {
				t.Fatalf("requests = %+v, want GET then PUT of pro_1", reqs)
			}
			jsonEqual(t, reqs[1].Body, tt.want)
		})
	}
}

func TestAdminProfileUpdateNotFound(t *testing.T) {
	t.Parallel()
	f := newFakeAdmin(t)
	f.handle("GET /admin/v1/profiles/{id}", problemReply(404, "not_found", "no profile pro_x"))
	code, _, errs := runAdmin(t, tokenEnv(f), "profiles", "update", "pro_x", "p2")
	if code != exitRuntime || errs != "baton: no profile pro_x\n" {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("requests = %d, want only the GET", n)
	}
}

func TestAdminProfileGet(t *testing.T) {
	t.Parallel()
	f := newFakeAdmin(t)
	f.handle("GET /admin/v1/profiles/{id}", reply(200, profileJSON))
	code, out, errs := runAdmin(t, tokenEnv(f), "profiles", "get", "pro_1")
	mustOK(t, code, errs)
	for _, want := range []string{"ID:", "pro_1", "FALLBACK_PROVIDERS:", "f1, f2", "ALLOWED_TOOLS:", `t1, {"odd":1}`,
		"AVAILABLE_SANDBOXES:", "img:1", "SYSTEM_PROMPT:", `"be brief"`, "MAX_ITERATIONS:", "5", "UPDATED_AT:"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	code, out, errs = runAdmin(t, tokenEnv(f), "profiles", "get", "pro_1", "--json")
	mustOK(t, code, errs)
	jsonEqual(t, out, profileJSON)
}

func TestAdminProfileDelete(t *testing.T) {
	t.Parallel()
	f := newFakeAdmin(t)
	f.handle("DELETE /admin/v1/profiles/{id}", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) })
	code, out, errs := runAdmin(t, tokenEnv(f), "profiles", "delete", "pro_1")
	mustOK(t, code, errs)
	if out != "deleted profile pro_1\n" {
		t.Errorf("stdout = %q", out)
	}
	if r := f.requests(); len(r) != 1 || r[0].Method != "DELETE" || r[0].Path != "/admin/v1/profiles/pro_1" {
		t.Errorf("requests = %+v", r)
	}
}

func TestAdminPathEscaping(t *testing.T) {
	t.Parallel()
	f := newFakeAdmin(t)
	f.handle("/", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) })
	code, _, errs := runAdmin(t, tokenEnv(f), "keys", "revoke", "a/b?c")
	mustOK(t, code, errs)
	if r := f.requests(); len(r) != 1 || r[0].Path != "/admin/v1/keys/a%2Fb%3Fc" || r[0].Query != "" {
		t.Errorf("requests = %+v", r)
	}
}

func TestAdminKeyCreate(t *testing.T) {
	t.Parallel()
	created := `{"id":"key_1","name":"ci","key":"bae_0123456789abcdef","prefix":"bae_0123","profile_id":"pro_1","created_at":"2025-01-01T00:00:00.000Z"}`
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no scopes", nil, `{"name":"ci","profile_id":"pro_1"}`},
		{"scopes", []string{"--scope", "session.manage", "--scope", "session.read"},
			`{"name":"ci","profile_id":"pro_1","scopes":["session.manage","session.read"]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAdmin(t)
			f.handle("POST /admin/v1/keys", reply(201, created))
			code, out, errs := runAdmin(t, tokenEnv(f), append([]string{"keys", "create", "ci", "pro_1"}, tt.args...)...)
			mustOK(t, code, errs)
			jsonEqual(t, f.requests()[0].Body, tt.want)
			if !strings.Contains(out, "KEY:") || !strings.Contains(out, "bae_0123456789abcdef") {
				t.Errorf("stdout lacks the key:\n%s", out)
			}
			if errs != "baton: copy the key now — it cannot be retrieved again\n" {
				t.Errorf("stderr = %q", errs)
			}
		})
	}
	f := newFakeAdmin(t)
	f.handle("POST /admin/v1/keys", reply(201, created))
	code, out, errs := runAdmin(t, tokenEnv(f), "keys", "create", "ci", "pro_1", "--json")
	mustOK(t, code, errs)
	jsonEqual(t, out, created)
	if !strings.Contains(errs, "copy the key now") {
		t.Errorf("no warning with --json: %q", errs)
	}
}

func TestAdminKeyList(t *testing.T) {
	t.Parallel()
	f := newFakeAdmin(t)
	f.handle("GET /admin/v1/keys", paged(50,
		`{"id":"key_1","name":"a","prefix":"bae_aaaa","profile_id":"pro_1","created_at":"t0","last_used_at":null}`,
		`{"id":"key_2","name":"b","prefix":"bae_bbbb","profile_id":"pro_2","created_at":"t1","last_used_at":"2025-03-01T10:00:00.000Z"}`))
	code, out, errs := runAdmin(t, tokenEnv(f), "keys", "list")
	mustOK(t, code, errs)
	want := "ID     NAME  PREFIX    PROFILE_ID  LAST_USED\n" +
		"key_1  a     bae_aaaa  pro_1       never\n" +
		"key_2  b     bae_bbbb  pro_2       2025-03-01T10:00:00.000Z\n"
	if d := cmp.Diff(want, out); d != "" {
		t.Errorf("table (-want +got):\n%s", d)
	}
}

func TestAdminKeyRevoke(t *testing.T) {
	t.Parallel()
	for _, verb := range []string{"revoke", "delete"} {
		t.Run(verb, func(t *testing.T) {
			f := newFakeAdmin(t)
			f.handle("DELETE /admin/v1/keys/{id}", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) })
			code, out, errs := runAdmin(t, tokenEnv(f), "keys", verb, "key_7")
			mustOK(t, code, errs)
			if out != "revoked key key_7\n" {
				t.Errorf("stdout = %q", out)
			}
			if r := f.requests(); len(r) != 1 || r[0].Method != "DELETE" || r[0].Path != "/admin/v1/keys/key_7" {
				t.Errorf("requests = %+v", r)
			}
		})
	}
}

func profileItems(n int) []string {
	var items []string
	for i := range n {
		items = append(items, fmt.Sprintf(`{"id":"pro_%d","name":"n%d","primary_provider":"p"}`, i, i))
	}
	return items
}

func TestAdminListFollowsCursors(t *testing.T) {
	t.Parallel()
	f := newFakeAdmin(t)
	items := profileItems(5)
	f.handle("GET /admin/v1/profiles", paged(2, items...))
	code, out, errs := runAdmin(t, tokenEnv(f), "profiles", "list")
	mustOK(t, code, errs)
	var queries []string
	for _, r := range f.requests() {
		queries = append(queries, r.Query)
	}
	if d := cmp.Diff([]string{"", "cursor=2", "cursor=4"}, queries); d != "" {
		t.Errorf("queries (-want +got):\n%s", d)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 6 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[0], "PRIMARY_PROVIDER") || !strings.HasPrefix(lines[5], "pro_4") {
		t.Errorf("table:\n%s", out)
	}

	code, out, errs = runAdmin(t, tokenEnv(f), "profiles", "list", "--json")
	mustOK(t, code, errs)
	jsonEqual(t, out, "["+strings.Join(items, ",")+"]")
}

func TestAdminListOnePage(t *testing.T) {
	t.Parallel()
	f := newFakeAdmin(t)
	items := profileItems(5)
	f.handle("GET /admin/v1/profiles", paged(50, items...))

	code, out, errs := runAdmin(t, tokenEnv(f), "profiles", "list", "--limit", "2", "--json")
	mustOK(t, code, errs)
	jsonEqual(t, out, `{"items":[`+items[0]+","+items[1]+`],"next_cursor":"2"}`)

	code, out, errs = runAdmin(t, tokenEnv(f), "profiles", "list", "--cursor", "2", "--limit", "2")
	mustOK(t, code, errs)
	if !strings.Contains(out, "pro_2") || !strings.Contains(out, "pro_3") || strings.Contains(out, "pro_4") ||
		!strings.HasSuffix(out, "more results: --cursor 4\n") {
		t.Errorf("stdout:\n%s", out)
	}
	var queries []string
	for _, r := range f.requests() {
		queries = append(queries, r.Query)
	}
	if d := cmp.Diff([]string{"limit=2", "cursor=2&limit=2"}, queries); d != "" {
		t.Errorf("queries (-want +got):\n%s", d)
	}
}

func TestAdminEmptyLists(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args  []string
		route string
		want  string
	}{
		{[]string{"profiles", "list"}, "GET /admin/v1/profiles", "no profiles found\n"},
		{[]string{"keys", "list"}, "GET /admin/v1/keys", "no keys found\n"},
		{[]string{"sessions", "list"}, "GET /admin/v1/sessions", "no sessions found\n"},
		{[]string{"events", "ses_1"}, "GET /admin/v1/sessions/ses_1/events", "no events found\n"},
		{[]string{"providers"}, "GET /admin/v1/providers", "no providers configured\n"},
		{[]string{"mcp-servers"}, "GET /admin/v1/mcp-servers", "no MCP servers configured\n"},
		{[]string{"sandbox-status"}, "GET /admin/v1/sandbox-status", "no sandbox status recorded\n"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			f := newFakeAdmin(t)
			f.handle(tt.route, reply(200, `{"items":[],"next_cursor":null}`))
			code, out, errs := runAdmin(t, tokenEnv(f), tt.args...)
			mustOK(t, code, errs)
			if out != tt.want {
				t.Errorf("stdout = %q, want %q", out, tt.want)
			}
			code, out, errs = runAdmin(t, tokenEnv(f), append(tt.args, "--json")...)
			mustOK(t, code, errs)
			if out != "[]\n" {
				t.Errorf("--json stdout = %q, want []", out)
			}
		})
	}
}

func TestAdminSessions(t *testing.T) {
	t.Parallel()
	f := newFakeAdmin(t)
	f.handle("GET /admin/v1/sessions", paged(50,
		`{"id":"ses_1","profile_id":"pro_1","state":"closed","client_version":null,"created_at":"t0","closed_at":"t1"}`,
		`{"id":"ses_2","profile_id":"pro_1","state":"open","client_version":"x","created_at":"t2","closed_at":null,"owner_node_id":"node-a"}`))
	code, out, errs := runAdmin(t, tokenEnv(f), "sessions", "list", "--state", "closed")
	mustOK(t, code, errs)
	want := "ID     PROFILE_ID  STATE   CREATED_AT  CLOSED_AT  OWNER\n" +
		"ses_1  pro_1       closed  t0          t1         -\n" +
		"ses_2  pro_1       open    t2          -          node-a\n"
	if d := cmp.Diff(want, out); d != "" {
		t.Errorf("table (-want +got):\n%s", d)
	}
	if q := f.requests()[0].Query; q != "state=closed" {
		t.Errorf("query = %q", q)
	}

	code, _, errs = runAdmin(t, tokenEnv(f), "sessions", "list", "--state", "paused")
	if code != exitUsage || !strings.Contains(errs, `invalid --state "paused"`) {
		t.Errorf("bad state: exit %d, stderr %q", code, errs)
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("bad state sent a request")
	}
}

func TestAdminEvents(t *testing.T) {
	t.Parallel()
	f := newFakeAdmin(t)
	events := []string{
		`{"id":"evt_1","session_id":"ses_1","client_key_id":"key_1","event_type":"session.open","payload":{},"created_at":"t0"}`,
		`{"id":"evt_2","session_id":"ses_1","client_key_id":null,"event_type":"turn.start","payload":{"a":1},"created_at":"t1"}`,
		`{"id":"evt_3","session_id":"ses_1","client_key_id":"key_1","event_type":"session.close","payload":{},"created_at":"t2"}`,
	}
	f.handle("GET /admin/v1/sessions/{id}/events", paged(2, events...))
	code, out, errs := runAdmin(t, tokenEnv(f), "events", "ses_1")
	mustOK(t, code, errs)
	want := "ID     EVENT_TYPE     CLIENT_KEY_ID  CREATED_AT\n" +
		"evt_1  session.open   key_1          t0\n" +
		"evt_2  turn.start     -              t1\n" +
		"evt_3  session.close  key_1          t2\n"
	if d := cmp.Diff(want, out); d != "" {
		t.Errorf("table (-want +got):\n%s", d)
	}
	code, out, errs = runAdmin(t, tokenEnv(f), "events", "ses_1", "--json")
	mustOK(t, code, errs)
	jsonEqual(t, out, "["+strings.Join(events, ",")+"]")
	for _, r := range f.requests() {
		if r.Path != "/admin/v1/sessions/ses_1/events" {
			t.Errorf("path = %q", r.Path)
		}
		// Pages of 20: events carry whole conversations.
		if !strings.Contains(r.Query, "limit=20") {
			t.Errorf("query = %q, want pages of 20", r.Query)
		}
	}
}

// TestAdminAnswerTooLarge: an answer over the client's limit is an error
// that says to ask for less, not a version mismatch.
func TestAdminAnswerTooLarge(t *testing.T) {
	t.Parallel()
	f := newFakeAdmin(t)
	f.handle("GET /admin/v1/sessions/{id}/events", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"items":[{"payload":"`)
		chunk := strings.Repeat("x", 1<<20)
		for range adminclient.MaxBody >> 20 {
			io.WriteString(w, chunk)
		}
		io.WriteString(w, `"}],"next_cursor":null}`)
	})
	code, _, errs := runAdmin(t, tokenEnv(f), "events", "ses_1", "--limit", "1")
	if code != 1 || !strings.Contains(errs, "larger than 64 MiB; ask for fewer items with --limit") {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
}

func TestAdminConfigAlwaysJSON(t *testing.T) {
	t.Parallel()
	f := newFakeAdmin(t)
	body := `{"mcp":{"servers":[]},"providers":{"entries":[{"name":"a","auth_token":"••••••••"}]},"telemetry":{"enabled":false}}`
	f.handle("GET /admin/v1/config", reply(200, body))
	code, out, errs := runAdmin(t, tokenEnv(f), "config")
	mustOK(t, code, errs)
	var want bytes.Buffer
	json.Indent(&want, []byte(body), "", "  ")
	if out != want.String()+"\n" {
		t.Errorf("stdout:\n%s\nwant:\n%s", out, want.String())
	}
}

func TestAdminRegistries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args  []string
		route string
		body  string
		want  string
	}{
		{[]string{"providers"}, "GET /admin/v1/providers",
			`{"items":[{"name":"claude","provider":"anthropic","model":"m","base_url":"https://api.anthropic.com"}]}`,
			"NAME    PROVIDER   MODEL  BASE_URL\nclaude  anthropic  m      https://api.anthropic.com\n"},
		{[]string{"mcp-servers"}, "GET /admin/v1/mcp-servers",
			`{"items":[{"name":"fs","transport":"stdio"},{"name":"web","transport":"http"}]}`,
			"NAME  TRANSPORT\nfs    stdio\nweb   http\n"},
		{[]string{"sandbox-status"}, "GET /admin/v1/sandbox-status",
			`{"items":[{"profile_id":"pro_1","images":[{"name":"a:1","status":"available"},{"name":"b:2","status":"error","detail":"pull failed"}]},{"profile_id":"pro_2","images":[]}]}`,
			"PROFILE_ID  IMAGE  STATUS     DETAIL\npro_1       a:1    available  -\npro_1       b:2    error      pull failed\npro_2       -      -          -\n"},
	}
	for _, tt := range tests {
		t.Run(tt.args[0], func(t *testing.T) {
			f := newFakeAdmin(t)
			f.handle(tt.route, reply(200, tt.body))
			code, out, errs := runAdmin(t, tokenEnv(f), tt.args...)
			mustOK(t, code, errs)
			if d := cmp.Diff(tt.want, out); d != "" {
				t.Errorf("table (-want +got):\n%s", d)
			}
			code, out, errs = runAdmin(t, tokenEnv(f), append(tt.args, "--json")...)
			mustOK(t, code, errs)
			var b struct{ Items json.RawMessage }
			json.Unmarshal([]byte(tt.body), &b)
			jsonEqual(t, out, string(b.Items))
		})
	}
}

func TestAdminErrors(t *testing.T) {
	longText := strings.Repeat("x", 300)
	tests := []struct {
		name    string
		handler http.HandlerFunc
		args    []string
		noToken bool
		want    []string // substrings of stderr
		not     []string
	}{
		{name: "unauthorized with token", handler: problemReply(401, "unauthorized", "invalid admin key"),
			args: []string{"profiles", "list"},
			want: []string{"baton: the admin API rejected the admin key from BAE_ADMIN_TOKEN (invalid admin key)",
				"--admin-token", "BAE_ADMIN_TOKEN environment variable", "--admin-key-file", "BAE_ADMIN_KEY_FILE",
				devKeyFile, defaultKeyFile}},
		{name: "unauthorized without token", handler: problemReply(401, "unauthorized", "missing Authorization header"),
			args: []string{"profiles", "list"}, noToken: true,
			want: []string{"requires an admin key and none was found (missing Authorization header)", "--admin-token"}},
		{name: "profile in use", handler: problemReply(409, "profile_in_use", "profile has 2 active client key(s); revoke them before deleting"),
			args: []string{"profiles", "delete", "pro_1"},
			want: []string{"baton: profile has 2 active client key(s); revoke them before deleting\n", "baton admin keys list", "baton admin keys revoke"}},
		{name: "profile unavailable", handler: problemReply(422, "profile_unavailable", "no active profile pro_1"),
			args: []string{"keys", "create", "k", "pro_1"},
			want: []string{"baton: no active profile pro_1 (the referenced profile does not exist or was deleted)\n"},
			not:  []string{"copy the key"}},
		{name: "other type gives detail", handler: problemReply(409, "duplicate_name", "a profile with that name already exists"),
			args: []string{"profiles", "create", "p", "x"},
			want: []string{"baton: a profile with that name already exists\n"}},
		{name: "short plain-text body", handler: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(422)
			io.WriteString(w, "Failed to deserialize the JSON body: missing field `name`")
		}, args: []string{"profiles", "create", "p", "x"},
			want: []string{"baton: admin API returned HTTP 422 with an unrecognized body: Failed to deserialize the JSON body: missing field `name`\n"}},
		{name: "long plain-text body", handler: func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(500)
			io.WriteString(w, longText)
		}, args: []string{"providers"},
			want: []string{"baton: admin API returned HTTP 500 with an unrecognized body\n"}, not: []string{"xxx"}},
		{name: "JSON without type", handler: reply(400, `{"error":"nope"}`), args: []string{"providers"},
			want: []string{"admin API returned HTTP 400 with an unrecognized body"}},
		{name: "empty 404 hints at the port", handler: func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(404) },
			args: []string{"providers"},
			want: []string{"admin API returned HTTP 404 with an unrecognized body (is http://", "the admin port?)"}},
		{name: "unparsable 2xx", handler: reply(200, `<html>`), args: []string{"config"},
			want: []string{"baton: unexpected response from admin API — check that baton and the server are the same version\n"}},
		{name: "page without items", handler: reply(200, `{"data":[]}`), args: []string{"profiles", "list"},
			want: []string{"unexpected response from admin API"}},
		{name: "item of wrong shape", handler: reply(200, `{"items":[{"id":7}],"next_cursor":null}`), args: []string{"profiles", "list"},
			want: []string{"unexpected response from admin API"}},
		{name: "cursor loop", handler: reply(200, `{"items":[],"next_cursor":"3"}`), args: []string{"keys", "list"},
			want: []string{"unexpected response from admin API"}},
		{name: "created without id", handler: reply(201, `{}`), args: []string{"keys", "create", "k", "pro_1"},
			want: []string{"unexpected response from admin API"}, not: []string{"copy the key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAdmin(t)
			f.handle("/", tt.handler)
			env := tokenEnv(f)
			if tt.noToken {
				t.Chdir(t.TempDir()) // no ./baton-data/admin-key.pem
				skipIfDefaultKey(t)
				delete(env, "BAE_ADMIN_TOKEN")
			}
			code, out, errs := runAdmin(t, env, tt.args...)
			if code != exitRuntime {
				t.Errorf("exit = %d, want %d", code, exitRuntime)
			}
			if out != "" {
				t.Errorf("stdout = %q, want nothing", out)
			}
			for _, w := range tt.want {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errs)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(errs, n) {
					t.Errorf("stderr has %q:\n%s", n, errs)
				}
			}
			if tt.noToken && f.requests()[0].Auth != "" {
				t.Errorf("sent Authorization %q without a token", f.requests()[0].Auth)
			}
		})
	}
}

func TestAdminUsageErrors(t *testing.T) {
	t.Parallel()
	f := newFakeAdmin(t)
	tests := [][]string{
		{"profiles", "create", "only-name"},
		{"profiles", "get"},
		{"profiles", "update", "pro_1"},
		{"keys", "create", "k"},
		{"events"},
		{"profiles", "list", "--limit", "0"},
		{"profiles", "create", "p", "x", "--max-iterations", "-1"},
		{"profiles", "list", "--no-such-flag"},
		{"--admin-addr", "ftp://host:1", "providers"},
		{"--admin-addr", "http://", "providers"},
		{"config", "extra"},
	}
	for _, args := range tests {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, _, errs := runAdmin(t, tokenEnv(f), args...)
			if code != exitUsage || !strings.HasPrefix(errs, "baton: ") {
				t.Errorf("exit %d, stderr %q; want exit 2", code, errs)
			}
		})
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("usage errors sent %d requests", n)
	}
}
