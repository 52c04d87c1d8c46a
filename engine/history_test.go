package engine

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton"
)

func ev(typ, key string, payload string) *baton.Event {
	return &baton.Event{Type: typ, ClientKeyID: key, Payload: json.RawMessage(payload), CreatedAt: time.Unix(1, 0)}
}

// TestRebuildMatchesLiveConversation: the transcript rebuilt from the log
// after a restart equals the one a turn built as it went, server-side
// tool rounds included, and a paused turn is recovered.
func TestRebuildMatchesLiveConversation(t *testing.T) {
	useMCP := `[{"type":"text","text":"looking"},{"type":"tool_use","id":"t1","name":"search","input":{}}]`
	useClient := `[{"type":"tool_use","id":"t2","name":"get_time","input":{}}]`
	tagged := `[{"dispatch":"client","id":"t2","input":{},"name":"get_time","type":"tool_use"}]`
	mcpResult := `[{"type":"text","text":"MCP error: none"}]`
	log := []*baton.Event{
		ev(baton.EventClientMessage, "k", `{"role":"user","content":"hi"}`),
		ev(baton.EventProviderResp, "k", `{"ok":true,"content":`+useMCP+`}`),
		ev(baton.EventToolResult, "k", `{"tool_use_id":"t1","dispatch":"mcp","is_error":true,"content":`+mcpResult+`}`),
		ev(baton.EventProviderResp, "k", `{"ok":false}`),
		ev(baton.EventProviderResp, "k", `{"ok":true,"content":`+useClient+`}`),
		ev(baton.EventServerMessage, "k", `{"role":"assistant","content":`+tagged+`}`),
	}
	tr := rebuild(log)

	live := newConvo([]baton.Message{{Role: "user", Content: json.RawMessage(`"hi"`)}})
	live.add(baton.Message{Role: "assistant", Content: json.RawMessage(useMCP)})
	live.add(userResults([]json.RawMessage{toolResult("t1", json.RawMessage(mcpResult), true)}))
	live.add(baton.Message{Role: "assistant", Content: json.RawMessage(tagged)})

	rebuilt := newConvo(tr.messages)
	if d := cmp.Diff(string(mustJSON(live.logged)), string(mustJSON(rebuilt.logged))); d != "" {
		t.Fatalf("logged form differs (-live +rebuilt):\n%s", d)
	}
	if d := cmp.Diff(string(mustJSON(live.ready)), string(mustJSON(rebuilt.ready))); d != "" {
		t.Fatalf("provider form differs (-live +rebuilt):\n%s", d)
	}
	if tr.paused == nil || tr.paused.owner != "k" || len(tr.paused.toolUses) != 1 || tr.paused.toolUses[0].ID != "t2" {
		t.Fatalf("paused turn not recovered: %+v", tr.paused)
	}
	// Tags never reach providers.
	if got := string(live.ready[3].Content); strings.Contains(got, "dispatch") {
		t.Fatalf("dispatch tag reached the provider form: %s", got)
	}
	if got := string(live.logged[3].Content); !strings.Contains(got, `"dispatch":"client"`) {
		t.Fatalf("logged form lost its tag: %s", got)
	}
}

// TestConvoMergesSameRole: two user messages in a row (a failed turn then
// a new message) reach providers as one.
func TestConvoMergesSameRole(t *testing.T) {
	c := newConvo([]baton.Message{
		{Role: "user", Content: json.RawMessage(`"first"`)},
		{Role: "user", Content: json.RawMessage(`[{"type":"text","text":"second"}]`)},
	})
	if len(c.logged) != 2 || len(c.ready) != 1 {
		t.Fatalf("logged %d ready %d", len(c.logged), len(c.ready))
	}
	want := `[{"text":"first","type":"text"},{"type":"text","text":"second"}]`
	if got := string(c.ready[0].Content); got != want {
		t.Fatalf("merged content %s, want %s", got, want)
	}
}

