package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// notDriverMsg is the server's -32001 text for sendMessage.
const notDriverMsg = "call session.registerDriver before session.sendMessage"

// forgetful makes f behave like a server that forgets driver
// registrations on restart: driver methods fail with -32001 until
// session.registerDriver is called again. forget simulates the restart.
type forgetful struct {
	f          *fake
	registered atomic.Bool
}

func newForgetful(f *fake) *forgetful {
	g := &forgetful{f: f}
	f.on("session.registerDriver", func(n *ndjson, c rpcCall) {
		g.registered.Store(true)
		n.result(`{"registered":true}`)
	})
	return g
}

func (g *forgetful) forget() { g.registered.Store(false) }

// on sets the handler of a driver method, gated on the registration.
func (g *forgetful) on(method string, h func(*ndjson, rpcCall)) {
	g.f.on(method, func(n *ndjson, c rpcCall) {
		if !g.registered.Load() {
			n.error(-32001, "call session.registerDriver before "+method)
			return
		}
		h(n, c)
	})
}

func methods(calls []rpcCall) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = c.Method
	}
	return out
}

// TestSendReregistersAfterRestart: the server forgets this driver while a
// tool handler runs (a restart between the pause and the result post).
// The results, refused with -32001, are sent again, unchanged, after one
// new registerDriver, and Send ends with the model's reply.
func TestSendReregistersAfterRestart(t *testing.T) {
	f := newFake(t)
	g := newForgetful(f)
	var leg atomic.Int32
	g.on("session.sendMessage", func(n *ndjson, c rpcCall) {
		if leg.Add(1) == 1 {
			n.result(resultJSON(`[{"type":"tool_use","id":"tu_1","name":"get_time","input":{},"dispatch":"client"}]`,
				[3]string{"evt_1", "client.message.send", `{}`}))
			return
		}
		n.result(resultJSON(`[{"type":"text","text":"it is 12:00"}]`, [3]string{"evt_2", "client.message.send", `{}`}))
	})
	h := f.harness()
	h.RegisterTool(ToolDef{Name: "get_time"}, func(context.Context, json.RawMessage) (any, error) {
		g.forget() // the server restarts while the tool runs
		return "12:00", nil
	})
	h.OnError(func(err error) { t.Errorf("OnError(%v)", err) })
	s := f.connect(h)
	reply, err := s.Send(context.Background(), "what time is it?")
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if got := reply.Message.Text(); got != "it is 12:00" {
		t.Errorf("reply %q", got)
	}
	want := []string{"session.registerDriver", "session.sendMessage", "session.sendMessage", "session.registerDriver", "session.sendMessage"}
	if d := cmp.Diff(want, methods(f.allCalls())); d != "" {
		t.Fatalf("calls (-want +got):\n%s", d)
	}
	const results = `[{"type":"tool_result","tool_use_id":"tu_1","content":"12:00"}]`
	for i := 1; i <= 2; i++ {
		if got := sentContent(t, f, i); got != results {
			t.Errorf("sendMessage %d content %s, want %s", i, got, results)
		}
	}
	if d := cmp.Diff([]string{"evt_1", "evt_2"}, eventIDs(reply.Events)); d != "" {
		t.Errorf("reply events (-want +got):\n%s", d)
	}
}

// TestNotDriverRetriedOnce: a server that keeps answering -32001 gets one
// new registration and one retry, then Send returns the -32001 error.
func TestNotDriverRetriedOnce(t *testing.T) {
	f := newFake(t)
	f.on("session.sendMessage", func(n *ndjson, c rpcCall) { n.error(-32001, notDriverMsg) })
	var reported []error
	h := f.harness()
	h.OnError(func(err error) { reported = append(reported, err) })
	_, err := f.connect(h).Send(context.Background(), "hi")
	var re *RPCError
	if !errors.As(err, &re) || re.Code != -32001 || re.Message != notDriverMsg {
		t.Fatalf("Send = %v, want RPCError -32001", err)
	}
	want := []string{"session.registerDriver", "session.sendMessage", "session.registerDriver", "session.sendMessage"}
	if d := cmp.Diff(want, methods(f.allCalls())); d != "" {
		t.Errorf("calls (-want +got):\n%s", d)
	}
	if len(reported) != 1 {
		t.Errorf("OnError saw %v, want the one final error", reported)
	}
}

// TestNotDriverAfterEventsNotRetried: a -32001 that follows streamed
// notifications is not a refusal before admission; it is not retried.
func TestNotDriverAfterEventsNotRetried(t *testing.T) {
	f := newFake(t)
	f.on("session.sendMessage", func(n *ndjson, c rpcCall) {
		n.event("evt_1", "client.message.send", `{}`)
		n.error(-32001, notDriverMsg)
	})
	_, err := f.connect(f.harness()).Send(context.Background(), "hi")
	var re *RPCError
	if !errors.As(err, &re) || re.Code != -32001 {
		t.Fatalf("Send = %v, want RPCError -32001", err)
	}
	if d := cmp.Diff([]string{"session.registerDriver", "session.sendMessage"}, methods(f.allCalls())); d != "" {
		t.Errorf("calls (-want +got):\n%s", d)
	}
}

