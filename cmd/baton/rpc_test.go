package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// profileSeq makes profile names unique within a test binary.
var profileSeq atomic.Int64

// frame is one decoded NDJSON line of an /rpc response.
type frame struct {
	ID     *json.RawMessage `json:"id"`
	Method string           `json:"method"`
	Params json.RawMessage  `json:"params"`
	Result json.RawMessage  `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	raw string
}

// rpcStream posts body to the session's /rpc and returns a frame reader;
// cancel ends the request.
func rpcStream(t *testing.T, s *server, sid, key, body string) (next func() (*frame, bool), cancel func()) {
	t.Helper()
	ctx, cancelCtx := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", s.clientURL+"/api/v1/sessions/"+sid+"/rpc", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancelCtx()
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		b, _ := io.ReadAll(resp.Body)
		cancelCtx()
		t.Fatalf("rpc status %d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	next = func() (*frame, bool) {
		if !sc.Scan() {
			return nil, false
		}
		var f frame
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			t.Fatalf("bad frame %q: %v", sc.Text(), err)
		}
		f.raw = sc.Text()
		return &f, true
	}
	return next, func() { cancelCtx(); resp.Body.Close() }
}

// rpcAll runs one request to completion and returns every frame.
func rpcAll(t *testing.T, s *server, sid, key, body string) []*frame {
	t.Helper()
	next, cancel := rpcStream(t, s, sid, key, body)
	defer cancel()
	var out []*frame
	for {
		f, ok := next()
		if !ok {
			return out
		}
		out = append(out, f)
	}
}

// rpcResult runs a request and returns its terminal result, failing on an
// error frame.
func rpcResult(t *testing.T, s *server, sid, key, method string, params any) (json.RawMessage, []*frame) {
	t.Helper()
	p, _ := json.Marshal(params)
	frames := rpcAll(t, s, sid, key, fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":%s}`, method, p))
	if len(frames) == 0 {
		t.Fatalf("%s: empty response", method)
	}
	last := frames[len(frames)-1]
	if last.Error != nil || last.Result == nil {
		t.Fatalf("%s: terminal frame %s", method, last.raw)
	}
	return last.Result, frames[:len(frames)-1]
}

// session opens a session on a fresh profile with the scripted provider
// and returns (session id, session key, client key).
func (s *server) scriptedSession(t *testing.T, tools ...string) (string, string, string) {
	t.Helper()
	allowed := make([]any, len(tools))
	decls := make([]any, len(tools))
	for i, name := range tools {
		allowed[i] = name
		decls[i] = map[string]any{"name": name, "description": "test tool", "input_schema": map[string]any{"type": "object"}}
	}
	pro := s.profile(map[string]any{"name": fmt.Sprintf("p-%d", profileSeq.Add(1)), "primary_provider": "script", "allowed_tools": allowed})
	_, k := s.clientKey("c", pro)
	r := s.client("POST", "/api/v1/sessions", k, map[string]any{"tools": decls})
	mustStatus(t, r, 201)
	m := r.json(t)
	return m["session_id"].(string), m["session_key"].(string), k
}

// loggedEvent is one event of an events page, as the tests read it.
type loggedEvent struct {
	EventType string          `json:"event_type"`
	Payload   json.RawMessage `json:"payload"`
}

// eventPage decodes the items of an events page (client or admin port).
func eventPage(t *testing.T, r *response) []loggedEvent {
	t.Helper()
	mustStatus(t, r, 200)
	var page struct {
		Items []loggedEvent `json:"items"`
	}
	if err := json.Unmarshal(r.body, &page); err != nil {
		t.Fatalf("events page: %v", err)
	}
	return page.Items
}

func eventTypes(t *testing.T, raw json.RawMessage) []string {
	t.Helper()
	var evs []struct {
		EventType string `json:"event_type"`
	}
	if err := json.Unmarshal(raw, &evs); err != nil {
		t.Fatalf("events: %v", err)
	}
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.EventType
	}
	return out
}

func notificationTypes(t *testing.T, frames []*frame) []string {
	t.Helper()
	var out []string
	for _, f := range frames {
		if f.Method != "session.event" {
			t.Fatalf("unexpected frame %s", f.raw)
		}
		var ev struct {
			EventType string `json:"event_type"`
		}
		json.Unmarshal(f.Params, &ev)
		out = append(out, ev.EventType)
	}
	return out
}

