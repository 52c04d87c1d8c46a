package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/rawjson"
)

// callProviders walks the profile's provider chain for one iteration
// (BAE's client API). It returns the canonical reply content, or a
// terminal result when every provider failed or the turn was cancelled.
func (tc *turnCtx) callProviders(prof *baton.Profile, cv *convo, tools []json.RawMessage) (json.RawMessage, *baton.TurnResult) {
	e, id, actor := tc.e, tc.a.id, tc.t.actor
	chain, ok := e.chainFor(id, prof)
	if !ok {
		return nil, tc.fail(map[string]any{
			"reason": "provider_config",
			"detail": fmt.Sprintf("primary provider %q is not configured in bae-config.toml", prof.PrimaryProvider),
		})
	}
	if tools == nil {
		tools = []json.RawMessage{}
	}
	req := &baton.ProviderRequest{
		System:   prof.SystemPrompt,
		Messages: cv.ready,
		Tools:    tools,
		OnDelta: func(text string) {
			e.hub.Publish(baton.Notice{Delta: &baton.Delta{SessionID: id, ClientKeyID: actor, Text: text}})
		},
	}
	resp, attempts, err := tc.walk(chain, req, cv.logged, entryMaxTokens)
	switch {
	case err != nil:
		return nil, &baton.TurnResult{Err: err}
	case resp != nil:
		return resp.Content, nil
	case tc.t.ctx.Err() != nil:
		return nil, tc.reply(cancelledText)
	}
	return nil, tc.fail(map[string]any{"reason": "all_providers_failed", "attempts": attempts})
}

// chainFor resolves the profile's provider chain: the primary, then each
// configured fallback (one missing from the registry is logged and
// skipped). ok is false when the primary is not configured.
func (e *Engine) chainFor(sessionID string, prof *baton.Profile) (chain []*baton.ProviderEntry, ok bool) {
	primary, ok := e.registry.Provider(prof.PrimaryProvider)
	if !ok {
		return nil, false
	}
	chain = []*baton.ProviderEntry{primary}
	for _, name := range prof.FallbackProviders {
		if p, ok := e.registry.Provider(name); ok {
			chain = append(chain, p)
		} else {
			e.log.Error("fallback provider is not configured; skipped", "session_id", sessionID, "provider", name)
		}
	}
	return chain, true
}

// entryMaxTokens is the max_tokens of a server turn's call: the entry's,
// or 4096.
func entryMaxTokens(entry *baton.ProviderEntry) int {
	if entry.MaxTokens > 0 {
		return entry.MaxTokens
	}
	return 4096
}

// walk makes one model call through chain: each provider in turn, each
// with bounded retries on retryable failures. Every attempt records a
// provider.request (committed behind the call) and a provider.response
// (a success is held, to be committed with what the reply leads to); the
// first failure also records a session.error provider_call_failed. req's
// Model and MaxTokens are set per entry (maxTokens picks the latter);
// logged is the history as provider.request records it. It returns the
// reply, or nil and the number of providers tried when every provider
// failed or the turn's context ended; err is a failure to persist. As in
// BAE, an event's attempt is its provider's index in the chain, kind
// "primary" for the first; a retry repeats its provider's attempt.
func (tc *turnCtx) walk(chain []*baton.ProviderEntry, req *baton.ProviderRequest, logged []baton.Message,
	maxTokens func(*baton.ProviderEntry) int) (*baton.ProviderResponse, int, error) {
	e, id, actor := tc.e, tc.a.id, tc.t.actor
	for attempt, entry := range chain {
		kind := "fallback"
		if attempt == 0 {
			kind = "primary"
		}
		for try := 0; try <= e.retries; try++ {
			n := maxTokens(entry)
			ev := &baton.Event{SessionID: id, ClientKeyID: actor, Type: baton.EventProviderReq,
				Payload: requestPayload(attempt, kind, entry, n, logged, req.Tools)}
			if err := tc.emitBehind(ev); err != nil {
				return nil, attempt + 1, err
			}
			r := *req
			r.Model, r.MaxTokens = entry.Model, n
			resp, perr := tc.callOne(entry, &r)
			if perr == nil {
				tc.hold(&baton.Event{SessionID: id, ClientKeyID: actor, Type: baton.EventProviderResp,
					Payload: responsePayload(attempt, kind, entry.Provider, resp)})
				return resp, attempt + 1, nil
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
			if attempt == 0 && try == 0 && tc.t.ctx.Err() == nil { // a cancelled turn is not a provider failure
				evs = append(evs, baton.NewEvent(id, actor, baton.EventSessionError, map[string]any{
					"reason": "provider_call_failed", "provider": entry.Provider, "detail": perr.Detail,
				}))
			}
			if err := tc.emit(evs...); err != nil {
				return nil, attempt + 1, err
			}
			if tc.t.ctx.Err() != nil {
				return nil, attempt + 1, nil
			}
			if !perr.Retryable || try == e.retries || !tc.backoff(try, perr.RetryAfter) {
				break
			}
		}
		if tc.t.ctx.Err() != nil {
			return nil, attempt + 1, nil
		}
	}
	return nil, len(chain), nil
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
			return nil, &baton.ProviderError{Detail: tokenError(err)}
		}
	}
	ctx, cancel := e.withTimeout(tc.t.ctx, e.providerTimeout, nil)
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
	fired, stop := tc.e.after(d)
	defer stop()
	select {
	case <-fired:
		return true
	case <-tc.t.ctx.Done():
		return false
	}
}

// maxRetryWait caps one wait between retries, whatever Retry-After says.
const maxRetryWait = 30 * time.Second

