package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/baton-engine/baton"
)

// reply is a model reply on its way back to the caller, in the canonical
// (Anthropic Messages) form whichever provider answered.
type reply struct {
	id      string
	model   string // the model the caller asked for, echoed
	created time.Time
	content json.RawMessage // canonical content block array
	blocks  []block
	stop    string // an Anthropic stop_reason
	usage   baton.Usage
}

// block is a canonical content block, decoded as far as the translations
// read it; raw keeps the original.
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	raw       json.RawMessage
}

// Anthropic stop reasons.
const (
	stopEnd   = "end_turn"
	stopTool  = "tool_use"
	stopLimit = "max_tokens"
)

// newReply decodes a provider response for translation. model is echoed
// back as the reply's model.
func newReply(resp *baton.ProviderResponse, model, idPrefix string) *reply {
	r := &reply{id: baton.NewID(idPrefix), model: model, created: time.Now(), content: resp.Content}
	var raws []json.RawMessage
	if json.Unmarshal(resp.Content, &raws) != nil {
		raws = nil
		r.content = json.RawMessage(`[]`)
	}
	for _, raw := range raws {
		var b block
		if json.Unmarshal(raw, &b) != nil {
			continue // not an object: nothing to translate
		}
		b.raw = raw
		if len(b.Input) == 0 || string(b.Input) == "null" {
			b.Input = json.RawMessage(`{}`)
		}
		r.blocks = append(r.blocks, b)
	}
	if resp.Usage != nil {
		r.usage = *resp.Usage
	}
	r.stop = stopReason(resp.Body)
	for _, b := range r.blocks {
		if b.Type == "tool_use" {
			r.stop = stopTool
		}
	}
	return r
}

// stopReason reads why the provider stopped from its own reply body: an
// Anthropic stop_reason, or an OpenAI finish_reason mapped to one. It is
// end_turn when the body says nothing usable.
func stopReason(body json.RawMessage) string {
	var b struct {
		StopReason string `json:"stop_reason"`
		Choices    []struct {
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	_ = json.Unmarshal(body, &b)
	switch {
	case b.StopReason != "":
		return b.StopReason
	case len(b.Choices) > 0 && b.Choices[0].FinishReason == "length":
		return stopLimit
	case len(b.Choices) > 0 && (b.Choices[0].FinishReason == "tool_calls" || b.Choices[0].FinishReason == "function_call"):
		return stopTool
	}
	return stopEnd
}

// sse writes a server-sent event stream, flushing after every event.
type sse struct {
	w   http.ResponseWriter
	buf bytes.Buffer
}

func startSSE(w http.ResponseWriter) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w}
}

// event queues one event: an "event:" line when name is set, then data
// (JSON-encoded unless it is already raw bytes).
func (s *sse) event(name string, data any) {
	if name != "" {
		fmt.Fprintf(&s.buf, "event: %s\n", name)
	}
	var b []byte
	switch d := data.(type) {
	case []byte:
		b = d
	default:
		b = baton.MarshalJSON(d)
	}
	s.buf.WriteString("data: ")
	s.buf.Write(b)
	s.buf.WriteString("\n\n")
}

// flush writes the queued events.
func (s *sse) flush() error {
	_, err := s.w.Write(s.buf.Bytes())
	s.buf.Reset()
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
	return err
}
