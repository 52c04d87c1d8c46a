// Package wire is the JSON-RPC 2.0 over NDJSON protocol of the session
// loop (POST /api/v1/sessions/{id}/rpc): request envelope parsing in BAE's
// exact order, the frame shapes written back, and the one table that maps
// Baton error codes to JSON-RPC error codes.
//
// It depends only on the standard library, the root package and
// internal/rawjson, so the server and tools can share it.
package wire

import (
	"bytes"
	"encoding/json"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/rawjson"
)

// JSON-RPC error codes Baton emits.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternal       = -32603
	CodeServer         = -32000 // session state, merge, loop failures, lagged
	CodeNotDriver      = -32001
	CodeImageNotAllow  = -32011
	CodeSandboxStart   = -32012
	CodeNoSandbox      = -32013
	CodeNoSubagent     = -32014
	CodeToolNotAllowed = -32015
)

// Request is a parsed JSON-RPC request or notification.
type Request struct {
	// ID is the raw id to echo; nil for a notification (no id member).
	ID     json.RawMessage
	Method string
	// Params is the raw params value; {} when absent.
	Params json.RawMessage
}

// Notification reports whether the request has no id member: its side
// effects run, but no terminal frame is written.
func (r *Request) Notification() bool { return r.ID == nil }

// Error is a JSON-RPC error object (never with a data member).
type Error struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Message }

// Parse decodes one request body in BAE's order (BAE's client API). On
// failure it returns the error to send. The request is nil when the body
// was not a JSON object (answer with id null); otherwise it carries the id
// to echo, and a notification gets no error frame at all.
func Parse(body []byte) (*Request, *Error) {
	body = bytes.TrimSpace(body)
	if !rawjson.Valid(body) {
		return nil, &Error{CodeParseError, "Parse error"}
	}
	switch body[0] {
	case '[':
		return nil, &Error{CodeInvalidRequest, "Invalid Request: batch requests are not supported"}
	case '{':
	default:
		return nil, &Error{CodeInvalidRequest, "Invalid Request"}
	}
	// Members are read as a map would take them: keys unescaped, the last
	// of duplicates winning. The raw values point into body.
	r := &Request{Params: json.RawMessage(`{}`)}
	var version, method, params []byte
	var key []byte
	_ = rawjson.EachMember(body, func(k, val []byte) {
		key = rawjson.AppendKey(key[:0], k)
		switch string(key) {
		case "id":
			r.ID = val
		case "jsonrpc":
			version = val
		case "method":
			method = val
		case "params":
			params = val
		}
	})
	if v, ok := rawjson.AppendUnquoted(nil, version); !ok || string(v) != "2.0" {
		return r, &Error{CodeInvalidRequest, `Invalid Request: missing or wrong "jsonrpc" version`}
	}
	// Only a string is a method: absent, null or any other type is missing.
	if method == nil || method[0] != '"' {
		return r, &Error{CodeInvalidRequest, `Invalid Request: missing "method"`}
	}
	m, _ := rawjson.AppendUnquoted(nil, method)
	r.Method = string(m)
	if params != nil {
		r.Params = params
	}
	return r, nil
}

// Param returns the raw value of key in params, or nil when params is not
// an object or lacks the key. Params of any JSON type are accepted and
// looked up by key (BAE's client API). Params come from Parse, so they
// are valid JSON; a duplicate key's last value counts.
func Param(params json.RawMessage, key string) json.RawMessage {
	return rawjson.Member(params, key)
}

// codes maps Baton error codes to JSON-RPC codes: the one table of this
// transport. Messages travel verbatim (the engine words them for the wire).
var codes = map[string]int{
	baton.ECodeNotOpen:         CodeServer,
	baton.ECodeSessionFailed:   CodeServer,
	baton.ECodeMergeInvalid:    CodeServer,
	baton.ECodeNoTurn:          CodeServer,
	baton.ECodeSessionClosed:   CodeServer,
	baton.ECodeTooManyRequests: CodeServer, // a session's queue or subscriber cap
	baton.ECodeUnavailable:     CodeServer, // e.g. no node of a cluster could serve the session in time
	baton.ECodeLeaseLost:       CodeServer, // the session moved to another node mid-request; retry
	baton.ECodeNotDriver:       CodeNotDriver,
	baton.ECodeInvalidParams:   CodeInvalidParams,
	baton.ECodeToolNotAllowed:  CodeToolNotAllowed,
	baton.ECodeInternal:        CodeInternal,
	baton.ECodeImageNotAllowed: CodeImageNotAllow,
	baton.ECodeSandboxStart:    CodeSandboxStart,
	baton.ECodeNoSandbox:       CodeNoSandbox,
	baton.ECodeNoSubagent:      CodeNoSubagent,
}

// FromError converts an error to its JSON-RPC error. Internal errors get
// the generic "Internal error" message; the caller logs the detail.
func FromError(err error) *Error {
	code := baton.ErrorCode(err)
	c, ok := codes[code]
	if !ok || code == baton.ECodeInternal {
		return &Error{CodeInternal, "Internal error"}
	}
	return &Error{c, baton.ErrorMessage(err)}
}

// Frame shapes. Each is one JSON object; the writer adds the newline.

type notificationFrame struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

type resultFrame struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result"`
}

type errorFrame struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   *Error          `json:"error"`
}

type laggedFrame struct {
	JSONRPC string `json:"jsonrpc"`
	Error   *Error `json:"error"`
}

// Notification returns a notification frame.
func Notification(method string, params any) ([]byte, error) {
	return json.Marshal(notificationFrame{"2.0", method, params})
}

// Result returns a success frame echoing id.
func Result(id json.RawMessage, result any) ([]byte, error) {
	return json.Marshal(resultFrame{"2.0", nullID(id), result})
}

// ErrorFrame returns an error frame echoing id (nil → null).
func ErrorFrame(id json.RawMessage, e *Error) []byte {
	b, _ := json.Marshal(errorFrame{"2.0", nullID(id), e})
	return b
}

// Lagged returns the id-less frame that ends a stream whose reader fell
// behind.
func Lagged() []byte {
	b, _ := json.Marshal(laggedFrame{"2.0", &Error{CodeServer, baton.ErrLagged.Error()}})
	return b
}

func nullID(id json.RawMessage) json.RawMessage {
	if id == nil {
		return json.RawMessage("null")
	}
	return id
}
