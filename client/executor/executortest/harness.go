// Package executortest is a fake harness for testing executors built on
// package executor, Baton's own `baton executor` among them.
//
// A Harness listens on loopback and serves what an executor talks to:
// the token exchange (POST /v1/environments/{id}/token and
// /v1/machines/{id}/token, accepting Credential) and the executor
// WebSocket (GET /v1/executors/connect, subprotocol bma.executor.v1.1).
// It answers the executor's requests the way a harness does
// (executor.register, heartbeats, token refresh, tool.result,
// session.event, …) unless a test overrides a method with Answer, and
// records every request and notification the executor sends, for the
// test to read with Conn.Next. Conn.Call sends a harness request and
// waits for the executor's answer. Handle mounts more routes, such as a
// fake model gateway.
//
// Every wait is bounded by Patience and fails the test when it runs out;
// it is a guard, never a synchronisation.
package executortest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/baton-engine/baton/client/executor"
)

// Credential is the executor credential the harness accepts.
const Credential = "bae_exc_0123456789abcdef0123456789abcdef0123456789abcdef"

// Patience bounds every wait of the harness.
const Patience = 10 * time.Second

// Frame is one JSON-RPC message: a request or notification from the
// executor (Method set), or its answer to a harness request.
type Frame struct {
	JSONRPC string             `json:"jsonrpc"`
	ID      json.RawMessage    `json:"id,omitempty"`
	Method  string             `json:"method,omitempty"`
	Params  json.RawMessage    `json:"params,omitempty"`
	Result  json.RawMessage    `json:"result,omitempty"`
	Error   *executor.RPCError `json:"error,omitempty"`
}

// AnswerFunc answers an executor request: a result, or an error. A
// result of NoAnswer leaves the request unanswered.
type AnswerFunc func(params json.RawMessage) (any, *executor.RPCError)

// NoAnswer, returned by an AnswerFunc, leaves the request unanswered.
type NoAnswer struct{}

// TokenRequest is one token exchange the harness saw.
type TokenRequest struct {
	Path          string
	Authorization string
}

// Harness is a fake harness on loopback.
type Harness struct {
	srv    *httptest.Server
	mux    *http.ServeMux
	conns  chan *Conn
	ctx    context.Context // ends when the test does: every connection with it
	cancel context.CancelFunc

	mu        sync.Mutex
	issued    []string
	requests  []TokenRequest
	answers   map[string]AnswerFunc
	heartbeat time.Duration
	wg        sync.WaitGroup // connection handlers
}

// New starts a harness; it stops when the test ends, closing every
// connection.
func New(t testing.TB) *Harness {
	t.Helper()
	h := &Harness{mux: http.NewServeMux(), conns: make(chan *Conn, 16), answers: map[string]AnswerFunc{}, heartbeat: time.Hour}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.mux.HandleFunc("POST /v1/environments/{id}/token", h.token)
	h.mux.HandleFunc("POST /v1/machines/{id}/token", h.token)
	h.mux.HandleFunc("GET /v1/executors/connect", h.connect)
	h.srv = httptest.NewServer(h.mux)
	t.Cleanup(h.close)
	return h
}

// URL is the harness's client origin, the executor's BaseURL.
func (h *Harness) URL() string { return h.srv.URL }

// Handle mounts handler at pattern (http.ServeMux syntax).
func (h *Harness) Handle(pattern string, handler http.Handler) { h.mux.Handle(pattern, handler) }

// Answer overrides how executor requests of method are answered.
func (h *Harness) Answer(method string, fn AnswerFunc) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.answers[method] = fn
}

// SetHeartbeat sets the heartbeat interval later registrations get
// (default one hour, so that heartbeats stay out of the way).
func (h *Harness) SetHeartbeat(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.heartbeat = d
}

// TokenRequests lists the token exchanges so far.
func (h *Harness) TokenRequests() []TokenRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.requests)
}

func (h *Harness) close() {
	h.cancel()
	h.srv.Close()
	h.wg.Wait()
}

