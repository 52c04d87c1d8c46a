package httpapi

import (
	"log/slog"
	"net/http"
	"strings"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/httpx"
)

// isV1 reports whether path is under the /v1 API, whose errors use the
// envelope instead of RFC 7807.
func isV1(path string) bool { return strings.HasPrefix(path, "/v1/") || path == "/v1" }

// guardError is one refusal of a guard (rate limit, client version,
// idempotency), in both of the client port's error shapes.
type guardError struct {
	status  int
	v1Code  string // code in the /v1 envelope
	apiType string // problem type on /api/v1
	message string
}

// write renders e in the shape of r's API.
func (e guardError) write(w http.ResponseWriter, r *http.Request) {
	if !isV1(r.URL.Path) {
		httpx.WriteProblem(w, e.status, e.apiType, e.message)
		return
	}
	httpx.WriteV1(w, e.status, e.v1Code, e.message)
}

// guardBadRequest is a 400 in either shape.
func guardBadRequest(msg string) guardError {
	return guardError{http.StatusBadRequest, httpx.V1InvalidRequest, baton.ECodeBadRequest, msg}
}

// writeGuardInternal answers an unexpected failure of a guard: a generic
// message with the request id on the wire, the detail in the log.
func writeGuardInternal(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	if !isV1(r.URL.Path) {
		httpx.WriteInternal(w, r, log, err, httpx.InternalDetail)
		return
	}
	id := httpx.RequestID(r.Context())
	if id == "" {
		id = httpx.NewRequestID()
	}
	discardNil(log).LogAttrs(r.Context(), slog.LevelError, "internal error",
		slog.String("request_id", id), slog.String("method", r.Method),
		slog.String("path", r.URL.Path), slog.String("error", err.Error()))
	guardError{http.StatusInternalServerError, httpx.V1Internal, baton.ECodeInternal,
		httpx.InternalDetail + " (request id " + id + ")"}.write(w, r)
}

// discardNil returns log, or a logger that discards when log is nil.
func discardNil(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log
}
