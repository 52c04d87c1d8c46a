package httpx

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestAccessLog(t *testing.T) {
	log, buf := logBuffer()
	var ctxID string
	h := AccessLog(log, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctxID = RequestID(r.Context())
		if r.URL.Path == "/teapot" {
			w.WriteHeader(http.StatusTeapot)
		}
	}))
	for _, path := range []string{"/healthz", "/teapot", "/implicit"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("POST", path, nil))
		if id := rec.Header().Get(RequestIDHeader); id == "" || id != ctxID {
			t.Errorf("%s: header id %q, context id %q", path, id, ctxID)
		}
	}
	lines := logLines(t, buf)
	if len(lines) != 3 {
		t.Fatalf("got %d log lines, want 3:\n%s", len(lines), buf)
	}
	want := []struct {
		level  string
		path   string
		status float64
	}{{"DEBUG", "/healthz", 200}, {"INFO", "/teapot", 418}, {"INFO", "/implicit", 200}}
	for i, w := range want {
		l := lines[i]
		if l["msg"] != "http request" || l["level"] != w.level || l["path"] != w.path || l["status"] != w.status || l["method"] != "POST" {
			t.Errorf("line %d = %v, want %+v", i, l, w)
		}
		if _, ok := l["duration"]; !ok {
			t.Errorf("line %d has no duration: %v", i, l)
		}
		if id, _ := l["request_id"].(string); !strings.HasPrefix(id, "req_") {
			t.Errorf("line %d request_id = %v", i, l["request_id"])
		}
	}
}

func TestAccessLogPanic(t *testing.T) {
	log, buf := logBuffer()
	h := AccessLog(log, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/p", nil))
	p := decodeProblem(t, rec)
	if p.Status != 500 || p.Type != "internal" || strings.Contains(p.Detail, "boom") {
		t.Errorf("problem = %+v", p)
	}
	if !strings.Contains(buf.String(), "panic: boom") || !strings.Contains(buf.String(), `"status":500`) {
		t.Errorf("log = %s", buf)
	}

	// After the response started, the connection is cut instead.
	h = AccessLog(log, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(200)
		panic("late")
	}))
	defer func() {
		if v := recover(); v != http.ErrAbortHandler {
			t.Errorf("recovered %v, want http.ErrAbortHandler", v)
		}
	}()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/p", nil))
}

// Streaming handlers behind AccessLog can still flush.
func TestAccessLogFlush(t *testing.T) {
	h := AccessLog(nil, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "a")
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("Flush: %v", err)
		}
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if !rec.Flushed || rec.Body.String() != "a" {
		t.Errorf("flushed %v, body %q", rec.Flushed, rec.Body)
	}
}

func TestRoutes(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /a", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("DELETE /a/{id}", func(w http.ResponseWriter, _ *http.Request) {})
	h := Routes(mux)
	tests := []struct {
		method, path string
		status       int
		body         string
	}{
		{"GET", "/a", 200, "ok"},
		{"HEAD", "/a", 200, "ok"}, // the server, not the recorder, drops HEAD bodies
		{"GET", "/b", 404, ""},
		{"POST", "/a", 405, ""},
		{"GET", "/a/1", 405, ""},
		{"DELETE", "/a/1", 200, ""},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, nil))
		if rec.Code != tt.status || rec.Body.String() != tt.body {
			t.Errorf("%s %s = %d %q, want %d %q", tt.method, tt.path, rec.Code, rec.Body, tt.status, tt.body)
		}
		if tt.status >= 400 && rec.Header().Get("Content-Type") != "" {
			t.Errorf("%s %s: Content-Type %q on an empty body", tt.method, tt.path, rec.Header().Get("Content-Type"))
		}
	}
}