// responsePayload builds the provider.response payload of a successful
// call as encoding/json would (keys sorted, the reply's JSON compacted),
// by appending: it is made on every model call.
func responsePayload(attempt int, kind, provider string, resp *baton.ProviderResponse) json.RawMessage {
	if !rawjson.Valid(resp.Body) || !rawjson.Valid(resp.Content) {
		payload := map[string]any{ // not JSON: encoding/json decides (it gives {})
			"attempt": attempt, "kind": kind, "provider": provider, "ok": true, "status": 200,
			"body": resp.Body, "content": resp.Content,
		}
		if resp.Usage != nil {
			payload["usage"] = resp.Usage
		}
		return baton.MarshalJSON(payload)
	}
	b := make([]byte, 0, 160+len(resp.Body)+len(resp.Content))
	b = append(b, `{"attempt":`...)
	b = strconv.AppendInt(b, int64(attempt), 10)
	b = append(b, `,"body":`...)
	b = rawjson.AppendCompact(b, resp.Body, false)
	b = append(b, `,"content":`...)
	b = rawjson.AppendCompact(b, resp.Content, false)
	b = append(b, `,"kind":`...)
	b = rawjson.AppendString(b, kind, false)
	b = append(b, `,"ok":true,"provider":`...)
	b = rawjson.AppendString(b, provider, false)
	b = append(b, `,"status":200`...)
	if u := resp.Usage; u != nil {
		b = append(b, `,"usage":{"input_tokens":`...)
		b = strconv.AppendInt(b, int64(u.InputTokens), 10)
		b = append(b, `,"output_tokens":`...)
		b = strconv.AppendInt(b, int64(u.OutputTokens), 10)
		b = append(b, '}')
	}
	return append(b, '}')
}

// messageEvent is an unsaved event whose payload is msg
// (client.message.send, server.message.send).
func messageEvent(sessionID, clientKeyID, typ string, msg baton.Message) *baton.Event {
	return &baton.Event{SessionID: sessionID, ClientKeyID: clientKeyID, Type: typ, Payload: messagePayload(msg.Role, msg.Content)}
}

// messagePayload builds a {"role","content"} payload as encoding/json
// would, in one allocation: a message may be megabytes long.
func messagePayload(role string, content json.RawMessage) json.RawMessage {
	if !rawjson.Valid(content) {
		return baton.MarshalJSON(baton.Message{Role: role, Content: content}) // encoding/json decides
	}
	b := make([]byte, 0, 32+2*len(role)+len(content))
	b = append(b, `{"role":`...)
	b = rawjson.AppendString(b, role, false)
	b = append(b, `,"content":`...)
	b = rawjson.AppendCompact(b, content, false)
	return append(b, '}')
}

// sharedMessage is the message of ev, a messageEvent of role and content,
// with the content as the payload holds it: a turn that keeps the message
// (in its conversation, its result) then holds one copy of a long
// message, not two. A payload that is not messagePayload's keeps content.
func sharedMessage(ev *baton.Event, role string, content json.RawMessage) baton.Message {
	if c := payloadContent(ev.Payload); c != nil {
		content = c
	}
	return baton.Message{Role: role, Content: content}
}

// payloadContent returns the content of a messagePayload as it holds it,
// sharing its bytes, or nil when the payload is not one messagePayload
// appended. The role before it is a JSON string, in which the quotes of
// ,"content": would be escaped, so the first such text is the member.
func payloadContent(payload json.RawMessage) json.RawMessage {
	const key = `,"content":`
	i := bytes.Index(payload, []byte(key))
	if i < 0 || !bytes.HasPrefix(payload, []byte(`{"role":`)) || payload[len(payload)-1] != '}' {
		return nil
	}
	return payload[i+len(key) : len(payload)-1 : len(payload)-1]
}

// requestPayload builds a provider.request payload. It carries the whole
// history (as BAE logs it), so it is appended directly — the message
// contents and tool definitions are already valid JSON — instead of going
// through encoding/json, which would re-validate all of it on every call.
// Keys are in the order encoding/json would sort them.
func requestPayload(attempt int, kind string, entry *baton.ProviderEntry, maxTokens int, messages []baton.Message, tools []json.RawMessage) json.RawMessage {
	b := make([]byte, 0, 256+rawjson.EncodedSize(messages, tools))
	b = append(b, `{"attempt":`...)
	b = strconv.AppendInt(b, int64(attempt), 10)
	b = append(b, `,"base_url":`...)
	b = rawjson.AppendString(b, entry.EffectiveBaseURL(), false)
	b = append(b, `,"kind":`...)
	b = rawjson.AppendString(b, kind, false)
	b = append(b, `,"max_tokens":`...)
	b = strconv.AppendInt(b, int64(maxTokens), 10)
	b = append(b, `,"messages":`...)
	b = rawjson.AppendMessages(b, messages)
	b = append(b, `,"model":`...)
	b = rawjson.AppendString(b, entry.Model, false)
	b = append(b, `,"provider":`...)
	b = rawjson.AppendString(b, entry.Provider, false)
	b = append(b, `,"tools":`...)
	b = rawjson.AppendRaw(b, tools)
	return append(b, '}')
}

// tokenError words a failure to resolve an auth_token template as BAE
// does (BAE's client API).
func tokenError(err error) string {
	var unset *baton.UnsetVarError
	switch {
	case errors.As(err, &unset):
		return "environment variable " + unset.Name + " referenced by provider config is not set"
	case errors.Is(err, baton.ErrUnterminatedVar):
		return "unterminated ${...} token in provider config"
	}
	return err.Error()
}
