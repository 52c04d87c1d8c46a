package httpx

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/baton-engine/baton"
)

// Problem is an RFC 7807 error body in BAE's shape. Type is the baton error
// code.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
}

// Status returns the HTTP status of a baton error code on the /api/v1 and
// /admin/v1 routes, and false for a code the table does not know.
func Status(code string) (int, bool) {
	switch code {
	case baton.ECodeBadRequest:
		return http.StatusBadRequest, true
	case baton.ECodeUnauthorized:
		return http.StatusUnauthorized, true
	case baton.ECodeForbidden, baton.ECodeToolNotAllowed,
		baton.ECodeProfileMismatch, baton.ECodeInsufficientScope:
		return http.StatusForbidden, true
	case baton.ECodeNotFound:
		return http.StatusNotFound, true
	case baton.ECodeDuplicateName, baton.ECodeProfileInUse,
		baton.ECodeSessionClosed, baton.ECodeConflict:
		return http.StatusConflict, true
	case baton.ECodePayloadTooLarge:
		return http.StatusRequestEntityTooLarge, true
	case baton.ECodeUnsupportedMediaType:
		return http.StatusUnsupportedMediaType, true
	case baton.ECodeProfileUnavailable, baton.ECodePrimaryProviderUnavailable,
		baton.ECodeReservedToolName, baton.ECodeInvalidSubagentTools,
		baton.ECodeUnprocessable:
		return http.StatusUnprocessableEntity, true
	case baton.ECodeTooManyRequests:
		return http.StatusTooManyRequests, true
	case baton.ECodeInternal:
		return http.StatusInternalServerError, true
	case baton.ECodeUnavailable, baton.ECodeLeaseLost: // a lost lease: the session moved to another node; retry
		return http.StatusServiceUnavailable, true
	}
	return http.StatusInternalServerError, false
}

// Title returns the problem title BAE uses for status.
func Title(status int) string {
	if status == http.StatusRequestEntityTooLarge {
		return "Payload Too Large" // net/http says "Request Entity Too Large"
	}
	return http.StatusText(status)
}

// WriteProblem writes a problem body with the given status, type and detail.
func WriteProblem(w http.ResponseWriter, status int, typ, detail string) {
	body, _ := marshal(Problem{Type: typ, Title: Title(status), Status: status, Detail: detail}) // strings and an int: cannot fail
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// Rejection is what BAE's HTTP framework answers before a handler runs (a
// body with the wrong content type, bad JSON syntax, the wrong shape, a
// query string that does not parse): a status and a plain-text body, not a
// problem.
type Rejection struct {
	Status int
	Text   string
}

func (e *Rejection) Error() string { return e.Text }

// Write writes the rejection as a plain-text response.
func (e *Rejection) Write(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(e.Status)
	_, _ = w.Write([]byte(e.Text))
}

// InternalDetail is the wire detail of every internal error; the request id
// is appended.
const InternalDetail = "an internal error occurred"

// WriteError renders err: a *Rejection as plain text, a baton error with a
// known code as a problem with the code as its type and the error's message
// as its detail, anything else as an internal error (see WriteInternal).
func WriteError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	var rej *Rejection
	if errors.As(err, &rej) {
		rej.Write(w)
		return
	}
	code := baton.ErrorCode(err)
	status, known := Status(code)
	if code == baton.ECodeInternal || !known {
		WriteInternal(w, r, log, err, InternalDetail)
		return
	}
	WriteProblem(w, status, code, baton.ErrorMessage(err))
}

// WriteInternal writes a 500 `internal` problem whose detail is the generic
// detail followed by the request id, and logs err at ERROR under the same
// id. err's text never reaches the wire. An error caused by the client
// going away is logged at WARN.
func WriteInternal(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error, detail string) {
	id := RequestID(r.Context())
	if id == "" {
		id = NewRequestID()
	}
	level := slog.LevelError
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		level = slog.LevelWarn
	}
	logger(log).LogAttrs(r.Context(), level, "internal error",
		slog.String("request_id", id),
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.String("error", err.Error()))
	WriteProblem(w, http.StatusInternalServerError, baton.ECodeInternal, detail+" (request id "+id+")")
}

// WriteJSON writes v as a JSON response with the given status. It marshals
// before writing anything, so a marshal error can still be rendered by the
// caller. HTML characters are not escaped and there is no trailing newline,
// as in BAE.
func WriteJSON(w http.ResponseWriter, status int, v any) error {
	body, err := marshal(v)
	if err != nil {
		return err
	}
	_ = WriteRaw(w, status, body) // the status is sent; a failed write is the client's loss
	return nil
}

// WriteRaw writes an already encoded JSON body.
func WriteRaw(w http.ResponseWriter, status int, body []byte) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, err := w.Write(body)
	return err
}

// marshal is json.Marshal without HTML escaping.
func marshal(v any) ([]byte, error) { return baton.EncodeJSON(v) }

// logger returns log, or a logger that discards when log is nil.
func logger(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log
}
