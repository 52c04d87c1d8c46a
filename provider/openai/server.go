package openai

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/httpx"
	"github.com/baton-engine/baton/internal/rawjson"
	"github.com/baton-engine/baton/provider"
	"github.com/baton-engine/baton/provider/sse"
)

// This file is the serving side of Chat Completions, as Baton's model
// gateway speaks it to brain executors: requests translated to the
// canonical form, canonical replies translated back, errors written.

// DecodeRequest turns a Chat Completions body into the canonical request
// and returns the decoded body with it: system and developer messages
// become the system prompt; assistant tool calls become tool_use blocks
// and tool messages tool_result blocks of a user message; consecutive
// messages of one role are merged, as the canonical form alternates. A
// body that breaks the rules is a baton.ECodeBadRequest.
func DecodeRequest(body []byte) (*baton.ProviderRequest, *ChatRequest, error) {
	var in ChatRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, nil, provider.Invalid("the body is not a Chat Completions request: %v", err)
	}
	if len(in.Messages) == 0 {
		return nil, nil, provider.Invalid("messages: at least one message is required")
	}
	req := &baton.ProviderRequest{}
	for _, n := range []*int{in.MaxCompletionTokens, in.MaxTokens} {
		if n != nil {
			if *n < 1 {
				return nil, nil, provider.Invalid("max_tokens: must be at least 1")
			}
			req.MaxTokens = *n
			break
		}
	}
	var system []string
	var msgs []canonical
	for i, m := range in.Messages {
		var (
			role   = "user"
			blocks []any
		)
		switch m.Role {
		case "system", "developer":
			text, err := contentText(m.Content, i)
			if err != nil {
				return nil, nil, err
			}
			system = append(system, text)
			continue
		case "user":
			parts, err := userParts(m.Content, i)
			if err != nil {
				return nil, nil, err
			}
			blocks = parts
		case "assistant":
			role = "assistant"
			text, err := contentText(m.Content, i)
			if err != nil {
				return nil, nil, err
			}
			if text != "" {
				blocks = append(blocks, map[string]string{"type": "text", "text": text})
			}
			for j, c := range m.ToolCalls {
				input, err := callArguments(c.Function.Arguments)
				if err != nil || c.Function.Name == "" {
					return nil, nil, provider.Invalid("messages.%d.tool_calls.%d: needs a function name and JSON object arguments", i, j)
				}
				blocks = append(blocks, map[string]any{"type": "tool_use", "id": c.ID, "name": c.Function.Name, "input": input})
			}
		case "tool":
			text, err := contentText(m.Content, i)
			if err != nil {
				return nil, nil, err
			}
			id := ""
			if m.ToolCallID != nil {
				id = *m.ToolCallID
			}
			blocks = []any{map[string]any{"type": "tool_result", "tool_use_id": id, "content": text}}
		default:
			return nil, nil, provider.Invalid("messages.%d.role: %q is not supported", i, m.Role)
		}
		if len(blocks) == 0 {
			continue
		}
		if n := len(msgs); n > 0 && msgs[n-1].role == role {
			msgs[n-1].blocks = append(msgs[n-1].blocks, blocks...)
		} else {
			msgs = append(msgs, canonical{role: role, blocks: blocks})
		}
	}
	if len(msgs) == 0 {
		return nil, nil, provider.Invalid("messages: no user or assistant message")
	}
	req.System = strings.Join(system, "\n")
	req.Messages = make([]baton.Message, len(msgs))
	for i, m := range msgs {
		req.Messages[i] = baton.Message{Role: m.role, Content: baton.MarshalJSON(m.blocks)}
	}
	req.Tools = make([]json.RawMessage, 0, len(in.Tools))
	for i, t := range in.Tools {
		if t.Type != "function" || t.Function.Name == "" {
			return nil, nil, provider.Invalid("tools.%d: only function tools with a name are supported", i)
		}
		schema := t.Function.Parameters
		if k := rawjson.Kind(schema); k == 0 || k == 'n' {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		req.Tools = append(req.Tools, baton.MarshalJSON(baton.ToolDef{
			Name: t.Function.Name, Description: t.Function.Description, InputSchema: schema,
		}))
	}
	return req, &in, nil
}

