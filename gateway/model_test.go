package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/provider/anthropic"
	"github.com/baton-engine/baton/provider/openai"
)

// post sends body to path with the headers (name, value pairs) and
// returns the status and the decoded JSON body.
func (f *fixture) post(path, body string, headers ...string) (int, map[string]any) {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.srv.URL+path, strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		f.t.Fatalf("%s: body is not JSON: %v\n%s", path, err, raw)
	}
	return resp.StatusCode, out
}

// canon compacts a JSON literal for comparisons.
func canon(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%v: %s", err, s)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func messagesOf(t *testing.T, req *baton.ProviderRequest) string {
	t.Helper()
	b, _ := json.Marshal(req.Messages)
	return canon(t, string(b))
}

const replyContent = `[{"type":"thinking","thinking":"hmm","signature":"sig"},{"type":"text","text":"Let me look."},` +
	`{"type":"tool_use","id":"toolu_1","name":"read_file","input":{"path":"a.go"}}]`

func TestAnthropicJSON(t *testing.T) {
	f := newFixture(t)
	tok := f.model("turn_1", "key_actor")
	f.eng.push(&baton.ProviderResponse{Content: json.RawMessage(replyContent), Usage: &baton.Usage{InputTokens: 11, OutputTokens: 7}})
	status, body := f.post("/v1/model/v1/messages", `{
		"model": "claude-whatever", "max_tokens": 300, "temperature": 0.2,
		"system": [{"type":"text","text":"be brief"},{"type":"text","text":"be kind","cache_control":{"type":"ephemeral"}}],
		"messages": [{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"yo"}]},{"role":"user","content":[{"type":"text","text":"read a.go"}]}],
		"tools": [{"name":"read_file","description":"reads","input_schema":{"type":"object"}}]
	}`, "Authorization", "Bearer "+tok)
	if status != http.StatusOK {
		t.Fatalf("status %d: %v", status, body)
	}
	reqs := f.eng.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d model calls", len(reqs))
	}
	r := reqs[0]
	if r.System != "be brief\nbe kind" || r.MaxTokens != 300 || len(r.Tools) != 1 {
		t.Errorf("canonical request: system %q, max_tokens %d, %d tools", r.System, r.MaxTokens, len(r.Tools))
	}
	want := canon(t, `[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"yo"}]},{"role":"user","content":[{"type":"text","text":"read a.go"}]}]`)
	if got := messagesOf(t, r); got != want {
		t.Errorf("messages:\n got %s\nwant %s", got, want)
	}
	if f.eng.actors[0] != "key_actor" {
		t.Errorf("actor %q", f.eng.actors[0])
	}
	if body["type"] != "message" || body["role"] != "assistant" || body["model"] != "claude-whatever" ||
		body["stop_reason"] != "tool_use" || !strings.HasPrefix(body["id"].(string), "msg_") {
		t.Errorf("reply envelope: %v", body)
	}
	got, _ := json.Marshal(body["content"])
	if string(got) != canon(t, replyContent) {
		t.Errorf("content %s", got)
	}
	if diff := cmp.Diff(map[string]any{"input_tokens": 11.0, "output_tokens": 7.0}, body["usage"]); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
}