// TestNotDriverRegistrationFails: when the new registration itself fails
// (the session closed meanwhile), that error is returned and the request
// is not sent again.
func TestNotDriverRegistrationFails(t *testing.T) {
	f := newFake(t)
	g := newForgetful(f)
	g.on("session.sendMessage", func(n *ndjson, c rpcCall) { n.result(resultJSON(`"hi"`)) })
	s := f.connect(f.harness())
	g.forget()
	f.on("session.registerDriver", func(n *ndjson, c rpcCall) { n.error(-32000, "session is closed, not open") })
	_, err := s.Send(context.Background(), "hi")
	var re *RPCError
	if !errors.As(err, &re) || re.Code != -32000 {
		t.Fatalf("Send = %v, want the registration's RPCError -32000", err)
	}
	want := []string{"session.registerDriver", "session.sendMessage", "session.registerDriver"}
	if d := cmp.Diff(want, methods(f.allCalls())); d != "" {
		t.Errorf("calls (-want +got):\n%s", d)
	}
}

// TestCallReregisters: the driver methods the SDK sends for the user
// (here UpdateTools) re-register too; registerDriver itself is never
// retried.
func TestCallReregisters(t *testing.T) {
	f := newFake(t)
	g := newForgetful(f)
	g.on("session.updateClientTools", func(n *ndjson, c rpcCall) { n.result(`{"updated":true}`) })
	s := f.connect(f.harness())
	g.forget()
	if err := s.UpdateTools(context.Background()); err != nil {
		t.Fatalf("UpdateTools: %v", err)
	}
	want := []string{"session.registerDriver", "session.updateClientTools", "session.registerDriver", "session.updateClientTools"}
	if d := cmp.Diff(want, methods(f.allCalls())); d != "" {
		t.Errorf("calls (-want +got):\n%s", d)
	}

	f.on("session.registerDriver", func(n *ndjson, c rpcCall) { n.error(-32001, "not a driver") })
	err := s.Call(context.Background(), "session.registerDriver", struct{}{}, nil)
	var re *RPCError
	if !errors.As(err, &re) || re.Code != -32001 {
		t.Fatalf("registerDriver = %v, want its -32001", err)
	}
	if n := len(f.callsOf("session.registerDriver")); n != 3 {
		t.Errorf("%d registerDriver calls, want 3 (no retry of registerDriver)", n)
	}
}

// TestFrameTooLargeSaysWhatToDo: the error of an oversized frame names
// the limit hit and Config.MaxFrameSize.
func TestFrameTooLargeSaysWhatToDo(t *testing.T) {
	f := newFake(t)
	f.on("session.sendMessage", func(n *ndjson, c rpcCall) {
		n.event("evt_2", "provider.request", `"`+strings.Repeat("x", 4096)+`"`)
	})
	h := NewHarness(Config{BaseURL: f.srv.URL, ClientKey: testClientKey, HTTPClient: f.srv.Client(), MaxFrameSize: 2048})
	_, err := f.connect(h).Send(context.Background(), "hi")
	var te *TransportError
	if !errors.As(err, &te) || !errors.Is(err, errFrameTooLarge) {
		t.Fatalf("Send = %v, want a *TransportError for the frame size", err)
	}
	const want = "client: session.sendMessage: frame exceeds the size limit of 2048 bytes; raise Config.MaxFrameSize (default 64 MiB) to read it"
	if got := err.Error(); got != want {
		t.Errorf("error\n got %s\nwant %s", got, want)
	}
	if DefaultMaxFrameSize != 64<<20 {
		t.Errorf("DefaultMaxFrameSize = %d, want 64 MiB", DefaultMaxFrameSize)
	}

	// A REST body over the limit says the same.
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"items":[],"pad":"`+strings.Repeat("x", 4096)+`"}`)
	}))
	defer big.Close()
	h = NewHarness(Config{BaseURL: big.URL, ClientKey: testClientKey, HTTPClient: big.Client(), MaxFrameSize: 2048})
	s := &Session{ID: testSessionID, Key: testSessionKey, h: h}
	_, err = s.Events(context.Background(), "", 0)
	const wantREST = "client: GET /api/v1/sessions/" + testSessionID + "/events: response body exceeds the size limit of 2048 bytes; raise Config.MaxFrameSize (default 64 MiB) to read it"
	if err == nil || err.Error() != wantREST {
		t.Errorf("Events = %v\nwant %s", err, wantREST)
	}
}

// v1Fake is a /v1 registered-clients endpoint whose calls stream and ping
// answer with the statuses the test sets.
type v1Fake struct {
	srv *httptest.Server

	mu       sync.Mutex
	streams  []int // status of each calls-stream connection, in order; the last repeats
	pings    []int // likewise for pings
	nStreams int
	nPings   int
	call     string // when set, every calls stream sends this line and ends
}

func newV1Fake(t *testing.T, streams, pings []int) *v1Fake {
	v := &v1Fake{streams: streams, pings: pings}
	base := "/v1/sessions/" + testSessionID + "/clients"
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+base, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":"cli_1","name":"laptop","expires_at":null}`)
	})
	mux.HandleFunc("GET "+base+"/cli_1/calls", func(w http.ResponseWriter, r *http.Request) {
		if st := v.next(&v.nStreams, v.streams); st != http.StatusOK {
			v1Fail(w, st)
			return
		}
		v.mu.Lock()
		call := v.call
		v.mu.Unlock()
		if call != "" {
			io.WriteString(w, call+"\n")
			return
		}
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done() // an open stream with no calls
	})
	mux.HandleFunc("POST "+base+"/cli_1/ping", func(w http.ResponseWriter, r *http.Request) {
		if st := v.next(&v.nPings, v.pings); st != http.StatusOK {
			v1Fail(w, st)
			return
		}
		io.WriteString(w, `{"expires_at":null}`)
	})
	mux.HandleFunc("DELETE "+base+"/cli_1", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	v.srv = httptest.NewServer(mux)
	t.Cleanup(v.srv.Close)
	return v
}

