package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
)

// Session is a session this client drives. Its methods are safe for
// concurrent use, but the server runs one turn at a time per session: a
// Send made while another driver's turn runs waits silently in the
// server's queue until it starts.
//
// A server forgets driver registrations when it restarts (paused turns
// and everything else persist). When a driver method (sendMessage, the
// tool loop's results, UpdateTools, CancelTurn, the sandbox and subagent
// methods, or any Call) is refused with -32001 before the server admitted
// it, the Session calls session.registerDriver once and sends the same
// request once more, so tool results computed across a restart still
// reach their paused turn.
type Session struct {
	ID      string
	Key     string
	Profile Profile

	h       *Harness
	nextID  atomic.Int64
	builtin builtin // per-session state of the builtin sandbox and subagent tools
}

// Call makes one JSON-RPC call on the session and decodes its terminal
// result into result (when not nil). Notifications are discarded. It
// serves methods the Session has no wrapper for, such as the sandbox and
// subagent methods. A -32001 refusal is retried once after registering
// again, as described on Session.
func (s *Session) Call(ctx context.Context, method string, params, result any) error {
	raw, err := s.call(ctx, method, params, nil)
	if err != nil {
		return err
	}
	if result == nil {
		return nil
	}
	if err := json.Unmarshal(raw, result); err != nil {
		return &TransportError{Op: method, Err: fmt.Errorf("decode result: %w", err)}
	}
	return nil
}

func (s *Session) call(ctx context.Context, method string, params any, note func(Event)) (json.RawMessage, error) {
	var raw json.RawMessage
	err := s.driving(ctx, method, func() (*stream, error) {
		st, err := s.h.c.openRPC(ctx, s.ID, s.Key, s.nextID.Add(1), method, params)
		if err != nil {
			return nil, err
		}
		raw, err = st.call(note)
		return st, err
	})
	return raw, err
}

const registerDriver = "session.registerDriver"

// codeNotDriver is the JSON-RPC error of a driver method called by a key
// the server does not hold as a driver of the session.
const codeNotDriver = -32001

// register registers this client as a driver of the session.
func (s *Session) register(ctx context.Context) error {
	return s.Call(ctx, registerDriver, struct{}{}, nil)
}

// driving runs one request of method through do. Driver registrations
// live in the server's memory, so a restarted server refuses the
// session's driver methods with -32001 until the client registers again.
// When the answer is that refusal, before any notification (so the
// request was not admitted), driving registers again and runs do once
// more with the same request; a second refusal, or a failed
// registration, is the error returned. registerDriver itself is never
// retried, so this cannot loop.
func (s *Session) driving(ctx context.Context, method string, do func() (*stream, error)) error {
	st, err := do()
	if method == registerDriver || st == nil || st.notes > 0 || !notDriver(err) {
		return err
	}
	s.h.c.log.InfoContext(ctx, "client registering again as a driver", "session", s.ID, "method", method)
	if err := s.register(ctx); err != nil {
		return err
	}
	_, err = do()
	return err
}

func notDriver(err error) bool {
	var re *RPCError
	return errors.As(err, &re) && re.Code == codeNotDriver
}

// Send sends content as a user turn and runs the harness tool loop until
// the assistant replies without calling a tool of this client. content is
// a string, a []Block, a []ToolResult, a json.RawMessage holding a string
// or block array, or a Message (whose Role, when set, is sent too); any
// other value is sent as its JSON encoding. The dispatch member of echoed
// tool_use blocks is removed. Tool handlers of one pause run concurrently;
// their results go back in tool_use order. Session events reach the
// OnEvent hook live, as they arrive.
//
// A turn in which every provider failed returns *ProvidersFailedError.
//
// Cancelling ctx ends Send promptly but does not stop the turn: turns
// belong to the session, not to the request. The server runs the turn to
// its end, and the next Send, from this or any other driver, waits
// silently in the server's queue behind it. A turn paused on this
// client's tool calls (whose results a cancelled Send no longer sends)
// stays paused: this client's next Send continues it, the calls answered
// with "abandoned" errors, while other drivers wait for its abandonment
// deadline. To stop the turn instead, call Session.CancelTurn (with a
// context that is still live).
func (s *Session) Send(ctx context.Context, content any) (*Reply, error) {
	return s.send(ctx, content, nil)
}

// SendStream is Send that also asks for streamed text deltas and passes fn
// every notification as it arrives: session events and DeltaType events
// carrying assistant text. fn runs on the calling goroutine.
func (s *Session) SendStream(ctx context.Context, content any, fn func(Event)) (*Reply, error) {
	return s.send(ctx, content, fn)
}

type sendParams struct {
	Message      Message `json:"message"`
	StreamDeltas bool    `json:"stream_deltas,omitempty"`
	// MaxFrameBytes asks Baton to keep every frame within the reader's
	// bound (Config.MaxFrameSize) by leaving out the largest event
	// payloads of a frame that would pass it; BAE ignores it.
	MaxFrameBytes int `json:"max_frame_bytes,omitempty"`
}

