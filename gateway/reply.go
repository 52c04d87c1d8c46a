package gateway

import (
	"encoding/json"
	"time"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/provider"
	"github.com/baton-engine/baton/provider/anthropic"
	"github.com/baton-engine/baton/provider/openai"
)

// newReply decodes a provider response for translation back to the
// caller. model is echoed back as the reply's model.
func newReply(resp *baton.ProviderResponse, model, idPrefix string) *provider.Reply {
	r := &provider.Reply{ID: baton.NewID(idPrefix), Model: model, Created: time.Now(), Content: resp.Content}
	var raws []json.RawMessage
	if json.Unmarshal(resp.Content, &raws) != nil {
		raws = nil
		r.Content = json.RawMessage(`[]`)
	}
	for _, raw := range raws {
		var b baton.Block
		if json.Unmarshal(raw, &b) != nil {
			continue // not an object: nothing to translate
		}
		b.Raw = raw
		if len(b.Input) == 0 || string(b.Input) == "null" {
			b.Input = json.RawMessage(`{}`)
		}
		r.Blocks = append(r.Blocks, b)
	}
	if resp.Usage != nil {
		r.Usage = *resp.Usage
	}
	r.Stop = stopReason(resp.Body)
	for _, b := range r.Blocks {
		if b.Type == baton.BlockToolUse {
			r.Stop = provider.StopToolUse
		}
	}
	return r
}

// stopReason reads why the provider stopped from its own reply body: an
// Anthropic stop_reason, or an OpenAI finish_reason mapped to one. It is
// end_turn when the body says nothing usable.
func stopReason(body json.RawMessage) string {
	if s := anthropic.StopReason(body); s != "" {
		return s
	}
	if s := openai.StopReason(body); s != "" {
		return s
	}
	return provider.StopEndTurn
}
