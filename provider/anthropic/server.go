package anthropic

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/httpx"
	"github.com/baton-engine/baton/internal/rawjson"
	"github.com/baton-engine/baton/provider"
	"github.com/baton-engine/baton/provider/sse"
)

// This file is the serving side of the Messages API, as Baton's model
// gateway speaks it to brain executors: requests decoded, replies and
// errors written. The canonical form is this API's, so messages pass
// through as sent.

// Request is the part of a Messages API request a server reads; other
// members (temperature, tool_choice, metadata, …) are accepted and
// ignored. encode writes the same members.
type Request struct {
	Model     string            `json:"model"`
	MaxTokens *int              `json:"max_tokens"`
	System    json.RawMessage   `json:"system"`
	Messages  []json.RawMessage `json:"messages"`
	Tools     []json.RawMessage `json:"tools"`
	Stream    bool              `json:"stream"`
}

// DecodeRequest turns a Messages API body into the canonical request and
// returns the decoded body with it. Messages keep their content as sent; a
// system given as text blocks is joined with newlines. A body that breaks
// the API's rules is a baton.ECodeBadRequest.
func DecodeRequest(body []byte) (*baton.ProviderRequest, *Request, error) {
	var in Request
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, nil, provider.Invalid("the body is not a Messages request: %v", err)
	}
	if len(in.Messages) == 0 {
		return nil, nil, provider.Invalid("messages: at least one message is required")
	}
	req := &baton.ProviderRequest{Messages: make([]baton.Message, 0, len(in.Messages))}
	if in.MaxTokens != nil {
		if *in.MaxTokens < 1 {
			return nil, nil, provider.Invalid("max_tokens: must be at least 1")
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
			return nil, nil, provider.Invalid("messages.%d: not a message object", i)
		}
		if m.Role != "user" && m.Role != "assistant" {
			return nil, nil, provider.Invalid("messages.%d.role: must be \"user\" or \"assistant\"", i)
		}
		if k := rawjson.Kind(m.Content); k != '"' && k != '[' {
			return nil, nil, provider.Invalid("messages.%d.content: must be a string or an array of content blocks", i)
		}
		req.Messages = append(req.Messages, baton.Message{Role: m.Role, Content: m.Content})
	}
	req.Tools = make([]json.RawMessage, 0, len(in.Tools))
	for i, t := range in.Tools {
		var def struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(t, &def) != nil || def.Name == "" {
			return nil, nil, provider.Invalid("tools.%d: a tool needs a name", i)
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
			return "", provider.Invalid("system: must be a string or an array of text blocks")
		}
		texts := make([]string, 0, len(parts))
		for _, p := range parts {
			if p.Type != "text" {
				return "", provider.Invalid("system: only text blocks are accepted, not %q", p.Type)
			}
			texts = append(texts, p.Text)
		}
		return strings.Join(texts, "\n"), nil
	}
	return "", provider.Invalid("system: must be a string or an array of text blocks")
}

// Message is a Messages API reply object, as a server writes it.
type Message struct {
	ID           string          `json:"id"`
	Type         string          `json:"type"`
	Role         string          `json:"role"`
	Model        string          `json:"model"`
	Content      json.RawMessage `json:"content"`
	StopReason   *string         `json:"stop_reason"`
	StopSequence *string         `json:"stop_sequence"`
	Usage        baton.Usage     `json:"usage"`
}

// StopReason is the stop_reason of a Messages API reply body, or "" when it
// has none.
func StopReason(body json.RawMessage) string {
	var m struct {
		StopReason string `json:"stop_reason"`
	}
	_ = json.Unmarshal(body, &m)
	return m.StopReason
}

// WriteReply answers with r as a Message, or, when stream is set, as the
// event stream the API sends: message_start, each block as
// content_block_start, its deltas and content_block_stop, then
// message_delta and message_stop.
func WriteReply(w http.ResponseWriter, r *provider.Reply, stream bool) error {
	stop := r.Stop
	if !stream {
		return httpx.WriteJSON(w, http.StatusOK, Message{
			ID: r.ID, Type: "message", Role: "assistant", Model: r.Model,
			Content: r.Content, StopReason: &stop, Usage: r.Usage,
		})
	}
	s := sse.NewWriter(w)
	event := func(name string, v any) { s.Event(name, baton.MarshalJSON(v)) }
	event("message_start", map[string]any{"type": "message_start", "message": Message{
		ID: r.ID, Type: "message", Role: "assistant", Model: r.Model, Content: json.RawMessage(`[]`),
		Usage: baton.Usage{InputTokens: r.Usage.InputTokens},
	}})
	i := 0
	for _, b := range r.Blocks {
		start, deltas, ok := streamBlock(b)
		if !ok {
			continue
		}
		event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": start})
		for _, d := range deltas {
			event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d})
		}
		event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
		i++
	}
	event("message_delta", map[string]any{
		"type":  "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]int{"output_tokens": r.Usage.OutputTokens},
	})
	event("message_stop", map[string]string{"type": "message_stop"})
	return s.Flush()
}

// streamBlock splits a content block into its content_block_start and its
// deltas, the inverse of what the assembler folds. Blocks without a delta
// form (redacted thinking, server tool blocks, …) start whole. ok is false
// for a text or thinking block whose text is not a string: it is left out.
func streamBlock(b baton.Block) (start any, deltas []any, ok bool) {
	var t struct {
		Text      string `json:"text"`
		Thinking  string `json:"thinking"`
		Signature string `json:"signature"`
	}
	switch b.Type {
	case baton.BlockText:
		if json.Unmarshal(b.Raw, &t) != nil {
			return nil, nil, false
		}
		return map[string]string{"type": "text", "text": ""},
			[]any{map[string]string{"type": "text_delta", "text": t.Text}}, true
	case baton.BlockToolUse:
		id := ""
		if b.ID != nil {
			id = *b.ID
		}
		return map[string]any{"type": "tool_use", "id": id, "name": b.Name, "input": json.RawMessage(`{}`)},
			[]any{map[string]string{"type": "input_json_delta", "partial_json": string(b.Input)}}, true
	case "thinking":
		if json.Unmarshal(b.Raw, &t) != nil {
			return nil, nil, false
		}
		deltas = []any{map[string]string{"type": "thinking_delta", "thinking": t.Thinking}}
		if t.Signature != "" {
			deltas = append(deltas, map[string]string{"type": "signature_delta", "signature": t.Signature})
		}
		return map[string]string{"type": "thinking", "thinking": ""}, deltas, true
	}
	return b.Raw, nil, true
}

// APIError is the error object of an error body and of a stream's error
// event. Its members are in the order the server writes them.
type APIError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
}

// ErrorBody is a Messages API error body.
type ErrorBody struct {
	Error APIError `json:"error"`
	Type  string   `json:"type"` // "error"
}

// ErrorType maps an HTTP status to the Messages API error type.
func ErrorType(status int) string {
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

// WriteError writes a Messages API error body.
func WriteError(w http.ResponseWriter, status int, msg string) {
	_ = httpx.WriteJSON(w, status, ErrorBody{Type: "error", Error: APIError{Type: ErrorType(status), Message: msg}})
}
