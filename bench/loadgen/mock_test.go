package main

import (
	"context"
	"encoding/json"
	"net/http"
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
