package httpx

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// lockedBuffer is a log sink that net/http's goroutines and the handler
// may write at once.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) snapshot() *bytes.Buffer {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.NewBuffer(bytes.Clone(b.buf.Bytes()))
}

// TestClientHangsUpMidBody serves a large page through a real loopback
// server and a client that reads the headers and a little of the body,
// then closes its socket: the failed write is a client disconnect, logged
// at DEBUG, and no second status line is attempted (net/http would log
// "superfluous response.WriteHeader" through the server's ErrorLog).
func TestClientHangsUpMidBody(t *testing.T) {
	page := bytes.Repeat([]byte(`{"id":"evt_0123456789abcdef","type":"x"},`), 1<<20) // ~40 MiB: more than the socket buffers hold
	for _, tc := range []struct {
		name   string
		handle func(*slog.Logger, HandlerFunc) http.Handler
	}{{"problem", Handle}, {"v1", HandleV1}} {
		t.Run(tc.name, func(t *testing.T) {
			var sink lockedBuffer
			log := slog.New(slog.NewJSONHandler(&sink, &slog.HandlerOptions{Level: slog.LevelDebug}))
			done := make(chan struct{})
			var once sync.Once
			inner := AccessLog(log, tc.handle(log, func(w http.ResponseWriter, _ *http.Request) error {
				return WriteRaw(w, http.StatusOK, page)
			}))
			s := NewServer("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				defer once.Do(func() { close(done) })
				inner.ServeHTTP(w, r)
			}), log)
			if err := s.Open(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer s.Close()

			conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL(), "http://"))
			if err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequest("GET", s.URL()+"/page", nil)
			if err := req.Write(conn); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status = %d", resp.StatusCode)
			}
			if _, err := io.ReadFull(resp.Body, make([]byte, 64<<10)); err != nil {
				t.Fatal(err)
			}
			conn.Close() // with unread data: the kernel resets the connection
			<-done

			logged := sink.snapshot()
			if strings.Contains(logged.String(), "superfluous") {
				t.Errorf("a second WriteHeader was attempted:\n%s", logged)
			}
			var disconnected bool
			for _, l := range logLines(t, logged) {
				if l["level"] == "ERROR" || l["level"] == "WARN" {
					t.Errorf("logged %v: %v", l["level"], l)
				}
				if l["msg"] == "client disconnected" && l["level"] == "DEBUG" {
					disconnected = true
					if id, _ := l["request_id"].(string); !strings.HasPrefix(id, "req_") || l["path"] != "/page" || l["error"] == nil {
						t.Errorf("disconnect line = %v", l)
					}
				}
				if l["msg"] == "http request" && l["status"] != float64(200) {
					t.Errorf("access line = %v", l)
				}
			}
			if !disconnected {
				t.Errorf("no DEBUG client disconnected line:\n%s", logged)
			}
		})
	}
}

// TestErrorAfterResponseStarted: an error returned after the status line
// that is not a failed write is logged at ERROR, and nothing is appended to
// the response that was already under way.
func TestErrorAfterResponseStarted(t *testing.T) {
	for _, tc := range []struct {
		name   string
		handle func(*slog.Logger, HandlerFunc) http.Handler
	}{{"problem", Handle}, {"v1", HandleV1}} {
		t.Run(tc.name, func(t *testing.T) {
			log, buf := logBuffer()
			h := tc.handle(log, func(w http.ResponseWriter, _ *http.Request) error {
				w.WriteHeader(http.StatusAccepted)
				_, _ = io.WriteString(w, "partial")
				return errors.New("store went away")
			})
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/p", nil))
			if rec.Code != http.StatusAccepted || rec.Body.String() != "partial" {
				t.Errorf("response = %d %q, want 202 \"partial\"", rec.Code, rec.Body)
			}
			lines := logLines(t, buf)
			if len(lines) != 1 || lines[0]["level"] != "ERROR" || lines[0]["msg"] != "error after the response started" ||
				lines[0]["error"] != "store went away" {
				t.Errorf("log = %s", buf)
			}
		})
	}
}

// TestHandleKeepsFlusher: handlers behind Handle can still flush and see
// their flush errors through http.ResponseController.
func TestHandleKeepsFlusher(t *testing.T) {
	h := Handle(nil, func(w http.ResponseWriter, _ *http.Request) error {
		if _, ok := w.(http.Flusher); !ok {
			t.Error("writer is not an http.Flusher")
		}
		return http.NewResponseController(w).Flush()
	})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/p", nil))
	if !rec.Flushed || rec.Code != http.StatusOK {
		t.Errorf("flushed = %v, code = %d", rec.Flushed, rec.Code)
	}
}
