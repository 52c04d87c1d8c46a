package executor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Protocol is the WebSocket subprotocol and the executor.register
// protocol value this package speaks.
const Protocol = "bma.executor.v1.1"

// MaxMessageSize bounds one WebSocket message in either direction.
const MaxMessageSize = 16 << 20

// frame is one JSON-RPC 2.0 object on the control channel. ID is nil
// when absent (a notification); Result and Error are set only on
// responses.
type frame struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
}

type frameKind int

const (
	kindRequest      frameKind = iota + 1 // method and id
	kindNotification                      // method, no id
	kindResponse                          // id with result or error
)

// kind classifies a decoded frame.
func (f *frame) kind() frameKind {
	switch {
	case f.Method != "" && f.ID != nil:
		return kindRequest
	case f.Method != "":
		return kindNotification
	}
	return kindResponse
}

// errMalformed marks a message that is not a JSON-RPC 2.0 frame.
var errMalformed = errors.New("malformed frame")

// decodeFrame parses one WebSocket message. It accepts requests,
// notifications and responses, and rejects anything else with an error
// wrapping errMalformed.
func decodeFrame(b []byte) (*frame, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return nil, fmt.Errorf("%w: not a JSON object", errMalformed)
	}
	f := new(frame)
	if err := json.Unmarshal(b, f); err != nil {
		return nil, fmt.Errorf("%w: %v", errMalformed, err)
	}
	if f.JSONRPC != "2.0" {
		return nil, fmt.Errorf("%w: jsonrpc must be \"2.0\"", errMalformed)
	}
	if isNull(f.ID) {
		f.ID = nil
		if f.Method == "" && f.Error == nil {
			return nil, fmt.Errorf("%w: response without id", errMalformed)
		}
	}
	if f.ID != nil && !validID(f.ID) {
		return nil, fmt.Errorf("%w: id must be a string or a number", errMalformed)
	}
	switch {
	case f.Method != "":
		if f.Result != nil || f.Error != nil {
			return nil, fmt.Errorf("%w: request with result or error", errMalformed)
		}
		if f.Params != nil && !isObject(f.Params) && !isNull(f.Params) && f.Params[0] != '[' {
			return nil, fmt.Errorf("%w: params must be an object or array", errMalformed)
		}
	case f.Result != nil && f.Error != nil:
		return nil, fmt.Errorf("%w: both result and error", errMalformed)
	case f.Result == nil && f.Error == nil:
		return nil, fmt.Errorf("%w: no method, result or error", errMalformed)
	case f.ID == nil && f.Error == nil:
		return nil, fmt.Errorf("%w: result without id", errMalformed)
	}
	return f, nil
}

// numericID returns the id of a response to one of our requests; ok is
// false for ids we never send (strings, fractions, null).
func (f *frame) numericID() (int64, bool) {
	if len(f.ID) == 0 || f.ID[0] == '"' {
		return 0, false
	}
	n, err := strconv.ParseInt(string(f.ID), 10, 64)
	return n, err == nil
}

func isNull(b json.RawMessage) bool { return b != nil && string(bytes.TrimSpace(b)) == "null" }

func isObject(b json.RawMessage) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{'
}

func validID(b json.RawMessage) bool {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return false
	}
	return b[0] == '"' || b[0] == '-' || (b[0] >= '0' && b[0] <= '9')
}

// encodeRequest renders a request (id > 0) or a notification (id == 0).
func encodeRequest(id int64, method string, params any) ([]byte, error) {
	p, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("encode %s params: %w", method, err)
	}
	return encodeRaw(id, method, p), nil
}

// encodeRaw renders a request or notification with params already
// encoded.
func encodeRaw(id int64, method string, params json.RawMessage) []byte {
	b := make([]byte, 0, len(params)+len(method)+48)
	b = append(b, `{"jsonrpc":"2.0",`...)
	if id > 0 {
		b = append(b, `"id":`...)
		b = strconv.AppendInt(b, id, 10)
		b = append(b, ',')
	}
	b = append(b, `"method":`...)
	b = strconv.AppendQuote(b, method)
	b = append(b, `,"params":`...)
	b = append(b, params...)
	return append(b, '}')
}

// encodeResponse renders the answer to a harness request: result, or
// rerr when it is non-nil.
func encodeResponse(id json.RawMessage, result any, rerr *RPCError) ([]byte, error) {
	if id == nil {
		id = json.RawMessage("null")
	}
	out := frame{JSONRPC: "2.0", ID: id}
	if rerr != nil {
		out.Error = rerr
	} else {
		r, err := json.Marshal(result)
		if err != nil {
			return nil, fmt.Errorf("encode result: %w", err)
		}
		out.Result = r
	}
	return json.Marshal(out)
}