func (h *Harness) token(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.requests = append(h.requests, TokenRequest{Path: r.URL.Path, Authorization: r.Header.Get("Authorization")})
	w.Header().Set("Content-Type", "application/json")
	if r.Header.Get("Authorization") != "Bearer "+Credential {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":{"code":"unauthorized","message":"invalid executor credential"}}`)
		return
	}
	tok := fmt.Sprintf("bae_ext_test%d", len(h.issued)+1)
	h.issued = append(h.issued, tok)
	_ = json.NewEncoder(w).Encode(map[string]any{"token": tok, "expires_at": time.Now().Add(time.Hour).UTC()})
}

func (h *Harness) connect(w http.ResponseWriter, r *http.Request) {
	// Counted before the upgrade: srv.Close waits for the handler until
	// the connection is hijacked, so close's wg.Wait sees this Add.
	h.wg.Add(1)
	defer h.wg.Done()
	h.mu.Lock()
	ok := slices.Contains(h.issued, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	h.mu.Unlock()
	if !ok {
		http.Error(w, `{"error":{"code":"unauthorized","message":"invalid executor token"}}`, http.StatusUnauthorized)
		return
	}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{executor.Protocol}})
	if err != nil {
		return
	}
	if ws.Subprotocol() != executor.Protocol {
		_ = ws.Close(4003, "subprotocol "+executor.Protocol+" required")
		return
	}
	ws.SetReadLimit(executor.MaxMessageSize)
	c := &Conn{h: h, ws: ws, frames: make(chan *Frame, 4096), waits: map[string]chan *Frame{}, done: make(chan struct{})}
	select {
	case h.conns <- c:
	case <-h.ctx.Done():
		_ = ws.CloseNow()
		return
	}
	c.read()
}

// Conn waits for the executor's next connection.
func (h *Harness) Conn(t testing.TB) *Conn {
	t.Helper()
	select {
	case c := <-h.conns:
		return c
	case <-time.After(Patience):
		t.Fatal("executortest: no executor connected")
		return nil
	}
}

// Conn is the harness's end of one executor connection.
type Conn struct {
	h      *Harness
	ws     *websocket.Conn
	frames chan *Frame   // requests and notifications from the executor
	done   chan struct{} // closed when the connection ended
	err    error         // why, set before done closes

	mu    sync.Mutex
	ids   int
	waits map[string]chan *Frame // harness requests waiting for answers
	bad   []string               // messages that were not JSON-RPC
}

func (c *Conn) read() {
	defer close(c.done)
	for {
		_, b, err := c.ws.Read(c.h.ctx)
		if err != nil {
			c.err = err
			return
		}
		f := new(Frame)
		if err := json.Unmarshal(b, f); err != nil || f.JSONRPC != "2.0" {
			c.mu.Lock()
			c.bad = append(c.bad, string(b))
			c.mu.Unlock()
			continue
		}
		if f.Method == "" { // an answer to a harness request
			c.mu.Lock()
			ch := c.waits[string(f.ID)]
			delete(c.waits, string(f.ID))
			c.mu.Unlock()
			if ch != nil {
				ch <- f
			}
			continue
		}
		if f.ID != nil {
			c.answer(f) // first, so a test that sees a request knows its answer is on the wire
		}
		select {
		case c.frames <- f:
		case <-c.h.ctx.Done():
			return
		}
	}
}