// canonical is a message being assembled.
type canonical struct {
	role   string
	blocks []any
}

// contentText reads a content that must be text: a string, null, or an
// array of text parts (joined with newlines).
func contentText(raw json.RawMessage, i int) (string, error) {
	switch rawjson.Kind(raw) {
	case 0, 'n':
		return "", nil
	case '"':
		var s string
		_ = json.Unmarshal(raw, &s)
		return s, nil
	case '[':
		var parts []ContentPart
		if json.Unmarshal(raw, &parts) == nil {
			texts := make([]string, 0, len(parts))
			for _, p := range parts {
				if p.Type != "text" {
					return "", provider.Invalid("messages.%d.content: only text parts are accepted here, not %q", i, p.Type)
				}
				texts = append(texts, p.Text)
			}
			return strings.Join(texts, "\n"), nil
		}
	}
	return "", provider.Invalid("messages.%d.content: must be a string or an array of text parts", i)
}

// userParts reads a user content: text, or text and image parts.
func userParts(raw json.RawMessage, i int) ([]any, error) {
	if rawjson.Kind(raw) != '[' {
		text, err := contentText(raw, i)
		if err != nil || text == "" {
			return nil, err
		}
		return []any{map[string]string{"type": "text", "text": text}}, nil
	}
	var parts []ContentPart
	if json.Unmarshal(raw, &parts) != nil {
		return nil, provider.Invalid("messages.%d.content: must be a string or an array of content parts", i)
	}
	out := make([]any, 0, len(parts))
	for j, p := range parts {
		switch p.Type {
		case "text":
			out = append(out, map[string]string{"type": "text", "text": p.Text})
		case "image_url":
			src, ok := imageSource(p.ImageURL.URL)
			if !ok {
				return nil, provider.Invalid("messages.%d.content.%d: image_url must be an http(s) URL or a base64 data URL", i, j)
			}
			out = append(out, map[string]any{"type": "image", "source": src})
		default:
			return nil, provider.Invalid("messages.%d.content.%d: part type %q is not supported", i, j, p.Type)
		}
	}
	return out, nil
}

// imageSource is the canonical image source of an image_url: a base64
// data URL, or a URL.
func imageSource(u string) (map[string]string, bool) {
	if rest, ok := strings.CutPrefix(u, "data:"); ok {
		media, data, found := strings.Cut(rest, ";base64,")
		if !found || media == "" {
			return nil, false
		}
		return map[string]string{"type": "base64", "media_type": media, "data": data}, true
	}
	if strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://") {
		return map[string]string{"type": "url", "url": u}, true
	}
	return nil, false
}

