package main

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRPCParamsErrors: malformed params of sendMessage and
// updateClientTools are answered with BAE's texts, which are serde's
// messages (never Go type names).
func TestRPCParamsErrors(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	sid, sk, _ := s.scriptedSession(t, "get_time")
	rpcResult(t, s, sid, sk, "session.registerDriver", map[string]any{})
	tests := []struct {
		method, params string
		code           int
		msg            string
	}{
		{"session.sendMessage", `{"message":"hi"}`, -32602, `Invalid params: invalid type: string "hi", expected struct MessageBody`},
		{"session.sendMessage", `{"message":null}`, -32602, `Invalid params: invalid type: null, expected struct MessageBody`},
		{"session.sendMessage", `{"message":{"role":null,"content":"hi"}}`, -32602, `Invalid params: invalid type: null, expected a string`},
		{"session.sendMessage", `{"message":{"role":5,"content":"hi"}}`, -32602, "Invalid params: invalid type: integer `5`, expected a string"},
		{"session.sendMessage", `{"message":{"content":"hi","role":true}}`, -32602, "Invalid params: invalid type: boolean `true`, expected a string"},
		{"session.sendMessage", `{"message":{"role":1.50}}`, -32602, "Invalid params: invalid type: floating point `1.5`, expected a string"},
		{"session.sendMessage", `{"message":{"role":"user"}}`, -32602, "Invalid params: missing field `content`"},
		{"session.sendMessage", `{"message":[]}`, -32602, "Invalid params: invalid length 0, expected struct MessageBody with 2 elements"},
		{"session.sendMessage", `{"message":["user"]}`, -32602, "Invalid params: invalid length 1, expected struct MessageBody with 2 elements"},
		{"session.updateClientTools", `{"tools":null}`, -32602, "Invalid params: invalid type: null, expected a sequence"},
		{"session.updateClientTools", `{"tools":{}}`, -32602, "Invalid params: invalid type: map, expected a sequence"},
		{"session.updateClientTools", `{"tools":["get_time"]}`, -32602, `Invalid params: invalid type: string "get_time", expected struct ClientToolDef`},
		{"session.updateClientTools", `{"tools":[{}]}`, -32602, "Invalid params: missing field `name`"},
		{"session.updateClientTools", `{"tools":[{"name":5}]}`, -32602, "Invalid params: invalid type: integer `5`, expected a string"},
		{"session.updateClientTools", `{"tools":[{"name":5,"description":-6}]}`, -32602, "Invalid params: invalid type: integer `-6`, expected a string"},
		{"session.updateClientTools", `{"tools":[{"name":" "}]}`, -32602, `Invalid params: every tool requires a non-empty "name"`},
		{"session.updateClientTools", `{"tools":[{"name":"remote_subagent_status"}]}`, -32015, `tool_not_allowed: tool "remote_subagent_status" is not in the profile's allowlist`},
		{"session.updateClientTools", `{"tools":[{"name":"get_time","description":null,"input_schema":null}]}`, 0, ""},
	}
	for _, tc := range tests {
		frames := rpcAll(t, s, sid, sk, fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":%s}`, tc.method, tc.params))
		if len(frames) != 1 {
			t.Fatalf("%s %s: %d frames", tc.method, tc.params, len(frames))
		}
		f := frames[0]
		if tc.code == 0 {
			if f.Error != nil {
				t.Errorf("%s %s: %s", tc.method, tc.params, f.raw)
			}
			continue
		}
		if f.Error == nil || f.Error.Code != tc.code || f.Error.Message != tc.msg {
			t.Errorf("%s %s:\n got %s\nwant %d %q", tc.method, tc.params, f.raw, tc.code, tc.msg)
		}
	}
}

// TestRPCClientToolResultPayload: a client tool_result block is recorded
// with its tool_use_id as sent, of any JSON type, or null when it has none.
func TestRPCClientToolResultPayload(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	sid, sk, _ := s.scriptedSession(t)
	rpcResult(t, s, sid, sk, "session.registerDriver", map[string]any{})
	res, _ := rpcResult(t, s, sid, sk, "session.sendMessage", map[string]any{"message": map[string]any{"content": []any{
		map[string]any{"type": "tool_result", "tool_use_id": 7, "content": "a"},
		map[string]any{"type": "tool_result", "content": "b"},
		map[string]any{"type": "tool_result", "tool_use_id": "toolu_x", "content": []any{map[string]any{"type": "text", "text": "c"}}},
		map[string]any{"type": "text", "text": "hi"},
	}}})
	var out struct {
		Events []struct {
			EventType string          `json:"event_type"`
			Payload   json.RawMessage `json:"payload"`
		} `json:"events"`
	}
	if err := json.Unmarshal(res, &out); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range out.Events {
		if ev.EventType == "tool.result" {
			got = append(got, string(ev.Payload))
		}
	}
	want := []string{
		`{"content":"a","dispatch":"client","tool_use_id":7}`,
		`{"content":"b","dispatch":"client","tool_use_id":null}`,
		`{"content":[{"text":"c","type":"text"}],"dispatch":"client","tool_use_id":"toolu_x"}`, // as sent
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("tool.result payloads (-want +got):\n%s", d)
	}
}

// TestRPCSubscribeErrorSession: a session in state error still takes
// events, so a subscription started on it replays and then stays live
// (as on an open session) until an unsubscribe; a DELETE of the session
// ends it as closed.
func TestRPCSubscribeErrorSession(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	sid, sk, _ := s.scriptedSession(t, "get_time")
	rpcResult(t, s, sid, sk, "session.registerDriver", map[string]any{})
	rpcResult(t, s, sid, sk, "session.sendMessage", map[string]any{"message": map[string]any{"content": "call get_time"}})
	// A resume that answers nothing moves the session to error.
	frames := rpcAll(t, s, sid, sk, `{"jsonrpc":"2.0","id":1,"method":"session.sendMessage","params":{"message":{"content":[]}}}`)
	if last := frames[len(frames)-1]; last.Error == nil || last.Error.Code != -32000 {
		t.Fatalf("bad resume answered %s", last.raw)
	}
	if st := loopState(t, s, sid); st != "error" {
		t.Fatalf("session is %s, want error", st)
	}

	// subscribe replays everything and returns once last was replayed.
	subscribe := func(last string) func() (*frame, bool) {
		next, cancel := rpcStream(t, s, sid, sk, `{"jsonrpc":"2.0","id":2,"method":"session.subscribe","params":{"since_event_id":"evt_unknown"}}`)
		t.Cleanup(cancel)
		for {
			f, ok := next()
			if !ok || f.Method != "session.event" {
				t.Fatalf("replay ended with %v", f)
			}
			if notificationTypes(t, []*frame{f})[0] == last {
				return next // the end of the replay
			}
		}
	}
	next := subscribe("session.error")
	rpcResult(t, s, sid, sk, "session.reportLocalSandbox", map[string]any{"state": "running", "image": "alpine:3"})
	if f, ok := next(); !ok || notificationTypes(t, []*frame{f})[0] != "session.sandbox.running" {
		t.Fatalf("live frame %v, want the session.sandbox.running report", f)
	}
	rpcResult(t, s, sid, sk, "session.unsubscribe", map[string]any{})
	if f, ok := next(); !ok || string(f.Result) != `{"ended":true,"reason":"unsubscribed"}` {
		t.Fatalf("end frame %v", f)
	}

	next = subscribe("session.sandbox.running")
	mustStatus(t, s.client("DELETE", "/api/v1/sessions/"+sid, sk, nil), 409) // already error
	if f, ok := next(); !ok || string(f.Result) != `{"ended":true,"reason":"session_closed"}` {
		t.Fatalf("end frame %v", f)
	}
}
