package proto

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/coder/websocket"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/wire"
)

// JSON-RPC error codes of the executor protocol. The standard ones are the
// client API's (package wire); the server range means something else here.
const (
	CodeParseError        = wire.CodeParseError
	CodeInvalidRequest    = wire.CodeInvalidRequest
	CodeMethodNotFound    = wire.CodeMethodNotFound
	CodeInvalidParams     = wire.CodeInvalidParams
	CodeInternal          = wire.CodeInternal
	CodeForbidden         = -32001
	CodeTurnInactive      = -32007
	CodeOverCapacity      = -32009 // capability or resource limits
	CodeProtocolMismatch  = -32010
	CodeCapabilityMissing = -32012 // data.reason, data.capability
	CodeConflict          = -32013 // data.expected_sequence where relevant
)

// Reasons carried in data.reason.
const (
	ReasonCapabilityMissing = "capability_missing"
	ReasonStaleEpoch        = "stale_epoch"
	ReasonForbidden         = "forbidden"
	ReasonTurnInactive      = "turn_inactive"
)

// WebSocket close codes.
const (
	CloseNormal           websocket.StatusCode = 1000
	CloseGoingAway        websocket.StatusCode = 1001
	CloseTokenExpired     websocket.StatusCode = 4001 // token expired or credential revoked
	CloseProtocolError    websocket.StatusCode = 4002
	CloseProtocolMismatch websocket.StatusCode = 4003
	CloseLeaseExpired     websocket.StatusCode = 4008
)

// Error is a JSON-RPC error object. Data, when present, is an object
// (ErrorData) in this protocol.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string {
	if len(e.Data) > 0 {
		return fmt.Sprintf("jsonrpc error %d: %s (%s)", e.Code, e.Message, e.Data)
	}
	return fmt.Sprintf("jsonrpc error %d: %s", e.Code, e.Message)
}

// ErrorData is the data member this protocol's errors carry.
type ErrorData struct {
	Reason           string `json:"reason,omitempty"`
	Capability       string `json:"capability,omitempty"`
	ExpectedSequence *int64 `json:"expected_sequence,omitempty"`
}

// Detail decodes e's data member; it is zero when absent or not an object.
func (e *Error) Detail() ErrorData {
	var d ErrorData
	_ = json.Unmarshal(e.Data, &d)
	return d
}

// Errorf returns an error without data.
func Errorf(code int, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// WithData returns e with d as its data member.
func (e *Error) WithData(d ErrorData) *Error {
	b, _ := json.Marshal(d)
	return &Error{Code: e.Code, Message: e.Message, Data: b}
}

// CapabilityMissing is -32012 with data {reason:"capability_missing",
// capability}. A tool the executor does not serve is capability
// "tool:<name>".
func CapabilityMissing(capability, message string) *Error {
	return Errorf(CodeCapabilityMissing, "%s", message).WithData(ErrorData{Reason: ReasonCapabilityMissing, Capability: capability})
}

// Conflict is -32013 with data.reason and, for a sequence gap,
// data.expected_sequence.
func Conflict(reason, message string, expectedSequence *int64) *Error {
	return Errorf(CodeConflict, "%s", message).WithData(ErrorData{Reason: reason, ExpectedSequence: expectedSequence})
}

// codes maps Baton error codes to this protocol's JSON-RPC codes: the one
// table of the executor transport. Messages travel verbatim.
var codes = map[string]int{
	baton.ECodeBadRequest:      CodeInvalidParams,
	baton.ECodeInvalidParams:   CodeInvalidParams,
	baton.ECodeUnprocessable:   CodeInvalidParams,
	baton.ECodeUnauthorized:    CodeForbidden,
	baton.ECodeForbidden:       CodeForbidden,
	baton.ECodeNotFound:        CodeForbidden, // unknown to this executor is forbidden (bma.executor.v1.1)
	baton.ECodeConflict:        CodeConflict,
	baton.ECodeTooManyRequests: CodeOverCapacity,
}

// FromError converts a handler's error to the error frame to send. An
// *Error passes through; a baton error maps by code; anything else is
// "Internal error" (the caller logs the detail).
func FromError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	code := baton.ErrorCode(err)
	if c, ok := codes[code]; ok {
		return &Error{Code: c, Message: baton.ErrorMessage(err)}
	}
	return &Error{Code: CodeInternal, Message: "Internal error"}
}
