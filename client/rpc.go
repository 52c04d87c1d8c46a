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
	ctx   context.Context
	c     *conn
	op    string
	body  io.ReadCloser
	fr    *frameReader // nil once closed
	last  string       // id of the last session.event read
	notes int          // notifications read, of any method
}

func newStream(ctx context.Context, c *conn, op string, body io.ReadCloser) *stream {
	return &stream{ctx: ctx, c: c, op: op, body: body, fr: c.frameReader(body)}
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
	return newStream(ctx, c, op, resp.Body), nil
}

// next returns the next notification as an event, or the terminal
// result. It returns io.EOF when the body ends cleanly, *RPCError for an
// error frame, *LaggedError for the lagged frame, and otherwise the
// context's error or a *TransportError. Notifications of unknown methods
// are skipped.
func (s *stream) next() (ev Event, result json.RawMessage, err error) {
	f, err := s.read(&ev, true)
	if f != nil {
		result = append(json.RawMessage(nil), f.Result...)
	}
	return ev, result, err
}

// read is next with the terminal frame, whose members point into the
// reader's buffer until the next read, returned as such. So does the
// event's payload unless keep.
func (s *stream) read(ev *Event, keep bool) (*frame, error) {
	for {
		f, err := s.fr.next()
		if err != nil {
			if err == io.EOF {
				return nil, io.EOF
			}
			return nil, s.c.fail(s.ctx, s.op, err)
		}
		k, _ := f.kind()
		switch k {
		case kindResult:
			return f, nil
		case kindError:
			return nil, &RPCError{Code: f.Error.Code, Message: f.Error.Message}
		case kindLagged:
			return nil, &LaggedError{LastEventID: s.last, RPC: &RPCError{Code: f.Error.Code, Message: f.Error.Message}}
		}
		s.notes++
		switch f.Method {
		case "session.event":
			err := f.eventErr
			if f.hasEvent {
				*ev = f.event
			} else {
				err = decodeEvent(f.Params, ev, s.fr.in, false)
			}
			if err != nil {
				return nil, &TransportError{Op: s.op, Err: malformed(f.Params, err)}
			}
			if keep && ev.Payload != nil {
				ev.Payload = append(json.RawMessage(nil), ev.Payload...)
			}
			if ev.ID != "" {
				s.last = ev.ID
			}
			return nil, nil
		case DeltaType:
			var d deltaParams
			if err := json.Unmarshal(f.Params, &d); err != nil {
				return nil, &TransportError{Op: s.op, Err: malformed(f.Params, err)}
			}
			*ev = Event{Type: DeltaType, SessionID: d.SessionID, ClientKeyID: d.ClientKeyID, Delta: d.Text}
			return nil, nil
		}
	}
}

// close releases the response body and the reader's buffers.
func (s *stream) close() {
	s.body.Close()
	if s.fr != nil && s.c != nil {
		s.c.release(s.fr)
	}
	s.fr = nil
}

// drain reads the little that follows a terminal frame (the end of the
// chunked body) so that the connection goes back to the pool: a body
// closed before EOF costs a new connection on the next request.
func (s *stream) drain() { _, _ = io.CopyN(io.Discard, s.body, 4<<10) }

// call reads s to its terminal result, passing notifications to note.
func (s *stream) call(note func(Event)) (json.RawMessage, error) {
	defer s.close()
	f, err := s.until(note)
	if err != nil {
		return nil, err
	}
	return append(json.RawMessage(nil), f.Result...), nil
}

// send is call for session.sendMessage: the result comes decoded, read in
// the same pass as its frame, its payloads pointing into one copy of it.
func (s *stream) send(note func(Event)) (*sendResult, error) {
	defer s.close()
	s.fr.sendResults = true
	f, err := s.until(note)
	if err != nil {
		return nil, err
	}
	if f.sendErr != nil {
		return nil, &TransportError{Op: s.op, Err: fmt.Errorf("decode result: %w", f.sendErr)}
	}
	return f.send.moved(f.Result, append([]byte(nil), f.Result...)), nil
}

// until reads to the terminal frame, left in the reader's buffer, and
// drains the body. Payloads are copied only for a note to keep.
func (s *stream) until(note func(Event)) (*frame, error) {
	var ev Event
	for {
		f, err := s.read(&ev, note != nil)
		if err == io.EOF {
			return nil, &TransportError{Op: s.op, Err: fmt.Errorf("stream ended before the terminal frame: %w", io.ErrUnexpectedEOF)}
		}
		if err != nil {
			return nil, err
		}
		if f != nil {
			s.drain()
			return f, nil
		}
		if note != nil {
			note(ev)
		}
	}
}
