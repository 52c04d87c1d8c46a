package baton

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Message is one entry of a conversation in canonical (Anthropic Messages)
// form: Content is a JSON string or an array of content blocks.
type Message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// AppendMessages appends msgs to b as a JSON array of {"role","content"}
// objects, as encoding/json would write them but without re-validating
// each content: every Message Baton builds or decodes holds valid JSON, and
// a conversation is re-sent whole on every model call. An empty content is
// written as null.
func AppendMessages(b []byte, msgs []Message) []byte {
	b = append(b, '[')
	for i, m := range msgs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"role":`...)
		b = AppendString(b, m.Role)
		b = append(b, `,"content":`...)
		if len(m.Content) == 0 {
			b = append(b, "null"...)
		} else {
			b = append(b, m.Content...)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// EncodedSize is about how many bytes AppendMessages and AppendRaw write
// for msgs and tools: the capacity to give a request body up front.
func EncodedSize(msgs []Message, tools []json.RawMessage) int {
	n := 0
	for _, m := range msgs {
		n += len(m.Content) + 32
	}
	for _, t := range tools {
		n += len(t) + 1
	}
	return n
}

// AppendRaw appends vals to b as a JSON array; like AppendMessages, it
// trusts each value to be valid JSON.
func AppendRaw(b []byte, vals []json.RawMessage) []byte {
	b = append(b, '[')
	for i, v := range vals {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, v...)
	}
	return append(b, ']')
}

// AppendString appends s to b as a JSON string, escaped as EncodeJSON
// escapes it (no HTML escaping).
func AppendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			return append(b, MarshalJSON(s)...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// ProviderRequest is one model call. Messages and Tools are already in
// canonical form with Baton's dispatch tags stripped.
type ProviderRequest struct {
	Model     string
	MaxTokens int
	System    string // empty means no system prompt
	Messages  []Message
	Tools     []json.RawMessage // each {"name","description","input_schema"}
	// OnDelta, when set, receives assistant text as it streams in.
	OnDelta func(text string)
}

// Usage is the token accounting a provider reported.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// ProviderResponse is a successful model call.
type ProviderResponse struct {
	// Content is the canonical content block array of the reply.
	Content json.RawMessage
	// Body is the provider's reply as its own wire JSON (for a streamed
	// call, the message reassembled from the stream), recorded in the
	// provider.response event.
	Body  json.RawMessage
	Usage *Usage
}

// ProviderError is a failed model call.
type ProviderError struct {
	Status     int    // HTTP status; 0 when no response arrived
	Detail     string // e.g. "provider returned HTTP 500"; never holds secrets
	Body       string // raw error body, if any
	Retryable  bool   // 429, 5xx and transport failures
	RetryAfter time.Duration
}

func (e *ProviderError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("%s (status %d)", e.Detail, e.Status)
	}
	return e.Detail
}

// Provider calls one kind of model API. token is the resolved auth token.
type Provider interface {
	Call(ctx context.Context, entry *ProviderEntry, token string, req *ProviderRequest) (*ProviderResponse, error)
}
