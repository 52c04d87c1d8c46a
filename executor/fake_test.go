package executor

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/executor/proto"
	"github.com/baton-engine/baton/internal/clocktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// guard bounds every wait of a test so that a broken feature fails it
// instead of hanging; nothing waits for it to pass.
const guard = 10 * time.Second

// fakeTokens is a hand-written baton.ExecutorTokens: tokens are whatever
// the test adds.
type fakeTokens struct {
	mu     sync.Mutex
	grants map[string]baton.ExecutorGrant
}

func newTokens() *fakeTokens { return &fakeTokens{grants: map[string]baton.ExecutorGrant{}} }

func (f *fakeTokens) add(token string, g baton.ExecutorGrant) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.grants[token] = g
	return token
}

func (f *fakeTokens) Issue(context.Context, string, string, string) (string, *baton.ExecutorGrant, error) {
	return "", nil, baton.Errorf(baton.ECodeUnauthorized, "not issued by the fake")
}

func (f *fakeTokens) Verify(_ context.Context, token string) (*baton.ExecutorGrant, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g, ok := f.grants[token]
	if !ok {
		return nil, baton.Errorf(baton.ECodeUnauthorized, "invalid executor token")
	}
	return &g, nil
}

// t0 is where the hub's test clock starts.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// env is a hub behind a loopback server.
type env struct {
	hub    *Hub
	url    string
	tokens *fakeTokens
	clock  *clocktest.Clock
}

const (
	interval = 10 * time.Second
	window   = time.Minute
)

func newEnv(t *testing.T, mods ...func(*Options)) *env {
	t.Helper()
	e := &env{tokens: newTokens(), clock: clocktest.New(t0)}
	opts := Options{Tokens: e.tokens, HeartbeatInterval: interval, ResumeWindow: window, Clock: e.clock, CallTimeout: guard}
	for _, m := range mods {
		m(&opts)
	}
	h, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	e.hub = h
	mux := http.NewServeMux()
	mux.Handle("GET /v1/executors/connect", h)
	srv := httptest.NewServer(mux)
	e.url = "ws" + strings.TrimPrefix(srv.URL, "http") + "/v1/executors/connect"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), guard)
		defer cancel()
		closeDone := make(chan error, 1)
		go func() { closeDone <- h.Close(ctx) }()
		<-closeDone
		srv.Close()
	})
	return e
}

// envToken adds a token for an environment executor valid for an hour.
func (e *env) envToken(envID, credID string) string {
	return e.tokens.add(baton.ExecutorTokenPrefix+envID+credID+strconv.Itoa(len(e.tokens.grants)), baton.ExecutorGrant{
		Scope: baton.ExecutorScopeEnvironment, EnvironmentID: envID, CredentialID: credID, ExpiresAt: t0.Add(time.Hour)})
}

func (e *env) machineToken(machineID, credID string) string {
	return e.tokens.add(baton.ExecutorTokenPrefix+machineID+credID+strconv.Itoa(len(e.tokens.grants)), baton.ExecutorGrant{
		Scope: baton.ExecutorScopeMachine, MachineID: machineID, CredentialID: credID, ExpiresAt: t0.Add(time.Hour)})
}

// texec is a raw test executor: it speaks the protocol frame by frame.
type texec struct {
	t       *testing.T
	ws      *websocket.Conn
	nextID  atomic.Int64
	mu      sync.Mutex
	waiting map[string]chan *proto.Frame
	inbox   chan *proto.Frame // harness → executor requests and notifications
	done    chan struct{}
	err     error // why the connection ended; read after done
}

func (e *env) dial(t *testing.T, token string, subprotocols ...string) *texec {
	t.Helper()
	if subprotocols == nil {
		subprotocols = []string{proto.SubprotocolV11}
	}
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, e.url, &websocket.DialOptions{
		HTTPHeader:   http.Header{"Authorization": {"Bearer " + token}},
		Subprotocols: subprotocols,
	})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	ws.SetReadLimit(proto.MaxMessage)
	x := &texec{t: t, ws: ws, waiting: map[string]chan *proto.Frame{}, inbox: make(chan *proto.Frame, 64), done: make(chan struct{})}
	go x.read()
	t.Cleanup(func() { _ = ws.CloseNow(); <-x.done })
	return x
}

func (x *texec) read() {
	defer close(x.done)
	for {
		_, b, err := x.ws.Read(context.Background())
		if err != nil {
			x.err = err
			return
		}
		f, perr := proto.Decode(b)
		if perr != nil {
			x.err = perr
			return
		}
		if f.Kind() == proto.KindResponse {
			x.mu.Lock()
			ch := x.waiting[string(f.ID)]
			delete(x.waiting, string(f.ID))
			x.mu.Unlock()
			if ch != nil {
				ch <- f
			} else {
				x.inbox <- f // an answer to nothing shows up as a surprise
			}
			continue
		}
		x.inbox <- f
	}
}

