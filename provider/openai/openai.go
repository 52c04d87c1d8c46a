// Package openai calls OpenAI's Chat Completions API (provider kind
// "openai") and streams the reply, translating between Baton's canonical
// (Anthropic Messages) form and OpenAI's both ways.
//
// A call is POST {base}/v1/chat/completions with authorization: Bearer
// <token> and the body {"model","max_tokens","messages","tools","stream":
// true,"stream_options":{"include_usage":true}}; tools is left out when
// there are none, and a system prompt becomes a leading system message.
// Messages are translated as BAE's engine says:
//
//   - string content stays a {role, content} message;
//   - an assistant block array becomes one message whose content is the
//     text blocks joined by "\n" (null without text) and whose tool_calls
//     carry the tool_use blocks, input as a JSON string;
//   - any other block array becomes one "tool" message per tool_result,
//     then one message with the joined text blocks, if any;
//   - anything else is a message with empty content.
//
// Tools become {"type":"function","function":{"name","description",
// "parameters"}} with the input_schema (or {}) as parameters; a description
// that is not a string is left out.
//
// The streamed chunks are folded into the chat.completion object the
// non-streamed API would have returned, which is the response Body (a
// server answering with plain JSON is accepted too); text deltas reach
// ProviderRequest.OnDelta as they arrive. That object is then translated
// back: non-empty string content becomes a text block, each tool call a
// tool_use block whose input is the parsed arguments ({} when blank).
// Unparsable arguments, a tool call without a name, or a reply without
// choices[0].message fail the call; so does a stream that ends before
// "data: [DONE]" (retryable) or carries an error object (retryable unless
// an invalid_request_error).
//
// The package also holds the serving side of the API, for Baton's model
// gateway, translating the other way: DecodeRequest turns a Chat
// Completions request into the canonical request, WriteReply answers with
// a provider.Reply as a chat.completion or a chunk stream (text blocks
// joined by "\n", tool_use blocks as tool calls, thinking left out), and
// WriteError writes the API's error body.
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/provider"
	"github.com/baton-engine/baton/provider/sse"
)

// defaultMaxTokens is sent when neither the request nor the entry sets one.
const defaultMaxTokens = 4096

// Client calls the Chat Completions API. It is safe for concurrent use.
type Client struct {
	provider.HTTP
}

var _ baton.Provider = (*Client)(nil)

// New returns a client using hc, or, when hc is nil, a client of its own
// (see provider.NewHTTP).
func New(hc *http.Client) *Client { return &Client{provider.NewHTTP(hc)} }

// Call translates req, sends it to the entry's endpoint and returns the
// reply in canonical form. Every failure is a *baton.ProviderError.
func (c *Client) Call(ctx context.Context, entry *baton.ProviderEntry, token string, req *baton.ProviderRequest) (*baton.ProviderResponse, error) {
	body, err := encodeRequest(entry, req)
	if err != nil {
		return nil, &baton.ProviderError{Detail: "translate request for openai: " + err.Error()}
	}
	header := http.Header{
		"Content-Type":  {"application/json"},
		"Accept":        {"text/event-stream"},
		"Authorization": {"Bearer " + token},
		"User-Agent":    {"baton/" + baton.Version},
	}
	resp, err := c.Post(ctx, provider.Endpoint(entry, "/v1/chat/completions"), header, body, token)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if provider.EventStream(resp) {
		return readStream(resp, req.OnDelta, provider.MaxBody)
	}
	return readPlain(resp, req.OnDelta)
}

// encodeRequest returns the translated request body.
func encodeRequest(entry *baton.ProviderEntry, req *baton.ProviderRequest) ([]byte, error) {
	msgs, err := translateMessages(req.System, req.Messages)
	if err != nil {
		return nil, err
	}
	r := ChatRequest{
		Model:         req.Model,
		Messages:      msgs,
		Stream:        true,
		StreamOptions: &StreamOptions{IncludeUsage: true},
	}
	if len(req.Tools) > 0 {
		r.Tools = translateTools(req.Tools)
	}
	if r.Model == "" {
		r.Model = entry.Model
	}
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = entry.MaxTokens
	}
	if maxTokens <= 0 {
		maxTokens = defaultMaxTokens
	}
	r.MaxTokens = &maxTokens
	return encode(r)
}

// readStream folds a streamed reply into a chat.completion and translates
// it; the reply may accumulate at most limit bytes of content.
func readStream(resp *http.Response, onDelta func(string), limit int) (*baton.ProviderResponse, error) {
	a := newAssembler(resp.StatusCode, onDelta, limit)
	dec := sse.NewDecoder(resp.Body)
	defer dec.Release()
	for !a.done {
		ev, err := dec.Next()
		switch {
		case err == io.EOF:
			return nil, provider.Truncated(resp.StatusCode, "[DONE]")
		case errors.Is(err, sse.ErrTooLong):
			return nil, a.failure("provider stream event is larger than %d bytes", sse.DefaultMaxEvent)
		case err != nil:
			return nil, provider.TransportError(resp.StatusCode, err)
		}
		if err := a.add(ev.Data); err != nil {
			return nil, err
		}
	}
	body, err := a.body()
	if err != nil {
		return nil, a.failure("encode reassembled reply: %v", err)
	}
	content, usage, err := translateResponse(resp.StatusCode, body)
	if err != nil {
		return nil, err
	}
	return &baton.ProviderResponse{Content: content, Body: body, Usage: usage}, nil
}

// readPlain translates a non-streamed chat.completion reply.
func readPlain(resp *http.Response, onDelta func(string)) (*baton.ProviderResponse, error) {
	body, err := provider.ReadBody(resp)
	if err != nil {
		return nil, err
	}
	content, usage, err := translateResponse(resp.StatusCode, body)
	if err != nil {
		return nil, err
	}
	if onDelta != nil {
		var blocks []baton.TextBlock
		_ = json.Unmarshal(content, &blocks)
		for _, b := range blocks {
			if b.Type == "text" && b.Text != "" {
				onDelta(b.Text)
			}
		}
	}
	return &baton.ProviderResponse{Content: content, Body: body, Usage: usage}, nil
}
