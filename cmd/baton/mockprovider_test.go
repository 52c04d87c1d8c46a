package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-engine/baton/client"
)

// mockProvider is a scriptable Anthropic Messages API on loopback: every
// POST /v1/messages takes the next canned reply from a queue (or, when the
// queue is empty, echoes the last user text as "mock: <text>") and answers
// with a server-sent event stream, an HTTP error, a hang or a gate. Every
// request is recorded.
type mockProvider struct {
	t    testing.TB
	srv  *httptest.Server
	done chan struct{} // closed at cleanup: unblocks hung and gated handlers

	mu      sync.Mutex
	queue   []*mockReply
	reqs    []*mockRequest
	arrived chan *mockRequest
}

// mockRequest is one recorded provider call.
type mockRequest struct {
	At time.Time
	// Replied is when the whole reply was written (read it under the
	// mock's lock, through mockProvider.replied).
	Replied  time.Time
	Header   http.Header
	Body     []byte
	Model    string
	System   string
	Messages []mockMessage
	Tools    []string // advertised tool names, in order
	// Cancelled is closed when the caller's context ended while the reply
	// was held back (a hang or a closed gate).
	Cancelled chan struct{}
}

// mockMessage is one message of a recorded request.
type mockMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// mockReply is one canned answer. Exactly one of text/uses (a streamed
// message, both may be set), status or hang applies; gate, when set, holds
// any of them back until released.
type mockReply struct {
	text   []string // text deltas of one text block
	uses   []mockUse
	status int
	body   string
	header http.Header
	hang   bool
	gate   *mockGate
}

// mockUse is a tool_use block of a streamed reply.
type mockUse struct {
	ID, Name, Input string // Input is a JSON object; "" means {}
}

// mockGate holds a reply back until the test releases it.
type mockGate struct {
	reached chan struct{} // closed when a request waits at the gate
	release chan struct{}
	once    sync.Once
}

// mockText is a streamed text reply sent as the given deltas.
func mockText(deltas ...string) *mockReply { return &mockReply{text: deltas} }

// mockTool is a streamed reply calling tools.
func mockTool(uses ...mockUse) *mockReply { return &mockReply{uses: uses} }

// mockStatus is a non-2xx answer with body.
func mockStatus(code int, body string) *mockReply { return &mockReply{status: code, body: body} }

// mockHang never answers: it waits for the caller to give up.
func mockHang() *mockReply { return &mockReply{hang: true} }

// gated holds r back behind a new gate and returns the gate.
func (r *mockReply) gated() (*mockReply, *mockGate) {
	r.gate = &mockGate{reached: make(chan struct{}), release: make(chan struct{})}
	return r, r.gate
}

// wait blocks until a request is held at the gate.
func (g *mockGate) wait(t testing.TB) {
	t.Helper()
	select {
	case <-g.reached:
	case <-time.After(loopWait):
		t.Fatal("no provider request reached the gate")
	}
}

// open lets the held request answer.
func (g *mockGate) open() { g.once.Do(func() { close(g.release) }) }

// loopWait bounds every wait of these tests; it only matters on failure.
const loopWait = 30 * time.Second

// newMockProvider starts a mock provider that lives until the test ends.
func newMockProvider(t testing.TB) *mockProvider {
	t.Helper()
	m := &mockProvider{t: t, done: make(chan struct{}), arrived: make(chan *mockRequest, 256)}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(func() {
		close(m.done)
		m.srv.Close()
	})
	return m
}

// push queues replies.
func (m *mockProvider) push(replies ...*mockReply) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.queue = append(m.queue, replies...)
}

// pending returns how many queued replies were not used.
func (m *mockProvider) pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.queue)
}

// requests returns the recorded requests so far.
func (m *mockProvider) requests() []*mockRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*mockRequest(nil), m.reqs...)
}

// next waits for the next request to arrive (in arrival order).
func (m *mockProvider) next(t testing.TB) *mockRequest {
	t.Helper()
	select {
	case r := <-m.arrived:
		return r
	case <-time.After(loopWait):
		t.Fatal("no provider request arrived")
		return nil
	}
}

// entry is the bae-config.toml provider entry pointing at m.
func (m *mockProvider) entry(name string) string {
	return fmt.Sprintf("\n[[providers.entries]]\nname = %q\nprovider = \"anthropic\"\nbase_url = %q\nmodel = \"m\"\nauth_token = \"x\"\n", name, m.srv.URL)
}