func (x *texec) write(v any) {
	x.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		x.t.Fatal(err)
	}
	if err := x.ws.Write(context.Background(), websocket.MessageText, b); err != nil {
		x.t.Fatalf("write: %v", err)
	}
}

// send writes a request with a given id and returns a channel for its answer.
func (x *texec) send(id, method string, params any) <-chan *proto.Frame {
	x.t.Helper()
	ch := make(chan *proto.Frame, 1)
	x.mu.Lock()
	x.waiting[id] = ch
	x.mu.Unlock()
	x.write(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": method, "params": params})
	return ch
}

// call sends a request and waits for its answer.
func (x *texec) call(method string, params any) *proto.Frame {
	x.t.Helper()
	return x.callID(strconv.FormatInt(x.nextID.Add(1), 10), method, params)
}

func (x *texec) callID(id, method string, params any) *proto.Frame {
	x.t.Helper()
	ch := x.send(id, method, params)
	select {
	case f := <-ch:
		return f
	case <-x.done:
		select { // the answer may have come just before the close
		case f := <-ch:
			return f
		default:
		}
		x.t.Fatalf("%s: connection ended: %v", method, x.err)
	case <-time.After(guard):
		x.t.Fatalf("%s: no answer", method)
	}
	return nil
}

// ok calls and decodes a success result into out (unless nil).
func (x *texec) ok(method string, params, out any) {
	x.t.Helper()
	f := x.call(method, params)
	if f.Error != nil {
		x.t.Fatalf("%s: %v", method, f.Error)
	}
	if out != nil {
		if err := json.Unmarshal(f.Result, out); err != nil {
			x.t.Fatal(err)
		}
	}
}

// fails calls and returns the error answer.
func (x *texec) fails(method string, params any) *proto.Error {
	x.t.Helper()
	f := x.call(method, params)
	if f.Error == nil {
		x.t.Fatalf("%s: want an error, got %s", method, f.Result)
	}
	return f.Error
}

func (x *texec) notify(method string, params any) {
	x.t.Helper()
	x.write(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
}

// next returns the next harness → executor frame.
func (x *texec) next() *proto.Frame {
	x.t.Helper()
	select {
	case f := <-x.inbox:
		return f
	case <-x.done:
		select { // frames read before the close come first
		case f := <-x.inbox:
			return f
		default:
		}
		x.t.Fatalf("connection ended: %v", x.err)
	case <-time.After(guard):
		x.t.Fatal("no frame from the harness")
	}
	return nil
}

// expect returns the next frame, which must be method; params decode into p.
func (x *texec) expect(method string, p any) *proto.Frame {
	x.t.Helper()
	f := x.next()
	if f.Method != method {
		x.t.Fatalf("got %s %s, want %s", f.Method, f.Params, method)
	}
	if p != nil {
		if e := f.Bind(p); e != nil {
			x.t.Fatal(e)
		}
	}
	return f
}

func (x *texec) reply(f *proto.Frame, result any) {
	x.t.Helper()
	b, err := proto.EncodeResult(f.ID, result)
	if err != nil {
		x.t.Fatal(err)
	}
	if err := x.ws.Write(context.Background(), websocket.MessageText, b); err != nil {
		x.t.Fatal(err)
	}
}

func (x *texec) replyErr(f *proto.Frame, e *proto.Error) {
	x.t.Helper()
	if err := x.ws.Write(context.Background(), websocket.MessageText, proto.EncodeError(f.ID, e)); err != nil {
		x.t.Fatal(err)
	}
}

// closed waits for the harness to end the connection and returns the
// close code it sent.
func (x *texec) closed() websocket.StatusCode {
	x.t.Helper()
	for {
		select {
		case f := <-x.inbox:
			x.t.Logf("frame before close: %s %s", f.Method, f.Params)
		case <-x.done:
			return websocket.CloseStatus(x.err)
		case <-time.After(guard):
			x.t.Fatal("the harness did not close the connection")
		}
	}
}

// register registers with the given capabilities.
func (x *texec) register(p proto.RegisterParams) proto.RegisterResult {
	x.t.Helper()
	if p.Protocol == "" {
		p.Protocol = proto.SubprotocolV11
	}
	var res proto.RegisterResult
	x.ok(proto.MethodRegister, p, &res)
	return res
}

// longLeases keeps leases out of a test's way.
func longLeases(o *Options) { o.HeartbeatInterval = 10 * time.Hour }

func tools(names ...string) proto.Capabilities {
	var c proto.Capabilities
	for _, n := range names {
		c.Tools = append(c.Tools, proto.ToolDef{Name: n, InputSchema: json.RawMessage(`{"type":"object"}`)})
	}
	return c
}