func (v *v1Fake) next(n *int, statuses []int) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	i := min(*n, len(statuses)-1)
	*n++
	return statuses[i]
}

func (v *v1Fake) count(n *int) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return *n
}

func v1Fail(w http.ResponseWriter, status int) {
	code := map[int]string{401: "unauthorized", 403: "forbidden", 404: "not_found", 503: "unavailable"}[status]
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, `{"error":{"code":"`+code+`","message":"refused"}}`)
}

// TestRegisteredClientStopsWhenRefused: a calls stream or a ping answered
// 401 or 403 (key revoked, session closed with the key, scope gone) ends
// the handle like 404 does, with Err saying why; 5xx answers before that
// are retried.
func TestRegisteredClientStopsWhenRefused(t *testing.T) {
	ok, unavailable := http.StatusOK, http.StatusServiceUnavailable
	tests := []struct {
		name          string
		streams       []int
		pings         []int
		ttl           time.Duration
		status        int
		minStreams    int
		minPings      int
		wantCodeInErr string
	}{
		{"stream 401 after 5xx", []int{unavailable, unavailable, 401}, []int{ok}, 0, 401, 3, 0, "unauthorized"},
		{"stream 403", []int{403}, []int{ok}, 0, 403, 1, 0, "forbidden"},
		{"ping 401", []int{ok}, []int{unavailable, 401}, 20 * time.Millisecond, 401, 1, 2, "unauthorized"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := newV1Fake(t, tt.streams, tt.pings)
			ctx := context.Background()
			c, err := RegisterClient(ctx, Config{BaseURL: v.srv.URL, HTTPClient: v.srv.Client()}, testSessionID, testSessionKey, "laptop", TTL(tt.ttl))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Abort()
			select {
			case <-c.Done():
			case <-time.After(failsafe):
				t.Fatal("Done not closed after the refusal")
			}
			var v1 *V1Error
			if err := c.Err(); !errors.As(err, &v1) || v1.Status != tt.status || v1.Code != tt.wantCodeInErr {
				t.Fatalf("Err = %v, want the %d", err, tt.status)
			}
			if !strings.Contains(c.Err().Error(), "401") && !strings.Contains(c.Err().Error(), "403") {
				t.Errorf("Err text %q does not name the status", c.Err())
			}
			if n := v.count(&v.nStreams); n < tt.minStreams {
				t.Errorf("%d stream connections, want at least %d (5xx retried)", n, tt.minStreams)
			}
			if n := v.count(&v.nPings); n < tt.minPings {
				t.Errorf("%d pings, want at least %d (5xx retried)", n, tt.minPings)
			}
		})
	}
}

// TestRegisteredClientCallTooLarge: a call line over Config.MaxFrameSize
// stops the client with an error that says what to raise, instead of
// reconnecting to the same call forever.
func TestRegisteredClientCallTooLarge(t *testing.T) {
	v := newV1Fake(t, []int{http.StatusOK}, []int{http.StatusOK})
	v.call = fmt.Sprintf(`{"call_id":"call_1","tool":"t","input":{"x":%q},"tool_use_id":"toolu_1"}`, strings.Repeat("x", 4096))
	c, err := RegisterClient(context.Background(), Config{BaseURL: v.srv.URL, HTTPClient: v.srv.Client(), MaxFrameSize: 1024},
		testSessionID, testSessionKey, "laptop", Never())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Abort()
	select {
	case <-c.Done():
	case <-time.After(failsafe):
		t.Fatal("Done not closed after a call over the size limit")
	}
	if err := c.Err(); err == nil || !strings.Contains(err.Error(), "call exceeds the size limit of 1024 bytes; raise Config.MaxFrameSize") {
		t.Fatalf("Err = %v", err)
	}
	if n := v.count(&v.nStreams); n != 1 {
		t.Errorf("%d stream connections, want 1", n)
	}
}
