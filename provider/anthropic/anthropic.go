// Package anthropic calls Anthropic's Messages API (provider kind
// "anthropic") and streams the reply.
//
// A call is POST {base}/v1/messages with the headers x-api-key,
// anthropic-version: 2023-06-01 and accept: text/event-stream, and the body
// {"model","max_tokens","messages","tools","stream":true} plus "system"
// when the request has a system prompt. tools is always sent, [] when
// empty. Messages are the canonical history, forwarded verbatim.
//
// The reply's server-sent events are folded back into the Message object
// the non-streamed API would have returned (same field order, unknown
// fields kept): text deltas appended, tool_use input assembled from its
// partial JSON ({} when empty), stop_reason and usage from message_delta.
// That object is the response Body, its content array the Content, and text
// deltas reach ProviderRequest.OnDelta as they arrive. A server that answers
// with a plain JSON Message instead of a stream is accepted as well.
//
// An error event fails the call (retryable for overloaded_error, api_error
// and rate_limit_error), and so does a stream that ends before
// message_stop (retryable). Other failures are classified by package
// provider.
//
// The package also holds the serving side of the API, for Baton's model
// gateway: DecodeRequest reads a Messages request into the canonical
// request (messages as sent, a system of text blocks joined with
// newlines), WriteReply answers with a provider.Reply as a Message or as
// the event stream above (text, tool input and thinking sent as one delta
// each), and WriteError writes the API's error body.
package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/rawjson"
	"github.com/baton-engine/baton/provider"
	"github.com/baton-engine/baton/provider/sse"
)

// Version is the anthropic-version header sent with every call.
const Version = "2023-06-01"

// defaultMaxTokens is sent when neither the request nor the entry sets one:
// the API requires the field.
const defaultMaxTokens = 4096

// Client calls the Messages API. It is safe for concurrent use.
type Client struct {
	provider.HTTP
}

var _ baton.Provider = (*Client)(nil)

// New returns a client using hc, or, when hc is nil, a client of its own
// (see provider.NewHTTP).
func New(hc *http.Client) *Client { return &Client{provider.NewHTTP(hc)} }

// Call sends req to the entry's endpoint and returns the reassembled reply.
// Every failure is a *baton.ProviderError.
func (c *Client) Call(ctx context.Context, entry *baton.ProviderEntry, token string, req *baton.ProviderRequest) (*baton.ProviderResponse, error) {
	body, err := encode(entry, req)
	if err != nil {
		return nil, &baton.ProviderError{Detail: "encode anthropic request: " + err.Error()}
	}
	header := http.Header{
		"Content-Type":      {"application/json"},
		"Accept":            {"text/event-stream"},
		"X-Api-Key":         {token},
		"Anthropic-Version": {Version},
		"User-Agent":        {"baton/" + baton.Version},
	}
	resp, err := c.Post(ctx, provider.Endpoint(entry, "/v1/messages"), header, body, token)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if provider.EventStream(resp) {
		return readStream(resp, req.OnDelta, provider.MaxBody)
	}
	return readPlain(resp, req.OnDelta)
}

// encode returns the request body: the fields of request, in its order,
// appended directly since messages and tools are already JSON (the whole
// conversation goes out on every call).
func encode(entry *baton.ProviderEntry, req *baton.ProviderRequest) ([]byte, error) {
	model, maxTokens := req.Model, req.MaxTokens
	if model == "" {
		model = entry.Model
	}
	if maxTokens <= 0 {
		maxTokens = entry.MaxTokens
	}
	if maxTokens <= 0 {
		maxTokens = defaultMaxTokens
	}
	b := make([]byte, 0, 128+len(model)+len(req.System)+rawjson.EncodedSize(req.Messages, req.Tools))
	b = append(b, `{"model":`...)
	b = rawjson.AppendString(b, model, false)
	b = append(b, `,"max_tokens":`...)
	b = strconv.AppendInt(b, int64(maxTokens), 10)
	if req.System != "" {
		b = append(b, `,"system":`...)
		b = rawjson.AppendString(b, req.System, false)
	}
	b = append(b, `,"messages":`...)
	b = rawjson.AppendMessages(b, req.Messages)
	b = append(b, `,"tools":`...)
	b = rawjson.AppendRaw(b, req.Tools)
	b = append(b, `,"stream":true}`...)
	return b, nil
}

// readStream folds a server-sent event reply into a message; the reply may
// accumulate at most limit bytes of content.
func readStream(resp *http.Response, onDelta func(string), limit int) (*baton.ProviderResponse, error) {
	a := assembler{onDelta: onDelta, status: resp.StatusCode, max: limit}
	dec := sse.NewDecoder(resp.Body)
	defer dec.Release()
	for !a.done {
		ev, err := dec.Next()
		switch {
		case err == io.EOF:
			return nil, provider.Truncated(resp.StatusCode, "message_stop")
		case errors.Is(err, sse.ErrTooLong):
			return nil, a.failure("provider stream event is larger than %d bytes", sse.DefaultMaxEvent)
		case err != nil:
			return nil, provider.TransportError(resp.StatusCode, err)
		}
		if err := a.add(ev.Type, ev.Data); err != nil {
			return nil, err
		}
	}
	body, content, usage, err := a.finish()
	if err != nil {
		return nil, err
	}
	return &baton.ProviderResponse{Content: content, Body: body, Usage: usage}, nil
}

// readPlain reads a non-streamed Message reply.
func readPlain(resp *http.Response, onDelta func(string)) (*baton.ProviderResponse, error) {
	body, err := provider.ReadBody(resp)
	if err != nil {
		return nil, err
	}
	var m struct {
		Content json.RawMessage `json:"content"`
		Usage   *baton.Usage    `json:"usage"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		// A type mismatch leaves what did decode; only a syntax error
		// means the body is not JSON.
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return nil, provider.NonJSON(resp.StatusCode, body, err)
		}
	}
	content := m.Content
	if len(content) == 0 || string(content) == "null" {
		content = json.RawMessage("[]")
	}
	if onDelta != nil {
		var blocks []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		_ = json.Unmarshal(content, &blocks)
		for _, b := range blocks {
			if b.Type == "text" && b.Text != "" {
				onDelta(b.Text)
			}
		}
	}
	return &baton.ProviderResponse{Content: content, Body: body, Usage: m.Usage}, nil
}