func TestRPCFraming(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	sid, sk, _ := s.scriptedSession(t)
	tests := []struct {
		name, body string
		want       string // exact single frame, or "" for an empty body
	}{
		{"parse error", `{"jsonrpc":`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"session.registerDriver"}]`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: batch requests are not supported"}}`},
		{"not an object", `"hi"`, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request"}}`},
		{"wrong version", `{"jsonrpc":"1.0","id":"x","method":"session.registerDriver"}`, `{"jsonrpc":"2.0","id":"x","error":{"code":-32600,"message":"Invalid Request: missing or wrong \"jsonrpc\" version"}}`},
		{"wrong version notification", `{"jsonrpc":"1.0","method":"session.registerDriver"}`, ``},
		{"missing method", `{"jsonrpc":"2.0","id":3}`, `{"jsonrpc":"2.0","id":3,"error":{"code":-32600,"message":"Invalid Request: missing \"method\""}}`},
		{"null method", `{"jsonrpc":"2.0","id":3,"method":null}`, `{"jsonrpc":"2.0","id":3,"error":{"code":-32600,"message":"Invalid Request: missing \"method\""}}`},
		{"unknown method", `{"jsonrpc":"2.0","id":4,"method":"session.fly"}`, `{"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"Method not found: session.fly"}}`},
		{"send before register", `{"jsonrpc":"2.0","id":5,"method":"session.sendMessage","params":{"message":{"content":"hi"}}}`, `{"jsonrpc":"2.0","id":5,"error":{"code":-32001,"message":"call session.registerDriver before session.sendMessage"}}`},
		{"notification register has no body", `{"jsonrpc":"2.0","method":"session.registerDriver"}`, ``},
		{"register with null id", `{"jsonrpc":"2.0","id":null,"method":"session.registerDriver"}`, `{"jsonrpc":"2.0","id":null,"result":{"registered":true}}`},
		{"missing message", `{"jsonrpc":"2.0","id":6,"method":"session.sendMessage","params":{}}`, `{"jsonrpc":"2.0","id":6,"error":{"code":-32602,"message":"Invalid params: missing \"message\""}}`},
		{"update tools missing", `{"jsonrpc":"2.0","id":7,"method":"session.updateClientTools"}`, `{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"Invalid params: missing \"tools\""}}`},
		{"update tools not allowed", `{"jsonrpc":"2.0","id":8,"method":"session.updateClientTools","params":{"tools":[{"name":"rm"}]}}`, `{"jsonrpc":"2.0","id":8,"error":{"code":-32015,"message":"tool_not_allowed: tool \"rm\" is not in the profile's allowlist"}}`},
		{"cancel with no turn", `{"jsonrpc":"2.0","id":9,"method":"session.cancelTurn"}`, `{"jsonrpc":"2.0","id":9,"error":{"code":-32000,"message":"no turn is running or paused in this session"}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			frames := rpcAll(t, s, sid, sk, tc.body)
			var got []string
			for _, f := range frames {
				got = append(got, f.raw)
			}
			want := []string(nil)
			if tc.want != "" {
				want = []string{tc.want}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("got %q\nwant %q", got, want)
			}
		})
	}
	r := rawCall(t, "POST", s.clientURL+"/api/v1/sessions/"+sid+"/rpc", "bae_ses_"+strings.Repeat("0", 48), "", `{}`)
	if r.status != 401 || r.json(t)["detail"] != "invalid session key" {
		t.Fatalf("bad key: %d %s", r.status, r.body)
	}
}

func TestRPCScriptedTurnAndClientTool(t *testing.T) { testScriptedTurn(t) }

// TestRPCScriptedTurnOnPostgres runs the session loop on PostgreSQL.
func TestRPCScriptedTurnOnPostgres(t *testing.T) {
	t.Parallel()
	dsn := postgresSchema(t)
	testScriptedTurn(t, func(env map[string]string) { env["BATON_DATABASE_URL"] = dsn })
}

func testScriptedTurn(t *testing.T, mutate ...func(map[string]string)) {
	s := startServer(t, mutate...)
	sid, sk, _ := s.scriptedSession(t, "get_time")
	res, _ := rpcResult(t, s, sid, sk, "session.registerDriver", map[string]any{})
	if string(res) != `{"registered":true}` {
		t.Fatalf("register: %s", res)
	}
	rpcResult(t, s, sid, sk, "session.registerDriver", map[string]any{}) // idempotent

	res, notes := rpcResult(t, s, sid, sk, "session.sendMessage", map[string]any{"message": map[string]any{"role": "user", "content": "hello"}})
	var out struct {
		Message struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"message"`
		Events json.RawMessage `json:"events"`
	}
	json.Unmarshal(res, &out)
	if out.Message.Role != "assistant" || !strings.Contains(string(out.Message.Content), "You said: hello") {
		t.Fatalf("echo reply: %s", res)
	}
	if got := fmt.Sprint(eventTypes(t, out.Events)); got != "[client.message.send provider.request provider.response server.message.send]" {
		t.Fatalf("result events: %s", got)
	}
	// The sender's stream skips its own message.
	if got := fmt.Sprint(notificationTypes(t, notes)); got != "[provider.request provider.response server.message.send]" {
		t.Fatalf("stream: %s", got)
	}

	// A client tool pauses the turn with dispatch tags…
	res, _ = rpcResult(t, s, sid, sk, "session.sendMessage", map[string]any{"message": map[string]any{"content": "call get_time"}})
	json.Unmarshal(res, &out)
	var blocks []map[string]any
	json.Unmarshal(out.Message.Content, &blocks)
	if len(blocks) != 1 || blocks[0]["type"] != "tool_use" || blocks[0]["dispatch"] != "client" || blocks[0]["name"] != "get_time" {
		t.Fatalf("paused reply: %s", out.Message.Content)
	}
	id := blocks[0]["id"].(string)
	// …and the owner resumes it with the result.
	res, _ = rpcResult(t, s, sid, sk, "session.sendMessage", map[string]any{"message": map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "tool_result", "tool_use_id": id, "content": "12:00"},
	}}})
	json.Unmarshal(res, &out)
	if !strings.Contains(string(out.Message.Content), "get_time returned: 12:00") {
		t.Fatalf("after tool: %s", out.Message.Content)
	}
	if got := fmt.Sprint(eventTypes(t, out.Events)); got != "[client.message.send tool.result provider.request provider.response server.message.send]" {
		t.Fatalf("resume events: %s", got)
	}
	// The next provider call saw the whole transcript, tags stripped.
	r := s.client("GET", "/api/v1/sessions/"+sid+"/events?limit=200", sk, nil)
	items := eventPage(t, r)
	var lastReq json.RawMessage
	for _, it := range items {
		if it.EventType == "provider.request" {
			lastReq = it.Payload
		}
	}
	var pr struct {
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
	}
	json.Unmarshal(lastReq, &pr)
	var roles []string
	for _, m := range pr.Messages {
		roles = append(roles, m.Role)
	}
	if fmt.Sprint(roles) != "[user assistant user assistant user]" {
		t.Fatalf("last provider request had roles %v: %s", roles, lastReq)
	}
}