// TestAnthropicStream consumes the gateway's stream with Baton's own
// Anthropic adapter, which streams and reassembles every block.
func TestAnthropicStream(t *testing.T) {
	f := newFixture(t)
	tok := f.model("turn_1", "key_actor")
	f.eng.push(&baton.ProviderResponse{Content: json.RawMessage(replyContent), Usage: &baton.Usage{InputTokens: 5, OutputTokens: 9},
		Body: json.RawMessage(`{"stop_reason":"end_turn"}`)})
	c := anthropic.New(nil)
	defer c.Close()
	entry := &baton.ProviderEntry{Provider: baton.ProviderAnthropic, BaseURL: f.srv.URL + ModelBasePath, Model: "m"}
	resp, err := c.Call(context.Background(), entry, tok, &baton.ProviderRequest{
		System: "sys", Messages: []baton.Message{{Role: "user", Content: json.RawMessage(`"hello"`)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := canon(t, string(resp.Content)); got != canon(t, replyContent) {
		t.Errorf("reassembled content:\n got %s\nwant %s", got, canon(t, replyContent))
	}
	if diff := cmp.Diff(&baton.Usage{InputTokens: 5, OutputTokens: 9}, resp.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	var b struct {
		StopReason string `json:"stop_reason"`
		Model      string `json:"model"`
	}
	_ = json.Unmarshal(resp.Body, &b)
	if b.StopReason != "tool_use" || b.Model != "m" {
		t.Errorf("reassembled message: %s", resp.Body)
	}
	if r := f.eng.requests()[0]; r.System != "sys" || messagesOf(t, r) != canon(t, `[{"role":"user","content":"hello"}]`) {
		t.Errorf("canonical request: %+v", r)
	}
}

func TestOpenAIJSON(t *testing.T) {
	f := newFixture(t)
	tok := f.model("turn_1", "key_actor")
	f.eng.push(&baton.ProviderResponse{Content: json.RawMessage(replyContent), Usage: &baton.Usage{InputTokens: 3, OutputTokens: 4}})
	status, body := f.post("/v1/model/v1/chat/completions", `{
		"model": "gpt-x", "max_completion_tokens": 99,
		"messages": [
			{"role":"system","content":"sys one"},
			{"role":"developer","content":[{"type":"text","text":"sys two"}]},
			{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]},
			{"role":"assistant","content":null,"tool_calls":[
				{"id":"call_1","type":"function","function":{"name":"ls","arguments":"{\"dir\": \".\"}"}},
				{"id":"call_2","type":"function","function":{"name":"pwd","arguments":""}}]},
			{"role":"tool","tool_call_id":"call_1","content":"a.go"},
			{"role":"tool","tool_call_id":"call_2","content":[{"type":"text","text":"/src"}]},
			{"role":"user","content":"thanks"}
		],
		"tools":[{"type":"function","function":{"name":"ls","description":"list","parameters":{"type":"object","properties":{"dir":{"type":"string"}}}}},
		         {"type":"function","function":{"name":"pwd"}}]
	}`, "Authorization", "Bearer "+tok)
	if status != http.StatusOK {
		t.Fatalf("status %d: %v", status, body)
	}
	r := f.eng.requests()[0]
	if r.System != "sys one\nsys two" || r.MaxTokens != 99 {
		t.Errorf("system %q, max_tokens %d", r.System, r.MaxTokens)
	}
	want := canon(t, `[
		{"role":"user","content":[{"type":"text","text":"look"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]},
		{"role":"assistant","content":[{"type":"tool_use","id":"call_1","name":"ls","input":{"dir":"."}},{"type":"tool_use","id":"call_2","name":"pwd","input":{}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":"a.go"},{"type":"tool_result","tool_use_id":"call_2","content":"/src"},{"type":"text","text":"thanks"}]}
	]`)
	if got := messagesOf(t, r); got != want {
		t.Errorf("messages:\n got %s\nwant %s", got, want)
	}
	tools, _ := json.Marshal(r.Tools)
	wantTools := canon(t, `[{"name":"ls","description":"list","input_schema":{"type":"object","properties":{"dir":{"type":"string"}}}},
		{"name":"pwd","description":null,"input_schema":{"type":"object","properties":{}}}]`)
	if canon(t, string(tools)) != wantTools {
		t.Errorf("tools %s", tools)
	}
	wantBody := canon(t, `{"object":"chat.completion","model":"gpt-x","choices":[{"index":0,"finish_reason":"tool_calls",
		"message":{"role":"assistant","content":"Let me look.","tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"a.go\"}"}}]}}],
		"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`)
	if !strings.HasPrefix(body["id"].(string), "chatcmpl-") || body["created"] == nil {
		t.Errorf("id/created: %v", body)
	}
	delete(body, "id")
	delete(body, "created")
	got, _ := json.Marshal(body)
	if string(got) != wantBody {
		t.Errorf("reply:\n got %s\nwant %s", got, wantBody)
	}
}

// TestOpenAIStream consumes the gateway's stream with Baton's own OpenAI
// adapter (which asks for the usage chunk).
func TestOpenAIStream(t *testing.T) {
	f := newFixture(t)
	tok := f.model("turn_1", "key_actor")
	f.eng.push(&baton.ProviderResponse{Content: json.RawMessage(replyContent), Usage: &baton.Usage{InputTokens: 2, OutputTokens: 8}})
	c := openai.New(nil)
	defer c.Close()
	entry := &baton.ProviderEntry{Provider: baton.ProviderOpenAI, BaseURL: f.srv.URL + ModelBasePath, Model: "m"}
	resp, err := c.Call(context.Background(), entry, tok, &baton.ProviderRequest{
		Messages: []baton.Message{{Role: "user", Content: json.RawMessage(`"hello"`)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Thinking has no Chat Completions form.
	want := canon(t, `[{"type":"text","text":"Let me look."},{"type":"tool_use","id":"toolu_1","name":"read_file","input":{"path":"a.go"}}]`)
	if got := canon(t, string(resp.Content)); got != want {
		t.Errorf("reassembled content:\n got %s\nwant %s", got, want)
	}
	if diff := cmp.Diff(&baton.Usage{InputTokens: 2, OutputTokens: 8}, resp.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	if r := f.eng.requests()[0]; messagesOf(t, r) != canon(t, `[{"role":"user","content":[{"type":"text","text":"hello"}]}]`) {
		t.Errorf("canonical request: %s", messagesOf(t, r))
	}
}

func TestModelErrors(t *testing.T) {
	f := newFixture(t)
	expired := f.model("turn_2", "key_actor")
	f.clk.add(time.Hour)
	good := f.model("turn_1", "key_actor")
	ended := f.model("turn_0", "key_actor")
	f.eng.end("ses_a", "turn_0")
	tools, _, err := f.tokens.IssueTools(context.Background(), "ses_a", "turn_1", "mch_a", 3)
	if err != nil {
		t.Fatal(err)
	}
	const okBody = `{"model":"x","messages":[{"role":"user","content":"hi"}]}`
	cases := []struct {
		name    string
		body    string
		headers []string
		engErr  error
		status  int
		message string
	}{
		{"no token", okBody, nil, nil, 401, "missing Authorization header"},
		{"bad token", okBody, []string{"Authorization", "Bearer bae_mdt_nope"}, nil, 401, "invalid model token"},
		{"tools token", okBody, []string{"Authorization", "Bearer " + tools}, nil, 401, "invalid model token"},
		{"expired", okBody, []string{"Authorization", "Bearer " + expired}, nil, 401, "model token expired"},
		{"inactive turn", okBody, []string{"Authorization", "Bearer " + ended}, nil, 403, "the turn is not active"},
		{"no messages", `{"messages":[]}`, []string{"Authorization", "Bearer " + good}, nil, 400, "messages: at least one message is required"},
		{"not JSON", `{`, []string{"Authorization", "Bearer " + good}, nil, 400, ""},
		{"invalid UTF-8", "{\"model\":\"x\",\"messages\":[{\"role\":\"user\",\"content\":\"hi \xff\xfe\"}]}", []string{"Authorization", "Bearer " + good},
			nil, 400, "Failed to parse the request body as JSON: invalid UTF-8 at offset 54"},
		{"session closed", okBody, []string{"Authorization", "Bearer " + good},
			baton.Errorf(baton.ECodeNotOpen, "session is closed, not open"), 403, "session is closed, not open"},
		{"all providers failed", okBody, []string{"Authorization", "Bearer " + good},
			baton.Errorf(baton.ECodeUnavailable, "all providers failed (3 attempts)"), 502, "all providers failed (3 attempts)"},
		{"internal", okBody, []string{"Authorization", "Bearer " + good}, context.DeadlineExceeded, 500, "internal error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f.eng.mu.Lock()
			f.eng.err = c.engErr
			f.eng.mu.Unlock()
			status, body := f.post("/v1/model/v1/messages", c.body, c.headers...)
			e, _ := body["error"].(map[string]any)
			if status != c.status || body["type"] != "error" || e["type"] != anthropic.ErrorType(c.status) ||
				(c.message != "" && e["message"] != c.message) {
				t.Errorf("anthropic: %d %v, want %d %q", status, body, c.status, c.message)
			}
			status, body = f.post("/v1/model/v1/chat/completions", c.body, c.headers...)
			e, _ = body["error"].(map[string]any)
			typ, code := openai.ErrorType(c.status)
			if status != c.status || e["type"] != typ || e["code"] != code || (c.message != "" && e["message"] != c.message) {
				t.Errorf("openai: %d %v, want %d %q", status, body, c.status, c.message)
			}
		})
	}
	// Anthropic clients may send the token as x-api-key; OpenAI's route
	// takes the Authorization header only.
	f.eng.mu.Lock()
	f.eng.err = nil
	f.eng.mu.Unlock()
	if status, body := f.post("/v1/model/v1/messages", okBody, "X-Api-Key", good); status != 200 {
		t.Errorf("x-api-key: %d %v", status, body)
	}
	if status, _ := f.post("/v1/model/v1/chat/completions", okBody, "X-Api-Key", good); status != 401 {
		t.Errorf("x-api-key on chat completions: %d", status)
	}
	// The body must be JSON (415 in the API's shape).
	if status, body := f.post("/v1/model/v1/messages", okBody, "Authorization", "Bearer "+good, "Content-Type", "text/plain"); status != 415 ||
		body["error"].(map[string]any)["type"] != "invalid_request_error" {
		t.Errorf("text/plain: %d %v", status, body)
	}
}
