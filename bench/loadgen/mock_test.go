package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/provider/anthropic"
)

func openMock(t *testing.T, perTurn int) *mock {
	t.Helper()
	m := newMock("127.0.0.1:0", perTurn, nil)
	if err := m.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	})
	return m
}

type mockBlock struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Text  string          `json:"text"`
	Input json.RawMessage `json:"input"`
}

// callMock sends messages through Baton's own Anthropic client, so the
// mock is checked against the decoder the server uses.
func callMock(t *testing.T, m *mock, msgs []baton.Message, tools []json.RawMessage) ([]mockBlock, string) {
	t.Helper()
	c := anthropic.New(nil)
	defer c.Close()
	entry := &baton.ProviderEntry{Name: "mock", Provider: baton.ProviderAnthropic, Model: "m", BaseURL: m.URL()}
	var deltas []string
	resp, err := c.Call(context.Background(), entry, "tok", &baton.ProviderRequest{
		Messages: msgs, Tools: tools, OnDelta: func(s string) { deltas = append(deltas, s) },
	})
	if err != nil {
		t.Fatal(err)
	}
	var blocks []mockBlock
	if err := json.Unmarshal(resp.Content, &blocks); err != nil {
		t.Fatalf("content %s: %v", resp.Content, err)
	}
	var body struct {
		StopReason string `json:"stop_reason"`
	}
	if err := json.Unmarshal(resp.Body, &body); err != nil {
		t.Fatal(err)
	}
	if len(blocks) > 0 && blocks[0].Type == "text" && !cmp.Equal(deltas, []string{blocks[0].Text}) {
		t.Errorf("deltas %q, want the text", deltas)
	}
	return blocks, body.StopReason
}

func TestMockCallsToolThenAnswersResults(t *testing.T) {
	m := openMock(t, 2)
	tools := []json.RawMessage{json.RawMessage(`{"name":"get_time","input_schema":{"type":"object"}}`)}
	user := baton.Message{Role: "user", Content: json.RawMessage(`"go"`)}

	blocks, stop := callMock(t, m, []baton.Message{user}, tools)
	if stop != "tool_use" || len(blocks) != 2 {
		t.Fatalf("first reply: stop %q, blocks %+v", stop, blocks)
	}
	for _, b := range blocks {
		if b.Type != "tool_use" || b.Name != "get_time" || !strings.HasPrefix(b.ID, "toolu_") || string(b.Input) != "{}" {
			t.Fatalf("tool_use block %+v", b)
		}
	}
	if blocks[0].ID == blocks[1].ID {
		t.Fatalf("parallel calls share id %s", blocks[0].ID)
	}

	assistant, _ := json.Marshal(blocks)
	results := json.RawMessage(`[{"type":"tool_result","tool_use_id":"` + blocks[0].ID + `","content":"ok"},` +
		`{"type":"tool_result","tool_use_id":"` + blocks[1].ID + `","content":"ok"}]`)
	msgs := []baton.Message{user, {Role: "assistant", Content: assistant}, {Role: "user", Content: results}}
	blocks, stop = callMock(t, m, msgs, tools)
	if stop != "end_turn" || len(blocks) != 1 || blocks[0].Type != "text" || blocks[0].Text != "done" {
		t.Fatalf("second reply: stop %q, blocks %+v", stop, blocks)
	}

	// Without tools there is nothing to call: a plain answer.
	if blocks, stop = callMock(t, m, []baton.Message{user}, nil); stop != "end_turn" || blocks[0].Type != "text" {
		t.Fatalf("no tools: stop %q, blocks %+v", stop, blocks)
	}
	if n := m.Calls(); n != 3 {
		t.Fatalf("Calls() = %d, want 3", n)
	}
}

