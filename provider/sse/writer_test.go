package sse

import (
	"io"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestWriter: what Writer writes, Decoder reads back, and nothing reaches
// the client before Flush.
func TestWriter(t *testing.T) {
	rec := httptest.NewRecorder()
	w := NewWriter(rec)
	w.Event("message_start", []byte(`{"type":"message_start"}`))
	w.Event("", []byte("[DONE]"))
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "text/event-stream" ||
		rec.Header().Get("Cache-Control") != "no-cache" || rec.Header().Get("X-Accel-Buffering") != "no" {
		t.Fatalf("status %d, header %v", rec.Code, rec.Header())
	}
	if rec.Body.Len() != 0 || rec.Flushed {
		t.Fatalf("written before Flush: %q", rec.Body)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	const want = "event: message_start\ndata: {\"type\":\"message_start\"}\n\ndata: [DONE]\n\n"
	if got := rec.Body.String(); got != want || !rec.Flushed {
		t.Fatalf("body %q (flushed %v), want %q", got, rec.Flushed, want)
	}
	got, err := decodeAll(rec.Body, DefaultMaxEvent)
	if err != io.EOF {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]ev{{Type: "message_start", Data: `{"type":"message_start"}`}, {Type: "message", Data: "[DONE]"}}, got); diff != "" {
		t.Errorf("decoded (-want +got):\n%s", diff)
	}
}
