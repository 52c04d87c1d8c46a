package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton/client"
)

// End-to-end tests of the session loop's provider side — failover,
// retries, restart recovery, the transcript and the iteration cap — driven
// through the Go SDK (see loop_test.go for the turn gate and streams).

// TestLoopFailover: a primary that answers 500 or times out hands the
// iteration to the fallback, logging the failure and one
// provider_call_failed; when every provider fails the SDK returns
// ProvidersFailedError and the session is in error.
func TestLoopFailover(t *testing.T) {
	t.Parallel()
	ctx := loopCtx(t)
	m := newMockProvider(t)
	unsetToken := "\n[[providers.entries]]\nname = \"nokey\"\nprovider = \"anthropic\"\nmodel = \"m\"\nauth_token = \"${BATON_TEST_NEVER_SET}\"\n"
	s := startServer(t, loopConfig(t, m.entry("mock")+unsetToken, "BATON_PROVIDER_RETRIES", "0", "BATON_PROVIDER_TIMEOUT", "1"))
	failover := loopProfile(t, s, map[string]any{"primary_provider": "mock", "fallback_providers": []string{"script"}})
	lone := loopProfile(t, s, map[string]any{"primary_provider": "mock"})
	const errBody = `{"type":"error","error":{"type":"api_error","message":"boom"}}`
	walk := func(status string) []string {
		return []string{
			"request 0 primary anthropic",
			"response 0 primary anthropic ok=false status=" + status,
			"error provider_call_failed",
			"request 1 fallback scripted",
			"response 1 fallback scripted ok=true status=200",
		}
	}

	t.Run("500", func(t *testing.T) {
		m.push(mockStatus(500, errBody))
		h, _ := loopHarness(t, s, failover)
		sess, err := h.Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r, err := sess.Send(ctx, "hello")
		r = mustReply(t, sent{r, err}, "You said: hello")
		if d := cmp.Diff(walk("500"), failoverLog(t, r.Events)); d != "" {
			t.Errorf("provider walk (-want +got):\n%s", d)
		}
		fail := payload(t, ofType(r.Events, "provider.response")[0])
		if fail["error"] != "provider returned HTTP 500" || fail["body"] != errBody {
			t.Errorf("failed response %v", fail)
		}
		if st := loopState(t, s, sess.ID); st != "open" {
			t.Errorf("session is %s, want open", st)
		}
	})

	t.Run("unset token variable", func(t *testing.T) {
		h, _ := loopHarness(t, s, loopProfile(t, s, map[string]any{"primary_provider": "nokey", "fallback_providers": []string{"script"}}))
		sess, err := h.Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r, err := sess.Send(ctx, "hello")
		r = mustReply(t, sent{r, err}, "You said: hello")
		// As BAE words it (BAE's client API), never showing a value.
		if fail := payload(t, ofType(r.Events, "provider.response")[0]); fail["error"] != "environment variable BATON_TEST_NEVER_SET referenced by provider config is not set" {
			t.Errorf("failed response %v", fail)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		m.push(mockHang())
		h, _ := loopHarness(t, s, failover)
		sess, err := h.Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		done := goSend(ctx, sess, "still there?")
		req := m.next(t)
		for req.lastUserText() != "still there?" {
			req = m.next(t)
		}
		select {
		case <-req.Cancelled:
		case <-time.After(loopWait):
			t.Fatal("the hung provider call was never cancelled")
		}
		r := mustReply(t, recv(t, done), "You said: still there?")
		if d := cmp.Diff(walk("<nil>"), failoverLog(t, r.Events)); d != "" {
			t.Errorf("provider walk (-want +got):\n%s", d)
		}
		fail := payload(t, ofType(r.Events, "provider.response")[0])
		if fail["error"] != "provider call timed out after 1s" {
			t.Errorf("failed response %v", fail)
		}
	})

	t.Run("all fail", func(t *testing.T) {
		m.push(mockStatus(500, errBody))
		h, _ := loopHarness(t, s, lone)
		sess, err := h.Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = sess.Send(ctx, "anyone?")
		var pf *client.ProvidersFailedError
		if !errors.As(err, &pf) {
			t.Fatalf("Send: %v, want *ProvidersFailedError", err)
		}
		if pf.Message.Text() != unavailable {
			t.Errorf("placeholder reply %q", pf.Message.Text())
		}
		want := []string{
			"request 0 primary anthropic",
			"response 0 primary anthropic ok=false status=500",
			"error provider_call_failed",
			"error all_providers_failed",
		}
		if d := cmp.Diff(want, failoverLog(t, pf.Events)); d != "" {
			t.Errorf("provider walk (-want +got):\n%s", d)
		}
		if n := payload(t, withReason(pf.Events, "all_providers_failed")[0])["attempts"]; n != 1.0 {
			t.Errorf("attempts %v, want 1", n)
		}
		if st := loopState(t, s, sess.ID); st != "error" {
			t.Errorf("session is %s, want error", st)
		}
	})
}

// TestLoopProviderRetryHonoursRetryAfter: a retryable failure is retried
// on the same provider after the delay its Retry-After asks for, longer
// than the engine's own backoff.
func TestLoopProviderRetryHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	ctx := loopCtx(t)
	m := newMockProvider(t)
	s := startServer(t, loopConfig(t, m.entry("mock"), "BATON_PROVIDER_RETRIES", "1"))
	pro := loopProfile(t, s, map[string]any{"primary_provider": "mock", "fallback_providers": []string{"script"}})
	busy := mockStatus(503, `{"type":"error","error":{"type":"overloaded_error","message":"busy"}}`)
	busy.header = http.Header{"Retry-After": {"1"}}
	m.push(busy, mockText("recovered"))
	h, _ := loopHarness(t, s, pro)
	sess, err := h.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, err := sess.Send(ctx, "hi")
	r = mustReply(t, sent{r, err}, "recovered")
	want := []string{
		"request 0 primary anthropic",
		"response 0 primary anthropic ok=false status=503",
		"error provider_call_failed",
		// As BAE numbers attempts: the provider's index in the chain, so a
		// retry repeats it.
		"request 0 primary anthropic",
		"response 0 primary anthropic ok=true status=200",
	}
	if d := cmp.Diff(want, failoverLog(t, r.Events)); d != "" {
		t.Errorf("provider walk (-want +got):\n%s", d)
	}
	reqs := m.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d provider calls, want 2", len(reqs))
	}
	if gap := reqs[1].At.Sub(reqs[0].At); gap < time.Second {
		t.Errorf("retried after %v, Retry-After asked for 1s", gap)
	}
}