func TestMockRejectsMalformedRequest(t *testing.T) {
	m := openMock(t, 1)
	resp, err := http.Post(m.URL()+"/v1/messages", "application/json", strings.NewReader(`{"messages":`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d, want 400", resp.StatusCode)
	}
	if m.Calls() != 0 {
		t.Fatalf("a rejected request was counted")
	}
}

func TestMockAddressInUse(t *testing.T) {
	m := openMock(t, 1)
	other := newMock(strings.TrimPrefix(m.URL(), "http://"), 1, nil)
	if err := other.Open(context.Background()); err == nil {
		other.Close()
		t.Fatal("second mock on the same address opened")
	}
}

func TestParseRequest(t *testing.T) {
	tests := []struct {
		name, body string
		want       mockRequest
	}{
		{"first leg", string(mockRequestFixture(1<<10, false)),
			mockRequest{model: []byte(`"loadgen-mock"`), tool: []byte(`"get_time"`), messages: 17}},
		{"tool results", string(mockRequestFixture(1<<10, true)),
			mockRequest{model: []byte(`"loadgen-mock"`), tool: []byte(`"get_time"`), messages: 19, results: true}},
		{"results not last", `{"messages":[{"role":"user","content":[{"type":"tool_result"}]},{"role":"user","content":"go"}],"tools":[]}`,
			mockRequest{messages: 2}},
		{"assistant last", `{"messages":[{"content":[{"type":"tool_result"}],"role":"assistant"}]}`,
			mockRequest{messages: 1}},
		{"text blocks", `{"messages":[{"role":"user","content":[{"type":"text","text":"\"type\":\"tool_result\""}]}]}`,
			mockRequest{messages: 1}},
		{"spaced and escaped", " {\n \"model\" : \"m\\u00e9\" , \"tools\" : [ {\"input_schema\":{\"a\":[1,\"]\"]},\"name\":\"get\\ttime\"} , {\"name\":\"x\"} ] } ",
			mockRequest{model: []byte(`"mé"`), tool: []byte(`"get\ttime"`)}},
		{"empty", `{}`, mockRequest{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseRequest([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, *got, cmp.AllowUnexported(mockRequest{})); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
	for _, body := range []string{``, `{"messages":`, `{"messages":[}`, `{"messages":[{"role":"user"]}`, `{"model":1}`,
		`{"model":"a\qb"}`, `{"tools":[{"name":7}]}`, `{"a" 1}`, `{"a":1,}`, `{"a":"unterminated}`, `[]`, `{} {}`, `{"messages":5}`} {
		if _, err := parseRequest([]byte(body)); err == nil {
			t.Errorf("%q: parsed", body)
		}
	}
}

func TestMockRepliesInOneWrite(t *testing.T) {
	m := newMock("127.0.0.1:0", 3, nil)
	for _, results := range []bool{false, true} {
		w := &discardWriter{h: http.Header{}}
		body := mockRequestFixture(8<<10, results)
		r, err := http.NewRequest(http.MethodPost, "/v1/messages", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		m.messages(w, r)
		if w.writes != 1 || w.h.Get("Content-Length") != strconv.Itoa(w.n) || w.h.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("%d writes of %d bytes, header %v", w.writes, w.n, w.h)
		}
	}
}

// refParse reads with encoding/json what parseRequest finds; ok is false
// when the body does not decode.
func refParse(body []byte) (model, tool string, messages int, results, ok bool) {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return
	}
	var msgs, tools []map[string]json.RawMessage
	if v, has := top["model"]; has && json.Unmarshal(v, &model) != nil {
		return
	}
	if v, has := top["messages"]; has && json.Unmarshal(v, &msgs) != nil {
		return
	}
	if v, has := top["tools"]; has && json.Unmarshal(v, &tools) != nil {
		return
	}
	if v, has := tools0(tools)["name"]; has && json.Unmarshal(v, &tool) != nil {
		return
	}
	if messages = len(msgs); messages > 0 {
		last := msgs[messages-1]
		var role string
		var blocks []map[string]json.RawMessage
		_ = json.Unmarshal(last["role"], &role)
		if json.Unmarshal(last["content"], &blocks) != nil {
			blocks = nil
		}
		for _, b := range blocks {
			var typ string
			results = results || json.Unmarshal(b["type"], &typ) == nil && typ == "tool_result"
		}
		results = results && role == "user"
	}
	return model, tool, messages, results, true
}

func tools0(tools []map[string]json.RawMessage) map[string]json.RawMessage {
	if len(tools) == 0 {
		return nil
	}
	return tools[0]
}

func unquote(lit []byte) string {
	var s string
	if lit != nil {
		_ = json.Unmarshal(lit, &s)
	}
	return s
}

func FuzzParseRequest(f *testing.F) {
	f.Add(mockRequestFixture(512, false))
	f.Add(mockRequestFixture(512, true))
	for _, s := range []string{`{}`, `null`, `{"messages":null,"tools":null,"model":null}`, `{"mod\u0065l":"x"}`,
		`{"messages":[{"role":"user","content":[{"type":"tool_result"},"x"]}]}`,
		`{"messages":[{"role":"us\u0065r","content":[{"type":"tool_result","type":"text"}]}]}`,
		`{"tools":[{"name":"a\"b"},{"name":"c"}],"tools":[]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := parseRequest(body)
		model, tool, messages, results, ok := refParse(body)
		if !ok {
			return // the mock need not reject what it was never sent
		}
		if err != nil {
			t.Fatalf("%q: %v; encoding/json decodes it", body, err)
		}
		if got := unquote(req.model); got != model || unquote(req.tool) != tool || req.messages != messages || req.results != results {
			t.Fatalf("%q: got model %q tool %q, %d messages, results %v; want %q %q %d %v",
				body, got, req.tool, req.messages, req.results, model, tool, messages, results)
		}
		if req.model != nil && !json.Valid(req.model) || req.tool != nil && !json.Valid(req.tool) {
			t.Fatalf("%q: invalid literal %q or %q", body, req.model, req.tool)
		}
	})
}
