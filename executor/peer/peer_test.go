package peer

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/baton-engine/baton/executor/proto"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serve starts a loopback server whose every connection becomes a Peer
// with h; it returns the server URL and the accepted peers.
func serve(t *testing.T, h Handler) (string, <-chan *Peer) {
	t.Helper()
	return serveOpts(t, Options{Handler: h})
}

func serveOpts(t *testing.T, opts Options) (string, <-chan *Peer) {
	t.Helper()
	peers := make(chan *Peer, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, nc, err := Accept(w, r, &websocket.AcceptOptions{Subprotocols: proto.Subprotocols()})
		if err != nil {
			return
		}
		opts := opts
		opts.NetConn = nc
		p := New(c, opts)
		p.Start()
		t.Cleanup(func() { p.Kill(); <-p.Done() })
		peers <- p
	}))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http"), peers
}

func dial(t *testing.T, url string) *websocket.Conn {
	t.Helper()
	c, _, err := websocket.Dial(context.Background(), url, &websocket.DialOptions{Subprotocols: []string{proto.SubprotocolV11}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	return c
}

// pair connects a client Peer (handler ch) to a server Peer (handler sh).
func pair(t *testing.T, sh, ch Handler) (server, client *Peer) {
	t.Helper()
	url, peers := serve(t, sh)
	client = New(dial(t, url), Options{Handler: ch})
	client.Start()
	t.Cleanup(func() { client.Kill(); <-client.Done() })
	return <-peers, client
}

func echo(_ context.Context, f *proto.Frame) (any, error) {
	switch f.Method {
	case "echo":
		return f.Params, nil
	case "fail":
		return nil, proto.CapabilityMissing("tool:x", "tool x is not served")
	case "crash":
		return nil, errors.New("secret detail")
	}
	return nil, proto.Errorf(proto.CodeMethodNotFound, "Method not found: %s", f.Method)
}

func TestPeerCallBothWays(t *testing.T) {
	server, client := pair(t, echo, echo)
	ctx := context.Background()
	for _, p := range []*Peer{client, server} {
		var got map[string]int
		if err := p.Call(ctx, "echo", map[string]int{"n": 1}, &got); err != nil || got["n"] != 1 {
			t.Fatalf("echo: %v %v", got, err)
		}
		err := p.Call(ctx, "fail", nil, nil)
		var e *proto.Error
		if !errors.As(err, &e) || e.Code != proto.CodeCapabilityMissing || e.Detail().Capability != "tool:x" {
			t.Fatalf("fail: %v", err)
		}
		err = p.Call(ctx, "crash", nil, nil)
		if !errors.As(err, &e) || e.Code != proto.CodeInternal || strings.Contains(e.Message, "secret") {
			t.Fatalf("crash: %v", err)
		}
		if err := p.Call(ctx, "nope", nil, nil); !errors.As(err, &e) || e.Code != proto.CodeMethodNotFound {
			t.Fatalf("nope: %v", err)
		}
	}
	if server.Subprotocol() != proto.SubprotocolV11 {
		t.Fatalf("subprotocol %q", server.Subprotocol())
	}
}

func TestPeerNilHandler(t *testing.T) {
	_, client := pair(t, nil, nil)
	var e *proto.Error
	if err := client.Call(context.Background(), "executor.heartbeat", nil, nil); !errors.As(err, &e) || e.Code != proto.CodeMethodNotFound {
		t.Fatalf("got %v", err)
	}
}

func TestPeerNotification(t *testing.T) {
	got := make(chan *proto.Frame, 1)
	_, client := pair(t, func(_ context.Context, f *proto.Frame) (any, error) {
		if f.Kind() == proto.KindNotification {
			got <- f
		}
		return echo(context.Background(), f)
	}, nil)
	if err := client.Notify(proto.MethodToolProgress, proto.ToolProgressParams{SessionID: "s", ToolCallID: "t", Message: "half"}); err != nil {
		t.Fatal(err)
	}
	f := <-got
	var p proto.ToolProgressParams
	if e := f.Bind(&p); e != nil || p.Message != "half" {
		t.Fatalf("got %+v %v", p, e)
	}
	// Nothing was answered: the next message the client gets is the
	// response to its next call.
	var v []int
	if err := client.Call(context.Background(), "echo", []int{4}, &v); err != nil || v[0] != 4 {
		t.Fatalf("echo after notification: %v %v", v, err)
	}
}

func TestPeerCallCanceled(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	_, client := pair(t, func(_ context.Context, f *proto.Frame) (any, error) {
		if f.Method == "slow" {
			entered <- struct{}{}
			<-release
		}
		return echo(context.Background(), f)
	}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- client.Call(ctx, "slow", nil, nil) }()
	<-entered
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	close(release)
	// The late response is dropped and the connection still works.
	var v []int
	if err := client.Call(context.Background(), "echo", []int{2}, &v); err != nil || v[0] != 2 {
		t.Fatalf("echo after cancel: %v %v", v, err)
	}
}

func TestPeerCloseFailsPending(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	server, client := pair(t, func(_ context.Context, f *proto.Frame) (any, error) {
		entered <- struct{}{}
		<-release
		return nil, nil
	}, nil)
	defer close(release)
	errc := make(chan error, 1)
	go func() { errc <- client.Call(context.Background(), "slow", nil, nil) }()
	<-entered
	client.Close(proto.CloseGoingAway, "bye")
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("pending call: %v", err)
	}
	if err := client.Call(context.Background(), "echo", nil, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("call after close: %v", err)
	}
	release <- struct{}{}
	<-server.Done()
	if code := websocket.CloseStatus(server.Err()); code != proto.CloseGoingAway {
		t.Fatalf("server saw %v, want 1001", server.Err())
	}
	<-client.Done()
}

func TestPeerReplyAfterThenClose(t *testing.T) {
	var server *Peer
	ready := make(chan struct{})
	url, peers := serve(t, func(_ context.Context, f *proto.Frame) (any, error) {
		<-ready
		return &Reply{Err: proto.Errorf(proto.CodeProtocolMismatch, "protocol mismatch"), After: func() {
			server.Close(proto.CloseProtocolMismatch, "protocol mismatch")
		}}, nil
	})
	c := dial(t, url)
	server = <-peers
	close(ready)
	ctx := context.Background()
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":1,"method":"executor.register"}`)); err != nil {
		t.Fatal(err)
	}
	_, b, err := c.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f, e := proto.Decode(b)
	if e != nil || f.Error == nil || f.Error.Code != proto.CodeProtocolMismatch || string(f.ID) != "1" {
		t.Fatalf("got %s", b)
	}
	if _, _, err := c.Read(ctx); websocket.CloseStatus(err) != proto.CloseProtocolMismatch {
		t.Fatalf("close: %v", err)
	}
	<-server.Done()
}