type sendResult struct {
	Message Message `json:"message"`
	Events  []Event `json:"events"`
}

func (s *Session) send(ctx context.Context, content any, fn func(Event)) (*Reply, error) {
	msg, err := userMessage(content)
	if err != nil {
		s.report(err)
		return nil, err
	}
	var all []Event
	for {
		res, err := s.sendMessage(ctx, msg, fn)
		if err != nil {
			s.report(err)
			return nil, err
		}
		all = append(all, res.Events...)
		if providersFailed(res.Events) {
			err := &ProvidersFailedError{Message: res.Message, Events: res.Events}
			s.report(err)
			return nil, err
		}
		if hk := s.h.snapshotHooks(); hk.message != nil {
			hk.message(res.Message)
		}
		calls := s.ours(res.Message)
		if len(calls) == 0 {
			return &Reply{Message: res.Message, Events: all}, nil
		}
		results := s.runTools(ctx, calls)
		if err := ctx.Err(); err != nil {
			s.report(err)
			return nil, err
		}
		blocks := make([]Block, len(results))
		for i, r := range results {
			blocks[i] = r.block()
		}
		b, err := json.Marshal(blocks)
		if err != nil {
			return nil, err
		}
		msg = Message{Role: "user", Content: b}
	}
}

// sendMessage runs one session.sendMessage call.
func (s *Session) sendMessage(ctx context.Context, msg Message, fn func(Event)) (*sendResult, error) {
	var note func(Event) // nil when nobody listens: payloads need not be kept
	if event := s.h.snapshotHooks().event; event != nil || fn != nil {
		note = func(ev Event) {
			if ev.Type != DeltaType && event != nil {
				event(ev)
			}
			if fn != nil {
				fn(ev)
			}
		}
	}
	const method = "session.sendMessage"
	params := sendParams{Message: msg, StreamDeltas: fn != nil, MaxFrameBytes: s.h.c.max}
	var res *sendResult
	err := s.driving(ctx, method, func() (*stream, error) {
		st, err := s.h.c.openRPC(ctx, s.ID, s.Key, s.nextID.Add(1), method, params)
		if err != nil {
			return nil, err
		}
		res, err = st.send(note)
		return st, err
	})
	return res, err
}

func (s *Session) report(err error) {
	if hk := s.h.snapshotHooks(); hk.err != nil {
		hk.err(err)
	}
}

func providersFailed(evs []Event) bool {
	for _, ev := range evs {
		if ev.Type == "session.error" && ev.Reason() == "all_providers_failed" {
			return true
		}
	}
	return false
}

// UpdateTools replaces this client's tool declarations on the server with
// the harness's currently registered tools (session.updateClientTools).
// The server applies them from the next turn.
func (s *Session) UpdateTools(ctx context.Context) error {
	return s.Call(ctx, "session.updateClientTools", struct {
		Tools []ToolDef `json:"tools"`
	}{s.h.defs()}, nil)
}

// CancelTurn stops the session's running turn (session.cancelTurn, a Baton
// extension; BAE answers -32601).
func (s *Session) CancelTurn(ctx context.Context) error {
	return s.Call(ctx, "session.cancelTurn", struct{}{}, nil)
}

// Unsubscribe ends every active subscription of the session, from any
// client (session.unsubscribe).
func (s *Session) Unsubscribe(ctx context.Context) error {
	return s.Call(ctx, "session.unsubscribe", struct{}{}, nil)
}

// Events returns one page of the session's persisted events, oldest first
// (GET …/events). cursor "" starts at the beginning; limit <= 0 uses the
// server default.
func (s *Session) Events(ctx context.Context, cursor string, limit int) (*EventPage, error) {
	q := url.Values{}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	path := s.path("/events")
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var page struct {
		Items      []Event `json:"items"`
		NextCursor *string `json:"next_cursor"`
	}
	if err := s.h.c.rest(ctx, http.MethodGet, path, s.Key, nil, &page); err != nil {
		return nil, err
	}
	p := &EventPage{Items: page.Items}
	if page.NextCursor != nil {
		p.NextCursor = *page.NextCursor
	}
	return p, nil
}

// Participants returns the sorted client-key ids registered as drivers.
func (s *Session) Participants(ctx context.Context) ([]string, error) {
	var out struct {
		Drivers []string `json:"drivers"`
	}
	if err := s.h.c.rest(ctx, http.MethodGet, s.path("/participants"), s.Key, nil, &out); err != nil {
		return nil, err
	}
	return out.Drivers, nil
}

// Close closes the session (DELETE). Closing a session that is no longer
// open returns an *APIError with Status 409. First it cancels the local
// subagents still running and stops the local sandbox containers this
// session started, reporting both to the server.
func (s *Session) Close(ctx context.Context) error {
	s.builtin.close(ctx, s)
	return s.h.c.rest(ctx, http.MethodDelete, s.path(""), s.Key, nil, nil)
}

func (s *Session) path(suffix string) string {
	return "/api/v1/sessions/" + url.PathEscape(s.ID) + suffix
}
