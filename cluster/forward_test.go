package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"github.com/baton-engine/baton"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/baton-engine/baton/wire"
)

func TestSessionOf(t *testing.T) {
	for _, c := range []struct {
		method, path, want string
	}{
		{"POST", "/api/v1/sessions/ses_1/rpc", "ses_1"},
		{"POST", "/api/v1/sessions/ses_1/join", "ses_1"},
		{"GET", "/api/v1/sessions/ses_1/participants", "ses_1"},
		{"DELETE", "/api/v1/sessions/ses_1", "ses_1"},
		{"GET", "/api/v1/sessions/ses_1", "ses_1"},
		// The event log is a read of the shared log: any node serves it.
		{"GET", "/api/v1/sessions/ses_1/events", ""},
		{"POST", "/api/v1/sessions/ses_1/events", "ses_1"},
		{"GET", "/api/v1/sessions/ses_1/events/more", "ses_1"},
		// Creating or listing sessions is about no session yet.
		{"POST", "/api/v1/sessions", ""},
		{"GET", "/api/v1/sessions", ""},
		{"GET", "/api/v1/sessions/", ""},
		{"POST", "/v1/sessions/ses_2/clients/cli_1/tool_results", "ses_2"},
		{"GET", "/v1/sessions/ses_2", "ses_2"},
		{"GET", "/v1/sessions/ses_2/events", "ses_2"}, // only /api/v1's log is exempt
		{"GET", "/v1/fs/ses_3/tree", "ses_3"},
		// The /v1 routes take a session id in UUID form too.
		{"GET", "/v1/sessions/0123abcd-4567-89ab-cdef-0123456789ab/clients", "ses_0123abcd456789abcdef0123456789ab"},
		{"GET", "/v1/fs/0123ABCD-4567-89AB-CDEF-0123456789AB/v", "ses_0123abcd456789abcdef0123456789ab"},
		{"PUT", "/v1/fs/ses_3/a/b/c.txt", "ses_3"},
		{"GET", "/v1/fs/ses_3", "ses_3"},
		{"GET", "/v1/fs/", ""},
		{"POST", "/v1/sessions", ""},
		{"GET", "/api/v1/me", ""},
		{"GET", "/healthz", ""},
		{"GET", "/", ""},
		{"GET", "", ""},
		{"GET", "/admin/v1/sessions/ses_1", ""},
		{"GET", "/api/v1/sessionsX/ses_1/rpc", ""},
		{"GET", "/api/v2/sessions/ses_1/rpc", ""},
		{"GET", "/x/api/v1/sessions/ses_1/rpc", ""},
	} {
		r := httptest.NewRequest(c.method, "http://node"+c.path, nil)
		if c.path == "" {
			r.URL.Path = ""
		}
		if got := SessionOf(r); got != c.want {
			t.Errorf("SessionOf(%s %q) = %q, want %q", c.method, c.path, got, c.want)
		}
	}
}

