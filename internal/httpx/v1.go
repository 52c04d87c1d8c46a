package httpx

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/baton-engine/baton"
)

// The closed /v1 error code set (docs/api.md, registered session clients).
const (
	V1Unauthorized       = "unauthorized"
	V1Forbidden          = "forbidden"
	V1NotFound           = "not_found"
	V1InvalidRequest     = "invalid_request"
	V1Conflict           = "conflict"
	V1ClientOutdated     = "client_outdated"
	V1PreconditionFailed = "precondition_failed"
	V1TooManyRequests    = "too_many_requests"
	V1Internal           = "internal"
)

// V1Status maps a baton error code to the /v1 error code and HTTP status.
// It is the one table for /v1; anything it does not list is internal.
func V1Status(code string) (v1code string, status int) {
	switch code {
	case baton.ECodeUnauthorized:
		return V1Unauthorized, http.StatusUnauthorized
	case baton.ECodeForbidden, baton.ECodeInsufficientScope, baton.ECodeToolNotAllowed, baton.ECodeProfileMismatch:
		return V1Forbidden, http.StatusForbidden
	case baton.ECodeNotFound:
		return V1NotFound, http.StatusNotFound
	case baton.ECodeBadRequest, baton.ECodeInvalidParams, baton.ECodeUnprocessable,
		baton.ECodeUnsupportedMediaType:
		return V1InvalidRequest, http.StatusBadRequest
	case baton.ECodePayloadTooLarge: // the code set stays closed; the status says why
		return V1InvalidRequest, http.StatusRequestEntityTooLarge
	case baton.ECodeConflict, baton.ECodeSessionClosed, baton.ECodeNotOpen, baton.ECodeDuplicateName:
		return V1Conflict, http.StatusConflict
	case V1ClientOutdated:
		return V1ClientOutdated, http.StatusUpgradeRequired
	case V1PreconditionFailed:
		return V1PreconditionFailed, http.StatusPreconditionFailed
	case baton.ECodeTooManyRequests:
		return V1TooManyRequests, http.StatusTooManyRequests
	}
	return V1Internal, http.StatusInternalServerError
}

// v1Body is the /v1 error envelope: {"error":{"code","message"}}.
type v1Body struct {
	Error v1Detail `json:"error"`
}

type v1Detail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// WriteV1 writes one /v1 error envelope with code, one of the closed set
// above, and msg.
func WriteV1(w http.ResponseWriter, status int, code, msg string) {
	_ = WriteJSON(w, status, v1Body{Error: v1Detail{Code: code, Message: msg}})
}

// WriteV1Error renders err in the /v1 envelope. Internal errors get a
// generic message carrying the request id; the detail is only logged.
func WriteV1Error(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	var rej *Rejection
	if errors.As(err, &rej) {
		err = baton.Errorf(baton.ECodeBadRequest, "%s", rej.Text)
	}
	code, status := V1Status(baton.ErrorCode(err))
	msg := baton.ErrorMessage(err)
	if code == V1Internal {
		id := RequestID(r.Context())
		if id == "" {
			id = NewRequestID()
		}
		level := slog.LevelError
		if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
			level = slog.LevelWarn
		}
		log.LogAttrs(r.Context(), level, "internal error", slog.String("request_id", id),
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("error", err.Error()))
		msg = "an internal error occurred (request id " + id + ")"
	}
	WriteV1(w, status, code, msg)
}
