package httpx

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/baton-engine/baton"
)

// RequestIDHeader is the response header carrying the request id.
const RequestIDHeader = "X-Request-Id"

// requestIDKey is the context key of the request id.
type requestIDKey struct{}

// NewRequestID returns a fresh request id, "req_" followed by 32 hex
// characters.
func NewRequestID() string { return baton.NewID("req_") }

// RequestID returns the id AccessLog gave the request, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// AccessLog gives every request an id (in its context and in the
// X-Request-Id response header), recovers a panicking handler into a 500
// problem, and logs one line per request with method, path, status,
// duration and request id: at DEBUG for /healthz, at INFO otherwise.
func AccessLog(log *slog.Logger, next http.Handler) http.Handler {
	log = logger(log)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := NewRequestID()
		r = r.WithContext(context.WithValue(r.Context(), requestIDKey{}, id))
		w.Header().Set(RequestIDHeader, id)
		rec := &recorder{ResponseWriter: w}
		defer func() {
			v := recover()
			if v != nil && v != http.ErrAbortHandler {
				err := fmt.Errorf("panic: %v", v)
				if !rec.wrote {
					WriteInternal(rec, r, log, err, InternalDetail)
					v = nil // answered: the connection can stay
				} else {
					log.LogAttrs(r.Context(), slog.LevelError, "panic after the response started",
						slog.String("request_id", id), slog.String("error", err.Error()))
					v = http.ErrAbortHandler // cut the connection, the response is broken
				}
			}
			level := slog.LevelInfo
			if r.URL.Path == "/healthz" {
				level = slog.LevelDebug
			}
			log.LogAttrs(r.Context(), level, "http request",
				slog.String("method", r.Method),
				slog.String("path", r.URL.Path),
				slog.Int("status", rec.code()),
				slog.Duration("duration", time.Since(start)),
				slog.String("request_id", id))
			if v != nil {
				panic(v)
			}
		}()
		next.ServeHTTP(rec, r)
	})
}

// recorder remembers the status a handler wrote. It passes Flush and Hijack
// through, so streaming and WebSocket handlers work behind AccessLog.
type recorder struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *recorder) WriteHeader(code int) {
	if !w.wrote && (code >= 200 || code == http.StatusSwitchingProtocols) {
		w.status = code
		w.wrote = true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recorder) Write(p []byte) (int, error) {
	if !w.wrote {
		w.status = http.StatusOK
		w.wrote = true
	}
	return w.ResponseWriter.Write(p)
}

// Flush sends buffered data to the client.
func (w *recorder) Flush() {
	if !w.wrote {
		w.status = http.StatusOK
		w.wrote = true
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Hijack hands the connection over to the handler.
func (w *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil && !w.wrote {
		w.status = http.StatusSwitchingProtocols
		w.wrote = true
	}
	return conn, rw, err
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// code is the status to log: what was written, or 200 when nothing was.
func (w *recorder) code() int {
	if !w.wrote {
		return http.StatusOK
	}
	return w.status
}
