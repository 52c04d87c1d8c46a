package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/baton-engine/baton"
)

// callProviders walks the profile's provider chain for one iteration
// (spec-client §10): the primary, then each fallback, each with bounded
// retries on retryable failures. It returns the canonical reply content,
// or a terminal result when every provider failed or the turn was
// cancelled.
func (tc *turnCtx) callProviders(prof *baton.Profile, cv *convo, tools []json.RawMessage) (json.RawMessage, *baton.TurnResult) {
	e, id, actor := tc.e, tc.a.id, tc.t.actor
	primary, ok := e.registry.Provider(prof.PrimaryProvider)
	if !ok {
		return nil, tc.fail(map[string]any{
			"reason": "provider_config",
			"detail": fmt.Sprintf("primary provider %q is not configured in bae-config.toml", prof.PrimaryProvider),
		})
	}
	chain := []*baton.ProviderEntry{primary}
	for _, name := range prof.FallbackProviders {
		if p, ok := e.registry.Provider(name); ok {
			chain = append(chain, p)
		} else {
			e.log.Error("fallback provider is not configured; skipped", "session_id", id, "provider", name)
		}
	}
	if tools == nil {
		tools = []json.RawMessage{}
	}
	req := &baton.ProviderRequest{
		Model:    "",
		System:   prof.SystemPrompt,
		Messages: cv.ready,
		Tools:    tools,
		OnDelta: func(text string) {
			e.hub.Publish(baton.Notice{Delta: &baton.Delta{SessionID: id, ClientKeyID: actor, Text: text}})
		},
	}
	attempt := 0
	for i, entry := range chain {
		kind := "fallback"
		if i == 0 {
			kind = "primary"
		}
		for try := 0; try <= e.retries; try++ {
			maxTokens := entry.MaxTokens
			if maxTokens <= 0 {
				maxTokens = 4096
			}
			ev := &baton.Event{SessionID: id, ClientKeyID: actor, Type: baton.EventProviderReq,
				Payload: requestPayload(attempt, kind, entry, maxTokens, cv.logged, tools)}
			if err := tc.emitBehind(ev); err != nil {
				return nil, &baton.TurnResult{Err: err}
			}
			r := *req
			r.Model, r.MaxTokens = entry.Model, maxTokens
			resp, perr := tc.callOne(entry, &r)
			if perr == nil {
				payload := map[string]any{
					"attempt": attempt, "kind": kind, "provider": entry.Provider, "ok": true, "status": 200,
					"body": resp.Body, "content": resp.Content,
				}
				if resp.Usage != nil {
					payload["usage"] = resp.Usage
				}
				// Held: it is committed together with what the reply leads to.
				tc.hold(baton.NewEvent(id, actor, baton.EventProviderResp, payload))
				return resp.Content, nil
			}
			var status, body any
			if perr.Status != 0 {
				status = perr.Status
			}
			if perr.Body != "" {
				body = perr.Body
			}
			evs := []*baton.Event{baton.NewEvent(id, actor, baton.EventProviderResp, map[string]any{
				"attempt": attempt, "kind": kind, "provider": entry.Provider, "ok": false,
				"status": status, "error": perr.Detail, "body": body,
			})}
			if attempt == 0 && tc.t.ctx.Err() == nil { // a cancelled turn is not a provider failure
				evs = append(evs, baton.NewEvent(id, actor, baton.EventSessionError, map[string]any{
					"reason": "provider_call_failed", "provider": entry.Provider, "detail": perr.Detail,
				}))
			}
			if err := tc.emit(evs...); err != nil {
				return nil, &baton.TurnResult{Err: err}
			}
			attempt++
			if tc.t.ctx.Err() != nil {
				return nil, tc.reply(cancelledText)
			}
			if !perr.Retryable || try == e.retries || !tc.backoff(try, perr.RetryAfter) {
				break
			}
		}
		if tc.t.ctx.Err() != nil {
			return nil, tc.reply(cancelledText)
		}
	}
	return nil, tc.fail(map[string]any{"reason": "all_providers_failed", "attempts": attempt})
}

