package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/auth"
	"github.com/baton-engine/baton/client"
	exsdk "github.com/baton-engine/baton/client/executor"
	"github.com/baton-engine/baton/mcp/mcptest"
	"github.com/baton-engine/baton/provider/anthropic"
	"github.com/baton-engine/baton/provider/openai"
	"github.com/baton-engine/baton/sandbox/sandboxtest"
	"github.com/baton-engine/baton/store"
)

// End-to-end tests of a brain's way back into its session: the model
// gateway and the session tools over MCP, through a real server, with
// mock providers and an MCP test server on loopback. The brain is the
// test itself: heldAgent hands each turn (with its credentials) over and
// finishes it when told.

// heldAgent is an executor agent whose turns the test runs.
type heldAgent struct {
	turns   chan *exsdk.Turn
	release chan string // the turn's final message
}

func newHeldAgent() *heldAgent {
	return &heldAgent{turns: make(chan *exsdk.Turn, 4), release: make(chan string)}
}

func (a *heldAgent) Open(_ context.Context, sessionID, _ string) (string, error) {
	return "ref-" + sessionID, nil
}

func (a *heldAgent) Close(context.Context, string) error { return nil }

func (a *heldAgent) Run(ctx context.Context, t *exsdk.Turn) error {
	a.turns <- t
	select {
	case text := <-a.release:
		_, err := t.Emit(exsdk.TextMessageEvent(text))
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// gatewayServer is a server whose profile runs on an agent executor, with
// two mock providers (a primary and a fallback) and an MCP server.
type gatewayServer struct {
	*server
	primary, fallback *mockProvider
	agent             *heldAgent
	net               *execNet // the executor's network
	machine           string
	profile           string
}

// newGatewayServer starts it; env (name, value pairs) and fields add to
// the server's environment and the profile.
func newGatewayServer(t *testing.T, fields map[string]any, env ...string) *gatewayServer {
	t.Helper()
	g := &gatewayServer{primary: newMockProvider(t), fallback: newMockProvider(t), agent: newHeldAgent()}
	tools := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server {
		return mcptest.NewServer(mcptest.Hooks{})
	}, nil))
	t.Cleanup(tools.Close)
	extra := g.primary.entry("gw-primary") + g.fallback.entry("gw-fallback") +
		fmt.Sprintf("\n[[mcp.servers]]\nname = \"gwtools\"\ntransport = \"http\"\nurl = %q\n", tools.URL)
	g.server = startServer(t, loopConfig(t, extra, append([]string{"BATON_PROVIDER_RETRIES", "0"}, env...)...))
	var secret string
	g.machine, secret = g.server.machine(fmt.Sprintf("gw-%d", profileSeq.Add(1)))
	pf := map[string]any{
		"primary_provider": "gw-primary", "fallback_providers": []string{"gw-fallback"}, "mcp_servers": []string{"gwtools"},
		"brain": map[string]any{"type": "executor", "machine_id": g.machine},
	}
	for k, v := range fields {
		pf[k] = v
	}
	g.profile = loopProfile(t, g.server, pf)
	g.net = newExecNet(t, g.server)
	startSDKExecutor(t, g.net, exsdk.Config{
		Credential: secret, Scope: exsdk.Machine(g.machine), ExecutorID: "exe_gw",
		Capabilities: exsdk.Capabilities{Agent: &exsdk.AgentCapability{MaxSessions: 4}}, Agent: g.agent,
	})
	return g
}