func TestRPCSubscribeReplayLiveAndEnd(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	sid, sk, _ := s.scriptedSession(t)
	rpcResult(t, s, sid, sk, "session.registerDriver", map[string]any{})
	// Replay from the open event: the driver registration follows it.
	r := s.client("GET", "/api/v1/sessions/"+sid+"/events", sk, nil)
	first := r.json(t)["items"].([]any)[0].(map[string]any)["id"].(string)
	next, cancel := rpcStream(t, s, sid, sk, fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"session.subscribe","params":{"since_event_id":%q}}`, first))
	defer cancel()
	f, ok := next()
	if !ok || !strings.Contains(f.raw, `"event_type":"session.driver.register"`) {
		t.Fatalf("replay frame: %v", f)
	}
	// Live: a turn's events arrive, the sender's own message included.
	rpcResult(t, s, sid, sk, "session.sendMessage", map[string]any{"message": map[string]any{"content": "hi"}})
	var types []string
	for len(types) < 4 {
		f, ok := next()
		if !ok {
			t.Fatalf("stream ended early after %v", types)
		}
		types = append(types, notificationTypes(t, []*frame{f})...)
	}
	if fmt.Sprint(types) != "[client.message.send provider.request provider.response server.message.send]" {
		t.Fatalf("live events: %v", types)
	}
	// unsubscribe ends the stream with Baton's terminal result.
	res, _ := rpcResult(t, s, sid, sk, "session.unsubscribe", map[string]any{})
	if string(res) != `{"unsubscribed":true}` {
		t.Fatalf("unsubscribe: %s", res)
	}
	f, ok = next()
	if !ok || string(f.Result) != `{"ended":true,"reason":"unsubscribed"}` {
		t.Fatalf("end frame: %v", f)
	}

	// On a closed session: replay, then a terminal result (BAE hangs).
	mustStatus(t, s.client("DELETE", "/api/v1/sessions/"+sid, sk, nil), 200)
	frames := rpcAll(t, s, sid, sk, `{"jsonrpc":"2.0","id":2,"method":"session.subscribe","params":{"since_event_id":"evt_unknown"}}`)
	last := frames[len(frames)-1]
	if string(last.Result) != `{"ended":true,"reason":"session_closed"}` {
		t.Fatalf("closed subscribe ended with %s", last.raw)
	}
	if got := notificationTypes(t, frames[:len(frames)-1]); got[0] != "session.open" || got[len(got)-1] != "session.close" {
		t.Fatalf("closed replay: %v", got)
	}
}

func TestRPCSandboxAndSubagentMethods(t *testing.T) {
	t.Parallel()
	// No Docker engine answers: starting a sandbox fails (see sandbox_test.go
	// for the driver at work).
	s := startServer(t, func(env map[string]string) { env["BATON_DOCKER_SOCKET"] = "/nonexistent/docker.sock" })
	pro := s.profile(map[string]any{"name": "sbx", "primary_provider": "script", "available_sandboxes": []any{"alpine:3"}})
	_, k := s.clientKey("c", pro)
	r := s.client("POST", "/api/v1/sessions", k, map[string]any{})
	mustStatus(t, r, 201)
	sid, sk := r.json(t)["session_id"].(string), r.json(t)["session_key"].(string)

	// Before registerDriver every method is gated.
	frames := rpcAll(t, s, sid, sk, `{"jsonrpc":"2.0","id":1,"method":"session.stopRemoteSandbox"}`)
	if len(frames) != 1 || frames[0].Error == nil || frames[0].Error.Code != -32001 {
		t.Fatalf("ungated: %v", frames[0].raw)
	}
	res, _ := rpcResult(t, s, sid, sk, "session.registerDriver", map[string]any{})
	if string(res) != `{"registered":true}` {
		t.Fatal(string(res))
	}
	tests := []struct {
		method, params string
		code           int
		msg            string
		result         string
	}{
		{"session.startRemoteSandbox", `{}`, -32602, `Invalid params: missing "image"`, ""},
		{"session.startRemoteSandbox", `{"image":"ubuntu"}`, -32011, `sandbox_image_not_allowed: image "ubuntu" is not in this session profile's available_sandboxes`, ""},
		{"session.startRemoteSandbox", `{"image":"alpine:3"}`, -32012, "sandbox_start_failed: ", ""},
		{"session.stopRemoteSandbox", `{}`, -32013, "sandbox_not_running: no remote sandbox is running for this session", ""},
		{"session.execRemoteSandbox", `{}`, -32602, `Invalid params: missing "command"`, ""},
		{"session.execRemoteSandbox", `{"command":"true"}`, -32013, "sandbox_not_running: no remote sandbox is running for this session", ""},
		{"session.cancelSubagent", `{}`, -32602, `Invalid params: missing "subagent_id"`, ""},
		{"session.cancelSubagent", `{"subagent_id":"sba_x"}`, -32014, `subagent_not_found: no tracked subagent "sba_x" for this session`, ""},
		{"session.reportLocalSandbox", `{"state":"paused"}`, -32602, `Invalid params: "state" must be "running", "stopped", or "error"`, ""},
		{"session.reportLocalSandbox", `{"state":"running","unsandboxed":"yes"}`, -32602, `Invalid params: "unsandboxed" must be a boolean`, ""},
		{"session.reportLocalSandbox", `{"state":"running","unsandboxed":true,"image":"x"}`, -32602, `Invalid params: "image" must be null when "unsandboxed" is true`, ""},
		{"session.reportLocalSandbox", `{"state":"running"}`, -32602, `Invalid params: missing "image"`, ""},
		{"session.reportLocalSandbox", `{"state":"running","image":5}`, -32602, `Invalid params: "image" must be a string or null`, ""},
		{"session.reportLocalSandbox", `{"state":"running","unsandboxed":true,"detail":"host"}`, 0, "", `{"reported":true}`},
		{"session.reportLocalSubagent", `{"state":"paused"}`, -32602, `Invalid params: "state" must be "start", "running", "completed", "failed", or "cancelled"`, ""},
		{"session.reportLocalSubagent", `{"state":"start","subagent_id":"a","harness":"h"}`, -32602, `Invalid params: "subagent_id", "harness", and "model" must be non-empty strings`, ""},
		{"session.reportLocalSubagent", `{"state":"start","subagent_id":" ","harness":"h","model":"m"}`, -32602, `Invalid params: "subagent_id", "harness", and "model" must be non-empty strings`, ""},
		{"session.reportLocalSubagent", `{"state":"completed","subagent_id":"a","harness":"h","model":"m","exit_code":null}`, -32602, `Invalid params: "exit_code" must be an integer`, ""},
		{"session.reportLocalSubagent", `{"state":"failed","subagent_id":"a","harness":"h","model":"m","reason":"nonzero_exit","exit_code":2}`, 0, "", `{"reported":true}`},
	}
	for _, tc := range tests {
		frames := rpcAll(t, s, sid, sk, fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":%s}`, tc.method, tc.params))
		if len(frames) != 1 {
			t.Fatalf("%s %s: %d frames", tc.method, tc.params, len(frames))
		}
		f := frames[0]
		if tc.code != 0 {
			if f.Error == nil || f.Error.Code != tc.code || !strings.HasPrefix(f.Error.Message, tc.msg) {
				t.Errorf("%s %s: got %s, want %d %q", tc.method, tc.params, f.raw, tc.code, tc.msg)
			}
			continue
		}
		if string(f.Result) != tc.result {
			t.Errorf("%s %s: got %s", tc.method, tc.params, f.raw)
		}
	}
	// The failed start and the reports are in the log with BAE's payloads.
	r = s.client("GET", "/api/v1/sessions/"+sid+"/events", sk, nil)
	items := eventPage(t, r)
	var got []string
	for _, it := range items {
		got = append(got, it.EventType+" "+string(it.Payload))
	}
	want := []string{
		`session.sandbox.start {"dispatch":"remote","image":"alpine:3"}`,
		`session.sandbox.error {"detail":"docker engine not reachable at /nonexistent/docker.sock: connect: no such file or directory","dispatch":"remote","image":"alpine:3","phase":"start","unsandboxed":false}`,
		`session.sandbox.running {"container_id":null,"detail":"host","dispatch":"local","image":null,"unsandboxed":true}`,
		`session.subagent.failed {"detail":null,"dispatch":"local","exit_code":2,"harness":"h","model":"m","reason":"nonzero_exit","subagent_id":"a"}`,
	}
	joined := strings.Join(got, "\n")
	for _, w := range want {
		if !strings.Contains(joined, w) {
			t.Errorf("missing event %s in:\n%s", w, joined)
		}
	}
}

