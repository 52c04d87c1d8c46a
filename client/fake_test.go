package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	testClientKey  = "bae_0123456789abcdef0123456789abcdef0123456789abcdef"
	testSessionID  = "ses_00000000000000000000000000000001"
	testSessionKey = "bae_ses_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	testJoinKey    = "bae_ses_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// rpcCall is one request the fake received on /rpc.
type rpcCall struct {
	ID          json.RawMessage
	Method      string
	Params      json.RawMessage
	Auth        string
	ContentType string
}

// ndjson writes response frames the way the server does: one object and a
// newline per frame, flushed.
type ndjson struct {
	w  http.ResponseWriter
	id json.RawMessage
	r  *http.Request
}

func (n *ndjson) raw(line string) {
	io.WriteString(n.w, line+"\n")
	n.w.(http.Flusher).Flush()
}

// event writes a session.event notification; payload is raw JSON.
func (n *ndjson) event(id, typ, payload string) {
	n.raw(`{"jsonrpc":"2.0","method":"session.event","params":` + eventJSON(id, typ, payload) + `}`)
}

func (n *ndjson) delta(text string) {
	n.raw(`{"jsonrpc":"2.0","method":"session.event_delta","params":{"session_id":"` + testSessionID + `","client_key_id":"key_1","text":` + quote(text) + `}}`)
}

func (n *ndjson) result(v string) {
	n.raw(`{"jsonrpc":"2.0","id":` + string(n.id) + `,"result":` + v + `}`)
}

func (n *ndjson) error(code int, msg string) {
	n.raw(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%s}}`, n.id, code, quote(msg)))
}

func (n *ndjson) lagged() {
	n.raw(`{"jsonrpc":"2.0","error":{"code":-32000,"message":"lagged; reconnect with since_event_id"}}`)
}

func eventJSON(id, typ, payload string) string {
	return `{"id":"` + id + `","session_id":"` + testSessionID + `","client_key_id":"key_1","event_type":"` + typ +
		`","payload":` + payload + `,"created_at":"2026-07-06T18:26:10.000Z"}`
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// resultJSON renders a sendMessage terminal result: an assistant message
// with content (raw JSON) and events given as id/type/payload triples.
func resultJSON(content string, events ...[3]string) string {
	evs := make([]string, len(events))
	for i, e := range events {
		evs[i] = eventJSON(e[0], e[1], e[2])
	}
	return `{"message":{"role":"assistant","content":` + content + `},"events":[` + strings.Join(evs, ",") + `]}`
}

// fake is a hand-written Baton client port for one session.
type fake struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	calls    []rpcCall
	opens    []json.RawMessage
	handlers map[string]func(*ndjson, rpcCall)
	closed   bool
}

func newFake(t *testing.T) *fake {
	f := &fake{t: t, handlers: map[string]func(*ndjson, rpcCall){}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v1/sessions", f.open)
	mux.HandleFunc("POST /api/v1/sessions/{id}/join", f.open)
	mux.HandleFunc("POST /api/v1/sessions/{id}/rpc", f.rpc)
	mux.HandleFunc("GET /api/v1/sessions/{id}/events", f.events)
	mux.HandleFunc("GET /api/v1/sessions/{id}/participants", f.participants)
	mux.HandleFunc("DELETE /api/v1/sessions/{id}", f.delete)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// on sets the handler of an RPC method.
func (f *fake) on(method string, h func(*ndjson, rpcCall)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handlers[method] = h
}

// harness returns a harness pointed at the fake.
func (f *fake) harness() *Harness {
	return NewHarness(Config{BaseURL: f.srv.URL, ClientKey: testClientKey, ClientVersion: "1.2.3", HTTPClient: f.srv.Client()})
}

// connect opens a session through h.
func (f *fake) connect(h *Harness) *Session {
	f.t.Helper()
	s, err := h.Connect(context.Background())
	if err != nil {
		f.t.Fatalf("Connect: %v", err)
	}
	return s
}

// callsOf returns the recorded calls of method.
func (f *fake) callsOf(method string) []rpcCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []rpcCall
	for _, c := range f.calls {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

func (f *fake) allCalls() []rpcCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]rpcCall(nil), f.calls...)
}

