package openai

import (
	"encoding/json"
	"testing"

	"github.com/baton-engine/baton"
)

// checkCanonical fails unless req is a well-formed canonical request.
func checkCanonical(t *testing.T, req *baton.ProviderRequest, alternate bool) {
	t.Helper()
	if len(req.Messages) == 0 || req.MaxTokens < 0 {
		t.Fatalf("accepted a request with %d messages, max_tokens %d", len(req.Messages), req.MaxTokens)
	}
	for i, m := range req.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			t.Fatalf("message %d has role %q", i, m.Role)
		}
		if !json.Valid(m.Content) {
			t.Fatalf("message %d content is not JSON: %s", i, m.Content)
		}
		if alternate && i > 0 && req.Messages[i-1].Role == m.Role {
			t.Fatalf("messages %d and %d share role %s", i-1, i, m.Role)
		}
	}
	for i, tl := range req.Tools {
		var def struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(tl, &def) != nil || def.Name == "" {
			t.Fatalf("tool %d has no name: %s", i, tl)
		}
	}
}

// FuzzDecodeRequest: a body is either refused as a bad request or turned
// into a well-formed canonical request of alternating, non-empty block
// array messages.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}]}`,
		`{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"r"},{"role":"tool","tool_call_id":"d","content":"s"}]}`,
		`{"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"[1]"}}]}]}`,
		`{"messages":[{"role":"user","content":null},{"role":"user","content":""}]}`,
		`{"max_tokens":-1,"messages":[{"role":"user","content":"x"}]}`,
		`{"tools":[{"type":"function","function":{"name":"f","parameters":null}}],"messages":[{"role":"user","content":"x"}]}`,
		`{"messages":[{"role":"function","content":"x"}]}`,
		`[]`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, in, err := DecodeRequest(body)
		if err != nil {
			if baton.ErrorCode(err) != baton.ECodeBadRequest {
				t.Fatalf("error %v is not a bad request", err)
			}
			return
		}
		if in == nil {
			t.Fatal("no decoded request")
		}
		checkCanonical(t, req, true)
		for i, m := range req.Messages {
			var blocks []map[string]any
			if json.Unmarshal(m.Content, &blocks) != nil || len(blocks) == 0 {
				t.Fatalf("message %d content is not a non-empty block array: %s", i, m.Content)
			}
		}
	})
}
