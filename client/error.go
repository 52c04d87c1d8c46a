package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// ErrLagged matches (with errors.Is) the error that ends a stream whose
// reader fell too far behind the server; the error itself is a
// *LaggedError.
var ErrLagged = errors.New("client: lagged; reconnect with since_event_id")

// ErrClosed is what Subscription.Next returns after Close.
var ErrClosed = errors.New("client: subscription closed")

// APIError is a non-2xx REST response. RFC 7807 bodies fill Type, Title
// and Detail; a plain-text body (framework rejections) becomes Detail.
type APIError struct {
	Status int
	Type   string
	Title  string
	Detail string
}

func (e *APIError) Error() string {
	t := e.Type
	if t == "" {
		t = strings.ToLower(http.StatusText(e.Status))
	}
	if e.Detail == "" {
		return fmt.Sprintf("client: HTTP %d %s", e.Status, t)
	}
	return fmt.Sprintf("client: HTTP %d %s: %s", e.Status, t, e.Detail)
}

// apiError builds an APIError from a response status and body.
func apiError(status int, body []byte) *APIError {
	e := &APIError{Status: status}
	var p struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}
	if json.Unmarshal(body, &p) == nil && (p.Type != "" || p.Title != "" || p.Detail != "") {
		e.Type, e.Title, e.Detail = p.Type, p.Title, p.Detail
	} else {
		e.Detail = strings.TrimSpace(string(body))
	}
	if e.Title == "" {
		e.Title = http.StatusText(status)
	}
	return e
}

// RPCError is a JSON-RPC error frame.
type RPCError struct {
	Code    int
	Message string
}

func (e *RPCError) Error() string {
	return fmt.Sprintf("client: rpc error %d: %s", e.Code, e.Message)
}

// LaggedError ends a stream whose reader fell behind: resubscribe with
// SinceEventID = LastEventID and reconcile with Session.Events. It
// matches ErrLagged and, through Unwrap, the -32000 *RPCError.
type LaggedError struct {
	// LastEventID is the id of the last event received on the stream
	// ("" when none was).
	LastEventID string
	RPC         *RPCError
}

func (e *LaggedError) Error() string { return ErrLagged.Error() }

// Is reports whether target is ErrLagged.
func (e *LaggedError) Is(target error) bool { return target == ErrLagged }

// Unwrap returns the lagged frame's RPC error.
func (e *LaggedError) Unwrap() error { return e.RPC }

// ProvidersFailedError reports a turn in which every provider failed (a
// session.error event with reason all_providers_failed). The session is
// then in the error state. Message is the server's placeholder reply and
// Events the result.events of that sendMessage.
type ProvidersFailedError struct {
	Message Message
	Events  []Event
}

func (e *ProvidersFailedError) Error() string {
	return "client: all providers failed: " + e.Message.Text()
}

// TransportError is a network failure, a stream that ended before its
// terminal frame, an oversized or malformed frame, or an unreadable
// response body.
type TransportError struct {
	Op  string
	Err error
}

func (e *TransportError) Error() string { return "client: " + e.Op + ": " + e.Err.Error() }

func (e *TransportError) Unwrap() error { return e.Err }

// ToolError is a tool handler's failure (an error or a panic), or a
// client-dispatched call with no registered handler. The harness sends it
// to the server as an is_error tool_result and reports it to OnError; it
// does not end Send.
type ToolError struct {
	Call ToolCall
	Err  error
}

func (e *ToolError) Error() string {
	return fmt.Sprintf("client: tool %s (%s): %v", e.Call.Name, e.Call.ID, e.Err)
}

func (e *ToolError) Unwrap() error { return e.Err }
