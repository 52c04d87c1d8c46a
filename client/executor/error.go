package executor

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/baton-engine/baton/executor/proto"
)

// JSON-RPC error codes of bma.executor.v1.1, in both directions.
const (
	CodeParseError        = proto.CodeParseError
	CodeInvalidRequest    = proto.CodeInvalidRequest
	CodeMethodNotFound    = proto.CodeMethodNotFound
	CodeInvalidParams     = proto.CodeInvalidParams
	CodeInternal          = proto.CodeInternal
	CodeForbidden         = proto.CodeForbidden
	CodeTurnInactive      = proto.CodeTurnInactive
	CodeOverCapacity      = proto.CodeOverCapacity
	CodeProtocolMismatch  = proto.CodeProtocolMismatch
	CodeCapabilityMissing = proto.CodeCapabilityMissing
	CodeConflict          = proto.CodeConflict
)

// ErrClosed is returned by calls made after Close, or after the harness
// stopped the executor for good (see Executor.Err for why).
var ErrClosed = errors.New("executor: closed")

// ErrDisconnected is returned by a call whose connection dropped before
// its answer arrived. Calls that are safe to repeat are retried on the
// next connection instead.
var ErrDisconnected = errors.New("executor: disconnected")

// RPCError is a JSON-RPC error object: one the harness answered, or one
// the executor answers with. It has the protocol's error fields (Code,
// Message, Data); Data holds the optional structured detail, such as
// {"reason":…, "capability":…} or {"expected_sequence":…}.
type RPCError proto.Error

func (e *RPCError) Error() string {
	if len(e.Data) > 0 {
		return fmt.Sprintf("executor: rpc error %d: %s %s", e.Code, e.Message, e.Data)
	}
	return fmt.Sprintf("executor: rpc error %d: %s", e.Code, e.Message)
}

// Reason returns data.reason, or "" when there is none.
func (e *RPCError) Reason() string {
	var d struct {
		Reason string `json:"reason"`
	}
	_ = json.Unmarshal(e.Data, &d)
	return d.Reason
}

// rpcErr builds an RPCError with data encoded from d (nil for none).
func rpcErr(code int, msg string, d any) *RPCError {
	e := &RPCError{Code: code, Message: msg}
	if d != nil {
		e.Data, _ = json.Marshal(d)
	}
	return e
}

// capabilityMissing is the -32012 answer for a capability or tool this
// executor does not serve.
func capabilityMissing(capability string) *RPCError {
	return rpcErr(CodeCapabilityMissing, "capability missing: "+capability,
		map[string]string{"reason": proto.ReasonCapabilityMissing, "capability": capability})
}

// HTTPError is a failed HTTP exchange with the harness: the token
// endpoint's answer, or a WebSocket upgrade refused before the switch.
// Code and Message come from the /v1 error envelope when there is one.
type HTTPError struct {
	Op      string
	Status  int
	Code    string
	Message string
}

func (e *HTTPError) Error() string {
	s := fmt.Sprintf("executor: %s: HTTP %d", e.Op, e.Status)
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// httpError builds an HTTPError from a response status and body.
func httpError(op string, status int, body []byte) *HTTPError {
	e := &HTTPError{Op: op, Status: status}
	var env struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &env) == nil && (env.Error.Code != "" || env.Error.Message != "") {
		e.Code, e.Message = env.Error.Code, env.Error.Message
	} else {
		e.Message = strings.TrimSpace(string(body))
		if len(e.Message) > 200 {
			e.Message = e.Message[:200]
		}
	}
	return e
}

// permanent reports whether the harness refuses the credential or the
// scope itself, so that retrying cannot help.
func (e *HTTPError) permanent() bool {
	switch e.Status {
	case 400, 401, 403, 404:
		return true
	}
	return false
}

// CloseError is why the harness stopped the executor for good: a close
// code it does not reconnect after (4002, 4003), or executor.close
// (Notified is then true and Code is the WebSocket code that followed).
type CloseError struct {
	Code     int
	Reason   string
	Notified bool
}

func (e *CloseError) Error() string {
	if e.Notified {
		return fmt.Sprintf("executor: closed by the harness (executor.close, code %d): %s", e.Code, e.Reason)
	}
	return fmt.Sprintf("executor: connection closed with %d: %s", e.Code, e.Reason)
}

// RegisterError is an executor.register refused for good: a protocol
// mismatch (-32010) or a missing capability (-32012).
type RegisterError struct {
	RPC *RPCError
}

func (e *RegisterError) Error() string { return "executor: register refused: " + e.RPC.Error() }

func (e *RegisterError) Unwrap() error { return e.RPC }
