package httpapi

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/httpx/httpxtest"
	"github.com/google/go-cmp/cmp"
)

const openResult = `{"session_id":"ses_new","session_key":"bae_ses_new","profile":{"id":"pro_1","name":"main","allowed_tools":[],"mcp_servers":[],"provider":{"provider":"anthropic","model":"claude"}}}`

// fail returns a setup that makes the session service fail with err.
func (f *fixture) fail(err error) func() {
	return func() { f.sessions.err = err }
}

func strp(s string) *string { return &s }

func TestOpenSession(t *testing.T) {
	f := newFixture(t, 0)
	const path = "/api/v1/sessions"
	shape := "Failed to deserialize the JSON body into the target type: "
	big := `{"client_version":"` + strings.Repeat("x", maxBody) + `"}`
	run(t, f, []httpxtest.Scenario{
		// 0. body (framework, plain text, before authentication)
		{Name: "no content type", Method: "POST", Path: path, Body: `{}`, Headers: httpxtest.Auth("Bearer " + clientToken),
			Status: 415, Text: "Expected request with `Content-Type: application/json`"},
		{Name: "text content type", Method: "POST", Path: path, Body: `{}`,
			Headers: map[string]string{"Content-Type": "text/plain", "Authorization": "Bearer " + clientToken},
			Status:  415, Text: "Expected request with `Content-Type: application/json`"},
		{Name: "content type before auth", Method: "POST", Path: path, Body: `{}`, Status: 415, Text: "Expected request"},
		{Name: "syntax error", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(clientToken), Body: `{"tools":[`,
			Status: 400, Text: "Failed to parse the request body as JSON: "},
		{Name: "empty body", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(clientToken),
			Status: 400, Text: "Failed to parse the request body as JSON: "},
		{Name: "syntax error before auth", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(""), Body: `nope`,
			Status: 400, Text: "Failed to parse the request body as JSON: "},
		{Name: "body not an object", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(clientToken), Body: `[]`,
			Status: 422, Text: shape + "invalid type: sequence"},
		{Name: "body null", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(clientToken), Body: `null`,
			Status: 422, Text: shape + "invalid type: null"},
		{Name: "tools not an array", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(clientToken), Body: `{"tools":{}}`,
			Status: 422, Text: shape + "tools: invalid type: map, expected a sequence"},
		{Name: "tools null", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(clientToken), Body: `{"tools":null}`,
			Status: 422, Text: shape + "tools: invalid type: null, expected a sequence"},
		{Name: "sandbox_tools null", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(clientToken), Body: `{"sandbox_tools":null}`,
			Status: 422, Text: shape + "sandbox_tools: invalid type: null"},
		{Name: "subagent_tools null", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(clientToken), Body: `{"subagent_tools":null}`,
			Status: 422, Text: shape + "subagent_tools: invalid type: null"},
		{Name: "tool not an object", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(clientToken), Body: `{"tools":["read"]}`,
			Status: 422, Text: shape + `tools[0]: invalid type: string "read", expected a map`},
		{Name: "tool without name", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(clientToken), Body: `{"tools":[{"name":"a"},{"description":"d"}]}`,
			Status: 422, Text: shape + "tools[1]: missing field `name`"},
		{Name: "tool name not a string", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(clientToken), Body: `{"tools":[{"name":5}]}`,
			Status: 422, Text: shape + "tools[0].name: invalid type: integer `5`, expected a string"},
		{Name: "description not a string", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(clientToken), Body: `{"tools":[{"name":"a","description":1}]}`,
			Status: 422, Text: shape + "tools[0].description"},
		{Name: "client_version not a string", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(clientToken), Body: `{"client_version":5}`,
			Status: 422, Text: shape + "client_version: invalid type: integer `5`"},
		{Name: "subagent tool without image", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(clientToken),
			Body: `{"subagent_tools":[{"name":"a","subagents":[]}]}`, Status: 422, Text: shape + "subagent_tools[0]: missing field `image`"},
		{Name: "subagent tool without subagents", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(clientToken),
			Body: `{"subagent_tools":[{"name":"a","image":"i"}]}`, Status: 422, Text: shape + "subagent_tools[0]: missing field `subagents`"},
		{Name: "subagents null", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(clientToken),
			Body: `{"subagent_tools":[{"name":"a","image":"i","subagents":null}]}`, Status: 422, Text: shape + "subagent_tools[0].subagents: invalid type: null"},
		{Name: "subagent without harness", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(clientToken),
			Body:   `{"subagent_tools":[{"name":"a","image":"i","subagents":[{"command_template":"c"}]}]}`,
			Status: 422, Text: shape + "subagent_tools[0].subagents[0]: missing field `harness`"},
		{Name: "negative timeout", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(clientToken),
			Body:   `{"subagent_tools":[{"name":"a","image":"i","subagents":[{"harness":"h","command_template":"c","timeout_secs":-1}]}]}`,
			Status: 422, Text: shape + "subagent_tools[0].subagents[0].timeout_secs: invalid value: integer `-1`, expected u64"},
		{Name: "too large", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(""), Body: big,
			Status: 413, Problem: httpxtest.Problem(413, "payload_too_large", "request body is larger than 4096 bytes")},

		// 1. client key
		{Name: "no authorization", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(""), Body: `{}`,
			Status: 401, Problem: httpxtest.Problem(401, "unauthorized", "missing Authorization header")},
		{Name: "not a bearer token", Method: "POST", Path: path, Body: `{}`,
			Headers: map[string]string{"Content-Type": "application/json", "Authorization": "Basic eDp5"},
			Status:  401, Problem: httpxtest.Problem(401, "unauthorized", "Authorization header must be a Bearer token")},
		{Name: "upper-case scheme", Method: "POST", Path: path, Body: `{}`,
			Headers: map[string]string{"Content-Type": "application/json", "Authorization": "BEARER " + clientToken},
			Status:  401, Problem: httpxtest.Problem(401, "unauthorized", "Authorization header must be a Bearer token")},
		{Name: "empty token", Method: "POST", Path: path, Body: `{}`,
			Headers: map[string]string{"Content-Type": "application/json", "Authorization": "Bearer "},
			Status:  401, Problem: httpxtest.Problem(401, "unauthorized", "empty bearer token")},
		{Name: "non-ascii header", Method: "POST", Path: path, Body: `{}`,
			Headers: map[string]string{"Content-Type": "application/json", "Authorization": "Bearer bae_\xe9"},
			Status:  401, Problem: httpxtest.Problem(401, "unauthorized", "missing Authorization header")},
		{Name: "unknown client key", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders("bae_nope"), Body: `{}`,
			Status: 401, Problem: httpxtest.Problem(401, "unauthorized", "invalid client key")},
		{Name: "session key is not a client key", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(sessionToken), Body: `{}`,
			Status: 401, Problem: httpxtest.Problem(401, "unauthorized", "invalid client key")},

		// 2-6. the service's checks, rendered through the table
		{Name: "profile unavailable", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(clientToken), Body: `{}`,
			Setup:  f.fail(baton.Errorf(baton.ECodeProfileUnavailable, "the profile bound to this client key is no longer available")),
			Status: 422, Problem: httpxtest.Problem(422, "profile_unavailable", "the profile bound to this client key is no longer available")},
		{Name: "primary provider unavailable", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(clientToken), Body: `{}`,
			Setup:  f.fail(baton.Errorf(baton.ECodePrimaryProviderUnavailable, `the profile's primary provider "x" is not configured in bae-config.toml`)),
			Status: 422, Problem: httpxtest.Problem(422, "primary_provider_unavailable", `the profile's primary provider "x" is not configured in bae-config.toml`)},
		{Name: "reserved tool name", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(clientToken), Body: `{"tools":[{"name":"remote_subagent_status"}]}`,
			Setup:  f.fail(baton.Errorf(baton.ECodeReservedToolName, "remote_subagent_status is reserved")),
			Status: 422, Problem: httpxtest.Problem(422, "reserved_tool_name", "remote_subagent_status is reserved")},
		{Name: "tool not allowed", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(clientToken), Body: `{"tools":[{"name":"rm"}]}`,
			Setup:  f.fail(baton.Errorf(baton.ECodeToolNotAllowed, `tool "rm" is not in the profile's allowlist`)),
			Status: 403, Problem: httpxtest.Problem(403, "tool_not_allowed", `tool "rm" is not in the profile's allowlist`)},
		{Name: "invalid subagent tools", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(clientToken), Body: `{}`,
			Setup:  f.fail(baton.Errorf(baton.ECodeInvalidSubagentTools, "invalid command_template placeholders")),
			Status: 422, Problem: httpxtest.Problem(422, "invalid_subagent_tools", "invalid command_template placeholders")},
		{Name: "database failure", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(clientToken), Body: `{}`,
			Setup:  f.fail(errors.New("sqlite: disk I/O error on secret.db")),
			Status: 500, Check: httpxtest.Internal},
		{Name: "authenticator failure", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(clientToken), Body: `{}`,
			Setup:  func() { f.auth.err = errors.New("sqlite: secret.db locked") },
			Status: 500, Check: httpxtest.Internal},

		// success
		{Name: "opened", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(clientToken),
			Body:   `{"client_version":"sdk/1","tools":[{"name":"read","extra":1},{"name":"write","description":"w","input_schema":{"type":"object"}},{"name":"n","description":null,"input_schema":null}],"sandbox_tools":[{"name":"sh"}],"subagent_tools":[{"name":"launch","image":"img","subagents":[{"harness":"claude","command_template":"c {prompt}","prompt_via":"arg","timeout_secs":30},{"harness":"codex","command_template":"x"}]}],"unknown":{"a":[1]}}`,
			Status: 201, Want: openResult,
			Check: func(t *testing.T, _ *httptest.ResponseRecorder) {
				thirty := uint64(30)
				schema := json.RawMessage("{}")
				want := &baton.OpenRequest{
					ClientVersion: strp("sdk/1"),
					Tools: []baton.ToolDef{
						{Name: "read", InputSchema: schema},
						{Name: "write", Description: strp("w"), InputSchema: json.RawMessage(`{"type":"object"}`)},
						{Name: "n", InputSchema: schema},
					},
					SandboxTools: []baton.ToolDef{{Name: "sh", InputSchema: schema}},
					SubagentTools: []baton.SubagentToolDef{{Name: "launch", InputSchema: schema, Image: "img", Subagents: []baton.SubagentDef{
						{Harness: "claude", CommandTemplate: "c {prompt}", PromptVia: "arg", TimeoutSecs: &thirty},
						{Harness: "codex", CommandTemplate: "x", PromptVia: "stdin"},
					}}},
				}
				if diff := cmp.Diff(want, f.sessions.req); diff != "" {
					t.Errorf("request (-want +got):\n%s", diff)
				}
				if f.sessions.key != f.clientK {
					t.Errorf("service got key %+v", f.sessions.key)
				}
			}},
		{Name: "empty body object defaults", Method: "POST", Path: path, Body: `{}`,
			Headers: map[string]string{"Content-Type": "application/json; charset=utf-8", "Authorization": "bearer " + clientToken},
			Status:  201, Want: openResult,
			Check: func(t *testing.T, _ *httptest.ResponseRecorder) {
				want := &baton.OpenRequest{Tools: []baton.ToolDef{}, SandboxTools: []baton.ToolDef{}, SubagentTools: []baton.SubagentToolDef{}}
				if diff := cmp.Diff(want, f.sessions.req); diff != "" {
					t.Errorf("request (-want +got):\n%s", diff)
				}
			}},
	})
}