// TestForward: a request about a session a owns, made to b, is served
// by a's handler with its method, path, query, body and credentials
// intact, marked as forwarded by b; a's answer reaches the client whole.
// Bodies too large to keep for a retry, or of unknown length, are
// streamed through. Requests about no session, the shared event log and
// sessions that do not exist are served where they land.
func TestForward(t *testing.T) {
	c := newTestCluster(t)
	a, b := c.start(t, "a", nodeSpec{}), c.start(t, "b", nodeSpec{})
	sid := a.openSession(t)
	large := strings.Repeat("0123456789abcdef", 2*maxReplay/16) // over maxReplay
	for _, tc := range []struct {
		name, method, path string
		body               io.Reader
		want               string // the body a receives
	}{
		{"rpc", http.MethodPost, "/api/v1/sessions/" + sid + "/rpc?x=1&y=two%20words", strings.NewReader(`{"jsonrpc":"2.0","id":7}`), `{"jsonrpc":"2.0","id":7}`},
		{"join", http.MethodPost, "/api/v1/sessions/" + sid + "/join", strings.NewReader(`{}`), `{}`},
		{"delete", http.MethodDelete, "/api/v1/sessions/" + sid, nil, ""},
		{"participants", http.MethodGet, "/api/v1/sessions/" + sid + "/participants", nil, ""},
		{"v1 client", http.MethodPost, "/v1/sessions/" + sid + "/clients/cli_1/tool_results", strings.NewReader(`[1,2]`), `[1,2]`},
		{"v1 fs", http.MethodPut, "/v1/fs/" + sid + "/dir/f.txt", strings.NewReader("file body"), "file body"},
		{"large body", http.MethodPut, "/v1/fs/" + sid + "/big", strings.NewReader(large), large},
		// No declared length: sent chunked, streamed to the owner.
		{"chunked body", http.MethodPost, "/api/v1/sessions/" + sid + "/rpc", io.MultiReader(strings.NewReader("chunk one, "), strings.NewReader("chunk two")), "chunk one, chunk two"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, s, _ := c.send(t, b, tc.method, tc.path, tc.body)
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("status %d, want a's 201", resp.StatusCode)
			}
			if got := resp.Header.Get("X-Served-By"); got != "a" {
				t.Errorf("X-Served-By %q, want a's header relayed", got)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q relayed", ct)
			}
			path, query, _ := strings.Cut(tc.path, "?")
			want := served{
				Node: "a", Method: tc.method, Path: path, Query: query, Auth: "Bearer bk_test",
				Body: tc.want, ForwardedBy: "b", ForwardedFor: "127.0.0.1",
			}
			if s != want {
				t.Errorf("a saw %+v (body %d bytes),\nwant %+v (body %d bytes)", trim(s), len(s.Body), trim(want), len(want.Body))
			}
		})
	}
	if n := b.served.Load(); n != 0 {
		t.Errorf("b's handler served %d of the session's requests, want none", n)
	}

	// Served where they land.
	for _, tc := range []struct{ name, method, path string }{
		{"event log", http.MethodGet, "/api/v1/sessions/" + sid + "/events"},
		{"create", http.MethodPost, "/api/v1/sessions"},
		{"no session", http.MethodGet, "/api/v1/me"},
		{"unknown session", http.MethodPost, "/api/v1/sessions/ses_nowhere/rpc"},
	} {
		_, s, _ := c.send(t, b, tc.method, tc.path, nil)
		if s.Node != "b" || s.ForwardedBy != "" {
			t.Errorf("%s: served by %q (forwarded by %q), want b itself", tc.name, s.Node, s.ForwardedBy)
		}
	}
	wantEngine(t, b, nil, nil)
	// And the owner serves its own requests without a detour.
	if s := c.rpc(t, a, sid); s.Node != "a" || s.ForwardedBy != "" {
		t.Errorf("request to the owner served by %s (forwarded by %q)", s.Node, s.ForwardedBy)
	}
}

// trim shortens a served for a message.
func trim(s served) served {
	if len(s.Body) > 64 {
		s.Body = s.Body[:64] + "…"
	}
	return s
}

// streamer is an owner's handler for NDJSON streams: it sends the first
// frame, waits for the test to release it, and then sends a second frame
// or breaks the stream with then.
type streamer struct {
	contentType string
	release     chan struct{}
	then        func(w http.ResponseWriter)
}

func (s *streamer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", s.contentType)
	w.Header().Set("X-Stream", "owner")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, `{"frame":1}`+"\n")
	if err := http.NewResponseController(w).Flush(); err != nil {
		return
	}
	select {
	case <-s.release:
	case <-r.Context().Done():
		return
	}
	s.then(w)
}

// openStream starts a streamed request about sessionID at node to.
func (c *testCluster) openStream(t *testing.T, to *testNode, sessionID string) (*http.Response, *bufio.Reader) {
	t.Helper()
	return c.openStreamAt(t, to, "/api/v1/sessions/"+sessionID+"/rpc")
}

// openStreamAt is openStream on any path.
func (c *testCluster) openStreamAt(t *testing.T, to *testNode, path string) (*http.Response, *bufio.Reader) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), requestTimeout)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, to.srv.URL+path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"subscribe"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp, bufio.NewReader(resp.Body)
}

