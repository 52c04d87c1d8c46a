package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/provider"
)

// ChatRequest is a Chat Completions request body: what Call sends, and
// the part of a request a server reads (other members are accepted and
// ignored).
type ChatRequest struct {
	Model               string         `json:"model"`
	MaxTokens           *int           `json:"max_tokens"`
	MaxCompletionTokens *int           `json:"max_completion_tokens,omitempty"`
	Messages            []ChatMessage  `json:"messages"`
	Tools               []Tool         `json:"tools,omitempty"`
	Stream              bool           `json:"stream"`
	StreamOptions       *StreamOptions `json:"stream_options,omitempty"`
}

// StreamOptions is a streamed request's stream_options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// ChatMessage is one Chat Completions message. Content is a JSON string,
// null or (from callers) an array of content parts.
type ChatMessage struct {
	Role       string          `json:"role"`
	ToolCallID *string         `json:"tool_call_id,omitempty"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  []ToolCall      `json:"tool_calls,omitempty"`
}

// ToolCall is one tool call of an assistant message.
type ToolCall struct {
	ID       string   `json:"id"`
	Type     string   `json:"type"`
	Function Function `json:"function"`
}

// Function is the function a tool call calls; Arguments is JSON text.
type Function struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool is a function tool of a request.
type Tool struct {
	Type     string      `json:"type"`
	Function FunctionDef `json:"function"`
}

// FunctionDef is the definition of a function tool.
type FunctionDef struct {
	Name        string          `json:"name"`
	Description *string         `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// ContentPart is one element of a message's array content.
type ContentPart struct {
	Type     string   `json:"type"`
	Text     string   `json:"text"`
	ImageURL ImageURL `json:"image_url"`
}

// ImageURL is an image_url part's image.
type ImageURL struct {
	URL string `json:"url"`
}

// block is the part of a canonical content block the translation reads.
// Raw fields keep a block of unexpected shape from failing the decode.
type block struct {
	Type      string          `json:"type"`
	Text      json.RawMessage `json:"text"`
	ID        json.RawMessage `json:"id"`
	Name      json.RawMessage `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID json.RawMessage `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

// encode returns the JSON of v without HTML escaping.
func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// str returns raw as a Go string when it is a JSON string, else "".
func str(raw json.RawMessage) string {
	var s string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return ""
}

// isNull reports whether raw is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// quoted returns s as a JSON string.
func quoted(s string) json.RawMessage {
	b, _ := encode(s) // a string always encodes
	return b
}

// translateMessages turns canonical messages into Chat Completions ones
// (BAE's engine), preceded by the system prompt when there is one.
func translateMessages(system string, msgs []baton.Message) ([]ChatMessage, error) {
	out := make([]ChatMessage, 0, len(msgs)+1)
	if system != "" {
		out = append(out, ChatMessage{Role: "system", Content: quoted(system)})
	}
	for i, m := range msgs {
		c := bytes.TrimSpace(m.Content)
		switch {
		case len(c) > 0 && c[0] == '"':
			if !json.Valid(c) {
				return nil, fmt.Errorf("message %d: content is not valid JSON", i)
			}
			out = append(out, ChatMessage{Role: m.Role, Content: json.RawMessage(c)})
		case len(c) > 0 && c[0] == '[':
			var raws []json.RawMessage
			if err := json.Unmarshal(c, &raws); err != nil {
				return nil, fmt.Errorf("message %d: %w", i, err)
			}
			blocks := make([]block, 0, len(raws))
			for _, r := range raws {
				var b block
				if json.Unmarshal(r, &b) == nil { // non-objects are skipped
					blocks = append(blocks, b)
				}
			}
			if m.Role == "assistant" {
				out = append(out, assistantMessage(blocks))
			} else {
				out = append(out, userMessages(m.Role, blocks)...)
			}
		default:
			out = append(out, ChatMessage{Role: m.Role, Content: quoted("")})
		}
	}
	return out, nil
}

// assistantMessage is one assistant message: the text blocks joined, or
// null, and a tool call per tool_use block.
func assistantMessage(blocks []block) ChatMessage {
	var texts []string
	var calls []ToolCall
	for _, b := range blocks {
		switch b.Type {
		case "text":
			texts = append(texts, str(b.Text))
		case "tool_use":
			args := "{}"
			if !isNull(b.Input) {
				var buf bytes.Buffer
				if json.Compact(&buf, b.Input) == nil {
					args = buf.String()
				}
			}
			calls = append(calls, ToolCall{
				ID:       str(b.ID),
				Type:     "function",
				Function: Function{Name: str(b.Name), Arguments: args},
			})
		}
	}
	m := ChatMessage{Role: "assistant", Content: json.RawMessage("null"), ToolCalls: calls}
	if len(texts) > 0 {
		m.Content = quoted(strings.Join(texts, "\n"))
	}
	return m
}

// userMessages is one tool message per tool_result block, then one message
// of the role with the text blocks joined, if there are any.
func userMessages(role string, blocks []block) []ChatMessage {
	var out []ChatMessage
	var texts []string
	for _, b := range blocks {
		switch b.Type {
		case "tool_result":
			id := str(b.ToolUseID)
			out = append(out, ChatMessage{Role: "tool", ToolCallID: &id, Content: quoted(resultText(b.Content))})
		case "text":
			texts = append(texts, str(b.Text))
		}
	}
	if len(texts) > 0 {
		out = append(out, ChatMessage{Role: role, Content: quoted(strings.Join(texts, "\n"))})
	}
	return out
}

// resultText is a tool_result's content as text: the string; the text
// blocks joined by "\n"; the JSON of content without text; "" for null.
func resultText(content json.RawMessage) string {
	if isNull(content) {
		return ""
	}
	if content[0] == '"' {
		return str(content)
	}
	var buf bytes.Buffer
	if json.Compact(&buf, content) != nil {
		return ""
	}
	if content[0] == '[' {
		var raws []json.RawMessage
		_ = json.Unmarshal(content, &raws)
		var texts []string
		for _, r := range raws {
			var b block
			if json.Unmarshal(r, &b) == nil && b.Type == "text" {
				texts = append(texts, str(b.Text))
			}
		}
		if len(texts) > 0 {
			return strings.Join(texts, "\n")
		}
	}
	return buf.String()
}

// translateTools turns canonical tool definitions into function tools.
// A description that is not a string is left out.
func translateTools(tools []json.RawMessage) []Tool {
	out := make([]Tool, 0, len(tools))
	for _, t := range tools {
		var def struct {
			Name        json.RawMessage `json:"name"`
			Description json.RawMessage `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		}
		_ = json.Unmarshal(t, &def)
		f := FunctionDef{Name: str(def.Name), Parameters: def.InputSchema}
		if len(def.Description) > 0 && def.Description[0] == '"' {
			d := str(def.Description)
			f.Description = &d
		}
		if isNull(f.Parameters) {
			f.Parameters = json.RawMessage("{}")
		}
		out = append(out, Tool{Type: "function", Function: f})
	}
	return out
}

// toolUse is the canonical tool_use block a reply translates to (text
// becomes baton.TextBlock).
type toolUse struct {
	Type  string          `json:"type"`
	ID    json.RawMessage `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// translateResponse turns a chat.completion body into canonical content
// and usage (BAE's engine). status is the reply's HTTP status, kept in
// failures.
func translateResponse(status int, body []byte) (json.RawMessage, *baton.Usage, error) {
	var top struct {
		Choices json.RawMessage `json:"choices"`
		Usage   json.RawMessage `json:"usage"`
	}
	if err := json.Unmarshal(body, &top); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return nil, nil, provider.NonJSON(status, body, err)
		}
	}
	fail := func(format string, args ...any) error {
		return &baton.ProviderError{Status: status, Detail: fmt.Sprintf(format, args...), Body: bounded(body)}
	}
	var choices []struct {
		Message json.RawMessage `json:"message"`
	}
	_ = json.Unmarshal(top.Choices, &choices)
	var msg struct {
		Content   json.RawMessage `json:"content"`
		ToolCalls json.RawMessage `json:"tool_calls"`
	}
	if len(choices) == 0 || isNull(choices[0].Message) || json.Unmarshal(choices[0].Message, &msg) != nil {
		return nil, nil, fail("provider response is missing choices[0].message")
	}

	var blocks []any
	if text := str(msg.Content); text != "" {
		blocks = append(blocks, baton.TextBlock{Type: baton.BlockText, Text: text})
	}
	var calls []struct {
		ID       json.RawMessage `json:"id"`
		Function struct {
			Name      json.RawMessage `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	}
	if !isNull(msg.ToolCalls) && json.Unmarshal(msg.ToolCalls, &calls) != nil {
		return nil, nil, fail("provider response tool_calls is not an array of tool calls")
	}
	for i, c := range calls {
		f := c.Function
		if len(f.Name) == 0 || f.Name[0] != '"' {
			return nil, nil, fail("provider response tool_calls[%d] is missing function.name", i)
		}
		input, err := arguments(f.Arguments)
		if err != nil {
			return nil, nil, fail("provider response tool_calls[%d] arguments are not valid JSON: %v", i, err)
		}
		id := c.ID
		if len(id) == 0 {
			id = json.RawMessage("null")
		}
		blocks = append(blocks, toolUse{Type: "tool_use", ID: id, Name: str(f.Name), Input: input})
	}
	content := json.RawMessage("[]")
	if len(blocks) > 0 {
		var err error
		if content, err = encode(blocks); err != nil {
			return nil, nil, fail("provider response cannot be translated: %v", err)
		}
	}

	var usage *baton.Usage
	var u struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	}
	if !isNull(top.Usage) && json.Unmarshal(top.Usage, &u) == nil {
		usage = &baton.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
	}
	return content, usage, nil
}

// arguments parses a tool call's arguments: a JSON string holding JSON
// (blank meaning {}); an object given directly is accepted as is.
func arguments(raw json.RawMessage) (json.RawMessage, error) {
	if isNull(raw) {
		return json.RawMessage("{}"), nil
	}
	if raw[0] == '{' {
		return raw, nil
	}
	if raw[0] != '"' {
		return nil, errors.New("arguments is not a string")
	}
	s := strings.TrimSpace(str(raw))
	if s == "" {
		return json.RawMessage("{}"), nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(s)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// bounded is body as an error body string, cut to a sane size.
func bounded(body []byte) string {
	const max = 64 << 10
	if len(body) > max {
		body = body[:max]
	}
	return string(body)
}
