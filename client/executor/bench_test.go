package executor

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/baton-engine/baton/executor/proto"
)

// BenchmarkToolRoundTrip measures one tool call through the executor
// over loopback WebSocket: tool.call, its ack, the handler, tool.result
// and its ack.
func BenchmarkToolRoundTrip(b *testing.B) {
	h := newHarness(b)
	cfg := h.config(b)
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Tools = []Tool{echoTool()}
	_, fc, _ := h.start(b, cfg)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		fc.result(b, "tool.call", callParams(fmt.Sprint("c", i), "echo", map[string]int{"i": i}), nil)
		fc.next(b, "tool.result")
	}
}

func BenchmarkDecodeFrame(b *testing.B) {
	msg := []byte(`{"jsonrpc":"2.0","id":"h-12","method":"tool.call","params":{"session_id":"ses_1","tool_call_id":"call_1","name":"echo","input":{"text":"hello world"}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, e := proto.DecodeLoose(msg); e != nil {
			b.Fatal(e)
		}
	}
}

func BenchmarkEmit(b *testing.B) {
	e, err := New(Config{BaseURL: "http://127.0.0.1:1", Credential: testCred, Scope: Machine("mch_1"),
		Capabilities: Capabilities{Agent: &AgentCapability{}}, Agent: &scriptAgent{}})
	if err != nil {
		b.Fatal(err)
	}
	s := &agentSession{id: "ses_1", custom: map[string]chan CustomToolResult{}}
	t := &Turn{SessionID: "ses_1", ID: "turn_1", e: e, s: s}
	ev := TextMessageEvent("hello")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := t.Emit(ev); err != nil {
			b.Fatal(err)
		}
	}
}