// callOne makes one provider call under the per-call timeout.
func (tc *turnCtx) callOne(entry *baton.ProviderEntry, req *baton.ProviderRequest) (*baton.ProviderResponse, *baton.ProviderError) {
	e := tc.e
	impl, ok := e.providers[entry.Provider]
	if !ok {
		return nil, &baton.ProviderError{Detail: fmt.Sprintf("provider kind %q is not supported", entry.Provider)}
	}
	token := ""
	if entry.AuthToken != "" {
		var err error
		if token, err = baton.ExpandVars(entry.AuthToken, e.lookupEnv); err != nil {
			return nil, &baton.ProviderError{Detail: err.Error()}
		}
	}
	ctx, cancel := context.WithTimeout(tc.t.ctx, e.providerTimeout)
	defer cancel()
	resp, err := impl.Call(ctx, entry, token, req)
	if err == nil {
		if len(resp.Content) == 0 || string(resp.Content) == "null" {
			resp.Content = json.RawMessage(`[]`)
		}
		return resp, nil
	}
	switch {
	case tc.t.ctx.Err() != nil:
		return nil, &baton.ProviderError{Detail: "turn cancelled"}
	case ctx.Err() != nil:
		return nil, &baton.ProviderError{Detail: fmt.Sprintf("provider call timed out after %s", e.providerTimeout), Retryable: true}
	}
	var pe *baton.ProviderError
	if errors.As(err, &pe) {
		return nil, pe
	}
	return nil, &baton.ProviderError{Detail: err.Error(), Retryable: true}
}

// backoff waits before retry number try+1: exponential with jitter, or the
// provider's Retry-After when it asked for longer (capped). It returns
// false when the turn was cancelled meanwhile.
func (tc *turnCtx) backoff(try int, retryAfter time.Duration) bool {
	d := tc.e.retryBase << try
	d += time.Duration(rand.Int64N(int64(d)/2 + 1))
	if retryAfter > d {
		d = retryAfter
	}
	if d > maxRetryWait {
		d = maxRetryWait
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-tc.t.ctx.Done():
		return false
	}
}

// maxRetryWait caps one wait between retries, whatever Retry-After says.
const maxRetryWait = 30 * time.Second

// requestPayload builds a provider.request payload. It carries the whole
// history (as BAE logs it), so it is appended directly — the message
// contents and tool definitions are already valid JSON — instead of going
// through encoding/json, which would re-validate all of it on every call.
// Keys are in the order encoding/json would sort them.
func requestPayload(attempt int, kind string, entry *baton.ProviderEntry, maxTokens int, messages []baton.Message, tools []json.RawMessage) json.RawMessage {
	size := 256
	for _, m := range messages {
		size += len(m.Content) + 32
	}
	for _, t := range tools {
		size += len(t) + 1
	}
	b := make([]byte, 0, size)
	b = append(b, `{"attempt":`...)
	b = strconv.AppendInt(b, int64(attempt), 10)
	b = append(b, `,"base_url":`...)
	b = append(b, baton.MarshalJSON(entry.EffectiveBaseURL())...)
	b = append(b, `,"kind":`...)
	b = append(b, baton.MarshalJSON(kind)...)
	b = append(b, `,"max_tokens":`...)
	b = strconv.AppendInt(b, int64(maxTokens), 10)
	b = append(b, `,"messages":[`...)
	for i, m := range messages {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"role":`...)
		b = append(b, baton.MarshalJSON(m.Role)...)
		b = append(b, `,"content":`...)
		if len(m.Content) == 0 {
			b = append(b, "null"...)
		} else {
			b = append(b, m.Content...)
		}
		b = append(b, '}')
	}
	b = append(b, `],"model":`...)
	b = append(b, baton.MarshalJSON(entry.Model)...)
	b = append(b, `,"provider":`...)
	b = append(b, baton.MarshalJSON(entry.Provider)...)
	b = append(b, `,"tools":[`...)
	for i, t := range tools {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, t...)
	}
	return append(b, "]}"...)
}
