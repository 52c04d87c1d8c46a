package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/httpx"
	"github.com/baton-engine/baton/internal/rawjson"
)

// openaiRequest is the part of a Chat Completions request the gateway
// reads; other members are accepted and ignored.
type openaiRequest struct {
	Model               string          `json:"model"`
	Messages            []openaiMessage `json:"messages"`
	Tools               []openaiTool    `json:"tools"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

type openaiMessage struct {
	Role       string           `json:"role"`
	Content    json.RawMessage  `json:"content"`
	ToolCalls  []openaiToolCall `json:"tool_calls"`
	ToolCallID string           `json:"tool_call_id"`
}

type openaiToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type openaiTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description *string         `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// part is one element of an array content.
type part struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

// decodeOpenAI turns a Chat Completions body into the canonical request:
// system and developer messages become the system prompt; assistant tool
// calls become tool_use blocks and tool messages tool_result blocks of a
// user message; consecutive messages of one role are merged, as the
// canonical form alternates.
func decodeOpenAI(body []byte) (*baton.ProviderRequest, *openaiRequest, error) {
	var in openaiRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, nil, invalid("the body is not a Chat Completions request: %v", err)
	}
	if len(in.Messages) == 0 {
		return nil, nil, invalid("messages: at least one message is required")
	}
	req := &baton.ProviderRequest{}
	for _, n := range []*int{in.MaxCompletionTokens, in.MaxTokens} {
		if n != nil {
			if *n < 1 {
				return nil, nil, invalid("max_tokens: must be at least 1")
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
					return nil, nil, invalid("messages.%d.tool_calls.%d: needs a function name and JSON object arguments", i, j)
				}
				blocks = append(blocks, map[string]any{"type": "tool_use", "id": c.ID, "name": c.Function.Name, "input": input})
			}
		case "tool":
			text, err := contentText(m.Content, i)
			if err != nil {
				return nil, nil, err
			}
			blocks = []any{map[string]any{"type": "tool_result", "tool_use_id": m.ToolCallID, "content": text}}
		default:
			return nil, nil, invalid("messages.%d.role: %q is not supported", i, m.Role)
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
		return nil, nil, invalid("messages: no user or assistant message")
	}
	req.System = strings.Join(system, "\n")
	req.Messages = make([]baton.Message, len(msgs))
	for i, m := range msgs {
		req.Messages[i] = baton.Message{Role: m.role, Content: baton.MarshalJSON(m.blocks)}
	}
	req.Tools = make([]json.RawMessage, 0, len(in.Tools))
	for i, t := range in.Tools {
		if t.Type != "function" || t.Function.Name == "" {
			return nil, nil, invalid("tools.%d: only function tools with a name are supported", i)
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
		var parts []part
		if json.Unmarshal(raw, &parts) == nil {
			texts := make([]string, 0, len(parts))
			for _, p := range parts {
				if p.Type != "text" {
					return "", invalid("messages.%d.content: only text parts are accepted here, not %q", i, p.Type)
				}
				texts = append(texts, p.Text)
			}
			return strings.Join(texts, "\n"), nil
		}
	}
	return "", invalid("messages.%d.content: must be a string or an array of text parts", i)
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
	var parts []part
	if json.Unmarshal(raw, &parts) != nil {
		return nil, invalid("messages.%d.content: must be a string or an array of content parts", i)
	}
	out := make([]any, 0, len(parts))
	for j, p := range parts {
		switch p.Type {
		case "text":
			out = append(out, map[string]string{"type": "text", "text": p.Text})
		case "image_url":
			src, ok := imageSource(p.ImageURL.URL)
			if !ok {
				return nil, invalid("messages.%d.content.%d: image_url must be an http(s) URL or a base64 data URL", i, j)
			}
			out = append(out, map[string]any{"type": "image", "source": src})
		default:
			return nil, invalid("messages.%d.content.%d: part type %q is not supported", i, j, p.Type)
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

// callArguments parses a tool call's arguments string: a JSON object, or
// blank for {}.
func callArguments(s string) (json.RawMessage, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return json.RawMessage(`{}`), nil
	}
	if rawjson.Kind(json.RawMessage(s)) != '{' {
		return nil, invalid("arguments must be a JSON object")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(s)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// openaiFinish maps an Anthropic stop reason to a finish_reason.
func openaiFinish(stop string) string {
	switch stop {
	case stopTool:
		return "tool_calls"
	case stopLimit:
		return "length"
	}
	return "stop"
}

// openaiText is the reply's text blocks joined with newlines; thinking and
// other blocks have no Chat Completions form and are left out.
func (r *reply) openaiText() (string, bool) {
	var texts []string
	for _, b := range r.blocks {
		if b.Type == "text" {
			texts = append(texts, b.Text)
		}
	}
	return strings.Join(texts, "\n"), len(texts) > 0
}

type openaiCallOut struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// openaiCalls is the reply's tool_use blocks as tool calls; stream adds
// their indexes.
func (r *reply) openaiCalls(stream bool) []openaiCallOut {
	var out []openaiCallOut
	for _, b := range r.blocks {
		if b.Type != "tool_use" {
			continue
		}
		c := openaiCallOut{ID: b.ID, Type: "function"}
		c.Function.Name, c.Function.Arguments = b.Name, string(b.Input)
		if stream {
			i := len(out)
			c.Index = &i
		}
		out = append(out, c)
	}
	return out
}

func (r *reply) openaiUsage() map[string]int {
	return map[string]int{
		"prompt_tokens":     r.usage.InputTokens,
		"completion_tokens": r.usage.OutputTokens,
		"total_tokens":      r.usage.InputTokens + r.usage.OutputTokens,
	}
}

// writeOpenAI answers with r as a chat.completion, or as a stream of
// chat.completion.chunk objects ending with data: [DONE].
func writeOpenAI(w http.ResponseWriter, r *reply, in *openaiRequest) error {
	text, hasText := r.openaiText()
	finish := openaiFinish(r.stop)
	if !in.Stream {
		msg := map[string]any{"role": "assistant", "content": nil}
		if hasText {
			msg["content"] = text
		}
		if calls := r.openaiCalls(false); len(calls) > 0 {
			msg["tool_calls"] = calls
		}
		return httpx.WriteJSON(w, http.StatusOK, map[string]any{
			"id": r.id, "object": "chat.completion", "created": r.created.Unix(), "model": r.model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
			"usage":   r.openaiUsage(),
		})
	}
	s := startSSE(w)
	chunk := func(delta map[string]any, finish any) {
		s.event("", map[string]any{
			"id": r.id, "object": "chat.completion.chunk", "created": r.created.Unix(), "model": r.model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
		})
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	if hasText {
		chunk(map[string]any{"content": text}, nil)
	}
	for _, c := range r.openaiCalls(true) {
		chunk(map[string]any{"tool_calls": []openaiCallOut{c}}, nil)
	}
	chunk(map[string]any{}, finish)
	if in.StreamOptions != nil && in.StreamOptions.IncludeUsage {
		s.event("", map[string]any{
			"id": r.id, "object": "chat.completion.chunk", "created": r.created.Unix(), "model": r.model,
			"choices": []any{}, "usage": r.openaiUsage(),
		})
	}
	s.event("", []byte("[DONE]"))
	return s.flush()
}

// openaiErrorType maps a status to a Chat Completions error type and code.
func openaiErrorType(status int) (typ, code string) {
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

// writeOpenAIError writes a Chat Completions error body.
func writeOpenAIError(w http.ResponseWriter, status int, msg string) {
	typ, code := openaiErrorType(status)
	_ = httpx.WriteJSON(w, status, map[string]any{
		"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code},
	})
}
