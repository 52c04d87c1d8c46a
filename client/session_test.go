package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestConnectRequest checks the open body, the driver registration and
// the /rpc request shape with its per-session id counter.
func TestConnectRequest(t *testing.T) {
	f := newFake(t)
	h := f.harness()
	h.RegisterTool(ToolDef{Name: "get_time", Description: "Return the time"}, nil)
	h.RegisterTool(ToolDef{Name: "roll_dice", InputSchema: json.RawMessage(`{"type":"object","properties":{"sides":{"type":"integer"}}}`)}, nil)
	s := f.connect(h)

	want := &Session{ID: testSessionID, Key: testSessionKey, Profile: Profile{
		ID: "pro_1", Name: "main", AllowedTools: []string{"get_time", "roll_dice"}, MCPServers: []string{"fs"},
		Provider: ProfileProvider{Provider: "scripted", Model: "m1"},
	}}
	if diff := cmp.Diff(want, s, cmp.Comparer(func(a, b *Session) bool {
		return a.ID == b.ID && a.Key == b.Key && cmp.Equal(a.Profile, b.Profile)
	})); diff != "" {
		t.Errorf("session (-want +got):\n%s", diff)
	}
	wantBody := `{"client_version":"1.2.3","tools":[{"name":"get_time","description":"Return the time","input_schema":{"type":"object","properties":{}}},` +
		`{"name":"roll_dice","input_schema":{"type":"object","properties":{"sides":{"type":"integer"}}}}]}`
	if got := string(f.opens[0]); got != wantBody {
		t.Errorf("open body = %s\nwant %s", got, wantBody)
	}

	f.on("session.cancelTurn", func(n *ndjson, c rpcCall) { n.result(`{"cancelled":true}`) })
	if err := s.CancelTurn(context.Background()); err != nil {
		t.Fatalf("CancelTurn: %v", err)
	}
	calls := f.allCalls()
	if len(calls) != 2 {
		t.Fatalf("%d rpc calls, want 2", len(calls))
	}
	for i, want := range []struct{ id, method string }{{"1", "session.registerDriver"}, {"2", "session.cancelTurn"}} {
		c := calls[i]
		if string(c.ID) != want.id || c.Method != want.method || string(c.Params) != "{}" {
			t.Errorf("call %d = id %s %s %s, want id %s %s {}", i, c.ID, c.Method, c.Params, want.id, want.method)
		}
		if c.Auth != "Bearer "+testSessionKey || c.ContentType != "application/json" {
			t.Errorf("call %d headers: auth %q content-type %q", i, c.Auth, c.ContentType)
		}
	}
}

func TestJoin(t *testing.T) {
	f := newFake(t)
	s, err := f.harness().Join(context.Background(), testSessionID)
	if err != nil {
		t.Fatalf("Join: %v", err)
	}
	if s.Key != testJoinKey {
		t.Errorf("key = %q, want the joiner's", s.Key)
	}
	reg := f.callsOf("session.registerDriver")
	if len(reg) != 1 || reg[0].Auth != "Bearer "+testJoinKey {
		t.Errorf("registerDriver calls = %+v", reg)
	}
	if got := string(f.opens[0]); got != `{"client_version":"1.2.3","tools":[]}` {
		t.Errorf("join body = %s", got)
	}

	_, err = f.harness().Join(context.Background(), "ses_nope")
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 404 || ae.Type != "not_found" || ae.Detail != "no session ses_nope" {
		t.Errorf("Join unknown = %v, want 404 not_found", err)
	}
}

func TestAPIErrors(t *testing.T) {
	f := newFake(t)

	bad := NewHarness(Config{BaseURL: f.srv.URL, ClientKey: "bae_wrong", HTTPClient: f.srv.Client()})
	_, err := bad.Connect(context.Background())
	want := &APIError{Status: 401, Type: "unauthorized", Title: "Unauthorized", Detail: "invalid client key"}
	var ae *APIError
	if !errors.As(err, &ae) {
		t.Fatalf("Connect with a bad key = %v, want *APIError", err)
	}
	if diff := cmp.Diff(want, ae); diff != "" {
		t.Errorf("APIError (-want +got):\n%s", diff)
	}

	h := f.harness()
	h.RegisterTool(ToolDef{Name: "forbidden"}, nil)
	_, err = h.Connect(context.Background())
	if !errors.As(err, &ae) || ae.Status != 403 || ae.Type != "tool_not_allowed" {
		t.Errorf("Connect with a forbidden tool = %v", err)
	}

	s := f.connect(f.harness())
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	err = s.Close(context.Background())
	want = &APIError{Status: 409, Type: "session_closed", Title: "Conflict", Detail: "session is already closed"}
	if !errors.As(err, &ae) {
		t.Fatalf("second Close = %v, want *APIError", err)
	}
	if diff := cmp.Diff(want, ae); diff != "" {
		t.Errorf("APIError (-want +got):\n%s", diff)
	}

	// /rpc auth failure is the one non-200 /rpc outcome.
	s.Key = "bae_ses_wrong"
	err = s.CancelTurn(context.Background())
	if !errors.As(err, &ae) || ae.Status != 401 {
		t.Errorf("rpc with a bad key = %v, want 401", err)
	}
}

