package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestParseVersion(t *testing.T) {
	good := map[string]Version{"1.2.3": {1, 2, 3}, "0.0.0": {}, "10.20.30-rc.1": {10, 20, 30}, "1.0.0+build.5": {1, 0, 0}}
	for s, want := range good {
		if got, err := ParseVersion(s); err != nil || got != want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "1", "1.2", "1.2.3.4", "a.b.c", "1.-2.3", "01.2.3", "1..3", "v1.2.3", "1.2.+3", " 1.2.3"} {
		if _, err := ParseVersion(s); err == nil {
			t.Errorf("ParseVersion(%q) accepted", s)
		}
	}
	if !(Version{1, 9, 9}).Less(Version{1, 10, 0}) || (Version{2, 0, 0}).Less(Version{1, 99, 99}) || (Version{1, 2, 3}).Less(Version{1, 2, 3}) {
		t.Error("Less is not numeric")
	}
}

func TestClientVersion(t *testing.T) {
	min := Version{1, 4, 0}
	h := ClientVersion(&min, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }))
	tests := []struct {
		path, header string
		status       int
		body         string
	}{
		{"/v1/sessions/x/clients", "", 204, ""},
		{"/v1/sessions/x/clients", "1.4.0", 204, ""},
		{"/v1/sessions/x/clients", "1.10.0", 204, ""},
		{"/v1/sessions/x/clients", "1.3.99", 426, `{"error":{"code":"client_outdated","message":"Client-Version is below the minimum this server accepts (1.4.0)"}}`},
		{"/api/v1/sessions", "0.9.0", 426, `"type":"client_outdated","title":"Upgrade Required","status":426`},
		{"/v1/sessions/x/clients", "banana", 400, `"code":"invalid_request"`},
		{"/api/v1/sessions", "1.4", 400, `"type":"bad_request"`},
		{"/healthz", "0.0.1", 204, ""},
		{"/api/v1/meta", "0.0.1", 204, ""},
	}
	for _, tc := range tests {
		r := httptest.NewRequest("POST", tc.path, nil)
		if tc.header != "" {
			r.Header.Set(ClientVersionHeader, tc.header)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.body) {
			t.Errorf("%s with %q: %d %s; want %d %s", tc.path, tc.header, w.Code, w.Body, tc.status, tc.body)
		}
	}
	// No minimum: no check at all, even of malformed headers.
	off := ClientVersion(nil, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }))
	r := httptest.NewRequest("POST", "/v1/a", nil)
	r.Header.Set(ClientVersionHeader, "banana")
	w := httptest.NewRecorder()
	off.ServeHTTP(w, r)
	if w.Code != 204 {
		t.Fatalf("unset minimum checked the header: %d", w.Code)
	}
}

// FuzzParseVersion: a parsed version prints as its core and parses back to
// itself.
func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{"1.2.3", "0.0.0", "1.2.3-rc.1", "1.2.3+abc", "01.2.3", "1.2", "1..3", "18446744073709551616.0.0", "1.2.3.4", "+1.2.3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseVersion(s)
		if err != nil {
			return
		}
		back, err := ParseVersion(v.String())
		if err != nil || back != v || v.Less(back) || back.Less(v) {
			t.Fatalf("ParseVersion(%q) = %v; its String %q parses as %v, %v", s, v, v.String(), back, err)
		}
	})
}