func TestJoinSession(t *testing.T) {
	f := newFixture(t, 0)
	path := "/api/v1/sessions/ses_target/join"
	run(t, f, []httpxtest.Scenario{
		{Name: "no content type", Method: "POST", Path: path, Body: `{}`, Status: 415, Text: "Expected request"},
		{Name: "syntax", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(""), Body: `{`, Status: 400, Text: "Failed to parse"},
		{Name: "shape", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(""), Body: `{"tools":"x"}`, Status: 422, Text: "Failed to deserialize"},
		{Name: "no key", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(""), Body: `{}`,
			Status: 401, Problem: httpxtest.Problem(401, "unauthorized", "missing Authorization header")},
		{Name: "unknown key", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders("bae_x"), Body: `{}`,
			Status: 401, Problem: httpxtest.Problem(401, "unauthorized", "invalid client key")},
		{Name: "no session", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(clientToken), Body: `{}`,
			Setup:  f.fail(baton.Errorf(baton.ECodeNotFound, "no session ses_target")),
			Status: 404, Problem: httpxtest.Problem(404, "not_found", "no session ses_target")},
		{Name: "session closed", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(clientToken), Body: `{}`,
			Setup:  f.fail(baton.Errorf(baton.ECodeSessionClosed, "session is already closed")),
			Status: 409, Problem: httpxtest.Problem(409, "session_closed", "session is already closed")},
		{Name: "profile mismatch", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(clientToken), Body: `{}`,
			Setup:  f.fail(baton.Errorf(baton.ECodeProfileMismatch, "the client key's profile does not match this session's profile")),
			Status: 403, Problem: httpxtest.Problem(403, "profile_mismatch", "the client key's profile does not match this session's profile")},
		{Name: "profile unavailable", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(clientToken), Body: `{}`,
			Setup:  f.fail(baton.Errorf(baton.ECodeProfileUnavailable, "the profile bound to this client key is no longer available")),
			Status: 422, Problem: httpxtest.Problem(422, "profile_unavailable", "the profile bound to this client key is no longer available")},
		{Name: "tool not allowed", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(clientToken), Body: `{}`,
			Setup:  f.fail(baton.Errorf(baton.ECodeToolNotAllowed, `tool "x" is not in the profile's allowlist`)),
			Status: 403, Problem: httpxtest.Problem(403, "tool_not_allowed", `tool "x" is not in the profile's allowlist`)},
		{Name: "joined", Method: "POST", Path: path, Headers: httpxtest.JSONHeaders(clientToken), Body: `{"client_version":"bae-max-observer/1","tools":[]}`,
			Status: 201, Want: strings.Replace(openResult, "ses_new", "ses_target", 1),
			Check: func(t *testing.T, _ *httptest.ResponseRecorder) {
				if f.sessions.id != "ses_target" || f.sessions.key != f.clientK || *f.sessions.req.ClientVersion != "bae-max-observer/1" {
					t.Errorf("service got id %q key %+v req %+v", f.sessions.id, f.sessions.key, f.sessions.req)
				}
			}},
	})
}