func problem(w http.ResponseWriter, status int, typ, detail string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"type":%q,"title":%q,"status":%d,"detail":%q}`, typ, http.StatusText(status), status, detail)
}

func bearer(r *http.Request) string {
	a := r.Header.Get("Authorization")
	if t, ok := strings.CutPrefix(a, "Bearer "); ok {
		return t
	}
	return ""
}

func (f *fake) open(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Content-Type") != "application/json" {
		w.WriteHeader(http.StatusUnsupportedMediaType)
		io.WriteString(w, "Expected request with `Content-Type: application/json`")
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		w.WriteHeader(http.StatusUnprocessableEntity)
		io.WriteString(w, "Failed to deserialize the JSON body into the target type")
		return
	}
	if bearer(r) != testClientKey {
		problem(w, http.StatusUnauthorized, "unauthorized", "invalid client key")
		return
	}
	key := testSessionKey
	if id := r.PathValue("id"); id != "" {
		if id != testSessionID {
			problem(w, http.StatusNotFound, "not_found", "no session "+id)
			return
		}
		key = testJoinKey
	}
	for _, t := range req.Tools {
		if t.Name == "forbidden" {
			problem(w, http.StatusForbidden, "tool_not_allowed", `tool "forbidden" is not in the profile's allowlist`)
			return
		}
	}
	f.mu.Lock()
	f.opens = append(f.opens, body)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"session_id":%q,"session_key":%q,"profile":{"id":"pro_1","name":"main","allowed_tools":["get_time","roll_dice"],"mcp_servers":["fs"],"provider":{"provider":"scripted","model":"m1"}}}`, testSessionID, key)
}

func (f *fake) authSession(w http.ResponseWriter, r *http.Request) bool {
	if k := bearer(r); r.PathValue("id") != testSessionID || (k != testSessionKey && k != testJoinKey) {
		problem(w, http.StatusUnauthorized, "unauthorized", "invalid session key")
		return false
	}
	return true
}

func (f *fake) rpc(w http.ResponseWriter, r *http.Request) {
	if !f.authSession(w, r) {
		return
	}
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	var req struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
	}
	n := &ndjson{w: w, id: json.RawMessage("null"), r: r}
	if err := json.Unmarshal(body, &req); err != nil {
		n.error(-32700, "Parse error")
		return
	}
	if req.ID != nil {
		n.id = req.ID
	}
	c := rpcCall{ID: req.ID, Method: req.Method, Params: req.Params, Auth: r.Header.Get("Authorization"), ContentType: r.Header.Get("Content-Type")}
	f.mu.Lock()
	f.calls = append(f.calls, c)
	h := f.handlers[req.Method]
	f.mu.Unlock()
	switch {
	case req.JSONRPC != "2.0":
		n.error(-32600, `Invalid Request: missing or wrong "jsonrpc" version`)
	case h != nil:
		h(n, c)
	case req.Method == "session.registerDriver":
		n.result(`{"registered":true}`)
	default:
		n.error(-32601, "Method not found: "+req.Method)
	}
}

func (f *fake) events(w http.ResponseWriter, r *http.Request) {
	if !f.authSession(w, r) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Query().Get("cursor") {
	case "":
		if r.URL.Query().Get("limit") != "2" {
			problem(w, http.StatusBadRequest, "bad_request", "want limit 2")
			return
		}
		io.WriteString(w, `{"items":[`+eventJSON("evt_1", "session.open", `{"client_version":"1.2.3"}`)+","+
			eventJSON("evt_2", "session.driver.register", `{}`)+`],"next_cursor":"2"}`)
	case "2":
		io.WriteString(w, `{"items":[`+eventJSON("evt_3", "session.close", `{"reason":"client_close"}`)+`],"next_cursor":null}`)
	default:
		problem(w, http.StatusBadRequest, "bad_request", "invalid cursor")
	}
}

func (f *fake) participants(w http.ResponseWriter, r *http.Request) {
	if !f.authSession(w, r) {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"drivers":["key_1","key_2"]}`)
}

func (f *fake) delete(w http.ResponseWriter, r *http.Request) {
	if !f.authSession(w, r) {
		return
	}
	f.mu.Lock()
	was := f.closed
	f.closed = true
	f.mu.Unlock()
	if was {
		problem(w, http.StatusConflict, "session_closed", "session is already closed")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"session_id":%q,"state":"closed"}`, testSessionID)
}
