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
