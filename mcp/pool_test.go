package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/mcp/mcptest"
	"github.com/google/go-cmp/cmp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// TestMain lets the test binary serve the test MCP server on stdio when a
// test starts it with mcptest.EnvServe=1.
func TestMain(m *testing.M) {
	if os.Getenv(mcptest.EnvServe) == "1" {
		mcptest.ServeStdio()
		return
	}
	goleak.VerifyTestMain(m)
}

// stdioServer is a registry entry that runs this test binary as the test
// server; ${EXE} is resolved through the pool's LookupEnv.
func stdioServer(name string, extraEnv ...string) baton.MCPServer {
	args := append([]string{mcptest.EnvServe + "=1"}, extraEnv...)
	return baton.MCPServer{Name: name, Transport: baton.MCPStdio, Command: "/usr/bin/env", Args: append(args, "${EXE}")}
}

func env(t testing.TB, extra map[string]string) func(string) (string, bool) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return func(k string) (string, bool) {
		if k == "EXE" {
			return exe, true
		}
		v, ok := extra[k]
		return v, ok
	}
}

func openPool(t testing.TB, opts Options) *Pool {
	t.Helper()
	p, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// text returns the first text block of a raw CallToolResult.
func text(t testing.TB, raw json.RawMessage) string {
	t.Helper()
	var r struct {
		Content []struct{ Type, Text string } `json:"content"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || len(r.Content) == 0 {
		t.Fatalf("result %s: %v", raw, err)
	}
	return r.Content[0].Text
}

func names(tools []baton.MCPTool) []string {
	var out []string
	for _, t := range tools {
		out = append(out, t.Server+"/"+t.Name)
	}
	slices.Sort(out)
	return out
}

func TestStdio(t *testing.T) {
	ctx := context.Background()
	p := openPool(t, Options{LookupEnv: env(t, nil)})
	srv := []baton.MCPServer{stdioServer("local")}
	tools, err := p.Tools(ctx, "s1", srv)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"local/echo", "local/fail", "local/pid", "local/slow"}
	if diff := cmp.Diff(want, names(tools)); diff != "" {
		t.Fatalf("tools (-want +got):\n%s", diff)
	}
	for _, tool := range tools {
		if tool.Name == "echo" && (tool.Description != "Echo the text back." || !strings.Contains(string(tool.InputSchema), `"text"`)) {
			t.Errorf("echo tool = %+v, schema %s", tool, tool.InputSchema)
		}
	}

	res, isErr, err := p.Call(ctx, "s1", "local", "echo", json.RawMessage(`{"text":"hi"}`))
	if err != nil || isErr || text(t, res) != "echo: hi" {
		t.Fatalf("echo = %s, %v, %v", res, isErr, err)
	}
	res, isErr, err = p.Call(ctx, "s1", "local", "fail", nil)
	if err != nil || !isErr || text(t, res) != "it failed" {
		t.Fatalf("fail = %s, %v, %v", res, isErr, err)
	}
	if !strings.Contains(string(res), `"isError":true`) {
		t.Errorf("raw result lacks isError: %s", res)
	}

	res, _, err = p.Call(ctx, "s1", "local", "pid", nil)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(text(t, res))
	if err != nil {
		t.Fatal(err)
	}
	// A second Tools call reuses the connection: same process.
	if _, err := p.Tools(ctx, "s1", srv); err != nil {
		t.Fatal(err)
	}
	res, _, _ = p.Call(ctx, "s1", "local", "pid", nil)
	if got := text(t, res); got != strconv.Itoa(pid) {
		t.Fatalf("second Tools reconnected: pid %s, want %d", got, pid)
	}

	if n := p.Sessions(); n != 1 {
		t.Errorf("Sessions() = %d with one connected session, want 1", n)
	}
	p.CloseSession("s1")
	if n := p.Sessions(); n != 0 {
		t.Errorf("Sessions() = %d after CloseSession, want 0", n)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("stdio server %d still exists after CloseSession: %v", pid, err)
	}
	if _, _, err := p.Call(ctx, "s1", "local", "echo", nil); err == nil {
		t.Fatal("call after CloseSession succeeded")
	}
	p.CloseSession("s1") // idempotent
}

func TestStdioTimeout(t *testing.T) {
	ctx := context.Background()
	p := openPool(t, Options{LookupEnv: env(t, nil), CallTimeout: 2 * time.Second})
	if _, err := p.Tools(ctx, "s1", []baton.MCPServer{stdioServer("local")}); err != nil {
		t.Fatal(err)
	}
	p.opts.CallTimeout = 200 * time.Millisecond
	start := time.Now()
	_, _, err := p.Call(ctx, "s1", "local", "slow", nil)
	if err == nil || err.Error() != "MCP transport error: timed out awaiting tools/call response" {
		t.Fatalf("slow call err = %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("timeout took %v", d)
	}
	// The connection survives a timed-out call.
	res, _, err := p.Call(ctx, "s1", "local", "echo", json.RawMessage(`{"text":"again"}`))
	if err != nil || text(t, res) != "echo: again" {
		t.Fatalf("echo after timeout = %s, %v", res, err)
	}
}

// httpServer serves the test server over streamable HTTP or the older
// HTTP+SSE transport and reports the Authorization headers it saw and the
// slow calls it saw cancelled.
type httpServer struct {
	url       string
	started   chan struct{}
	cancelled chan struct{}
	mu        sync.Mutex
	auth      []string
}

// startRemote serves the test MCP server over Streamable HTTP, or over the
// older HTTP+SSE transport when legacy is set.
func startRemote(t testing.TB, legacy bool) *httpServer {
	h := &httpServer{started: make(chan struct{}, 4), cancelled: make(chan struct{}, 4)}
	srv := mcptest.NewServer(mcptest.Hooks{
		Started:   func() { h.started <- struct{}{} },
		Cancelled: func() { h.cancelled <- struct{}{} },
	})
	var handler http.Handler = sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	if legacy {
		handler = sdk.NewSSEHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.auth = append(h.auth, r.Header.Get("Authorization"))
		h.mu.Unlock()
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	h.url = ts.URL
	return h
}

// TestHTTP runs the remote transports. "http" and "sse" both reach a
// Streamable HTTP server, as in BAE; "sse" also reaches a server that only
// has the older HTTP+SSE transport.
func TestHTTP(t *testing.T) {
	for _, tc := range []struct {
		name, transport string
		legacy          bool
	}{
		{"http", baton.MCPHTTP, false},
		{"sse on streamable HTTP", baton.MCPSSE, false},
		{"sse on HTTP+SSE", baton.MCPSSE, true},
	} {
		t.Run(tc.name, func(t *testing.T) { testRemote(t, tc.transport, tc.legacy) })
	}
}

func testRemote(t *testing.T, transport string, legacy bool) {
	ctx := context.Background()
	h := startRemote(t, legacy)
	p := openPool(t, Options{LookupEnv: env(t, map[string]string{"TOKEN": "s3cret"}), CallTimeout: 5 * time.Second})
	srv := baton.MCPServer{Name: "remote", Transport: transport, URL: h.url, Headers: map[string]string{"Authorization": "Bearer ${TOKEN}"}}
	tools, err := p.Tools(ctx, "s1", []baton.MCPServer{srv})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"remote/echo", "remote/fail", "remote/pid", "remote/slow"}, names(tools)); diff != "" {
		t.Fatalf("tools (-want +got):\n%s", diff)
	}
	res, isErr, err := p.Call(ctx, "s1", "remote", "echo", json.RawMessage(`{"text":"over http"}`))
	if err != nil || isErr || text(t, res) != "echo: over http" {
		t.Fatalf("echo = %s, %v, %v", res, isErr, err)
	}
	h.mu.Lock()
	for _, a := range h.auth {
		if a != "Bearer s3cret" {
			t.Errorf("Authorization = %q", a)
		}
	}
	h.mu.Unlock()

	// A caller's cancellation reaches the server as notifications/cancelled.
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, _, err := p.Call(cctx, "s1", "remote", "slow", nil)
		done <- err
	}()
	<-h.started
	cancel()
	if err := <-done; err == nil {
		t.Fatal("cancelled slow call succeeded")
	}
	select {
	case <-h.cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the server never saw the cancellation")
	}
	p.CloseSession("s1")
}

func TestSkipsUnresolvableServer(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: &logs}, nil))
	p := openPool(t, Options{LookupEnv: env(t, nil), Logger: log})
	bad := baton.MCPServer{Name: "bad", Transport: baton.MCPStdio, Command: "${NOT_SET_ANYWHERE}"}
	badHTTP := baton.MCPServer{Name: "badhttp", Transport: baton.MCPHTTP, URL: "http://127.0.0.1:1/", Headers: map[string]string{"X": "${ALSO_MISSING}"}}
	tools, err := p.Tools(context.Background(), "s1", []baton.MCPServer{bad, badHTTP, stdioServer("good")})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"good/echo", "good/fail", "good/pid", "good/slow"}, names(tools)); diff != "" {
		t.Fatalf("tools (-want +got):\n%s", diff)
	}
	mu.Lock()
	out := logs.String()
	mu.Unlock()
	for _, want := range []string{`level=ERROR msg="MCP connect failed" session_id=s1 server=bad`, "NOT_SET_ANYWHERE", "server=badhttp", "ALSO_MISSING"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if _, _, err := p.Call(context.Background(), "s1", "bad", "echo", nil); err == nil {
		t.Fatal("call to a skipped server succeeded")
	}
}

func TestMissingCommandIsSkipped(t *testing.T) {
	p := openPool(t, Options{})
	srv := baton.MCPServer{Name: "x", Transport: baton.MCPStdio, Command: filepath.Join(t.TempDir(), "nope")}
	tools, err := p.Tools(context.Background(), "s1", []baton.MCPServer{srv})
	if err != nil || len(tools) != 0 {
		t.Fatalf("tools = %v, %v", tools, err)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// BenchmarkStdioCall measures one tools/call round trip to a stdio server
// whose tool does no work: the pool's and the SDK's overhead.
func BenchmarkStdioCall(b *testing.B) {
	ctx := context.Background()
	p := openPool(b, Options{LookupEnv: env(b, nil)})
	if _, err := p.Tools(ctx, "s1", []baton.MCPServer{stdioServer("local")}); err != nil {
		b.Fatal(err)
	}
	in := json.RawMessage(`{"text":"x"}`)
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		if _, _, err := p.Call(ctx, "s1", "local", "echo", in); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	}
}

// TestOversizedResponse: a JSON reply past the body cap fails the call with
// an error that says so, instead of being read whole into memory.
func TestOversizedResponse(t *testing.T) {
	const limit = 64 << 10
	srv := mcptest.NewServer(mcptest.Hooks{})
	handler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !bytes.Contains(body, []byte(`"tools/call"`)) {
			r.Body = io.NopCloser(bytes.NewReader(body))
			handler.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		chunk := bytes.Repeat([]byte("x"), 16<<10)
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"`)
		for range 64 * limit / len(chunk) { // 64 times the cap
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		_, _ = io.WriteString(w, `"}]}}`)
	}))
	t.Cleanup(ts.Close)

	p := openPool(t, Options{CallTimeout: 5 * time.Second})
	p.maxBody = limit
	remote := baton.MCPServer{Name: "remote", Transport: baton.MCPHTTP, URL: ts.URL}
	tools, err := p.Tools(context.Background(), "s1", []baton.MCPServer{remote})
	if err != nil || len(tools) == 0 {
		t.Fatalf("tools = %v, %v", names(tools), err)
	}
	_, _, err = p.Call(context.Background(), "s1", "remote", "echo", json.RawMessage(`{"text":"hi"}`))
	if err == nil || !strings.Contains(err.Error(), "response body is larger than "+strconv.Itoa(limit)+" bytes") {
		t.Fatalf("oversized call: err = %v", err)
	}
	p.CloseSession("s1")
}

func TestLimitBody(t *testing.T) {
	for _, tc := range []struct {
		size    int
		wantErr bool
	}{{0, false}, {9, false}, {10, false}, {11, true}, {1000, true}} {
		b := &limitBody{rc: io.NopCloser(bytes.NewReader(bytes.Repeat([]byte("a"), tc.size))), left: 10, max: 10}
		got, err := io.ReadAll(b)
		if (err != nil) != tc.wantErr {
			t.Errorf("size %d: err = %v", tc.size, err)
		}
		if want := min(tc.size, 10); len(got) != want {
			t.Errorf("size %d: read %d bytes, want %d", tc.size, len(got), want)
		}
	}
}