// TestForwardStream: an NDJSON stream from the owner reaches the client
// frame by frame: the client reads the first frame while the owner is
// still holding the second back.
func TestForwardStream(t *testing.T) {
	c := newTestCluster(t)
	st := &streamer{contentType: "application/x-ndjson; charset=utf-8", release: make(chan struct{}), then: func(w http.ResponseWriter) {
		_, _ = io.WriteString(w, `{"frame":2}`+"\n")
	}}
	a := c.start(t, "a", nodeSpec{inner: st})
	b := c.start(t, "b", nodeSpec{})
	sid := a.openSession(t)

	resp, r := c.openStream(t, b, sid)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Stream") != "owner" {
		t.Fatalf("stream answer %d, X-Stream %q", resp.StatusCode, resp.Header.Get("X-Stream"))
	}
	if line, err := r.ReadString('\n'); err != nil || line != `{"frame":1}`+"\n" {
		t.Fatalf("first frame %q, %v", line, err)
	}
	close(st.release) // only now may the second frame exist
	if line, err := r.ReadString('\n'); err != nil || line != `{"frame":2}`+"\n" {
		t.Fatalf("second frame %q, %v", line, err)
	}
	if rest, err := io.ReadAll(r); err != nil || len(rest) != 0 {
		t.Errorf("after the last frame: %q, %v; want a clean end", rest, err)
	}
}

