package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/baton-engine/baton/executor/proto"
)

// envShellParent makes the test binary an executor process that runs the
// command in it with Shell and waits (TestShellDiesWithExecutor).
const envShellParent = "EXECUTOR_TEST_SHELL_PARENT"

func TestMain(m *testing.M) {
	if cmd := os.Getenv(envShellParent); cmd != "" { // a test's executor process to kill
		(&Shell{}).Exec(context.Background(), ExecRequest{Command: cmd})
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

const (
	testCred = "bae_exc_0123456789abcdef0123456789abcdef0123456789abcdef"
	testEnv  = "env_test"
	// patience bounds every wait for a frame; it is a failure guard, never
	// a synchronisation.
	patience = 10 * time.Second
)

// fakeHarness is a loopback harness: the token endpoints and the
// executor WebSocket, speaking bma.executor.v1.1 with auto-answers that
// tests can override per method.
type fakeHarness struct {
	t   testing.TB
	srv *httptest.Server
	wg  sync.WaitGroup

	conns chan *fakeConn

	drained   chan struct{} // closed once a heartbeat was answered drain:true
	drainOnce sync.Once

	mu          sync.Mutex
	tokenTTL    time.Duration
	heartbeatMS int64
	drain       bool
	issued      []string // every token handed out, in order
	tokenAuth   []string // Authorization of each exchange
	tokenPaths  []string
	connects    int
	open        []*fakeConn
	answers     map[string]func(params json.RawMessage) (any, *RPCError)
	held        map[string]bool // methods left unanswered
}

func newHarness(t testing.TB) *fakeHarness {
	t.Helper()
	h := &fakeHarness{
		t: t, conns: make(chan *fakeConn, 16), drained: make(chan struct{}),
		tokenTTL: time.Hour, heartbeatMS: 3_600_000,
		answers: map[string]func(json.RawMessage) (any, *RPCError){},
		held:    map[string]bool{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/environments/{id}/token", h.token)
	mux.HandleFunc("POST /v1/machines/{id}/token", h.token)
	mux.HandleFunc("GET /v1/executors/connect", h.connect)
	h.srv = httptest.NewServer(mux)
	t.Cleanup(h.close)
	return h
}

func (h *fakeHarness) close() {
	h.mu.Lock()
	open := slices.Clone(h.open)
	h.mu.Unlock()
	for _, fc := range open {
		_ = fc.ws.CloseNow()
	}
	h.srv.Close()
	h.wg.Wait()
}

// answer overrides the auto-answer of method.
func (h *fakeHarness) answer(method string, fn func(params json.RawMessage) (any, *RPCError)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.answers[method] = fn
}

// hold leaves method's requests unanswered (on) or answers them (off).
func (h *fakeHarness) hold(method string, on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held[method] = on
}

func (h *fakeHarness) set(f func(h *fakeHarness)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f(h)
}

func (h *fakeHarness) token(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tokenAuth = append(h.tokenAuth, r.Header.Get("Authorization"))
	h.tokenPaths = append(h.tokenPaths, r.URL.Path)
	if r.Header.Get("Authorization") != "Bearer "+testCred {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":{"code":"unauthorized","message":"invalid credential"}}`)
		return
	}
	tok := fmt.Sprintf("bae_ext_%d", len(h.issued)+1)
	h.issued = append(h.issued, tok)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"token": tok, "expires_at": time.Now().Add(h.tokenTTL).UTC()})
}

func (h *fakeHarness) connect(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	valid := slices.Contains(h.issued, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	h.mu.Unlock()
	if !valid {
		http.Error(w, "bad token", http.StatusUnauthorized)
		return
	}
	if !strings.Contains(r.Header.Get("Sec-WebSocket-Protocol"), Protocol) {
		http.Error(w, "no acceptable subprotocol", http.StatusBadRequest)
		return
	}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{Protocol}})
	if err != nil {
		return
	}
	ws.SetReadLimit(MaxMessageSize)
	fc := &fakeConn{h: h, ws: ws, frames: make(chan *proto.Frame, 4096), nulls: make(chan *proto.Frame, 16), pending: map[string]chan *proto.Frame{}, done: make(chan struct{})}
	h.mu.Lock()
	h.connects++
	h.open = append(h.open, fc)
	h.wg.Add(1)
	h.mu.Unlock()
	defer h.wg.Done()
	h.conns <- fc
	fc.serve()
}

// conn waits for the next connection.
func (h *fakeHarness) conn(t testing.TB) *fakeConn {
	t.Helper()
	select {
	case fc := <-h.conns:
		return fc
	case <-time.After(patience):
		t.Fatal("no executor connection")
		return nil
	}
}

func (h *fakeHarness) connections() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.connects
}