// turn opens a session (after setup, when set, prepared the harness and
// then the session), sends a message and returns the running turn.
func (g *gatewayServer) turn(t *testing.T, setup ...func(*client.Harness, *client.Session)) (*client.Session, string, *exsdk.Turn, <-chan sent) {
	t.Helper()
	h, keyID := loopHarness(t, g.server, g.profile)
	for _, f := range setup {
		f(h, nil)
	}
	sess, err := h.Connect(loopCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range setup {
		f(nil, sess)
	}
	done := goSend(loopCtx(t), sess, "go")
	select {
	case tr := <-g.agent.turns:
		return sess, keyID, tr, done
	case <-time.After(loopWait):
		t.Fatal("no turn reached the agent")
		return nil, "", nil, nil
	}
}

// gwPost posts body to url with a bearer token and returns the status and
// the raw body.
func gwPost(t *testing.T, url, token, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// allEvents reads every persisted event of the session.
func allEvents(t *testing.T, sess *client.Session) []client.Event {
	t.Helper()
	var out []client.Event
	cursor := ""
	for {
		p, err := sess.Events(loopCtx(t), cursor, 500)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p.Items...)
		if p.NextCursor == "" {
			return out
		}
		cursor = p.NextCursor
	}
}

// TestGatewayModelCalls: a brain's model calls through the gateway, in
// both formats, plain and streamed, run through the profile's provider
// chain (failover on a 500) and are logged on the session, attributed to
// the driver; the credentials end with the turn.
func TestGatewayModelCalls(t *testing.T) {
	t.Parallel()
	onlySingleNode(t, "brains serve only the sessions of the node they are connected to")
	g := newGatewayServer(t, nil)
	sess, keyID, tr, done := g.turn(t)
	md := tr.Metadata
	if md.ModelBaseURL != g.clientURL+"/v1/model" || !strings.HasPrefix(md.ModelToken, auth.ModelTokenPrefix) {
		t.Fatalf("turn metadata %+v", md)
	}
	if d := time.Until(md.ModelTokenExpiresAt); d < 55*time.Minute || d > time.Hour {
		t.Errorf("model token expires in %s", d)
	}

	// Anthropic, not streamed: the primary fails with 500, the fallback answers.
	g.primary.push(mockStatus(500, `{"type":"error","error":{"type":"api_error","message":"boom"}}`))
	g.fallback.push(mockText("hello ", "brain"))
	status, body := gwPost(t, md.ModelBaseURL+"/v1/messages", md.ModelToken,
		`{"model":"any","max_tokens":64,"system":"be brief","messages":[{"role":"user","content":"hi"}]}`)
	var msg struct {
		Type       string `json:"type"`
		Model      string `json:"model"`
		StopReason string `json:"stop_reason"`
		Content    []struct{ Type, Text string }
	}
	if err := json.Unmarshal(body, &msg); err != nil || status != 200 {
		t.Fatalf("messages: %d %s", status, body)
	}
	if msg.Type != "message" || msg.Model != "any" || msg.StopReason != "end_turn" || len(msg.Content) != 1 || msg.Content[0].Text != "hello brain" {
		t.Fatalf("messages reply %s", body)
	}
	if n := len(g.primary.requests()); n != 1 {
		t.Fatalf("primary saw %d requests", n)
	}
	fr := g.fallback.next(t)
	if fr.System != "be brief" || fr.lastUserText() != "hi" || fr.Model != "m" || !bytes.Contains(fr.Body, []byte(`"max_tokens":64`)) {
		t.Errorf("fallback request: system %q, text %q, model %q\n%s", fr.System, fr.lastUserText(), fr.Model, fr.Body)
	}

	// Anthropic streamed, read by Baton's own Anthropic adapter.
	ac := anthropic.New(nil)
	defer ac.Close()
	resp, err := ac.Call(loopCtx(t), &baton.ProviderEntry{Provider: baton.ProviderAnthropic, BaseURL: md.ModelBaseURL, Model: "x"},
		md.ModelToken, &baton.ProviderRequest{Messages: []baton.Message{{Role: "user", Content: json.RawMessage(`"stream one"`)}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := contentText(resp.Content); got != "mock: stream one" {
		t.Errorf("streamed anthropic reply %q", got)
	}

	// OpenAI, not streamed, with a tool round.
	g.primary.push(mockTool(mockUse{ID: "toolu_9", Name: "lookup", Input: `{"q":"x"}`}))
	status, body = gwPost(t, md.ModelBaseURL+"/v1/chat/completions", md.ModelToken, `{"model":"gpt","messages":[
		{"role":"system","content":"sys"},{"role":"user","content":"find"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"lookup","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"nothing"}],
		"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object"}}}]}`)
	var cc struct {
		Object  string `json:"object"`
		Choices []struct {
			FinishReason string `json:"finish_reason"`
			Message      struct {
				ToolCalls []struct {
					ID       string
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			}
		}
	}
	if err := json.Unmarshal(body, &cc); err != nil || status != 200 || cc.Object != "chat.completion" || len(cc.Choices) != 1 {
		t.Fatalf("chat completions: %d %s", status, body)
	}
	if c := cc.Choices[0]; c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 ||
		c.Message.ToolCalls[0].ID != "toolu_9" || c.Message.ToolCalls[0].Function.Arguments != `{"q":"x"}` {
		t.Fatalf("chat completion %s", body)
	}
	pr := g.primary.requests()
	last := pr[len(pr)-1]
	if fmt.Sprint(last.roles()) != "[user assistant user]" || last.System != "sys" || fmt.Sprint(last.Tools) != "[lookup]" {
		t.Errorf("translated request: roles %v, system %q, tools %v", last.roles(), last.System, last.Tools)
	}

	// OpenAI streamed, read by Baton's own OpenAI adapter.
	oc := openai.New(nil)
	defer oc.Close()
	resp, err = oc.Call(loopCtx(t), &baton.ProviderEntry{Provider: baton.ProviderOpenAI, BaseURL: md.ModelBaseURL, Model: "x"},
		md.ModelToken, &baton.ProviderRequest{Messages: []baton.Message{{Role: "user", Content: json.RawMessage(`"stream two"`)}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := contentText(resp.Content); got != "mock: stream two" {
		t.Errorf("streamed openai reply %q", got)
	}

	// Every attempt is on the session, attributed to the driver.
	var reqs, oks, fails int
	for _, ev := range allEvents(t, sess) {
		switch ev.Type {
		case "provider.request":
			reqs++
		case "provider.response":
			if payload(t, ev)["ok"] == true {
				oks++
			} else if p := payload(t, ev); p["status"] == 500.0 && p["kind"] == "primary" {
				fails++
			}
		default:
			continue
		}
		if ev.ClientKeyID != keyID {
			t.Errorf("%s attributed to %q, want %q", ev.Type, ev.ClientKeyID, keyID)
		}
	}
	if reqs != 5 || oks != 4 || fails != 1 {
		t.Errorf("events: %d provider.request, %d ok and %d failed provider.response; want 5, 4, 1", reqs, oks, fails)
	}

	// A refreshed model token works too.
	fresh, err := tr.RefreshModelToken(loopCtx(t))
	if err != nil || fresh.Token == md.ModelToken {
		t.Fatalf("refresh: %+v %v", fresh, err)
	}
	if status, body := gwPost(t, md.ModelBaseURL+"/v1/messages", fresh.Token, `{"messages":[{"role":"user","content":"again"}]}`); status != 200 {
		t.Fatalf("refreshed token: %d %s", status, body)
	}

	// An expired token (signed with this installation's key an hour ago).
	expired := pastModelToken(t, g.server, sess.ID, tr.ID, g.machine)
	if status, body := gwPost(t, md.ModelBaseURL+"/v1/messages", expired, `{"messages":[{"role":"user","content":"x"}]}`); status != 401 ||
		!bytes.Contains(body, []byte(`"authentication_error"`)) || !bytes.Contains(body, []byte("model token expired")) {
		t.Errorf("expired token: %d %s", status, body)
	}
	if status, body := gwPost(t, md.ModelBaseURL+"/v1/chat/completions", "bae_mdt_forged.AAAA", `{"messages":[{"role":"user","content":"x"}]}`); status != 401 ||
		!bytes.Contains(body, []byte(`"invalid_api_key"`)) {
		t.Errorf("forged token: %d %s", status, body)
	}

	// The turn ends: its tokens are refused and no new one is signed.
	g.agent.release <- "done"
	mustReply(t, recv(t, done), "done")
	for _, tok := range []string{md.ModelToken, fresh.Token} {
		if status, body := gwPost(t, md.ModelBaseURL+"/v1/messages", tok, `{"messages":[{"role":"user","content":"late"}]}`); status != 403 ||
			!bytes.Contains(body, []byte(`"permission_error"`)) {
			t.Errorf("token of an ended turn: %d %s", status, body)
		}
	}
	var rerr *exsdk.RPCError
	if _, err := tr.RefreshModelToken(loopCtx(t)); !errors.As(err, &rerr) || rerr.Code != exsdk.CodeTurnInactive {
		t.Errorf("refresh after the turn: %v", err)
	}
}

// pastModelToken signs a model token that expired a minute ago, on
// another node sharing the server's store (and so its key).
func pastModelToken(t *testing.T, s *server, sessionID, turnID, machineID string) string {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, store.Options{URL: s.storeURL(), SharedFile: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	x, err := auth.OpenTurnTokens(ctx, auth.TurnTokenOptions{Store: db, Now: func() time.Time { return time.Now().Add(-61 * time.Minute) }})
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := x.IssueModel(ctx, sessionID, turnID, machineID)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestGatewaySessionTools: a brain lists and calls the session's MCP
// tools through the tools endpoint with the Go SDK's MCP client; the call
// is logged like a server turn's; the token ends with the turn.
func TestGatewaySessionTools(t *testing.T) {
	t.Parallel()
	onlySingleNode(t, "brains serve only the sessions of the node they are connected to")
	g := newGatewayServer(t, nil)
	sess, keyID, tr, done := g.turn(t)
	md := tr.Metadata
	if md.ToolsMCPURL != g.clientURL+"/v1/sessions/"+sess.ID+"/mcp" || !strings.HasPrefix(md.ToolsMCPToken, auth.ToolsTokenPrefix) {
		t.Fatalf("turn metadata %+v", md)
	}
	cs := connectSessionTools(t, md.ToolsMCPURL, md.ToolsMCPToken)
	ctx := loopCtx(t)
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
	}
	if fmt.Sprint(names) != "[echo fail pid slow]" { // the MCP server lists them sorted
		t.Errorf("tools %v", names)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || len(res.Content) != 1 || res.Content[0].(*sdk.TextContent).Text != "echo: hi" {
		t.Fatalf("echo result %+v", res)
	}
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "fail", Arguments: map[string]any{}})
	if err != nil || !res.IsError {
		t.Fatalf("fail result %+v %v", res, err)
	}

	var got []string
	for _, ev := range allEvents(t, sess) {
		switch ev.Type {
		case "tool.call", "mcp.request", "mcp.response", "tool.result":
		default:
			continue
		}
		p := payload(t, ev)
		got = append(got, fmt.Sprintf("%s:%v:%v", ev.Type, p["server_name"], p["is_error"]))
		if ev.ClientKeyID != keyID {
			t.Errorf("%s attributed to %q, want %q", ev.Type, ev.ClientKeyID, keyID)
		}
		if ev.Type == "tool.call" && (p["dispatch"] != "mcp" || !strings.HasPrefix(fmt.Sprint(p["id"]), "toolu_")) {
			t.Errorf("tool.call payload %v", p)
		}
	}
	want := "[tool.call:gwtools:<nil> mcp.request:gwtools:<nil> mcp.response:gwtools:<nil> tool.result:gwtools:false " +
		"tool.call:gwtools:<nil> mcp.request:gwtools:<nil> mcp.response:gwtools:<nil> tool.result:gwtools:true]"
	if fmt.Sprint(got) != want {
		t.Errorf("events\n got %v\nwant %s", got, want)
	}

	// A refreshed tools token works; the turn ends and both are refused.
	fresh, err := tr.RefreshToolsToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := connectSessionTools(t, md.ToolsMCPURL, fresh.Token).ListTools(ctx, nil); err != nil {
		t.Fatalf("refreshed tools token: %v", err)
	}
	g.agent.release <- "done"
	mustReply(t, recv(t, done), "done")
	for _, tok := range []string{md.ToolsMCPToken, fresh.Token} {
		status, body := gwPost(t, md.ToolsMCPURL, tok, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		if status != 403 || !bytes.Contains(body, []byte(`"forbidden"`)) {
			t.Errorf("tools token of an ended turn: %d %s", status, body)
		}
	}
}

// connectSessionTools opens a Go SDK MCP client session on a tools URL.
func connectSessionTools(t *testing.T, url, token string) *sdk.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: headerTransport{"Authorization": "Bearer " + token}}
	c := sdk.NewClient(&sdk.Implementation{Name: "brain", Version: "1"}, nil)
	cs, err := c.Connect(loopCtx(t), &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: hc, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// headerTransport sets headers on every request.
type headerTransport map[string]string

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestGatewaySandboxTool: while the session's remote sandbox runs, the
// driver's Auto-mode sandbox tool is offered to the brain (before the MCP
// tools) and runs in the sandbox, logged like a server turn's call.
func TestGatewaySandboxTool(t *testing.T) {
	t.Parallel()
	onlySingleNode(t, "brains serve only the sessions of the node they are connected to")
	docker := &sandboxtest.Engine{Images: []string{"alpine:3"}}
	g := newGatewayServer(t, map[string]any{
		"available_sandboxes": []string{"alpine:3"}, "allowed_tools": []string{client.ShellCommandTool},
	}, "BATON_DOCKER_SOCKET", docker.Start(t))
	var sandboxID string
	sess, keyID, tr, done := g.turn(t, func(h *client.Harness, sess *client.Session) {
		if h != nil {
			if err := h.AddShellTool(client.ShellConfig{Target: client.TargetRemote, Mode: client.RemoteAuto}); err != nil {
				t.Fatal(err)
			}
			return
		}
		sb, err := sess.StartRemoteSandbox(loopCtx(t), "alpine:3")
		if err != nil {
			t.Fatal(err)
		}
		sandboxID = sb.SandboxID
	})
	cs := connectSessionTools(t, tr.Metadata.ToolsMCPURL, tr.Metadata.ToolsMCPToken)
	ctx := loopCtx(t)
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Tools) != 5 || list.Tools[0].Name != client.ShellCommandTool {
		t.Fatalf("tools %+v", list.Tools)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: client.ShellCommandTool, Arguments: map[string]any{"command": "echo from-brain"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || res.Content[0].(*sdk.TextContent).Text != "from-brain\n" {
		t.Fatalf("result %+v", res)
	}
	var got []string
	for _, ev := range allEvents(t, sess) {
		switch ev.Type {
		case "tool.call", "sandbox.request", "sandbox.response", "tool.result":
		default:
			continue
		}
		p := payload(t, ev)
		got = append(got, fmt.Sprintf("%s:%v:%v", ev.Type, p["dispatch"], p["sandbox_id"]))
		if ev.ClientKeyID != keyID {
			t.Errorf("%s attributed to %q, want %q", ev.Type, ev.ClientKeyID, keyID)
		}
	}
	want := fmt.Sprintf("[tool.call:sandbox:<nil> sandbox.request:<nil>:<nil> sandbox.response:<nil>:%s tool.result:sandbox:<nil>]", sandboxID)
	if fmt.Sprint(got) != want {
		t.Errorf("events\n got %v\nwant %s", got, want)
	}
	g.agent.release <- "done"
	mustReply(t, recv(t, done), "done")
}
