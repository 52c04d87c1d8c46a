package sse

import (
	"bytes"
	"net/http"
)

// Writer writes a server-sent event stream as an HTTP reply: the serving
// side of the format Decoder reads. Events are queued and written by
// Flush.
type Writer struct {
	w   http.ResponseWriter
	buf bytes.Buffer
}

// NewWriter sends the headers of an event stream (200, text/event-stream,
// no caching or proxy buffering) and returns a Writer for its events.
func NewWriter(w http.ResponseWriter) *Writer {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &Writer{w: w}
}

// Event queues one event: an "event:" line when name is set, then one
// "data:" line. data must not hold a line break (JSON as encoding/json
// writes it does not).
func (s *Writer) Event(name string, data []byte) {
	if name != "" {
		s.buf.WriteString("event: ")
		s.buf.WriteString(name)
		s.buf.WriteByte('\n')
	}
	s.buf.WriteString("data: ")
	s.buf.Write(data)
	s.buf.WriteString("\n\n")
}

// Flush writes the queued events and flushes the response.
func (s *Writer) Flush() error {
	_, err := s.w.Write(s.buf.Bytes())
	s.buf.Reset()
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
	return err
}
