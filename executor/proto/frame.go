package proto

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"
)

// Limits of one frame.
const (
	MaxMessage   = 16 << 20 // bytes in one WebSocket message
	maxIDLen     = 256      // bytes of an id's JSON text
	maxMethodLen = 128
)

// Kind is what a decoded frame is.
type Kind int

// Frame kinds.
const (
	KindRequest      Kind = iota + 1 // method and id
	KindNotification                 // method, no id
	KindResponse                     // id and exactly one of result, error
)

// Frame is one decoded JSON-RPC object.
type Frame struct {
	// ID is the id's JSON text (a string or number; null only in an error
	// response); nil for a notification.
	ID     json.RawMessage
	Method string
	// Params is the params value (an object or array); nil when absent.
	Params json.RawMessage
	// Result is the result of a success response (possibly "null").
	Result json.RawMessage
	// Error is the error of an error response.
	Error *Error

	call bool // it had a method member (a request or notification)
}

// Kind reports whether f is a request, notification or response.
func (f *Frame) Kind() Kind {
	switch {
	case f.Method == "":
		return KindResponse
	case f.ID == nil:
		return KindNotification
	}
	return KindRequest
}

// IsCall reports whether the message had a method member: a request or
// notification, also when it failed to decode (Decode's answer to a
// response that failed cannot be sent: its id is the other side's).
func (f *Frame) IsCall() bool { return f.call }

// Bind decodes f's params into v. Absent params decode as {}. A failure is
// the -32602 error to answer with.
func (f *Frame) Bind(v any) *Error {
	p := f.Params
	if p == nil {
		p = json.RawMessage(`{}`)
	}
	if err := json.Unmarshal(p, v); err != nil {
		return Errorf(CodeInvalidParams, "Invalid params: %s", paramsProblem(err))
	}
	return nil
}

// paramsProblem words a decoding failure without echoing input.
func paramsProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return te.Field + " must be " + te.Type.String()
	}
	if errors.As(err, &te) {
		return "params must be an object"
	}
	return err.Error()
}

// rawFrame is the decoder's view: every member raw, so that absence and
// null can be told apart.
type rawFrame struct {
	JSONRPC json.RawMessage `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  json.RawMessage `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

// Decode parses one message. On failure it returns the error to answer
// with and, when the message was an object with a usable id, a frame
// carrying that id (answer with id null otherwise). A response that fails
// to decode cannot be answered; the caller drops it. A message that is not
// valid UTF-8 is a parse error, as for serde_json (encoding/json would
// keep the bytes in every raw member).
func Decode(b []byte) (*Frame, *Error) {
	if len(b) > MaxMessage {
		return nil, Errorf(CodeInvalidRequest, "Invalid Request: message larger than %d bytes", MaxMessage)
	}
	b = bytes.TrimSpace(b)
	if !utf8.Valid(b) {
		return nil, Errorf(CodeParseError, "Parse error")
	}
	var r rawFrame
	if err := json.Unmarshal(b, &r); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) || len(b) == 0 {
			return nil, Errorf(CodeParseError, "Parse error")
		}
		return nil, Errorf(CodeInvalidRequest, "Invalid Request: not a JSON object")
	}
	f := &Frame{call: r.Method != nil}
	if r.ID != nil {
		if !validID(r.ID) {
			return nil, Errorf(CodeInvalidRequest, "Invalid Request: id must be a string or a number")
		}
		f.ID = r.ID
	}
	if string(r.JSONRPC) != `"2.0"` {
		return f, Errorf(CodeInvalidRequest, `Invalid Request: missing or wrong "jsonrpc" version`)
	}
	if f.call {
		return f, f.decodeCall(&r)
	}
	return f, f.decodeResponse(&r)
}

func (f *Frame) decodeCall(r *rawFrame) *Error {
	if json.Unmarshal(r.Method, &f.Method) != nil || f.Method == "" || len(f.Method) > maxMethodLen {
		f.Method = ""
		return Errorf(CodeInvalidRequest, `Invalid Request: "method" must be a non-empty string`)
	}
	if string(f.ID) == "null" {
		return Errorf(CodeInvalidRequest, "Invalid Request: id must be a string or a number")
	}
	if r.Result != nil || r.Error != nil {
		return Errorf(CodeInvalidRequest, "Invalid Request: a request has no result or error")
	}
	if r.Params != nil {
		if c := r.Params[0]; c != '{' && c != '[' {
			return Errorf(CodeInvalidRequest, `Invalid Request: "params" must be an object or an array`)
		}
		f.Params = r.Params
	}
	return nil
}

func (f *Frame) decodeResponse(r *rawFrame) *Error {
	if f.ID == nil {
		return Errorf(CodeInvalidRequest, `Invalid Request: missing "method"`)
	}
	if (r.Result == nil) == (r.Error == nil) {
		return Errorf(CodeInvalidRequest, "Invalid Request: a response has exactly one of result and error")
	}
	if r.Error != nil {
		var e Error
		if err := json.Unmarshal(r.Error, &e); err != nil || r.Error[0] != '{' {
			return Errorf(CodeInvalidRequest, "Invalid Request: malformed error object")
		}
		if len(e.Data) > 0 && string(e.Data) == "null" {
			e.Data = nil
		}
		f.Error = &e
		return nil
	}
	if string(f.ID) == "null" {
		return Errorf(CodeInvalidRequest, "Invalid Request: a result needs an id")
	}
	f.Result = r.Result
	return nil
}

// validID reports whether id is null, a string or a number within the
// length limit.
func validID(id json.RawMessage) bool {
	if len(id) == 0 || len(id) > maxIDLen {
		return false
	}
	switch c := id[0]; {
	case c == '"', c == '-', c >= '0' && c <= '9':
		return true
	}
	return string(id) == "null"
}

// Encoders. Requests and errors are written without HTML escaping;
// notifications and results with it, byte for byte as the client API
// writes its frames of the same shapes.

type requestFrame struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  any             `json:"params,omitempty"`
}

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

// EncodeRequest returns a request frame with a numeric id.
func EncodeRequest(id uint64, method string, params any) ([]byte, error) {
	return marshalRaw(requestFrame{"2.0", strconv.AppendUint(nil, id, 10), method, params})
}

// EncodeNotification returns a notification frame; nil params become {}.
func EncodeNotification(method string, params any) ([]byte, error) {
	if params == nil {
		params = struct{}{}
	}
	return json.Marshal(notificationFrame{"2.0", method, params})
}

// EncodeResult returns a success response echoing id.
func EncodeResult(id json.RawMessage, result any) ([]byte, error) {
	if id == nil {
		id = json.RawMessage("null")
	}
	return json.Marshal(resultFrame{"2.0", id, result})
}

// EncodeError returns an error response echoing id (nil → null).
func EncodeError(id json.RawMessage, e *Error) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, err := marshalRaw(errorFrame{"2.0", id, e})
	if err != nil { // only a malformed Data member can fail
		b, _ = marshalRaw(errorFrame{"2.0", id, &Error{Code: e.Code, Message: e.Message}})
	}
	return b
}

// marshalRaw is json.Marshal without HTML escaping.
func marshalRaw(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
