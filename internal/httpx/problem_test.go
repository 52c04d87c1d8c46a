package httpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/baton-engine/baton"
	"github.com/google/go-cmp/cmp"
)

func TestStatus(t *testing.T) {
	tests := []struct {
		code   string
		status int
	}{
		{baton.ECodeBadRequest, 400},
		{baton.ECodeUnauthorized, 401},
		{baton.ECodeForbidden, 403},
		{baton.ECodeToolNotAllowed, 403},
		{baton.ECodeProfileMismatch, 403},
		{baton.ECodeInsufficientScope, 403},
		{baton.ECodeNotFound, 404},
		{baton.ECodeDuplicateName, 409},
		{baton.ECodeProfileInUse, 409},
		{baton.ECodeSessionClosed, 409},
		{baton.ECodeConflict, 409},
		{baton.ECodePayloadTooLarge, 413},
		{baton.ECodeUnsupportedMediaType, 415},
		{baton.ECodeProfileUnavailable, 422},
		{baton.ECodePrimaryProviderUnavailable, 422},
		{baton.ECodeReservedToolName, 422},
		{baton.ECodeInvalidSubagentTools, 422},
		{baton.ECodeUnprocessable, 422},
		{baton.ECodeTooManyRequests, 429},
		{baton.ECodeInternal, 500},
		{baton.ECodeUnavailable, 503},
		{baton.ECodeLeaseLost, 503},
	}
	for _, tt := range tests {
		got, ok := Status(tt.code)
		if !ok || got != tt.status {
			t.Errorf("Status(%q) = %d, %v; want %d, true", tt.code, got, ok, tt.status)
		}
	}
	if got, ok := Status("no_such_code"); ok || got != 500 {
		t.Errorf("Status(unknown) = %d, %v; want 500, false", got, ok)
	}
}

func TestTitle(t *testing.T) {
	want := map[int]string{
		400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
		409: "Conflict", 413: "Payload Too Large", 415: "Unsupported Media Type",
		422: "Unprocessable Entity", 429: "Too Many Requests", 500: "Internal Server Error",
	}
	for status, title := range want {
		if got := Title(status); got != title {
			t.Errorf("Title(%d) = %q, want %q", status, got, title)
		}
	}
}

// logBuffer returns a logger writing JSON lines into the returned buffer.
func logBuffer() (*slog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	return slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), &buf
}

// logLines decodes every JSON log line in buf.
func logLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func decodeProblem(t *testing.T, rec *httptest.ResponseRecorder) Problem {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type = %q, want application/json", ct)
	}
	var p Problem
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatalf("problem body %q: %v", rec.Body, err)
	}
	return p
}

func TestWriteError(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Problem
	}{
		{"coded", baton.Errorf(baton.ECodeNotFound, "no session ses_1"),
			Problem{Type: "not_found", Title: "Not Found", Status: 404, Detail: "no session ses_1"}},
		{"wrapped", fmt.Errorf("join: %w", baton.Errorf(baton.ECodeSessionClosed, "session is already closed")),
			Problem{Type: "session_closed", Title: "Conflict", Status: 409, Detail: "session is already closed"}},
		{"too large", baton.Errorf(baton.ECodePayloadTooLarge, "big"),
			Problem{Type: "payload_too_large", Title: "Payload Too Large", Status: 413, Detail: "big"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			WriteError(rec, httptest.NewRequest("GET", "/", nil), nil, tt.err)
			if rec.Code != tt.want.Status {
				t.Errorf("status = %d, want %d", rec.Code, tt.want.Status)
			}
			if diff := cmp.Diff(tt.want, decodeProblem(t, rec)); diff != "" {
				t.Errorf("problem (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWriteErrorRejection(t *testing.T) {
	rec := httptest.NewRecorder()
	err := fmt.Errorf("wrapped: %w", &Rejection{Status: 415, Text: "nope"})
	WriteError(rec, httptest.NewRequest("GET", "/", nil), nil, err)
	if rec.Code != 415 || rec.Body.String() != "nope" || rec.Header().Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Errorf("got %d %q %q", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
}

// Internal errors (uncoded, explicitly internal, or with a code the table
// does not know) never show their text; the log has it under the request
// id the wire shows.
func TestWriteErrorInternal(t *testing.T) {
	for _, err := range []error{
		errors.New("sql: secret table exploded"),
		baton.Errorf(baton.ECodeInternal, "secret table exploded"),
		baton.Errorf("weird_code", "secret table exploded"),
	} {
		log, buf := logBuffer()
		h := AccessLog(log, Handle(log, func(http.ResponseWriter, *http.Request) error { return err }))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/x", nil))
		p := decodeProblem(t, rec)
		id := rec.Header().Get(RequestIDHeader)
		want := Problem{Type: "internal", Title: "Internal Server Error", Status: 500,
			Detail: "an internal error occurred (request id " + id + ")"}
		if diff := cmp.Diff(want, p); diff != "" {
			t.Errorf("%v: problem (-want +got):\n%s", err, diff)
		}
		if !strings.HasPrefix(id, "req_") || strings.Contains(rec.Body.String(), "secret") {
			t.Errorf("%v: id %q, body %q", err, id, rec.Body)
		}
		var logged bool
		for _, l := range logLines(t, buf) {
			if l["msg"] == "internal error" {
				logged = l["level"] == "ERROR" && l["request_id"] == id && strings.Contains(l["error"].(string), "secret table exploded")
			}
		}
		if !logged {
			t.Errorf("%v: internal error not logged at ERROR with id %s:\n%s", err, id, buf)
		}
	}
}

func TestWriteJSONNoHTMLEscape(t *testing.T) {
	rec := httptest.NewRecorder()
	if err := WriteJSON(rec, 201, map[string]string{"a": "<b>&"}); err != nil {
		t.Fatal(err)
	}
	if rec.Code != 201 || rec.Body.String() != `{"a":"<b>&"}` {
		t.Errorf("got %d %q", rec.Code, rec.Body)
	}
	// A value that cannot be marshalled is an error and nothing is written.
	rec = httptest.NewRecorder()
	if err := WriteJSON(rec, 200, json.RawMessage("{bad")); err == nil {
		t.Error("WriteJSON(invalid raw) = nil error")
	}
	if rec.Body.Len() != 0 {
		t.Errorf("wrote %q after a marshal error", rec.Body)
	}
}