// TestAPIErrorPlainText: framework rejections are plain text.
func TestAPIErrorPlainText(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnprocessableEntity)
		io.WriteString(w, "Failed to deserialize the JSON body\n")
	}))
	defer srv.Close()
	_, err := NewHarness(Config{BaseURL: srv.URL, ClientKey: testClientKey, HTTPClient: srv.Client()}).Connect(context.Background())
	want := &APIError{Status: 422, Title: "Unprocessable Entity", Detail: "Failed to deserialize the JSON body"}
	var ae *APIError
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v, want *APIError", err)
	}
	if diff := cmp.Diff(want, ae); diff != "" {
		t.Errorf("APIError (-want +got):\n%s", diff)
	}
}

func TestSessionMethods(t *testing.T) {
	f := newFake(t)
	h := f.harness()
	h.RegisterTool(ToolDef{Name: "get_time"}, nil)
	s := f.connect(h)
	ctx := context.Background()

	f.on("session.updateClientTools", func(n *ndjson, c rpcCall) { n.result(`{"updated":true}`) })
	h.RegisterTool(ToolDef{Name: "roll_dice", Description: "d6"}, nil)
	h.RemoveTool("get_time")
	if err := s.UpdateTools(ctx); err != nil {
		t.Fatalf("UpdateTools: %v", err)
	}
	if got, want := string(f.callsOf("session.updateClientTools")[0].Params),
		`{"tools":[{"name":"roll_dice","description":"d6","input_schema":{"type":"object","properties":{}}}]}`; got != want {
		t.Errorf("updateClientTools params = %s, want %s", got, want)
	}

	f.on("session.unsubscribe", func(n *ndjson, c rpcCall) { n.result(`{"unsubscribed":true}`) })
	if err := s.Unsubscribe(ctx); err != nil {
		t.Fatalf("Unsubscribe: %v", err)
	}

	var out struct {
		Stdout   string `json:"stdout"`
		ExitCode int    `json:"exit_code"`
	}
	f.on("session.execRemoteSandbox", func(n *ndjson, c rpcCall) {
		n.result(`{"stdout":"hi\n","stderr":"","exit_code":3}`)
	})
	if err := s.Call(ctx, "session.execRemoteSandbox", map[string]string{"command": "echo hi"}, &out); err != nil {
		t.Fatalf("Call: %v", err)
	}
	if out.Stdout != "hi\n" || out.ExitCode != 3 {
		t.Errorf("Call result = %+v", out)
	}
	if err := s.Call(ctx, "session.nope", struct{}{}, nil); err == nil {
		t.Error("unknown method succeeded")
	} else if re := (*RPCError)(nil); !errors.As(err, &re) || re.Code != -32601 {
		t.Errorf("unknown method = %v, want -32601", err)
	}

	drivers, err := s.Participants(ctx)
	if err != nil {
		t.Fatalf("Participants: %v", err)
	}
	if diff := cmp.Diff([]string{"key_1", "key_2"}, drivers); diff != "" {
		t.Errorf("drivers (-want +got):\n%s", diff)
	}

	page, err := s.Events(ctx, "", 2)
	if err != nil {
		t.Fatalf("Events: %v", err)
	}
	if page.NextCursor != "2" || len(page.Items) != 2 {
		t.Fatalf("page 1 = %+v", page)
	}
	want := Event{ID: "evt_1", SessionID: testSessionID, ClientKeyID: "key_1", Type: "session.open",
		Payload: json.RawMessage(`{"client_version":"1.2.3"}`), CreatedAt: time.Date(2026, 7, 6, 18, 26, 10, 0, time.UTC)}
	if diff := cmp.Diff(want, page.Items[0]); diff != "" {
		t.Errorf("event (-want +got):\n%s", diff)
	}
	page, err = s.Events(ctx, page.NextCursor, 2)
	if err != nil {
		t.Fatalf("Events page 2: %v", err)
	}
	if page.NextCursor != "" || len(page.Items) != 1 || page.Items[0].Reason() != "client_close" {
		t.Errorf("page 2 = %+v", page)
	}
}

// TestSendContextCancel: cancelling mid-stream returns promptly with the
// context's error and closes the response, which the server observes.
func TestSendContextCancel(t *testing.T) {
	f := newFake(t)
	gone := make(chan struct{})
	f.on("session.sendMessage", func(n *ndjson, c rpcCall) {
		n.event("evt_2", "provider.request", `{}`)
		<-n.r.Context().Done() // the client hung up
		close(gone)
	})
	h := f.harness()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h.OnEvent(func(Event) { cancel() })
	var hooked error
	h.OnError(func(err error) { hooked = err })
	_, err := f.connect(h).Send(ctx, "hi")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Send = %v, want context.Canceled", err)
	}
	if hooked != err {
		t.Errorf("OnError got %v", hooked)
	}
	<-gone
}

