package openai

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/provider"
)

// maxCalls bounds the tool call index a stream may use.
const maxCalls = 1024

// chunk is one chat.completion.chunk (or an error object sent mid-stream).
type chunk struct {
	ID      string          `json:"id"`
	Model   string          `json:"model"`
	Choices []chunkChoice   `json:"choices"`
	Usage   json.RawMessage `json:"usage"`
	Error   json.RawMessage `json:"error"`
}

type chunkChoice struct {
	Index int `json:"index"`
	Delta struct {
		Content   *string     `json:"content"`
		ToolCalls []callDelta `json:"tool_calls"`
	} `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

// callDelta is a fragment of one tool call.
type callDelta struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// completion is the chat.completion a stream is folded into.
type completion struct {
	ID      string          `json:"id"`
	Object  string          `json:"object"`
	Model   string          `json:"model"`
	Choices []choice        `json:"choices"`
	Usage   json.RawMessage `json:"usage"`
}

type choice struct {
	Index        int     `json:"index"`
	Message      message `json:"message"`
	FinishReason *string `json:"finish_reason"`
}

type message struct {
	Role      string     `json:"role"`
	Content   *string    `json:"content"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
}

// call is a tool call being streamed.
type call struct {
	id         string
	name, args strings.Builder
}

// assembler folds a Chat Completions stream into a chat.completion.
type assembler struct {
	status  int
	onDelta func(string)
	max     int // bytes the text and tool calls may add up to
	size    int // bytes of text and tool calls so far

	id, model string
	text      strings.Builder
	calls     []*call // by index; nil where none arrived
	last      int     // slot of the last call fragment, -1 before any
	finish    *string
	usage     json.RawMessage
	done      bool // [DONE] arrived
}

func newAssembler(status int, onDelta func(string), limit int) *assembler {
	return &assembler{status: status, onDelta: onDelta, max: limit, last: -1}
}

// grow counts n more bytes kept and fails once they pass a.max.
func (a *assembler) grow(n int) error {
	a.size += n
	if a.size > a.max {
		return provider.TooLarge(a.status, a.max)
	}
	return nil
}

func (a *assembler) failure(format string, args ...any) *baton.ProviderError {
	return &baton.ProviderError{Status: a.status, Detail: fmt.Sprintf(format, args...)}
}

// add handles one data payload.
func (a *assembler) add(data []byte) error {
	if string(data) == "[DONE]" {
		a.done = true
		return nil
	}
	var c chunk
	if err := json.Unmarshal(data, &c); err != nil {
		e := a.failure("provider returned a malformed stream chunk: %v", err)
		e.Body = bounded(data)
		return e
	}
	if !isNull(c.Error) {
		return a.streamError(c.Error, data)
	}
	if a.id == "" {
		a.id = c.ID
	}
	if a.model == "" {
		a.model = c.Model
	}
	if !isNull(c.Usage) {
		a.usage = c.Usage
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue // only one choice is asked for
		}
		if d := ch.Delta.Content; d != nil && *d != "" {
			if err := a.grow(len(*d)); err != nil {
				return err
			}
			a.text.WriteString(*d)
			if a.onDelta != nil {
				a.onDelta(*d)
			}
		}
		for _, tc := range ch.Delta.ToolCalls {
			if err := a.callDelta(tc); err != nil {
				return err
			}
		}
		if ch.FinishReason != nil {
			a.finish = ch.FinishReason
		}
	}
	return nil
}

// callDelta appends a tool call fragment to its slot. A fragment without an
// index continues the last call unless it brings a new id.
func (a *assembler) callDelta(tc callDelta) error {
	slot := a.last
	switch {
	case tc.Index != nil:
		slot = *tc.Index
	case slot < 0 || (tc.ID != "" && a.calls[slot].id != "" && a.calls[slot].id != tc.ID):
		slot = len(a.calls)
	}
	if slot < 0 || slot >= maxCalls {
		return a.failure("provider stream has an invalid tool call index")
	}
	if err := a.grow(len(tc.ID) + len(tc.Function.Name) + len(tc.Function.Arguments)); err != nil {
		return err
	}
	for len(a.calls) <= slot {
		a.calls = append(a.calls, nil)
	}
	c := a.calls[slot]
	if c == nil {
		c = &call{}
		a.calls[slot] = c
	}
	if c.id == "" {
		c.id = tc.ID
	}
	c.name.WriteString(tc.Function.Name)
	c.args.WriteString(tc.Function.Arguments)
	a.last = slot
	return nil
}

// streamError is the failure of an error object sent mid-stream; it is
// retryable unless it blames the request.
func (a *assembler) streamError(raw json.RawMessage, data []byte) error {
	var e APIError
	_ = json.Unmarshal(raw, &e)
	pe := &baton.ProviderError{Status: a.status, Detail: "provider stream error", Body: bounded(data)}
	if e.Type != "" {
		pe.Detail += ": " + e.Type
	}
	if e.Message != "" {
		pe.Detail += ": " + e.Message
	}
	pe.Retryable = e.Type != "invalid_request_error"
	return pe
}

// body returns the chat.completion the stream folded into.
func (a *assembler) body() ([]byte, error) {
	msg := message{Role: "assistant"}
	if a.text.Len() > 0 {
		s := a.text.String()
		msg.Content = &s
	}
	for _, c := range a.calls {
		if c == nil {
			continue
		}
		msg.ToolCalls = append(msg.ToolCalls, ToolCall{
			ID:       c.id,
			Type:     "function",
			Function: Function{Name: c.name.String(), Arguments: c.args.String()},
		})
	}
	usage := a.usage
	if usage == nil {
		usage = json.RawMessage("null")
	}
	return encode(completion{
		ID:      a.id,
		Object:  "chat.completion",
		Model:   a.model,
		Choices: []choice{{Index: 0, Message: msg, FinishReason: a.finish}},
		Usage:   usage,
	})
}