// config is a test Config against h.
func (h *fakeHarness) config(t testing.TB) Config {
	return Config{
		BaseURL: h.srv.URL, Credential: testCred, Scope: Environment(testEnv),
		Logger:       slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		ReconnectMin: time.Millisecond, ReconnectMax: 20 * time.Millisecond,
	}
}

// start opens an executor with cfg and returns it with its connection,
// the register frame already consumed.
func (h *fakeHarness) start(t testing.TB, cfg Config) (*Executor, *fakeConn, *proto.Frame) {
	t.Helper()
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := e.Open(ctx); err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		if err := e.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	fc := h.conn(t)
	return e, fc, fc.next(t, "executor.register")
}

// noAnswer from an answer hook leaves the request unanswered.
type noAnswer struct{}

// fakeConn is the harness end of one executor connection.
type fakeConn struct {
	h      *fakeHarness
	ws     *websocket.Conn
	frames chan *proto.Frame // every request and notification from the executor
	nulls  chan *proto.Frame // error answers with a null id
	done   chan struct{}
	err    error // why the connection ended, set before done closes

	mu      sync.Mutex
	pending map[string]chan *proto.Frame
	ids     int
}

func (fc *fakeConn) serve() {
	defer close(fc.done)
	for {
		_, b, err := fc.ws.Read(context.Background())
		if err != nil {
			fc.err = err
			return
		}
		f, e := proto.Decode(b) // as strictly as a harness does
		if e != nil {
			fc.h.t.Errorf("executor sent a malformed frame: %s: %v", b, e)
			continue
		}
		if f.Method == "" && isNull(f.ID) {
			fc.nulls <- f
			continue
		}
		if f.Method == "" {
			fc.mu.Lock()
			ch := fc.pending[string(f.ID)]
			delete(fc.pending, string(f.ID))
			fc.mu.Unlock()
			if ch == nil {
				fc.h.t.Errorf("executor answered an unknown id: %s", b)
				continue
			}
			ch <- f
			continue
		}
		// Answer first: a test that sees a request knows its answer is on
		// the wire.
		if f.ID != nil {
			fc.autoAnswer(f)
		}
		fc.frames <- f
	}
}

// autoAnswer answers executor requests the way a harness does, unless
// the test overrides or holds the method.
func (fc *fakeConn) autoAnswer(f *proto.Frame) {
	h := fc.h
	h.mu.Lock()
	fn, held := h.answers[f.Method], h.held[f.Method]
	hb, drain, ttl := h.heartbeatMS, h.drain, h.tokenTTL
	h.mu.Unlock()
	if held {
		return
	}
	var res any
	var rerr *RPCError
	switch {
	case fn != nil:
		res, rerr = fn(f.Params)
		if _, skip := res.(noAnswer); skip {
			return
		}
	case f.Method == "executor.register":
		res = map[string]any{"executor_id": "exr_1", "connection_id": fmt.Sprintf("conn_%d", h.connections()),
			"heartbeat_interval_ms": hb, "lease_expires_at": time.Now().Add(time.Minute).UTC(),
			"token_expires_at": time.Now().Add(ttl).UTC()}
	case f.Method == "executor.heartbeat":
		res = map[string]any{"lease_expires_at": time.Now().Add(time.Minute).UTC(), "drain": drain}
		if drain {
			defer h.drainOnce.Do(func() { close(h.drained) })
		}
	case f.Method == "executor.token.refresh":
		res = map[string]any{"expires_at": time.Now().Add(ttl).UTC()}
	case f.Method == "session.event":
		res = map[string]any{}
	case f.Method == "interaction.request":
		res = map[string]any{"platform_interaction_id": "int_1"}
	default:
		res = map[string]any{"ok": true}
	}
	fc.respond(f.ID, res, rerr)
}