// TestSendQueuedCancel: a call the server keeps silent (queued behind
// another turn) ends when its context is cancelled.
func TestSendQueuedCancel(t *testing.T) {
	f := newFake(t)
	queued := make(chan struct{})
	f.on("session.sendMessage", func(n *ndjson, c rpcCall) {
		n.w.(http.Flusher).Flush() // headers only: queued
		close(queued)
		<-n.r.Context().Done()
	})
	s := f.connect(f.harness())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-queued
		cancel()
	}()
	if _, err := s.Send(ctx, "hi"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Send = %v, want context.Canceled", err)
	}
	<-done
}

func TestSendTransportErrors(t *testing.T) {
	tests := []struct {
		name   string
		max    int
		write  func(n *ndjson)
		unwrap error
	}{
		{"eof before terminal", 0, func(n *ndjson) { n.event("evt_2", "provider.request", `{}`) }, io.ErrUnexpectedEOF},
		{"not json", 0, func(n *ndjson) { n.raw("<html>oops</html>") }, nil},
		{"not an object", 0, func(n *ndjson) { n.raw(`[1,2]`) }, nil},
		{"no kind", 0, func(n *ndjson) { n.raw(`{"jsonrpc":"2.0","id":1}`) }, nil},
		{"bad event params", 0, func(n *ndjson) { n.raw(`{"jsonrpc":"2.0","method":"session.event","params":[1]}`) }, nil},
		{"bad result", 0, func(n *ndjson) { n.result(`{"message":"no"}`) }, nil},
		{"frame too large", 1024, func(n *ndjson) { n.event("evt_2", "provider.request", `"`+strings.Repeat("x", 2048)+`"`) }, errFrameTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t)
			f.on("session.sendMessage", func(n *ndjson, c rpcCall) { tt.write(n) })
			h := NewHarness(Config{BaseURL: f.srv.URL, ClientKey: testClientKey, HTTPClient: f.srv.Client(), MaxFrameSize: tt.max})
			_, err := f.connect(h).Send(context.Background(), "hi")
			var te *TransportError
			if !errors.As(err, &te) {
				t.Fatalf("Send = %v, want *TransportError", err)
			}
			if te.Op != "session.sendMessage" {
				t.Errorf("Op = %q", te.Op)
			}
			if tt.unwrap != nil && !errors.Is(err, tt.unwrap) {
				t.Errorf("Send = %v, want it to wrap %v", err, tt.unwrap)
			}
		})
	}
}

// TestSendLagged: a lagged frame during a turn ends Send with ErrLagged.
func TestSendLagged(t *testing.T) {
	f := newFake(t)
	f.on("session.sendMessage", func(n *ndjson, c rpcCall) {
		n.event("evt_2", "provider.request", `{}`)
		n.lagged()
	})
	_, err := f.connect(f.harness()).Send(context.Background(), "hi")
	if !errors.Is(err, ErrLagged) {
		t.Fatalf("Send = %v, want ErrLagged", err)
	}
	var le *LaggedError
	if !errors.As(err, &le) || le.LastEventID != "evt_2" {
		t.Errorf("LaggedError = %+v", le)
	}
}

func TestConnectNetworkError(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := NewHarness(Config{BaseURL: url, ClientKey: testClientKey}).Connect(context.Background())
	var te *TransportError
	if !errors.As(err, &te) || te.Op != "POST /api/v1/sessions" {
		t.Fatalf("Connect to a closed port = %v, want *TransportError", err)
	}
}

// TestRPCReusesConnection: a call read to its terminal frame leaves the
// connection in the pool, so the next calls make no new connection, also
// when the server flushes the terminal frame before ending the body.
func TestRPCReusesConnection(t *testing.T) {
	f := newFake(t)
	var conns atomic.Int32
	tr := f.srv.Client().Transport.(*http.Transport).Clone()
	dial := (&net.Dialer{}).DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conns.Add(1)
		return dial(ctx, network, addr)
	}
	t.Cleanup(tr.CloseIdleConnections)
	h := NewHarness(Config{BaseURL: f.srv.URL, ClientKey: testClientKey, ClientVersion: "1.2.3", HTTPClient: &http.Client{Transport: tr}})
	s := f.connect(h)
	f.on("session.execRemoteSandbox", func(n *ndjson, c rpcCall) {
		n.result(`{"stdout":"","stderr":"","exit_code":0}`) // flushed, like BAE
	})
	for i := range 5 {
		if err := s.Call(context.Background(), "session.execRemoteSandbox", map[string]string{"command": "true"}, nil); err != nil {
			t.Fatalf("Call %d: %v", i, err)
		}
	}
	if got := conns.Load(); got != 1 {
		t.Errorf("Connect and 5 sequential calls dialled %d connections, want 1", got)
	}
}
