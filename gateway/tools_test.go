package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/auth"
)

// bearer adds an Authorization header to every request.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// connectTools opens an MCP client session on a session's tools endpoint.
func connectTools(t *testing.T, base, session, token string) (*sdk.ClientSession, error) {
	t.Helper()
	hc := &http.Client{Transport: bearer{token: token, base: http.DefaultTransport}}
	c := sdk.NewClient(&sdk.Implementation{Name: "brain", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{
		Endpoint: base + "/v1/sessions/" + session + "/mcp", HTTPClient: hc, DisableStandaloneSSE: true, MaxRetries: -1,
	}, nil)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

func (f *fixture) toolsToken(turn, actor string, epoch int64) string {
	f.t.Helper()
	f.eng.activate("ses_a", turn, actor)
	tok, _, err := f.tokens.IssueTools(context.Background(), "ses_a", turn, "mch_a", epoch)
	if err != nil {
		f.t.Fatal(err)
	}
	return tok
}

func TestToolsMCP(t *testing.T) {
	f := newFixture(t)
	desc := "echo it"
	f.eng.tools = []baton.ToolDef{
		{Name: "echo", Description: &desc, InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)},
		{Name: "run", InputSchema: json.RawMessage(`{}`)}, // no type: served as an object schema
	}
	f.eng.result = json.RawMessage(`[{"type":"text","text":"echo: hi"}]`)
	cs, err := connectTools(t, f.srv.URL, "ses_a", f.toolsToken("turn_1", "key_actor", 3))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tl := range list.Tools {
		schema, _ := json.Marshal(tl.InputSchema)
		got = append(got, tl.Name+"|"+tl.Description+"|"+string(schema))
	}
	want := []string{`echo|echo it|{"properties":{"text":{"type":"string"}},"type":"object"}`, `run||{"type":"object"}`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}

	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || len(res.Content) != 1 || res.Content[0].(*sdk.TextContent).Text != "echo: hi" {
		t.Errorf("result %+v", res)
	}
	f.eng.mu.Lock()
	calls := f.eng.calls
	f.eng.mu.Unlock()
	if len(calls) != 1 || calls[0].SessionID != "ses_a" || calls[0].Actor != "key_actor" || calls[0].Name != "echo" ||
		canon(t, string(calls[0].Input)) != `{"text":"hi"}` {
		t.Errorf("engine calls %+v", calls)
	}

	// A failing tool is an error result; a string content is text.
	f.eng.mu.Lock()
	f.eng.result, f.eng.isErr = json.RawMessage(`"sandbox error: boom"`), true
	f.eng.mu.Unlock()
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "run", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || res.Content[0].(*sdk.TextContent).Text != "sandbox error: boom" {
		t.Errorf("error result %+v", res)
	}

	// An unknown tool is a protocol error.
	f.eng.mu.Lock()
	f.eng.callErr = baton.Errorf(baton.ECodeNotFound, `the session offers no tool named "nope"`)
	f.eng.mu.Unlock()
	_, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "nope"})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(werr.Message, "nope") {
		t.Errorf("unknown tool: %v", err)
	}

	// The turn ends: the next request is refused.
	f.eng.end("ses_a", "turn_1")
	if _, err := cs.ListTools(ctx, nil); err == nil {
		t.Error("tools listed after the turn ended")
	}
}

// TestToolsInvalidUTF8: a tools/call whose arguments are not valid UTF-8
// is refused as a malformed payload (400, plain text) before the MCP
// layer, whose encoding/json would hand the bytes to the engine; the same
// call in valid UTF-8 runs.
func TestToolsInvalidUTF8(t *testing.T) {
	f := newFixture(t)
	f.eng.tools = []baton.ToolDef{{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)}}
	f.eng.result = json.RawMessage(`[{"type":"text","text":"ok"}]`)
	token := f.toolsToken("turn_1", "key_actor", 3)
	post := func(text string) (int, string) {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + text + `"}}}`
		req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/v1/sessions/ses_a/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	calls := func() int {
		f.eng.mu.Lock()
		defer f.eng.mu.Unlock()
		return len(f.eng.calls)
	}
	if st, body := post("hi \xff\xfe"); st != http.StatusBadRequest || body != "malformed payload: invalid UTF-8\n" || calls() != 0 {
		t.Fatalf("invalid UTF-8: %d %q, %d engine calls; want 400 malformed payload and none", st, body, calls())
	}
	if st, body := post("héllo"); st != http.StatusOK || calls() != 1 {
		t.Fatalf("valid UTF-8: %d %q, %d engine calls", st, body, calls())
	}
}