// TestLoopRestartResumesPausedTurn: a turn paused on a client tool survives
// a restart; after re-registering, the owner's tool result resumes it, and
// the parked server result (rebuilt from the log) is merged in order.
func TestLoopRestartResumesPausedTurn(t *testing.T) {
	t.Parallel()
	onlySingleNode(t, "it restarts one node, and the session's owner may be another")
	m := newMockProvider(t)
	s := startServer(t, loopConfig(t, m.entry("mock")))
	pro := loopProfile(t, s, map[string]any{"primary_provider": "mock", "allowed_tools": []string{"get_time"}})
	_, key := s.clientKey("k", pro)
	r := s.client("POST", "/api/v1/sessions", key, map[string]any{"tools": []any{map[string]any{"name": "get_time", "input_schema": map[string]any{"type": "object"}}}})
	mustStatus(t, r, 201)
	sid, sk := r.json(t)["session_id"].(string), r.json(t)["session_key"].(string)
	rpcResult(t, s, sid, sk, "session.registerDriver", map[string]any{})
	m.push(mockTool(mockUse{ID: "toolu_srv", Name: "lookup", Input: `{"q":"clock"}`}, mockUse{ID: "toolu_cli", Name: "get_time"}), mockText("it is noon"))
	res, _ := rpcResult(t, s, sid, sk, "session.sendMessage", map[string]any{"message": map[string]any{"content": "what time is it?"}})
	var paused turnResult
	json.Unmarshal(res, &paused)
	want := []string{`tool_use:toolu_srv:lookup:{"q":"clock"}:dispatch="mcp"`, `tool_use:toolu_cli:get_time:{}:dispatch="client"`}
	if d := cmp.Diff(want, blocksOf(t, paused.Message.Content)); d != "" {
		t.Fatalf("paused reply (-want +got):\n%s", d)
	}

	s.stop()
	s2 := runServer(t, s.dir, s.env)
	resume := map[string]any{"message": map[string]any{"content": []any{
		map[string]any{"type": "tool_result", "tool_use_id": "toolu_cli", "content": "12:00"},
	}}}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "session.sendMessage", "params": resume})
	if f := rpcAll(t, s2, sid, sk, string(body)); len(f) != 1 || f[0].Error == nil || f[0].Error.Code != -32001 {
		t.Fatalf("send before re-registering: %d frame(s), want one -32001 error", len(f))
	}
	rpcResult(t, s2, sid, sk, "session.registerDriver", map[string]any{})
	res, _ = rpcResult(t, s2, sid, sk, "session.sendMessage", resume)
	var done turnResult
	json.Unmarshal(res, &done)
	if done.Message.Text() != "it is noon" {
		t.Fatalf("resumed reply %s", res)
	}
	const mcpErr = "MCP error: no MCP server is configured for tool 'lookup'"
	merged := []string{"tool_result:toolu_srv:error=true:" + mcpErr, "tool_result:toolu_cli:error=false:12:00"}
	var msg client.Message
	json.Unmarshal(done.Events[0].Payload, &msg)
	if d := cmp.Diff(merged, blocksOf(t, msg.Content)); d != "" {
		t.Errorf("recorded resume (-want +got):\n%s", d)
	}
	wantReq := []string{
		"user text:what time is it?",
		`assistant tool_use:toolu_srv:lookup:{"q":"clock"} | tool_use:toolu_cli:get_time:{}`,
		"user " + strings.Join(merged, " | "),
	}
	reqs := m.requests()
	if d := cmp.Diff(wantReq, messagesOf(t, reqs[len(reqs)-1])); d != "" {
		t.Errorf("provider request after restart (-want +got):\n%s", d)
	}
}