func (m *mockProvider) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	req := &mockRequest{At: time.Now(), Header: r.Header.Clone(), Body: body, Cancelled: make(chan struct{})}
	var decoded struct {
		Model    string        `json:"model"`
		System   string        `json:"system"`
		Messages []mockMessage `json:"messages"`
		Tools    []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &decoded); err != nil {
		m.t.Errorf("mock provider: request is not JSON: %v\n%s", err, body)
	}
	req.Model, req.System, req.Messages = decoded.Model, decoded.System, decoded.Messages
	for _, tl := range decoded.Tools {
		req.Tools = append(req.Tools, tl.Name)
	}

	m.mu.Lock()
	n := len(m.reqs)
	m.reqs = append(m.reqs, req)
	var reply *mockReply
	if len(m.queue) > 0 {
		reply = m.queue[0]
		m.queue = m.queue[1:]
	} else {
		reply = mockText("mock: " + req.lastUserText())
	}
	m.mu.Unlock()
	select {
	case m.arrived <- req:
	default: // nobody is counting arrivals this far
	}

	ctx := r.Context()
	if g := reply.gate; g != nil {
		close(g.reached)
		select {
		case <-g.release:
		case <-ctx.Done():
			close(req.Cancelled)
			return
		case <-m.done:
			return
		}
	}
	if reply.hang {
		select {
		case <-ctx.Done():
			close(req.Cancelled)
		case <-m.done:
		}
		return
	}
	if reply.status != 0 {
		for k, v := range reply.header {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(reply.status)
		io.WriteString(w, reply.body)
		return
	}
	m.stream(w, n, reply)
	m.mu.Lock()
	req.Replied = time.Now()
	m.mu.Unlock()
}

// replied returns when the reply to request i was written in full.
func (m *mockProvider) replied(i int) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reqs[i].Replied
}

// stream writes reply as a Messages API event stream, flushing each event.
func (m *mockProvider) stream(w http.ResponseWriter, n int, reply *mockReply) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(typ string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
		rc.Flush()
	}
	type obj = map[string]any
	send("message_start", obj{"type": "message_start", "message": obj{
		"id": fmt.Sprintf("msg_mock_%d", n), "type": "message", "role": "assistant", "model": "m",
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": obj{"input_tokens": 7, "output_tokens": 0},
	}})
	idx := 0
	if len(reply.text) > 0 {
		send("content_block_start", obj{"type": "content_block_start", "index": idx, "content_block": obj{"type": "text", "text": ""}})
		for _, d := range reply.text {
			send("content_block_delta", obj{"type": "content_block_delta", "index": idx, "delta": obj{"type": "text_delta", "text": d}})
		}
		send("content_block_stop", obj{"type": "content_block_stop", "index": idx})
		idx++
	}
	for _, u := range reply.uses {
		send("content_block_start", obj{"type": "content_block_start", "index": idx, "content_block": obj{
			"type": "tool_use", "id": u.ID, "name": u.Name, "input": obj{},
		}})
		if u.Input != "" {
			send("content_block_delta", obj{"type": "content_block_delta", "index": idx, "delta": obj{"type": "input_json_delta", "partial_json": u.Input}})
		}
		send("content_block_stop", obj{"type": "content_block_stop", "index": idx})
		idx++
	}
	stop := "end_turn"
	if len(reply.uses) > 0 {
		stop = "tool_use"
	}
	send("message_delta", obj{"type": "message_delta", "delta": obj{"stop_reason": stop, "stop_sequence": nil}, "usage": obj{"output_tokens": 3}})
	send("message_stop", obj{"type": "message_stop"})
}

// lastUserText is the text of the request's last user message: its string
// content or its text blocks joined by "\n".
func (r *mockRequest) lastUserText() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return contentText(r.Messages[i].Content)
		}
	}
	return ""
}

// roles lists the roles of the request's messages.
func (r *mockRequest) roles() []string {
	out := make([]string, len(r.Messages))
	for i, msg := range r.Messages {
		out[i] = msg.Role
	}
	return out
}