// TestForwardOwnerLost: the owner stops mid-stream. A relayed NDJSON
// stream ends with a JSON-RPC error frame saying so, after the frames
// that did arrive; any other relayed answer is cut, so that the client
// cannot take it for a complete one.
func TestForwardOwnerLost(t *testing.T) {
	abort := func(http.ResponseWriter) { panic(http.ErrAbortHandler) }
	t.Run("ndjson", func(t *testing.T) {
		c := newTestCluster(t)
		st := &streamer{contentType: "application/x-ndjson", release: make(chan struct{}), then: abort}
		a := c.start(t, "a", nodeSpec{inner: st})
		b := c.start(t, "b", nodeSpec{})
		sid := a.openSession(t)

		_, r := c.openStream(t, b, sid)
		if line, err := r.ReadString('\n'); err != nil || line != `{"frame":1}`+"\n" {
			t.Fatalf("first frame %q, %v", line, err)
		}
		close(st.release)
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after the owner broke: %q, %v; want an error frame", line, err)
		}
		var f struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   *wire.Error     `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &f); err != nil {
			t.Fatalf("error frame %q: %v", line, err)
		}
		if f.JSONRPC != "2.0" || string(f.ID) != "null" || f.Error == nil || f.Error.Code != wire.CodeServer || f.Error.Message != ErrOwnerLost {
			t.Errorf("error frame %s, want code %d and message %q", line, wire.CodeServer, ErrOwnerLost)
		}
		if rest, err := io.ReadAll(r); err != nil || len(rest) != 0 {
			t.Errorf("after the error frame: %q, %v; want the end", rest, err)
		}
	})
	t.Run("ndjson calls stream", func(t *testing.T) {
		// Not JSON-RPC: a registered client would read an error frame as
		// a call, so the answer is cut and the client reconnects.
		c := newTestCluster(t)
		st := &streamer{contentType: "application/x-ndjson", release: make(chan struct{}), then: abort}
		a := c.start(t, "a", nodeSpec{inner: st})
		b := c.start(t, "b", nodeSpec{})
		sid := a.openSession(t)

		_, r := c.openStreamAt(t, b, "/v1/sessions/"+baton.SessionUUID(sid)+"/clients/cli_1/calls")
		if line, err := r.ReadString('\n'); err != nil || line != `{"frame":1}`+"\n" {
			t.Fatalf("first frame %q, %v", line, err)
		}
		close(st.release)
		if rest, err := io.ReadAll(r); err == nil || len(rest) != 0 {
			t.Errorf("after the owner broke: %q, err %v; want the answer cut", rest, err)
		}
	})
	t.Run("other", func(t *testing.T) {
		c := newTestCluster(t)
		st := &streamer{contentType: "application/json", release: make(chan struct{}), then: abort}
		a := c.start(t, "a", nodeSpec{inner: st})
		b := c.start(t, "b", nodeSpec{})
		sid := a.openSession(t)

		_, r := c.openStream(t, b, sid)
		if line, err := r.ReadString('\n'); err != nil || line != `{"frame":1}`+"\n" {
			t.Fatalf("first frame %q, %v", line, err)
		}
		close(st.release)
		rest, err := io.ReadAll(r)
		if err == nil || len(rest) != 0 {
			t.Errorf("after the owner broke: %q, err %v; want the answer cut", rest, err)
		}
		if errors.Is(err, io.EOF) {
			t.Errorf("cut answer ended with a clean EOF")
		}
	})
}

// TestForwardedNotOwner: a forwarded request reaching a node that does
// not own the session is turned away with 421 and Baton-Not-Owner, never
// forwarded again nor served.
func TestForwardedNotOwner(t *testing.T) {
	c := newTestCluster(t)
	a, b := c.start(t, "a", nodeSpec{}), c.start(t, "b", nodeSpec{})
	sid := a.openSession(t)
	ctx, cancel := context.WithTimeout(t.Context(), requestTimeout)
	defer cancel()
	for _, path := range []string{"/api/v1/sessions/" + sid + "/rpc", "/v1/sessions/" + sid + "/clients/cli_1"} {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.srv.URL+path, strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(HeaderForwardedBy, "x")
		resp, err := c.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusMisdirectedRequest || resp.Header.Get(HeaderNotOwner) == "" {
			t.Errorf("%s: %d, %s %q; want 421 with %s", path, resp.StatusCode, HeaderNotOwner, resp.Header.Get(HeaderNotOwner), HeaderNotOwner)
		}
		if !strings.Contains(string(body), sid) {
			t.Errorf("%s: body %s does not name the session", path, body)
		}
	}
	if a.served.Load() != 0 || b.served.Load() != 0 {
		t.Errorf("handlers served %d (a) and %d (b) requests, want none", a.served.Load(), b.served.Load())
	}
	wantEngine(t, b, nil, nil)
	wantHolder(t, a, sid, "a", 1)
}

// TestForwardReresolves: b remembers a as the owner, but the session has
// moved to d since. a turns b's forwarded request away; b reads the lease
// again and forwards to d, which serves it.
func TestForwardReresolves(t *testing.T) {
	c := newTestCluster(t)
	a, b, d := c.start(t, "a", nodeSpec{}), c.start(t, "b", nodeSpec{}), c.start(t, "d", nodeSpec{})
	sid := a.openSession(t)
	ctx := t.Context()
	if url, err := b.n.route(ctx, sid, true); err != nil || url != a.srv.URL {
		t.Fatalf("b's route: %q %v, want a at %s", url, err, a.srv.URL)
	}
	c.expire(t, sid)
	if url, err := d.n.route(ctx, sid, false); err != nil || url != "" {
		t.Fatalf("d taking over: %q %v", url, err)
	}
	// b's answer is still cached: it goes to a first.
	if url, err := b.n.route(ctx, sid, true); err != nil || url != a.srv.URL {
		t.Fatalf("b's cached route: %q %v, want a", url, err)
	}

	s := c.rpc(t, b, sid)
	if s.Node != "d" || s.ForwardedBy != "b" {
		t.Errorf("served by %s (forwarded by %q), want d via b", s.Node, s.ForwardedBy)
	}
	if n := a.served.Load(); n != 0 {
		t.Errorf("a, no longer the owner, served %d requests", n)
	}
	wantEngine(t, a, nil, nil) // a did not take it back
	wantHolder(t, d, sid, "d", 2)
	if url, err := b.n.route(ctx, sid, true); err != nil || url != d.srv.URL {
		t.Errorf("b's route after the retry: %q %v, want d at %s", url, err, d.srv.URL)
	}
}