// TestLoopTranscriptSystemPromptAndIterationCap: server-side tool rounds
// stay in the history of later turns (BAE forgets them), the profile's
// system prompt is sent, and max_iterations caps a turn's provider calls.
func TestLoopTranscriptSystemPromptAndIterationCap(t *testing.T) {
	t.Parallel()
	ctx := loopCtx(t)
	m := newMockProvider(t)
	s := startServer(t, loopConfig(t, m.entry("mock")))

	t.Run("transcript", func(t *testing.T) {
		pro := loopProfile(t, s, map[string]any{"primary_provider": "mock", "system_prompt": "Answer in one word."})
		h, _ := loopHarness(t, s, pro)
		sess, err := h.Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m.push(mockTool(mockUse{ID: "toolu_m1", Name: "lookup", Input: `{"q":"weather"}`}), mockText("first answer"))
		r, err := sess.Send(ctx, "one")
		r = mustReply(t, sent{r, err}, "first answer")
		if d := cmp.Diff([]string{"client.message.send", "provider.request", "provider.response", "tool.call",
			"mcp.request", "mcp.response", "tool.result", "provider.request", "provider.response", "server.message.send"}, types(r.Events)); d != "" {
			t.Errorf("turn events (-want +got):\n%s", d)
		}
		r, err = sess.Send(ctx, "two")
		mustReply(t, sent{r, err}, "mock: two")
		reqs := m.requests()
		if len(reqs) != 3 {
			t.Fatalf("%d provider calls, want 3", len(reqs))
		}
		round := []string{
			"user text:one",
			`assistant tool_use:toolu_m1:lookup:{"q":"weather"}`,
			"user tool_result:toolu_m1:error=true:MCP error: no MCP server is configured for tool 'lookup'",
		}
		if d := cmp.Diff(round, messagesOf(t, reqs[1])); d != "" {
			t.Errorf("second iteration (-want +got):\n%s", d)
		}
		next := append(round, "assistant text:first answer", "user text:two")
		if d := cmp.Diff(next, messagesOf(t, reqs[2])); d != "" {
			t.Errorf("next turn's history (-want +got):\n%s", d)
		}
		for i, r := range reqs {
			if r.System != "Answer in one word." {
				t.Errorf("request %d system %q", i, r.System)
			}
		}
	})

	t.Run("iteration cap", func(t *testing.T) {
		pro := loopProfile(t, s, map[string]any{"primary_provider": "mock", "max_iterations": 2})
		h, _ := loopHarness(t, s, pro)
		sess, err := h.Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		before := len(m.requests())
		for i := range 3 {
			m.push(mockTool(mockUse{ID: fmt.Sprintf("toolu_l%d", i), Name: "lookup"}))
		}
		r, err := sess.Send(ctx, "loop forever")
		r = mustReply(t, sent{r, err}, unavailable)
		if n := len(m.requests()) - before; n != 2 || m.pending() != 1 {
			t.Errorf("%d provider calls (%d replies unused), want 2 (1)", n, m.pending())
		}
		lim := withReason(r.Events, "loop_limit")
		if len(lim) != 1 || payload(t, lim[0])["max_iterations"] != 2.0 {
			t.Fatalf("loop_limit events %v", lim)
		}
		if st := loopState(t, s, sess.ID); st != "error" {
			t.Errorf("session is %s, want error", st)
		}
	})
}