// contentText is a message content's string, or its text blocks joined.
func contentText(c json.RawMessage) string {
	var s string
	if json.Unmarshal(c, &s) == nil {
		return s
	}
	var bs []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(c, &bs)
	var parts []string
	for _, b := range bs {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// loopConfig writes a bae-config.toml holding the test providers plus
// extra into a temp dir and points BAE_CONFIG at it; env sets more
// variables (name, value pairs).
func loopConfig(t testing.TB, extra string, env ...string) func(map[string]string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bae-config.toml")
	if err := os.WriteFile(path, []byte(testConfig+extra), 0o600); err != nil {
		t.Fatal(err)
	}
	return func(e map[string]string) {
		e["BAE_CONFIG"] = path
		e["BAE_SHUTDOWN_TIMEOUT"] = "5" // a failed test's stuck turn must not stall cleanup long
		for i := 0; i+1 < len(env); i += 2 {
			e[env[i]] = env[i+1]
		}
	}
}

// Fixtures shared by the loop tests.

// Texts the engine answers with.
const (
	unavailable = "The provider is currently unavailable."
	abandoned   = "Client tool call was abandoned before returning a result."
)

// loopCtx bounds one test's SDK calls.
func loopCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*loopWait)
	t.Cleanup(cancel)
	return ctx
}

// loopProfile creates a profile with a unique name and the given fields.
func loopProfile(t testing.TB, s *server, fields map[string]any) string {
	t.Helper()
	body := map[string]any{"name": fmt.Sprintf("loop-%d", profileSeq.Add(1))}
	for k, v := range fields {
		body[k] = v
	}
	r := call(t, "POST", s.adminURL+"/admin/v1/profiles", s.adminKey, body)
	mustStatus(t, r, 201)
	return r.json(t)["id"].(string)
}

// loopHarness mints a client key on profileID and returns a harness using
// it, with the key's id.
func loopHarness(t testing.TB, s *server, profileID string) (*client.Harness, string) {
	t.Helper()
	r := call(t, "POST", s.adminURL+"/admin/v1/keys", s.adminKey, map[string]any{"name": "loop", "profile_id": profileID})
	mustStatus(t, r, 201)
	m := r.json(t)
	return client.NewHarness(client.Config{BaseURL: s.clientURL, ClientKey: m["key"].(string)}), m["id"].(string)
}

// sent is the outcome of a Send run on another goroutine.
type sent struct {
	reply *client.Reply
	err   error
}

func goSend(ctx context.Context, sess *client.Session, content any) <-chan sent {
	ch := make(chan sent, 1)
	go func() {
		r, err := sess.Send(ctx, content)
		ch <- sent{r, err}
	}()
	return ch
}

func recv(t testing.TB, ch <-chan sent) sent {
	t.Helper()
	select {
	case out := <-ch:
		return out
	case <-time.After(loopWait):
		t.Fatal("Send did not return")
		return sent{}
	}
}

// mustReply fails unless the Send succeeded with text.
func mustReply(t testing.TB, out sent, text string) *client.Reply {
	t.Helper()
	if out.err != nil {
		t.Fatalf("Send: %v", out.err)
	}
	if got := out.reply.Message.Text(); got != text {
		t.Fatalf("reply %q, want %q", got, text)
	}
	return out.reply
}

// turnResult is a sendMessage result read through Session.Call, which
// does not run the harness's tool loop.
type turnResult struct {
	Message client.Message `json:"message"`
	Events  []client.Event `json:"events"`
}

func sendRaw(t testing.TB, ctx context.Context, sess *client.Session, content any) turnResult {
	t.Helper()
	var res turnResult
	if err := sess.Call(ctx, "session.sendMessage", map[string]any{"message": map[string]any{"content": content}}, &res); err != nil {
		t.Fatalf("sendMessage: %v", err)
	}
	return res
}

// loopEvents reads a session's whole log through the admin API.
func loopEvents(t testing.TB, s *server, sid string) []client.Event {
	t.Helper()
	return adminEvents(t, s.adminURL, s.adminKey, sid)
}

// loopState is the session's state as the admin API lists it.
func loopState(t testing.TB, s *server, sid string) string {
	t.Helper()
	r := call(t, "GET", s.adminURL+"/admin/v1/sessions?limit=200", s.adminKey, nil)
	mustStatus(t, r, 200)
	var page struct {
		Items []struct{ ID, State string }
	}
	json.Unmarshal(r.body, &page)
	for _, it := range page.Items {
		if it.ID == sid {
			return it.State
		}
	}
	t.Fatalf("session %s is not listed", sid)
	return ""
}

