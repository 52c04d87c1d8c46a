package baton

import (
	"errors"
	"fmt"
)

// Error codes. They are the `type` slugs of BAE's RFC 7807 bodies; each
// transport has exactly one table mapping them to its own status codes.
const (
	ECodeBadRequest                 = "bad_request"
	ECodeUnauthorized               = "unauthorized"
	ECodeForbidden                  = "forbidden"
	ECodeNotFound                   = "not_found"
	ECodeConflict                   = "conflict"
	ECodeDuplicateName              = "duplicate_name"
	ECodeProfileInUse               = "profile_in_use"
	ECodeProfileUnavailable         = "profile_unavailable"
	ECodePrimaryProviderUnavailable = "primary_provider_unavailable"
	ECodeReservedToolName           = "reserved_tool_name"
	ECodeToolNotAllowed             = "tool_not_allowed"
	ECodeInvalidSubagentTools       = "invalid_subagent_tools"
	ECodeProfileMismatch            = "profile_mismatch"
	ECodeSessionClosed              = "session_closed"
	ECodeInsufficientScope          = "insufficient_scope"
	ECodePayloadTooLarge            = "payload_too_large"
	ECodeUnsupportedMediaType       = "unsupported_media_type"
	ECodeUnprocessable              = "unprocessable_entity"
	ECodeTooManyRequests            = "too_many_requests"
	ECodeUnavailable                = "unavailable"
	ECodeInternal                   = "internal"

	// ECodeLeaseLost is an append refused because this node does not own
	// the session at the epoch it holds (it never acquired the lease, or
	// another node took it over): the caller must stop acting for the
	// session and forward to, or wait for, the new owner. Nothing of the
	// refused write was committed.
	ECodeLeaseLost = "lease_lost"

	// Codes of the session loop (JSON-RPC); the client API maps them to
	// its own error codes.
	ECodeNotOpen         = "session_not_open"          // "session is <state>, not open"
	ECodeNotDriver       = "driver_not_registered"     // "call session.registerDriver before <method>"
	ECodeInvalidParams   = "invalid_params"            // "Invalid params: …"
	ECodeMergeInvalid    = "tool_result_merge_invalid" // "tool result merge invalid: …"
	ECodeSessionFailed   = "session_failed"            // other -32000 conditions
	ECodeNoTurn          = "no_turn"                   // cancelTurn with nothing to cancel
	ECodeImageNotAllowed = "sandbox_image_not_allowed" // -32011
	ECodeSandboxStart    = "sandbox_start_failed"      // -32012
	ECodeNoSandbox       = "sandbox_not_running"       // -32013
	ECodeNoSubagent      = "subagent_not_found"        // -32014
)

// Error is Baton's one domain error. Code is machine-readable and stable;
// Message is safe to show to the caller. Errors without a Code are internal:
// transports replace their text with a generic message and log the detail.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, or
// ECodeInternal when there is none. A nil error has no code.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ECodeInternal
}

// ErrorMessage returns the caller-safe message of the first *Error in err's
// chain, or a generic message for internal errors.
func ErrorMessage(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}
