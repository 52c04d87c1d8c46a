package peer

import (
	"errors"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/executor/proto"
)

// codes maps Baton error codes to this protocol's JSON-RPC codes: the one
// table of the executor transport. Messages travel verbatim.
var codes = map[string]int{
	baton.ECodeBadRequest:      proto.CodeInvalidParams,
	baton.ECodeInvalidParams:   proto.CodeInvalidParams,
	baton.ECodeUnprocessable:   proto.CodeInvalidParams,
	baton.ECodeUnauthorized:    proto.CodeForbidden,
	baton.ECodeForbidden:       proto.CodeForbidden,
	baton.ECodeNotFound:        proto.CodeForbidden, // unknown to this executor is forbidden (bma.executor.v1.1)
	baton.ECodeConflict:        proto.CodeConflict,
	baton.ECodeTooManyRequests: proto.CodeOverCapacity,
}

// FromError converts a handler's error to the error frame to send. An// *proto.Error passes through; a baton error maps by code; anything else is
// "Internal error" (the caller logs the detail).
func FromError(err error) *proto.Error {
	var e *proto.Error
	if errors.As(err, &e) {
		return e
	}
	code := baton.ErrorCode(err)
	if c, ok := codes[code]; ok {
		return &proto.Error{Code: c, Message: baton.ErrorMessage(err)}
	}
	return &proto.Error{Code: proto.CodeInternal, Message: "Internal error"}
}