// answer replies to an executor request.
func (c *Conn) answer(f *Frame) {
	h := c.h
	h.mu.Lock()
	fn, hb := h.answers[f.Method], h.heartbeat
	h.mu.Unlock()
	var res any
	var rerr *executor.RPCError
	switch {
	case fn != nil:
		res, rerr = fn(f.Params)
		if _, skip := res.(NoAnswer); skip {
			return
		}
	case f.Method == "executor.register":
		res = map[string]any{"executor_id": "exr_test", "connection_id": "conn_test",
			"heartbeat_interval_ms": hb.Milliseconds(), "lease_expires_at": time.Now().Add(time.Minute).UTC(),
			"token_expires_at": time.Now().Add(time.Hour).UTC()}
	case f.Method == "executor.heartbeat":
		res = map[string]any{"lease_expires_at": time.Now().Add(time.Minute).UTC(), "drain": false}
	case f.Method == "executor.token.refresh":
		res = map[string]any{"expires_at": time.Now().Add(time.Hour).UTC()}
	case f.Method == "session.event":
		res = map[string]any{}
	case f.Method == "interaction.request":
		res = map[string]any{"platform_interaction_id": "int_test"}
	case f.Method == "model_token.refresh":
		res = map[string]any{"model_token": "mtok_refreshed", "expires_at": time.Now().Add(time.Hour).UTC()}
	default:
		res = map[string]any{"ok": true}
	}
	c.write(Frame{JSONRPC: "2.0", ID: f.ID, Result: marshal(res), Error: rerr})
}

func marshal(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("executortest: %v", err))
	}
	return b
}

func (c *Conn) write(f Frame) error {
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), Patience)
	defer cancel()
	return c.ws.Write(ctx, websocket.MessageText, b)
}

// Call sends a harness request and returns the executor's answer.
func (c *Conn) Call(t testing.TB, method string, params any) *Frame {
	t.Helper()
	c.mu.Lock()
	c.ids++
	id := json.RawMessage(fmt.Sprintf(`"h-%d"`, c.ids))
	ch := make(chan *Frame, 1)
	c.waits[string(id)] = ch
	c.mu.Unlock()
	if err := c.write(Frame{JSONRPC: "2.0", ID: id, Method: method, Params: marshal(params)}); err != nil {
		t.Fatalf("executortest: send %s: %v", method, err)
	}
	select {
	case f := <-ch:
		return f
	case <-c.done:
		t.Fatalf("executortest: the connection ended before %s was answered: %v", method, c.err)
	case <-time.After(Patience):
		t.Fatalf("executortest: %s was not answered", method)
	}
	return nil
}

// Result calls and decodes a successful answer into out (nil: ignore).
func (c *Conn) Result(t testing.TB, method string, params, out any) {
	t.Helper()
	f := c.Call(t, method, params)
	if f.Error != nil {
		t.Fatalf("executortest: %s: %v", method, f.Error)
	}
	if out != nil {
		Decode(t, f.Result, out)
	}
}

// Notify sends a harness notification.
func (c *Conn) Notify(t testing.TB, method string, params any) {
	t.Helper()
	if err := c.write(Frame{JSONRPC: "2.0", Method: method, Params: marshal(params)}); err != nil {
		t.Fatalf("executortest: send %s: %v", method, err)
	}
}

// Next returns the executor's next request or notification whose method
// is one of methods, dropping the others before it.
func (c *Conn) Next(t testing.TB, methods ...string) *Frame {
	t.Helper()
	timeout := time.After(Patience)
	for {
		select {
		case f := <-c.frames:
			if slices.Contains(methods, f.Method) {
				return f
			}
		case <-timeout:
			t.Fatalf("executortest: no %v from the executor", methods)
			return nil
		}
	}
}

// Closed waits for the connection to end and returns the WebSocket
// close status the executor sent (-1 when it closed without one).
func (c *Conn) Closed(t testing.TB) websocket.StatusCode {
	t.Helper()
	select {
	case <-c.done:
		return websocket.CloseStatus(c.err)
	case <-time.After(Patience):
		t.Fatal("executortest: the connection is still open")
		return -1
	}
}

// Close closes the connection with code and reason, as a harness does.
func (c *Conn) Close(code websocket.StatusCode, reason string) error { return c.ws.Close(code, reason) }

// Malformed lists the messages from the executor that were not JSON-RPC
// 2.0 objects.
func (c *Conn) Malformed() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.bad)
}

// Decode unmarshals raw into out, failing the test when it does not fit.
func Decode(t testing.TB, raw json.RawMessage, out any) {
	t.Helper()
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("executortest: decode %s: %v", raw, err)
	}
}