// TestRPCSingleResponseIsOneWrite: a one-frame answer is not flushed
// before the handler ends, so net/http sends it with a Content-Length
// instead of as a chunked stream (one write, and the connection is
// reusable as soon as the frame is read).
func TestRPCSingleResponseIsOneWrite(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	sid, sk, _ := s.scriptedSession(t)
	req, _ := http.NewRequest("POST", s.clientURL+"/api/v1/sessions/"+sid+"/rpc", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"session.registerDriver"}`))
	req.Header.Set("Authorization", "Bearer "+sk)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.ContentLength != int64(len(b)) || len(resp.TransferEncoding) != 0 {
		t.Fatalf("Content-Length %d, Transfer-Encoding %v for body %q; want the length of one unchunked body", resp.ContentLength, resp.TransferEncoding, b)
	}
	if want := `{"jsonrpc":"2.0","id":1,"result":{"registered":true}}` + "\n"; string(b) != want {
		t.Fatalf("body %q, want %q", b, want)
	}
}

// TestRPCPrettyContentKeepsFramesOnOneLine: message content sent with
// newlines between its tokens never puts a raw newline inside an NDJSON
// frame (provider.request notices repeat it, in this turn and the next).
func TestRPCPrettyContentKeepsFramesOnOneLine(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	sid, sk, _ := s.scriptedSession(t)
	rpcResult(t, s, sid, sk, "session.registerDriver", nil)
	for i, text := range []string{"first", "second"} {
		body := "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"session.sendMessage\",\"params\":{\"message\":{\"content\":[\n  {\"type\": \"text\",\r\n   \"text\": \"" + text + "\"}\n]}}}"
		frames := rpcAll(t, s, sid, sk, body) // fails on any line that is not a whole frame
		last := frames[len(frames)-1]
		if last.Result == nil || !strings.Contains(string(last.Result), "You said: "+text) {
			t.Fatalf("turn %d: terminal frame %s", i+1, last.raw)
		}
		for _, f := range frames {
			if strings.ContainsAny(f.raw, "\r\n") {
				t.Fatalf("turn %d: frame spans lines: %q", i+1, f.raw)
			}
		}
	}
}
