package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
)

type rpcRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      int64  `json:"id"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
}

// stream is one open /rpc response.
type stream struct {
	ctx  context.Context
	c    *conn
	op   string
	body io.ReadCloser
	fr   *frameReader
	last string // id of the last session.event read
}

// openRPC posts one JSON-RPC request to the session's /rpc endpoint and
// returns its NDJSON response. A non-200 status is an *APIError.
func (c *conn) openRPC(ctx context.Context, sessionID, key string, id int64, method string, params any) (*stream, error) {
	op := method
	b, err := json.Marshal(rpcRequest{JSONRPC: "2.0", ID: id, Method: method, Params: params})
	if err != nil {
		return nil, &TransportError{Op: op, Err: err}
	}
	u := c.base + "/api/v1/sessions/" + url.PathEscape(sessionID) + "/rpc"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(b))
	if err != nil {
		return nil, &TransportError{Op: op, Err: err}
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/x-ndjson")
	c.log.DebugContext(ctx, "client rpc", "method", method, "id", id, "session", sessionID)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, c.fail(ctx, op, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		body, err := c.readBody(resp.Body)
		if err != nil {
			return nil, c.fail(ctx, op, err)
		}
		return nil, apiError(resp.StatusCode, body)
	}
	return &stream{ctx: ctx, c: c, op: op, body: resp.Body, fr: newFrameReader(resp.Body, c.max)}, nil
}

// next returns the next notification as an event, or the terminal
// result. It returns io.EOF when the body ends cleanly, *RPCError for an
// error frame, *LaggedError for the lagged frame, and otherwise the
// context's error or a *TransportError. Notifications of unknown methods
// are skipped.
func (s *stream) next() (ev Event, result json.RawMessage, err error) {
	for {
		f, err := s.fr.next()
		if err != nil {
			if err == io.EOF {
				return Event{}, nil, io.EOF
			}
			return Event{}, nil, s.c.fail(s.ctx, s.op, err)
		}
		k, _ := f.kind()
		switch k {
		case kindResult:
			return Event{}, f.Result, nil
		case kindError:
			return Event{}, nil, &RPCError{Code: f.Error.Code, Message: f.Error.Message}
		case kindLagged:
			return Event{}, nil, &LaggedError{LastEventID: s.last, RPC: &RPCError{Code: f.Error.Code, Message: f.Error.Message}}
		}
		switch f.Method {
		case "session.event":
			if err := json.Unmarshal(f.Params, &ev); err != nil {
				return Event{}, nil, &TransportError{Op: s.op, Err: malformed(f.Params, err)}
			}
			if ev.ID != "" {
				s.last = ev.ID
			}
			return ev, nil, nil
		case DeltaType:
			var d deltaParams
			if err := json.Unmarshal(f.Params, &d); err != nil {
				return Event{}, nil, &TransportError{Op: s.op, Err: malformed(f.Params, err)}
			}
			return Event{Type: DeltaType, SessionID: d.SessionID, ClientKeyID: d.ClientKeyID, Delta: d.Text}, nil, nil
		}
	}
}

// close releases the response body.
func (s *stream) close() { s.body.Close() }

// drain reads the little that follows a terminal frame (the end of the
// chunked body) so that the connection goes back to the pool: a body
// closed before EOF costs a new connection on the next request.
func (s *stream) drain() { _, _ = io.CopyN(io.Discard, s.body, 4<<10) }

// call reads s to its terminal result, passing notifications to note.
func (s *stream) call(note func(Event)) (json.RawMessage, error) {
	defer s.close()
	for {
		ev, res, err := s.next()
		if err == io.EOF {
			return nil, &TransportError{Op: s.op, Err: fmt.Errorf("stream ended before the terminal frame: %w", io.ErrUnexpectedEOF)}
		}
		if err != nil {
			return nil, err
		}
		if res != nil {
			s.drain()
			return res, nil
		}
		if note != nil {
			note(ev)
		}
	}
}