// TestRequestPayloadMatchesEncodingJSON: the appended provider.request
// payload is what encoding/json would produce for the same values.
func TestRequestPayloadMatchesEncodingJSON(t *testing.T) {
	entry := &baton.ProviderEntry{Name: "a", Provider: baton.ProviderAnthropic, Model: "m<1>", BaseURL: "http://x/?a=1&b=2"}
	msgs := []baton.Message{
		{Role: "user", Content: json.RawMessage(`"hi \u003c there"`)},
		{Role: "assistant", Content: json.RawMessage(`[{"type":"tool_use","id":"t","name":"n","input":{},"dispatch":"client"}]`)},
	}
	tools := []json.RawMessage{json.RawMessage(`{"name":"n","description":null,"input_schema":{}}`)}
	got := requestPayload(3, "fallback", entry, 4096, msgs, tools)
	want := baton.MarshalJSON(map[string]any{
		"attempt": 3, "kind": "fallback", "provider": entry.Provider, "base_url": entry.EffectiveBaseURL(),
		"model": entry.Model, "max_tokens": 4096, "messages": msgs, "tools": tools,
	})
	if string(got) != string(want) {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if got := requestPayload(0, "primary", entry, 1, nil, nil); !json.Valid(got) {
		t.Fatalf("empty payload invalid: %s", got)
	}
}

// refResponsePayload is responsePayload as encoding/json writes it.
func refResponsePayload(attempt int, kind, provider string, resp *baton.ProviderResponse) json.RawMessage {
	payload := map[string]any{
		"attempt": attempt, "kind": kind, "provider": provider, "ok": true, "status": 200,
		"body": resp.Body, "content": resp.Content,
	}
	if resp.Usage != nil {
		payload["usage"] = resp.Usage
	}
	return baton.MarshalJSON(payload)
}

// FuzzResponsePayload: the appended provider.response payload is what
// encoding/json would produce, for any reply bytes.
func FuzzResponsePayload(f *testing.F) {
	f.Add(`{"id":"msg_1","content":[{"type":"text","text":"a <b> & \u2028"}],"usage":{"input_tokens":1}}`,
		`[{"type":"text","text":"a <b> & \u2028"}]`, "primary", "anthropic", 0, true)
	f.Add("{ \"x\" : [ 1 , 2 ]\n}", `[ ]`, "fallback", "open\"ai", 3, false)
	f.Add(`{`, `[]`, "primary", "p", 1, true)
	f.Add(``, `null`, "é", "p", 2, false)
	f.Fuzz(func(t *testing.T, body, content, kind, provider string, attempt int, usage bool) {
		resp := &baton.ProviderResponse{Body: json.RawMessage(body), Content: json.RawMessage(content)}
		if usage {
			resp.Usage = &baton.Usage{InputTokens: attempt * 7, OutputTokens: 2}
		}
		got := responsePayload(attempt, kind, provider, resp)
		if want := refResponsePayload(attempt, kind, provider, resp); string(got) != string(want) {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
	})
}

// FuzzMessagePayload: the appended client.message.send payload is what
// encoding/json would produce for the same message, for any content bytes.
func FuzzMessagePayload(f *testing.F) {
	f.Add("user", `"hi <there> & \u2028"`)
	f.Add("us\"er", "[\n {\"type\": \"text\", \"text\": \"a\"}\n]")
	f.Add("", `{`)
	f.Add("é", ``)
	f.Fuzz(func(t *testing.T, role, content string) {
		got := messagePayload(role, json.RawMessage(content))
		want := baton.MarshalJSON(baton.Message{Role: role, Content: json.RawMessage(content)})
		if string(got) != string(want) {
			t.Fatalf("got  %s\nwant %s", got, want)
		}
		if !json.Valid([]byte(content)) {
			return
		}
		var compact bytes.Buffer
		_ = json.Compact(&compact, []byte(content))
		if c := payloadContent(got); string(c) != compact.String() {
			t.Fatalf("payloadContent %s, want %s", c, compact.Bytes())
		}
	})
}