// callArguments parses a request's tool call arguments string: a JSON
// object, or blank for {}.
func callArguments(s string) (json.RawMessage, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return json.RawMessage(`{}`), nil
	}
	if rawjson.Kind(json.RawMessage(s)) != '{' {
		return nil, provider.Invalid("arguments must be a JSON object")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(s)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// FinishReason maps a canonical stop reason to a finish_reason.
func FinishReason(stop string) string {
	switch stop {
	case provider.StopToolUse:
		return "tool_calls"
	case provider.StopMaxTokens:
		return "length"
	}
	return "stop"
}

// StopReason is the canonical stop reason of a chat.completion body's
// first choice, or "" when its finish_reason has none (a plain stop, or
// no finish_reason).
func StopReason(body json.RawMessage) string {
	var c struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	_ = json.Unmarshal(body, &c)
	if len(c.Choices) == 0 {
		return ""
	}
	switch c.Choices[0].FinishReason {
	case "length":
		return provider.StopMaxTokens
	case "tool_calls", "function_call":
		return provider.StopToolUse
	}
	return ""
}

// replyText is the reply's text blocks joined with newlines; thinking and
// other blocks have no Chat Completions form and are left out. A text
// block whose text is not a string is left out too.
func replyText(r *provider.Reply) (string, bool) {
	var texts []string
	for _, b := range r.Blocks {
		var t struct {
			Text string `json:"text"`
		}
		if b.Type == baton.BlockText && json.Unmarshal(b.Raw, &t) == nil {
			texts = append(texts, t.Text)
		}
	}
	return strings.Join(texts, "\n"), len(texts) > 0
}

// replyCalls is the reply's tool_use blocks as tool calls.
func replyCalls(r *provider.Reply) []ToolCall {
	var out []ToolCall
	for _, b := range r.Blocks {
		if b.Type != baton.BlockToolUse {
			continue
		}
		c := ToolCall{Type: "function", Function: Function{Name: b.Name, Arguments: string(b.Input)}}
		if b.ID != nil {
			c.ID = *b.ID
		}
		out = append(out, c)
	}
	return out
}

// indexedCall is a tool call in a stream chunk, which numbers them.
type indexedCall struct {
	Index int `json:"index"`
	ToolCall
}

func replyUsage(r *provider.Reply) map[string]int {
	return map[string]int{
		"prompt_tokens":     r.Usage.InputTokens,
		"completion_tokens": r.Usage.OutputTokens,
		"total_tokens":      r.Usage.InputTokens + r.Usage.OutputTokens,
	}
}

// WriteReply answers in, the request, with r as a chat.completion, or as a
// stream of chat.completion.chunk objects ending with data: [DONE] when in
// asked for a stream (with a usage chunk before it when asked for that
// too).
func WriteReply(w http.ResponseWriter, r *provider.Reply, in *ChatRequest) error {
	text, hasText := replyText(r)
	finish := FinishReason(r.Stop)
	if !in.Stream {
		msg := map[string]any{"role": "assistant", "content": nil}
		if hasText {
			msg["content"] = text
		}
		if calls := replyCalls(r); len(calls) > 0 {
			msg["tool_calls"] = calls
		}
		return httpx.WriteJSON(w, http.StatusOK, map[string]any{
			"id": r.ID, "object": "chat.completion", "created": r.Created.Unix(), "model": r.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
			"usage":   replyUsage(r),
		})
	}
	s := sse.NewWriter(w)
	event := func(v any) { s.Event("", baton.MarshalJSON(v)) }
	chunk := func(delta map[string]any, finish any) {
		event(map[string]any{
			"id": r.ID, "object": "chat.completion.chunk", "created": r.Created.Unix(), "model": r.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
		})
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	if hasText {
		chunk(map[string]any{"content": text}, nil)
	}
	for i, c := range replyCalls(r) {
		chunk(map[string]any{"tool_calls": []indexedCall{{Index: i, ToolCall: c}}}, nil)
	}
	chunk(map[string]any{}, finish)
	if in.StreamOptions != nil && in.StreamOptions.IncludeUsage {
		event(map[string]any{
			"id": r.ID, "object": "chat.completion.chunk", "created": r.Created.Unix(), "model": r.Model,
			"choices": []any{}, "usage": replyUsage(r),
		})
	}
	s.Event("", []byte("[DONE]"))
	return s.Flush()
}

// APIError is the error object of an error body, and of an error sent in
// the middle of a stream. Its members are in the order the server writes
// them.
type APIError struct {
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
	Type    string  `json:"type"`
}

// ErrorBody is a Chat Completions error body.
type ErrorBody struct {
	Error APIError `json:"error"`
}

// ErrorType maps an HTTP status to a Chat Completions error type and code.
func ErrorType(status int) (typ, code string) {
	switch status {
	case http.StatusUnauthorized:
		return "invalid_request_error", "invalid_api_key"
	case http.StatusForbidden:
		return "permission_error", "turn_inactive"
	case http.StatusBadGateway:
		return "server_error", "all_providers_failed"
	}
	if status >= 400 && status < 500 {
		return "invalid_request_error", "invalid_request"
	}
	return "server_error", "internal_error"
}

// WriteError writes a Chat Completions error body.
func WriteError(w http.ResponseWriter, status int, msg string) {
	typ, code := ErrorType(status)
	_ = httpx.WriteJSON(w, status, ErrorBody{Error: APIError{Code: code, Message: msg, Type: typ}})
}
