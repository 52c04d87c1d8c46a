package cluster

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// FuzzSessionOf: SessionOf never panics, whatever the method and path,
// and names either no session or one path segment that directly follows
// a session-scoped prefix; the shared event log is never forwarded.
func FuzzSessionOf(f *testing.F) {
	for _, seed := range []struct{ method, path string }{
		{"POST", "/api/v1/sessions/ses_1/rpc"},
		{"GET", "/api/v1/sessions/ses_1/events"},
		{"DELETE", "/api/v1/sessions/ses_1"},
		{"POST", "/api/v1/sessions"},
		{"GET", "/api/v1/sessions/"},
		{"GET", "/api/v1/sessions//rpc"},
		{"POST", "/v1/sessions/ses_2/clients/cli_1"},
		{"GET", "/v1/fs/ses_3/a/b"},
		{"GET", "/v1/fs/"},
		{"GET", ""},
		{"", "/api/v1/sessions/%2F/rpc"},
	} {
		f.Add(seed.method, seed.path)
	}
	f.Fuzz(func(t *testing.T, method, path string) {
		r := &http.Request{Method: method, URL: &url.URL{Path: path}}
		id := SessionOf(r)
		if id == "" {
			return
		}
		if strings.Contains(id, "/") {
			t.Fatalf("SessionOf(%s %q) = %q, which has a slash", method, path, id)
		}
		var rest string
		for _, prefix := range []string{"/api/v1/sessions/", "/v1/sessions/", "/v1/fs/"} {
			if r, ok := strings.CutPrefix(path, prefix); ok {
				rest = r
				break
			}
		}
		if rest != id && !strings.HasPrefix(rest, id+"/") {
			t.Fatalf("SessionOf(%s %q) = %q, not the segment after a session prefix", method, path, id)
		}
		if method == http.MethodGet && strings.HasPrefix(path, "/api/v1/sessions/") && rest == id+"/events" {
			t.Fatalf("SessionOf(GET %q) = %q: the event log is forwarded", path, id)
		}
	})
}
