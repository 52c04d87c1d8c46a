package proto

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// The executor side's rules. An executor decodes what a harness sends
// more tolerantly than the harness decodes what an executor sends (Decode),
// as the executor SDK always has: a null id marks a notification, null
// params are absent params, and neither the id's nor the method's length
// nor the text's UTF-8 is checked. Both sides' rules live here so that the
// difference is visible in one place.

// looseFrame is DecodeLoose's view of a message.
type looseFrame struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *Error          `json:"error,omitempty"`
}

// DecodeLoose parses one message from a harness. It accepts requests,
// notifications and responses (a null id becomes no id; an error's null
// data stays "null"). On failure it returns the error to answer with:
// -32700 for a message that is not JSON, -32600 for one that is not a
// JSON-RPC 2.0 frame, with a message beginning "malformed frame: ". The
// frame returned alongside carries the message's id when the message
// names a method and a string or number id, so that the answer reaches
// the caller; it is nil otherwise.
func DecodeLoose(b []byte) (*Frame, *Error) {
	f, why := decodeLoose(b)
	if why == "" {
		return f, nil
	}
	code := CodeInvalidRequest
	if !json.Valid(b) {
		code = CodeParseError
	}
	e := &Error{Code: code, Message: "malformed frame: " + why}
	var probe struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(b, &probe) != nil || probe.Method == "" || !looseID(probe.ID) {
		return nil, e
	}
	return &Frame{ID: probe.ID, call: true}, e
}

// decodeLoose returns the frame, or why b is not one.
func decodeLoose(b []byte) (*Frame, string) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return nil, "not a JSON object"
	}
	var r looseFrame
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err.Error()
	}
	if r.JSONRPC != "2.0" {
		return nil, `jsonrpc must be "2.0"`
	}
	if isNull(r.ID) {
		r.ID = nil
		if r.Method == "" && r.Error == nil {
			return nil, "response without id"
		}
	}
	if r.ID != nil && !looseID(r.ID) {
		return nil, "id must be a string or a number"
	}
	switch {
	case r.Method != "":
		if r.Result != nil || r.Error != nil {
			return nil, "request with result or error"
		}
		if r.Params != nil && !isObject(r.Params) && !isNull(r.Params) && r.Params[0] != '[' {
			return nil, "params must be an object or array"
		}
	case r.Result != nil && r.Error != nil:
		return nil, "both result and error"
	case r.Result == nil && r.Error == nil:
		return nil, "no method, result or error"
	case r.ID == nil && r.Error == nil:
		return nil, "result without id"
	}
	return &Frame{ID: r.ID, Method: r.Method, Params: r.Params, Result: r.Result, Error: r.Error, call: r.Method != ""}, ""
}

func isNull(b json.RawMessage) bool { return b != nil && string(bytes.TrimSpace(b)) == "null" }

func isObject(b json.RawMessage) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{'
}

// looseID reports whether b is a string or a number, of any length.
func looseID(b json.RawMessage) bool {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return false
	}
	return b[0] == '"' || b[0] == '-' || (b[0] >= '0' && b[0] <= '9')
}

// EncodeCall returns a request (id > 0) or a notification (id 0) whose
// params the caller has already encoded; they are written verbatim.
func EncodeCall(id uint64, method string, params json.RawMessage) []byte {
	m, _ := json.Marshal(method) // a string always encodes
	b := make([]byte, 0, len(params)+len(m)+48)
	b = append(b, `{"jsonrpc":"2.0",`...)
	if id > 0 {
		b = append(b, `"id":`...)
		b = strconv.AppendUint(b, id, 10)
		b = append(b, ',')
	}
	b = append(b, `"method":`...)
	b = append(b, m...)
	b = append(b, `,"params":`...)
	b = append(b, params...)
	return append(b, '}')
}
