package adminapi

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/httpx/httpxtest"
)

func TestRegistries(t *testing.T) {
	f := newFixture(t)
	run(t, f, []httpxtest.Scenario{
		{Name: "mcp servers", Method: "GET", Path: "/admin/v1/mcp-servers", Headers: admin(), Status: 200,
			Want: `{"items":[{"name":"fs","transport":"stdio"},{"name":"web","transport":"http"}]}`},
		{Name: "providers", Method: "GET", Path: "/admin/v1/providers", Headers: admin(), Status: 200,
			Want: `{"items":[{"name":"claude","provider":"anthropic","model":"claude-sonnet","base_url":"https://api.anthropic.com"},` +
				`{"name":"gpt","provider":"openai","model":"gpt-5","base_url":"https://proxy.example/openai"}]}`,
			Check: func(t *testing.T, rec *httptest.ResponseRecorder) {
				if strings.Contains(rec.Body.String(), "secret") || strings.Contains(rec.Body.String(), "SECRET") {
					t.Errorf("providers leak a token: %s", rec.Body)
				}
			}},
		{Name: "config verbatim", Method: "GET", Path: "/admin/v1/config", Headers: admin(), Status: 200,
			Want: `{"providers":{"entries":[{"auth_token":"••••••••","name":"claude"}]}}`},
		{Name: "sandbox status empty", Method: "GET", Path: "/admin/v1/sandbox-status", Headers: admin(), Status: 200,
			Want: `{"items":[]}`},
		{Name: "sandbox status", Method: "GET", Path: "/admin/v1/sandbox-status", Headers: admin(), Status: 200,
			Setup: func() {
				f.images.status = []baton.ProfileImages{
					{ProfileID: "pro_a", Images: []baton.ImageStatus{
						{Name: "alpine", Status: baton.ImageAvailable},
						{Name: "bad", Status: baton.ImageError, Detail: "pull failed"},
						{Name: "ubuntu", Status: baton.ImagePending},
					}},
					{ProfileID: "pro_b"},
				}
			},
			Want: `{"items":[{"profile_id":"pro_a","images":[{"name":"alpine","status":"available"},{"name":"bad","status":"error","detail":"pull failed"},{"name":"ubuntu","status":"pending"}]},` +
				`{"profile_id":"pro_b","images":[]}]}`},
		{Name: "registries are read-only", Method: "POST", Path: "/admin/v1/providers", Headers: admin(), Body: `{}`, Status: 405, Empty: true},
	})
}
