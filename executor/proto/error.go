package proto

import (
	"encoding/json"
	"fmt"
)

// JSON-RPC error codes of the executor protocol. The standard ones are
// JSON-RPC 2.0's (the client API uses the same values); the server range
// means something else here.
const (
	CodeParseError        = -32700
	CodeInvalidRequest    = -32600
	CodeMethodNotFound    = -32601
	CodeInvalidParams     = -32602
	CodeInternal          = -32603
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

// WebSocket close codes. They are untyped so that either side's
// WebSocket library takes them as its own status type.
const (
	CloseNormal           = 1000
	CloseGoingAway        = 1001
	CloseTokenExpired     = 4001 // token expired or credential revoked
	CloseProtocolError    = 4002
	CloseProtocolMismatch = 4003
	CloseLeaseExpired     = 4008
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
