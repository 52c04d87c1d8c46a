package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/httpx"
	"github.com/baton-engine/baton/internal/rawjson"
)

// anthropicRequest is the part of a Messages API request the gateway
// reads; other members (temperature, tool_choice, metadata, …) are
// accepted and ignored.
type anthropicRequest struct {
	Model     string            `json:"model"`
	MaxTokens *int              `json:"max_tokens"`
	System    json.RawMessage   `json:"system"`
	Messages  []json.RawMessage `json:"messages"`
	Tools     []json.RawMessage `json:"tools"`
	Stream    bool              `json:"stream"`
}

// decodeAnthropic turns a Messages API body into the canonical request.
// Messages keep their content as sent (the canonical form is this API's);
// a system given as text blocks is joined with newlines.
func decodeAnthropic(body []byte) (*baton.ProviderRequest, *anthropicRequest, error) {
	var in anthropicRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, nil, invalid("the body is not a Messages request: %v", err)
	}
	if len(in.Messages) == 0 {
		return nil, nil, invalid("messages: at least one message is required")
	}
	req := &baton.ProviderRequest{Messages: make([]baton.Message, 0, len(in.Messages))}
	if in.MaxTokens != nil {
		if *in.MaxTokens < 1 {
			return nil, nil, invalid("max_tokens: must be at least 1")
		}
		req.MaxTokens = *in.MaxTokens
	}
	system, err := systemText(in.System)
	if err != nil {
		return nil, nil, err
	}
	req.System = system
	for i, raw := range in.Messages {
		var m struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, nil, invalid("messages.%d: not a message object", i)
		}
		if m.Role != "user" && m.Role != "assistant" {
			return nil, nil, invalid("messages.%d.role: must be \"user\" or \"assistant\"", i)
		}
		if k := rawjson.Kind(m.Content); k != '"' && k != '[' {
			return nil, nil, invalid("messages.%d.content: must be a string or an array of content blocks", i)
		}
		req.Messages = append(req.Messages, baton.Message{Role: m.Role, Content: m.Content})
	}
	req.Tools = make([]json.RawMessage, 0, len(in.Tools))
	for i, t := range in.Tools {
		var def struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(t, &def) != nil || def.Name == "" {
			return nil, nil, invalid("tools.%d: a tool needs a name", i)
		}
		req.Tools = append(req.Tools, t)
	}
	return req, &in, nil
}

// systemText reads a Messages API system prompt: absent, a string, or an
// array of text blocks (joined with newlines).
func systemText(raw json.RawMessage) (string, error) {
	switch rawjson.Kind(raw) {
	case 0, 'n':
		return "", nil
	case '"':
		var s string
		_ = json.Unmarshal(raw, &s)
		return s, nil
	case '[':
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(raw, &parts) != nil {
			return "", invalid("system: must be a string or an array of text blocks")
		}
		texts := make([]string, 0, len(parts))
		for _, p := range parts {
			if p.Type != "text" {
				return "", invalid("system: only text blocks are accepted, not %q", p.Type)
			}
			texts = append(texts, p.Text)
		}
		return strings.Join(texts, "\n"), nil
	}
	return "", invalid("system: must be a string or an array of text blocks")
}

// anthropicMessage is a Messages API reply object.
type anthropicMessage struct {
	ID           string          `json:"id"`
	Type         string          `json:"type"`
	Role         string          `json:"role"`
	Model        string          `json:"model"`
	Content      json.RawMessage `json:"content"`
	StopReason   *string         `json:"stop_reason"`
	StopSequence *string         `json:"stop_sequence"`
	Usage        baton.Usage     `json:"usage"`
}

// writeAnthropic answers with r as a Messages API reply.
func writeAnthropic(w http.ResponseWriter, r *reply, stream bool) error {
	stop := r.stop
	if !stream {
		return httpx.WriteJSON(w, http.StatusOK, anthropicMessage{
			ID: r.id, Type: "message", Role: "assistant", Model: r.model,
			Content: r.content, StopReason: &stop, Usage: r.usage,
		})
	}
	s := startSSE(w)
	s.event("message_start", map[string]any{"type": "message_start", "message": anthropicMessage{
		ID: r.id, Type: "message", Role: "assistant", Model: r.model, Content: json.RawMessage(`[]`),
		Usage: baton.Usage{InputTokens: r.usage.InputTokens},
	}})
	for i, b := range r.blocks {
		start, deltas := streamBlock(b)
		s.event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": start})
		for _, d := range deltas {
			s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d})
		}
		s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	s.event("message_delta", map[string]any{
		"type":  "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]int{"output_tokens": r.usage.OutputTokens},
	})
	s.event("message_stop", map[string]string{"type": "message_stop"})
	return s.flush()
}

// streamBlock splits a content block into its content_block_start and its
// deltas, as the Messages API streams it. Blocks without a delta form
// (redacted thinking, server tool blocks, …) start whole.
func streamBlock(b block) (start any, deltas []any) {
	switch b.Type {
	case "text":
		return map[string]string{"type": "text", "text": ""},
			[]any{map[string]string{"type": "text_delta", "text": b.Text}}
	case "tool_use":
		return map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": json.RawMessage(`{}`)},
			[]any{map[string]string{"type": "input_json_delta", "partial_json": string(b.Input)}}
	case "thinking":
		deltas = []any{map[string]string{"type": "thinking_delta", "thinking": b.Thinking}}
		if b.Signature != "" {
			deltas = append(deltas, map[string]string{"type": "signature_delta", "signature": b.Signature})
		}
		return map[string]string{"type": "thinking", "thinking": ""}, deltas
	}
	return b.raw, nil
}

// anthropicErrorType maps a status to the Messages API error type.
func anthropicErrorType(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	}
	if status >= 400 && status < 500 {
		return "invalid_request_error"
	}
	return "api_error"
}

// writeAnthropicError writes a Messages API error body.
func writeAnthropicError(w http.ResponseWriter, status int, msg string) {
	_ = httpx.WriteJSON(w, status, map[string]any{
		"type":  "error",
		"error": map[string]string{"type": anthropicErrorType(status), "message": msg},
	})
}

// invalid is a 400 with a caller-facing message.
func invalid(format string, args ...any) error {
	return baton.Errorf(baton.ECodeBadRequest, "%s", fmt.Sprintf(format, args...))
}
