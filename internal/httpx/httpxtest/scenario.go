// Package httpxtest runs table-driven handler tests for the HTTP ports:
// each Scenario is one request and the response it must get, checked
// exactly (status, RFC 7807 body, framework plain text, JSON body, or an
// empty body).
package httpxtest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/baton-engine/baton/internal/httpx"
	"github.com/google/go-cmp/cmp"
)

// Scenario is one request and what must come back.
type Scenario struct {
	Name    string
	Method  string
	Path    string
	Headers map[string]string
	Body    string
	Setup   func() // runs before the request

	Status  int
	Problem *httpx.Problem // exact RFC 7807 body
	Text    string         // plain-text body must start with this
	Want    string         // exact JSON body
	Empty   bool           // the body must be empty, with no Content-Type
	Check   func(t *testing.T, rec *httptest.ResponseRecorder)
}

// Run runs each scenario as a subtest against h; reset, if set, runs before
// every scenario.
func Run(t *testing.T, h http.Handler, reset func(), scenarios []Scenario) {
	t.Helper()
	for _, sc := range scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			if reset != nil {
				reset()
			}
			if sc.Setup != nil {
				sc.Setup()
			}
			rec := Do(h, sc.Method, sc.Path, sc.Headers, sc.Body)
			sc.check(t, rec)
			if sc.Check != nil {
				sc.Check(t, rec)
			}
		})
	}
}

// Do sends one request to h and returns the recorded response.
func Do(h http.Handler, method, path string, headers map[string]string, body string) *httptest.ResponseRecorder {
	var rb io.Reader
	if body != "" {
		rb = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, path, rb)
	for k, v := range headers {
		r.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

func (sc Scenario) check(t *testing.T, rec *httptest.ResponseRecorder) {
	t.Helper()
	if rec.Code != sc.Status {
		t.Errorf("status = %d, want %d (body %q)", rec.Code, sc.Status, rec.Body)
	}
	ct := rec.Header().Get("Content-Type")
	switch {
	case sc.Problem != nil:
		var p httpx.Problem
		if ct != "application/json" || json.Unmarshal(rec.Body.Bytes(), &p) != nil {
			t.Fatalf("want a problem, got %q %q", ct, rec.Body)
		}
		if diff := cmp.Diff(*sc.Problem, p); diff != "" {
			t.Errorf("problem (-want +got):\n%s", diff)
		}
	case sc.Text != "":
		if ct != "text/plain; charset=utf-8" || !strings.HasPrefix(rec.Body.String(), sc.Text) {
			t.Errorf("want plain text %q…, got %q %q", sc.Text, ct, rec.Body)
		}
	case sc.Want != "":
		if ct != "application/json" {
			t.Errorf("Content-Type = %q", ct)
		}
		if diff := cmp.Diff(sc.Want, rec.Body.String()); diff != "" {
			t.Errorf("body (-want +got):\n%s", diff)
		}
	case sc.Empty:
		if rec.Body.Len() != 0 || ct != "" {
			t.Errorf("want an empty body, got %q %q", ct, rec.Body)
		}
	}
}

// Problem builds an expected problem body.
func Problem(status int, typ, detail string) *httpx.Problem {
	return &httpx.Problem{Type: typ, Title: httpx.Title(status), Status: status, Detail: detail}
}

// Internal checks a 500 `internal` problem whose detail is the generic one
// with the response's request id, so no error text leaked.
func Internal(t *testing.T, rec *httptest.ResponseRecorder) {
	t.Helper()
	InternalDetail(t, rec, "an internal error occurred")
}

// InternalDetail is Internal for another generic detail.
func InternalDetail(t *testing.T, rec *httptest.ResponseRecorder, detail string) {
	t.Helper()
	id := rec.Header().Get(httpx.RequestIDHeader)
	want := `{"type":"internal","title":"Internal Server Error","status":500,"detail":"` + detail + ` (request id ` + id + `)"}`
	if rec.Code != 500 || id == "" || rec.Body.String() != want {
		t.Errorf("got %d %s, want 500 %s", rec.Code, rec.Body, want)
	}
}

// JSONHeaders returns a JSON Content-Type and, unless token is empty, a
// bearer Authorization header.
func JSONHeaders(token string) map[string]string {
	h := map[string]string{"Content-Type": "application/json"}
	if token != "" {
		h["Authorization"] = "Bearer " + token
	}
	return h
}

// Auth returns headers with only an Authorization value.
func Auth(value string) map[string]string { return map[string]string{"Authorization": value} }