// ofType returns the events of type typ.
func ofType(evs []client.Event, typ string) []client.Event {
	var out []client.Event
	for _, ev := range evs {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

func types(evs []client.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}

// withReason returns the events whose payload.reason is reason.
func withReason(evs []client.Event, reason string) []client.Event {
	var out []client.Event
	for _, ev := range evs {
		if ev.Reason() == reason {
			out = append(out, ev)
		}
	}
	return out
}

func payload(t testing.TB, ev client.Event) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(ev.Payload, &m); err != nil {
		t.Fatalf("%s payload: %v", ev.Type, err)
	}
	return m
}

// blocksOf summarizes content as one line per block, for comparisons.
func blocksOf(t testing.TB, content json.RawMessage) []string {
	t.Helper()
	var s string
	if json.Unmarshal(content, &s) == nil {
		return []string{"text:" + s}
	}
	var bs []map[string]json.RawMessage
	if err := json.Unmarshal(content, &bs); err != nil {
		t.Fatalf("content %s: %v", content, err)
	}
	out := make([]string, len(bs))
	for i, b := range bs {
		var typ, text, id, name, tuid string
		var isErr bool
		json.Unmarshal(b["type"], &typ)
		json.Unmarshal(b["text"], &text)
		json.Unmarshal(b["id"], &id)
		json.Unmarshal(b["name"], &name)
		json.Unmarshal(b["tool_use_id"], &tuid)
		json.Unmarshal(b["is_error"], &isErr)
		switch typ {
		case "text":
			out[i] = "text:" + text
		case "tool_use":
			out[i] = fmt.Sprintf("tool_use:%s:%s:%s", id, name, b["input"])
			if d, ok := b["dispatch"]; ok {
				out[i] += ":dispatch=" + string(d)
			}
		case "tool_result":
			out[i] = fmt.Sprintf("tool_result:%s:error=%v:%s", tuid, isErr, contentText(b["content"]))
		default:
			out[i] = string(b["type"])
		}
	}
	return out
}

// messagesOf summarizes a recorded provider request's messages.
func messagesOf(t testing.TB, r *mockRequest) []string {
	t.Helper()
	var out []string
	for _, m := range r.Messages {
		out = append(out, m.Role+" "+strings.Join(blocksOf(t, m.Content), " | "))
	}
	return out
}

// waitGoroutines polls the process's goroutine dump until cond holds. The
// engine offers no signal that a sendMessage has entered the gate's queue
// (queued turns log nothing), so the dump — the server runs in this
// process — is the one observable.
func waitGoroutines(t testing.TB, what string, cond func(stacks []string) bool) {
	t.Helper()
	deadline := time.Now().Add(loopWait)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		for n == len(buf) {
			buf = make([]byte, 2*len(buf))
			n = runtime.Stack(buf, true)
		}
		if cond(strings.Split(string(buf[:n]), "\n\n")) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// queued counts sendMessage handlers blocked in their select on the
// turn's start: requests admitted to the gate's queue.
func queued(stacks []string) int {
	n := 0
	for _, g := range stacks {
		lines := strings.Split(g, "\n")
		if !strings.Contains(lines[0], "[select") {
			continue
		}
		for _, l := range lines[1:] {
			if strings.HasPrefix(l, "\t") || strings.HasPrefix(l, "runtime.") {
				continue
			}
			if strings.Contains(l, "httpapi.(*call).sendMessage(") {
				n++
			}
			break
		}
	}
	return n
}

func waitQueued(t testing.TB, n int) {
	t.Helper()
	waitGoroutines(t, fmt.Sprintf("%d queued sendMessage request(s)", n), func(st []string) bool { return queued(st) == n })
}

// failoverLog summarizes the provider walk of a turn's events.
func failoverLog(t testing.TB, evs []client.Event) []string {
	t.Helper()
	var out []string
	for _, ev := range evs {
		p := payload(t, ev)
		switch ev.Type {
		case "provider.request":
			out = append(out, fmt.Sprintf("request %v %v %v", p["attempt"], p["kind"], p["provider"]))
		case "provider.response":
			out = append(out, fmt.Sprintf("response %v %v %v ok=%v status=%v", p["attempt"], p["kind"], p["provider"], p["ok"], p["status"]))
		case "session.error":
			out = append(out, fmt.Sprintf("error %v", p["reason"]))
		}
	}
	return out
}

// readUntil reads sub until an event of type typ (inclusive).
func readUntil(t testing.TB, ctx context.Context, sub *client.Subscription, typ string) []client.Event {
	t.Helper()
	var out []client.Event
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("subscription ended after %v: %v", types(out), err)
		}
		out = append(out, ev)
		if ev.Type == typ {
			return out
		}
	}
}