func TestParticipants(t *testing.T) {
	f := newFixture(t, 0)
	path := "/api/v1/sessions/" + f.sid + "/participants"
	run(t, f, []httpxtest.Scenario{
		{Name: "no key", Method: "GET", Path: path, Status: 401, Problem: httpxtest.Problem(401, "unauthorized", "missing Authorization header")},
		{Name: "client key", Method: "GET", Path: path, Headers: httpxtest.Auth("Bearer " + clientToken),
			Status: 401, Problem: httpxtest.Problem(401, "unauthorized", "invalid session key")},
		{Name: "unknown session is 401", Method: "GET", Path: "/api/v1/sessions/ses_nope/participants", Headers: httpxtest.Auth("Bearer " + sessionToken),
			Status: 401, Problem: httpxtest.Problem(401, "unauthorized", "invalid session key")},
		{Name: "none", Method: "GET", Path: path, Headers: httpxtest.Auth("Bearer " + sessionToken), Status: 200, Want: `{"drivers":[]}`},
		{Name: "some", Method: "GET", Path: path, Headers: httpxtest.Auth("Bearer " + sessionToken),
			Setup:  func() { f.sessions.drivers = []string{"key_a", "key_b"} },
			Status: 200, Want: `{"drivers":["key_a","key_b"]}`,
			Check: func(t *testing.T, _ *httptest.ResponseRecorder) {
				if f.sessions.id != f.sid {
					t.Errorf("service asked about %q", f.sessions.id)
				}
			}},
	})
}

func TestCloseSession(t *testing.T) {
	f := newFixture(t, 0)
	path := "/api/v1/sessions/" + f.sid
	run(t, f, []httpxtest.Scenario{
		{Name: "no key", Method: "DELETE", Path: path, Status: 401, Problem: httpxtest.Problem(401, "unauthorized", "missing Authorization header")},
		{Name: "unknown session is 401", Method: "DELETE", Path: "/api/v1/sessions/ses_nope", Headers: httpxtest.Auth("Bearer " + sessionToken),
			Status: 401, Problem: httpxtest.Problem(401, "unauthorized", "invalid session key")},
		{Name: "closed", Method: "DELETE", Path: path, Headers: httpxtest.Auth("Bearer " + sessionToken),
			Status: 200, Want: `{"session_id":"` + f.sid + `","state":"closed"}`,
			Check: func(t *testing.T, _ *httptest.ResponseRecorder) {
				if f.sessions.key != f.sessionK {
					t.Errorf("service closed with key %+v", f.sessions.key)
				}
			}},
		{Name: "already closed", Method: "DELETE", Path: path, Headers: httpxtest.Auth("Bearer " + sessionToken),
			Status: 409, Problem: httpxtest.Problem(409, "session_closed", "session is already closed")},
	})
}