func TestToolsAuthorization(t *testing.T) {
	f := newFixture(t)
	model := f.model("turn_1", "key_actor")
	good := f.toolsToken("turn_1", "key_actor", 3)
	stale := f.toolsToken("turn_1", "key_actor", 2)
	f.eng.activate("ses_b", "turn_9", "key_actor")
	other, _, err := f.tokens.IssueTools(context.Background(), "ses_b", "turn_9", "mch_a", 3)
	if err != nil {
		t.Fatal(err)
	}
	ended := f.toolsToken("turn_0", "key_actor", 3)
	f.eng.end("ses_a", "turn_0")
	const init = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	for _, c := range []struct {
		name, session, token string
		status               int
		code                 string
	}{
		{"no token", "ses_a", "", 401, "unauthorized"},
		{"model token", "ses_a", model, 401, "unauthorized"},
		{"other session", "ses_a", other, 403, "forbidden"},
		{"superseded epoch", "ses_a", stale, 403, "forbidden"},
		{"inactive turn", "ses_a", ended, 403, "forbidden"},
		{"ok", "ses_a", good, 200, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/v1/sessions/"+c.session+"/mcp", strings.NewReader(init))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if c.token != "" {
				req.Header.Set("Authorization", "Bearer "+c.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body struct {
				Error struct{ Code string } `json:"error"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&body)
			if resp.StatusCode != c.status || body.Error.Code != c.code {
				t.Errorf("%d %q, want %d %q", resp.StatusCode, body.Error.Code, c.status, c.code)
			}
			if c.status == 401 && resp.Header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
	// The Go SDK client cannot connect with a refused token.
	if _, err := connectTools(t, f.srv.URL, "ses_a", stale); err == nil {
		t.Error("connected with a superseded epoch")
	}
}

func TestCredentials(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.eng.activate("ses_a", "turn_1", "key_actor")
	md, err := f.creds.Issue(ctx, "ses_a", "turn_1", "mch_a", 3)
	if err != nil {
		t.Fatal(err)
	}
	if md.ModelBaseURL != f.srv.URL+"/v1/model" || md.ToolsMCPURL != "" || md.ToolsMCPToken != "" {
		t.Errorf("metadata without tools: %+v", md)
	}
	g, err := f.tokens.VerifyModel(md.ModelToken)
	if err != nil || g.SessionID != "ses_a" || g.TurnID != "turn_1" || g.MachineID != "mch_a" || !g.ExpiresAt.Equal(md.ModelTokenExpiresAt) {
		t.Errorf("model token grant %+v, %v", g, err)
	}

	f.eng.offers = true
	md, err = f.creds.Issue(ctx, "ses_a", "turn_1", "mch_a", 3)
	if err != nil {
		t.Fatal(err)
	}
	if md.ToolsMCPURL != f.srv.URL+"/v1/sessions/ses_a/mcp" {
		t.Errorf("tools url %q", md.ToolsMCPURL)
	}
	if g, err := f.tokens.VerifyTools(md.ToolsMCPToken); err != nil || g.Epoch != 3 || g.TurnID != "turn_1" {
		t.Errorf("tools token grant %+v, %v", g, err)
	}
	// The issued credentials work against the gateway.
	if _, err := connectTools(t, f.srv.URL, "ses_a", md.ToolsMCPToken); err != nil {
		t.Errorf("tools token from Issue: %v", err)
	}
	if st, body := f.post("/v1/model/v1/messages", `{"messages":[{"role":"user","content":"x"}]}`, "Authorization", "Bearer "+md.ModelToken); st != 200 {
		t.Errorf("model token from Issue: %d %v", st, body)
	}

	if _, err := f.creds.Issue(ctx, "ses_a", "turn_ended", "mch_a", 3); !errors.Is(err, auth.ErrTurnInactive) {
		t.Errorf("inactive turn: %v", err)
	}
	pub := NewCredentials(CredentialOptions{Issuer: f.tokens, Origin: Origin("https://baton.example/", nil)})
	if md, err := pub.Issue(ctx, "ses_a", "turn_1", "mch_a", 3); err != nil || md.ModelBaseURL != "https://baton.example/v1/model" {
		t.Errorf("public origin: %+v, %v", md, err)
	}
	none := NewCredentials(CredentialOptions{Issuer: f.tokens, Origin: Origin("", func() string { return "" })})
	if _, err := none.Issue(ctx, "ses_a", "turn_1", "mch_a", 3); baton.ErrorCode(err) != baton.ECodeUnavailable {
		t.Errorf("no origin: %v", err)
	}
}
