package executor

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/executor/peer"
	"github.com/baton-engine/baton/executor/proto"
)

// benchHub is a hub on the real clock behind a loopback server.
func benchHub(b *testing.B, hb time.Duration) (*Hub, string, *fakeTokens) {
	b.Helper()
	tokens := newTokens()
	h, err := Open(Options{Tokens: tokens, HeartbeatInterval: hb})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = h.Close(ctx)
		srv.Close()
	})
	return h, "ws" + strings.TrimPrefix(srv.URL, "http"), tokens
}

func benchDial(b *testing.B, url, token string) *websocket.Conn {
	b.Helper()
	ws, _, err := websocket.Dial(context.Background(), url, &websocket.DialOptions{
		HTTPHeader:   http.Header{"Authorization": {"Bearer " + token}},
		Subprotocols: []string{proto.SubprotocolV11},
	})
	if err != nil {
		b.Fatal(err)
	}
	return ws
}

// benchExecutor is an executor built on peer.Peer that answers every
// tool.call at once: ack, then tool.result from a sender goroutine.
func benchExecutor(b *testing.B, ws *websocket.Conn) *peer.Peer {
	b.Helper()
	results := make(chan proto.ToolResultParams, 16)
	var p *peer.Peer
	p = peer.New(ws, peer.Options{Handler: func(_ context.Context, f *proto.Frame) (any, error) {
		switch f.Method {
		case proto.MethodSessionAssign:
			var ap proto.AssignParams
			_ = f.Bind(&ap)
			return &peer.Reply{Result: proto.Accepted{Accepted: true}, After: func() {
				go func() {
					_ = p.Call(context.Background(), proto.MethodSessionReady, proto.SessionEpoch{SessionID: ap.SessionID, Epoch: ap.Epoch}, nil)
				}()
			}}, nil
		case proto.MethodToolCall:
			var tc proto.ToolCallParams
			_ = f.Bind(&tc)
			return &peer.Reply{Result: proto.Accepted{Accepted: true}, After: func() {
				results <- proto.ToolResultParams{SessionID: tc.SessionID, ToolCallID: tc.ToolCallID, Content: json.RawMessage(`[{"type":"text","text":"ok"}]`)}
			}}, nil
		}
		return proto.Ack{OK: true}, nil
	}})
	p.Start()
	go func() {
		for {
			select {
			case r := <-results:
				_ = p.Call(context.Background(), proto.MethodToolResult, r, nil)
			case <-p.Done():
				return
			}
		}
	}()
	b.Cleanup(func() { p.Kill(); <-p.Done() })
	return p
}

// BenchmarkToolCallRoundTrip measures Binding.Call through the hub to an
// executor over loopback WebSocket and back. For comparison it first
// measures a bare WebSocket echo round trip on the same machine; the
// difference is what the hub and the executor's JSON-RPC layer add.
func BenchmarkToolCallRoundTrip(b *testing.B) {
	echo := echoRTT(b, 2000)
	h, url, tokens := benchHub(b, time.Hour)
	tok := tokens.add("bae_ext_bench", baton.ExecutorGrant{Scope: baton.ExecutorScopeEnvironment, EnvironmentID: "env_1", CredentialID: "c", ExpiresAt: time.Now().Add(time.Hour)})
	ex := benchExecutor(b, benchDial(b, url, tok))
	var res proto.RegisterResult
	if err := ex.Call(context.Background(), proto.MethodRegister, proto.RegisterParams{Protocol: proto.SubprotocolV11, EnvironmentID: "env_1", Capabilities: tools("echo")}, &res); err != nil {
		b.Fatal(err)
	}
	bind, err := h.Assign(context.Background(), Target{EnvironmentID: "env_1", Tool: "echo"}, Assignment{SessionID: "ses_bench"})
	if err != nil {
		b.Fatal(err)
	}
	input := json.RawMessage(`{"text":"hello"}`)
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if _, err := bind.Call(ctx, "toolu_"+strconv.Itoa(i), "echo", input, 0); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	p50 := percentile(lat, 50)
	b.ReportMetric(float64(p50.Microseconds()), "p50-µs")
	b.ReportMetric(float64(percentile(lat, 99).Microseconds()), "p99-µs")
	b.ReportMetric(float64(echo.Microseconds()), "echo-p50-µs")
	b.ReportMetric(float64((p50 - echo).Microseconds()), "overhead-p50-µs")
}