func (fc *fakeConn) respond(id json.RawMessage, res any, rerr *RPCError) {
	b, err := encodeResponse(id, res, rerr)
	if err != nil {
		fc.h.t.Errorf("encode: %v", err)
		return
	}
	_ = fc.ws.Write(context.Background(), websocket.MessageText, b)
}

// send writes a raw message.
func (fc *fakeConn) send(t testing.TB, msg string) {
	t.Helper()
	if err := fc.ws.Write(context.Background(), websocket.MessageText, []byte(msg)); err != nil {
		t.Fatalf("send: %v", err)
	}
}

// call sends a harness request and waits for the executor's answer.
func (fc *fakeConn) call(t testing.TB, method string, params any) *proto.Frame {
	t.Helper()
	fc.mu.Lock()
	fc.ids++
	id := json.RawMessage(fmt.Sprintf(`"h-%d"`, fc.ids))
	ch := make(chan *proto.Frame, 1)
	fc.pending[string(id)] = ch
	fc.mu.Unlock()
	p, _ := json.Marshal(params)
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
	}{"2.0", id, method, p})
	if err := fc.ws.Write(context.Background(), websocket.MessageText, b); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	select {
	case f := <-ch:
		return f
	case <-time.After(patience):
		t.Fatalf("no answer to %s", method)
		return nil
	}
}

// result calls and decodes a successful answer into out.
func (fc *fakeConn) result(t testing.TB, method string, params, out any) {
	t.Helper()
	f := fc.call(t, method, params)
	if f.Error != nil {
		t.Fatalf("%s: %v", method, f.Error)
	}
	if out != nil {
		if err := json.Unmarshal(f.Result, out); err != nil {
			t.Fatalf("%s result %s: %v", method, f.Result, err)
		}
	}
}

// rpcError calls and returns the error answer.
func (fc *fakeConn) rpcError(t testing.TB, method string, params any) *RPCError {
	t.Helper()
	f := fc.call(t, method, params)
	if f.Error == nil {
		t.Fatalf("%s: want an error, got %s", method, f.Result)
	}
	return (*RPCError)(f.Error)
}

// next returns the next frame from the executor whose method is one of
// methods, dropping others.
func (fc *fakeConn) next(t testing.TB, methods ...string) *proto.Frame {
	t.Helper()
	timeout := time.After(patience)
	for {
		select {
		case f := <-fc.frames:
			if slices.Contains(methods, f.Method) {
				return f
			}
		case <-timeout:
			t.Fatalf("no %v frame", methods)
			return nil
		}
	}
}

// until returns the next frame of method for which ok holds.
func (fc *fakeConn) until(t testing.TB, method string, ok func(*proto.Frame) bool) *proto.Frame {
	t.Helper()
	timeout := time.After(patience)
	for {
		select {
		case f := <-fc.frames:
			if f.Method == method && ok(f) {
				return f
			}
		case <-timeout:
			t.Fatalf("no matching %s frame", method)
			return nil
		}
	}
}

// flush drops every frame received so far.
func (fc *fakeConn) flush() {
	for {
		select {
		case <-fc.frames:
		default:
			return
		}
	}
}

// barrier makes sure the executor has processed everything sent before
// it: the reader serves frames in order.
func (fc *fakeConn) barrier(t testing.TB) {
	t.Helper()
	if f := fc.call(t, "test.barrier", nil); f.Error == nil || f.Error.Code != CodeMethodNotFound {
		t.Fatalf("barrier answered %+v", f)
	}
}

// closed waits for the connection to end and returns why.
func (fc *fakeConn) closed(t testing.TB) error {
	t.Helper()
	select {
	case <-fc.done:
		return fc.err
	case <-time.After(patience):
		t.Fatal("connection still open")
		return nil
	}
}

func decode[T any](t testing.TB, raw json.RawMessage) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return v
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func waitDone(t testing.TB, e *Executor) {
	t.Helper()
	select {
	case <-e.Done():
	case <-time.After(patience):
		t.Fatal("executor did not stop")
	}
}

// await waits for ch to close (or receive), failing after patience.
func await[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(patience):
		t.Fatalf("timed out waiting for %s", what)
		var zero T
		return zero
	}
}