// TestPeerMalformed drives the server with raw messages.
func TestPeerMalformed(t *testing.T) {
	url, peers := serve(t, echo)
	c := dial(t, url)
	<-peers
	ctx := context.Background()
	roundTrip := func(typ websocket.MessageType, msg string) *proto.Frame {
		t.Helper()
		if err := c.Write(ctx, typ, []byte(msg)); err != nil {
			t.Fatal(err)
		}
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		f, e := proto.Decode(b)
		if e != nil {
			t.Fatalf("answer %s: %v", b, e)
		}
		return f
	}
	tests := []struct {
		typ  websocket.MessageType
		msg  string
		id   string
		code int
	}{
		{websocket.MessageText, `{"jsonrpc":`, "null", proto.CodeParseError},
		{websocket.MessageText, `{"jsonrpc":"2.0","id":1,"method":5}`, "1", proto.CodeInvalidRequest},
		{websocket.MessageBinary, `{"jsonrpc":"2.0","id":2,"method":"echo"}`, "null", proto.CodeInvalidRequest},
	}
	for _, tc := range tests {
		f := roundTrip(tc.typ, tc.msg)
		if f.Error == nil || f.Error.Code != tc.code || string(f.ID) != tc.id {
			t.Errorf("%s: got id %s error %+v", tc.msg, f.ID, f.Error)
		}
	}
	// A malformed response and a response to nothing are dropped: the next
	// answer is the one to the following request.
	for _, msg := range []string{`{"jsonrpc":"2.0","id":77,"result":1,"error":{"code":1,"message":"x"}}`, `{"jsonrpc":"2.0","id":78,"result":1}`} {
		if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	f := roundTrip(websocket.MessageText, `{"jsonrpc":"2.0","id":"next","method":"echo","params":[1]}`)
	if string(f.ID) != `"next"` || string(f.Result) != "[1]" {
		t.Fatalf("got %+v", f)
	}
}

// TestPeerInvalid: the Invalid hook hears every message the handler does
// not see, with the error the peer would send (nil for a response), and
// replaces the answer: here a response is answered too, and each answer
// is followed by After.
func TestPeerInvalid(t *testing.T) {
	heard := make(chan string, 8)
	url, peers := serveOpts(t, Options{Handler: echo, Invalid: func(e *proto.Error) *Reply {
		if e == nil {
			heard <- "response"
			return &Reply{Err: proto.Errorf(proto.CodeInvalidRequest, "Invalid Request: unexpected response"), After: func() { heard <- "after" }}
		}
		heard <- strconv.Itoa(e.Code)
		if e.Code == proto.CodeParseError {
			return nil // the default answer
		}
		return &Reply{} // no answer
	}})
	c := dial(t, url)
	<-peers
	ctx := context.Background()
	for _, m := range []struct {
		typ websocket.MessageType
		msg string
	}{
		{websocket.MessageText, `{nope`},
		{websocket.MessageBinary, `{}`},
		{websocket.MessageText, `{"jsonrpc":"1.0","id":3,"method":"echo"}`},
		{websocket.MessageText, `{"jsonrpc":"2.0","id":4,"result":{}}`},
		{websocket.MessageText, `{"jsonrpc":"2.0","id":"next","method":"echo","params":[2]}`},
	} {
		if err := c.Write(ctx, m.typ, []byte(m.msg)); err != nil {
			t.Fatal(err)
		}
	}
	var answers []string
	for range 3 {
		_, b, err := c.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		answers = append(answers, string(b))
	}
	want := []string{
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: unexpected response"}}`,
		`{"jsonrpc":"2.0","id":"next","result":[2]}`,
	}
	if d := cmp.Diff(want, answers); d != "" {
		t.Errorf("answers (-want +got):\n%s", d)
	}
	var got []string
	for range 5 {
		got = append(got, <-heard)
	}
	if d := cmp.Diff([]string{"-32700", "-32600", "-32600", "response", "after"}, got); d != "" {
		t.Errorf("hook calls (-want +got):\n%s", d)
	}
}

func TestPeerReadLimit(t *testing.T) {
	url, peers := serveOpts(t, Options{Handler: echo, ReadLimit: 1024})
	c := dial(t, url)
	server := <-peers
	ctx := context.Background()
	fits := `{"jsonrpc":"2.0","id":1,"method":"echo","params":["` + strings.Repeat("a", 900) + `"]}`
	if err := c.Write(ctx, websocket.MessageText, []byte(fits)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Read(ctx); err != nil {
		t.Fatalf("message under the limit: %v", err)
	}
	big := `{"jsonrpc":"2.0","method":"x","params":["` + strings.Repeat("a", 1024) + `"]}`
	_ = c.Write(ctx, websocket.MessageText, []byte(big))
	<-server.Done()
	if !errors.Is(server.Err(), websocket.ErrMessageTooBig) {
		t.Fatalf("server ended with %v", server.Err())
	}
	if _, _, err := c.Read(ctx); websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
		t.Fatalf("client saw %v, want close 1009", err)
	}
}

func TestPeerDefaultReadLimit(t *testing.T) {
	_, client := pair(t, echo, nil)
	if client.readLimit != proto.MaxMessage || proto.MaxMessage != 16<<20 {
		t.Fatalf("read limit %d, want 16 MiB", client.readLimit)
	}
}

func TestPeerKillCutsHandshake(t *testing.T) {
	url, peers := serve(t, echo)
	c := dial(t, url) // never reads: it will not answer the close frame
	_ = c
	server := <-peers
	server.Close(proto.CloseNormal, "bye")
	server.Kill()
	select {
	case <-server.Done():
	case <-time.After(3 * time.Second): // a bound, not synchronisation: the handshake alone waits 5s
		t.Fatal("Kill did not cut the close handshake short")
	}
	if code := websocket.CloseStatus(server.Err()); code != proto.CloseNormal {
		t.Fatalf("reason %v", server.Err())
	}
}

func TestPeerResultDecodeError(t *testing.T) {
	_, client := pair(t, echo, nil)
	var n int
	err := client.Call(context.Background(), "echo", map[string]string{"a": "b"}, &n)
	var se *json.UnmarshalTypeError
	if !errors.As(err, &se) {
		t.Fatalf("got %v", err)
	}
}