// echoRTT is the p50 round trip of a message echoed by a bare WebSocket
// server over loopback.
func echoRTT(b *testing.B, n int) time.Duration {
	b.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			typ, m, err := c.Read(context.Background())
			if err != nil {
				return
			}
			if err := c.Write(context.Background(), typ, m); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	c, _, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer c.CloseNow()
	msg := []byte(`{"jsonrpc":"2.0","id":1,"method":"tool.call","params":{"session_id":"ses_bench","tool_call_id":"toolu_1","name":"echo","input":{"text":"hello"}}}`)
	lat := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		if err := c.Write(context.Background(), websocket.MessageText, msg); err != nil {
			b.Fatal(err)
		}
		if _, _, err := c.Read(context.Background()); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	return percentile(lat, 50)
}

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

// BenchmarkIdleConnections holds 1,000 registered executor connections
// and, per iteration, takes one heartbeat from each. It reports the
// memory per connection (both ends live in this process; the bare-socket
// figure is the same clients against a server that only accepts) and the
// CPU one heartbeat costs, from which the load at the default 10s
// interval follows.
func BenchmarkIdleConnections(b *testing.B) {
	const n = 1000
	bare := bareConnMemory(b, n)

	_, url, tokens := benchHub(b, time.Minute)
	tok := tokens.add("bae_ext_idle", baton.ExecutorGrant{Scope: baton.ExecutorScopeEnvironment, EnvironmentID: "env_1", CredentialID: "c", ExpiresAt: time.Now().Add(time.Hour)})
	before := liveBytes()
	conns := make([]*websocket.Conn, n)
	for i := range conns {
		conns[i] = benchDial(b, url, tok)
		roundTrip(b, conns[i], `{"jsonrpc":"2.0","id":1,"method":"executor.register","params":{"protocol":"bma.executor.v1.1","environment_id":"env_1","capabilities":{"tools":[{"name":"grep","input_schema":{"type":"object"}}]}}}`)
	}
	perConn := float64(liveBytes()-before) / n
	b.Cleanup(func() {
		for _, c := range conns {
			_ = c.CloseNow()
		}
	})

	hbMsg := []byte(`{"jsonrpc":"2.0","id":2,"method":"executor.heartbeat","params":{"active_sessions":[]}}`)
	ctx := context.Background()
	cpu0 := cpuTime()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, c := range conns {
			if err := c.Write(ctx, websocket.MessageText, hbMsg); err != nil {
				b.Fatal(err)
			}
		}
		for _, c := range conns {
			if _, _, err := c.Read(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	cpuPerHB := float64(cpuTime()-cpu0) / float64(b.N*n)
	b.ReportMetric(perConn/1024, "KiB/conn")
	b.ReportMetric(bare/1024, "bare-KiB/conn")
	b.ReportMetric(cpuPerHB, "cpu-ns/heartbeat")
	// At the default interval every connection sends one heartbeat per
	// 10s: n/10 heartbeats a second.
	b.ReportMetric(cpuPerHB*n/10/1e9*100, "cpu-%-at-10s")
}

// bareConnMemory is the memory per connection of the same clients against
// a server that accepts and keeps the socket with no goroutine.
func bareConnMemory(b *testing.B, n int) float64 {
	b.Helper()
	keep := make(chan *websocket.Conn, n)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: proto.Subprotocols()})
		if err == nil {
			keep <- c
		}
	}))
	defer srv.Close()
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	before := liveBytes()
	var conns []*websocket.Conn
	for range n {
		conns = append(conns, benchDial(b, url, "x"))
	}
	for range n {
		conns = append(conns, <-keep)
	}
	m := float64(liveBytes()-before) / float64(n)
	for _, c := range conns {
		_ = c.CloseNow()
	}
	return m
}

func roundTrip(b *testing.B, c *websocket.Conn, msg string) {
	b.Helper()
	if err := c.Write(context.Background(), websocket.MessageText, []byte(msg)); err != nil {
		b.Fatal(err)
	}
	_, m, err := c.Read(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	if f, e := proto.Decode(m); e != nil || f.Error != nil {
		b.Fatalf("answer %s", m)
	}
}

// liveBytes is the heap in use plus goroutine stacks after a GC.
func liveBytes() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc + m.StackInuse)
}

// cpuTime is the process's user+system CPU time in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
