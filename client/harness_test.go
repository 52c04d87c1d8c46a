package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// failsafe bounds a wait that only a broken feature would make long; it
// is not used to order events.
const failsafe = 10 * time.Second

// sentContent returns the message content of the i-th sendMessage call.
func sentContent(t *testing.T, f *fake, i int) string {
	t.Helper()
	calls := f.callsOf("session.sendMessage")
	if i >= len(calls) {
		t.Fatalf("only %d sendMessage calls, want call %d", len(calls), i)
	}
	var p struct {
		Message struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"message"`
	}
	if err := json.Unmarshal(calls[i].Params, &p); err != nil {
		t.Fatal(err)
	}
	if p.Message.Role != "user" {
		t.Errorf("call %d role = %q, want user", i, p.Message.Role)
	}
	return string(p.Message.Content)
}

// eventIDs returns the ids of evs.
func eventIDs(evs []Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.ID)
	}
	return out
}

// TestSendToolLoop drives a turn that pauses twice: first on a client tool
// next to an MCP call, then on two client tools that must run concurrently
// and answer in tool_use order.
func TestSendToolLoop(t *testing.T) {
	f := newFake(t)
	var leg atomic.Int32
	f.on("session.sendMessage", func(n *ndjson, c rpcCall) {
		switch leg.Add(1) {
		case 1:
			n.event("evt_2", "provider.request", `{"attempt":0}`)
			n.event("evt_3", "server.message.send", `{}`)
			n.result(resultJSON(`[{"type":"text","text":"let me look"},`+
				`{"type":"tool_use","id":"tu_1","name":"get_time","input":{},"dispatch":"client"},`+
				`{"type":"tool_use","id":"tu_2","name":"list_dir","input":{"path":"/"},"dispatch":"mcp"}]`,
				[3]string{"evt_1", "client.message.send", `{"role":"user","content":"hi"}`},
				[3]string{"evt_2", "provider.request", `{"attempt":0}`},
				[3]string{"evt_3", "server.message.send", `{}`}))
		case 2:
			n.event("evt_5", "server.message.send", `{}`)
			n.result(resultJSON(`[{"type":"tool_use","id":"tu_3","name":"roll_dice","input":{"sides":6},"dispatch":"client"},`+
				`{"type":"tool_use","id":"tu_4","name":"get_time","input":{},"dispatch":"client"}]`,
				[3]string{"evt_4", "client.message.send", `{}`},
				[3]string{"evt_5", "server.message.send", `{}`}))
		default:
			n.event("evt_7", "server.message.send", `{}`)
			n.result(resultJSON(`[{"type":"text","text":"done"}]`,
				[3]string{"evt_6", "client.message.send", `{}`},
				[3]string{"evt_7", "server.message.send", `{}`}))
		}
	})

	h := f.harness()
	var timeCalls atomic.Int32
	secondTimeDone := make(chan struct{})
	h.RegisterTool(ToolDef{Name: "get_time", Description: "time"}, func(ctx context.Context, in json.RawMessage) (any, error) {
		n := timeCalls.Add(1)
		if n == 2 {
			defer close(secondTimeDone)
		}
		return fmt.Sprintf("12:0%d", n), nil
	})
	h.RegisterTool(ToolDef{Name: "roll_dice"}, func(ctx context.Context, in json.RawMessage) (any, error) {
		// Finishes only after get_time of the same pause: it must run
		// concurrently, and its result must still come first.
		select {
		case <-secondTimeDone:
		case <-time.After(failsafe):
			return nil, errors.New("get_time did not run concurrently")
		}
		var p struct{ Sides int }
		json.Unmarshal(in, &p)
		return map[string]int{"value": p.Sides}, nil
	})
	var mu sync.Mutex
	var log []string
	h.OnEvent(func(ev Event) { mu.Lock(); log = append(log, "event "+ev.ID); mu.Unlock() })
	h.OnMessage(func(m Message) { mu.Lock(); log = append(log, "message "+m.Text()); mu.Unlock() })
	h.OnToolCall(func(c ToolCall) { mu.Lock(); log = append(log, "call "+c.ID+" "+c.Name); mu.Unlock() })
	h.OnToolResult(func(c ToolCall, r ToolResult) {
		mu.Lock()
		log = append(log, "result "+c.ID+" "+r.Text())
		mu.Unlock()
	})
	h.OnError(func(err error) { t.Errorf("OnError(%v)", err) })

	s := f.connect(h)
	reply, err := s.Send(context.Background(), "hi")
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if got := reply.Message.Text(); got != "done" {
		t.Errorf("reply text = %q, want done", got)
	}
	if diff := cmp.Diff([]string{"evt_1", "evt_2", "evt_3", "evt_4", "evt_5", "evt_6", "evt_7"}, eventIDs(reply.Events)); diff != "" {
		t.Errorf("reply events (-want +got):\n%s", diff)
	}
	wantLog := []string{
		"event evt_2", "event evt_3", "message let me look",
		"call tu_1 get_time", "result tu_1 12:01",
		"event evt_5", "message ",
		"call tu_3 roll_dice", "call tu_4 get_time",
		"result tu_3 {\"value\":6}", "result tu_4 12:02",
		"event evt_7", "message done",
	}
	if diff := cmp.Diff(wantLog, log); diff != "" {
		t.Errorf("hook order (-want +got):\n%s", diff)
	}
	wantSent := []string{
		`"hi"`,
		`[{"type":"tool_result","tool_use_id":"tu_1","content":"12:01"}]`,
		`[{"type":"tool_result","tool_use_id":"tu_3","content":"{\"value\":6}"},{"type":"tool_result","tool_use_id":"tu_4","content":"12:02"}]`,
	}
	for i, want := range wantSent {
		if got := sentContent(t, f, i); got != want {
			t.Errorf("sendMessage %d content = %s, want %s", i, got, want)
		}
	}
	if n := len(f.callsOf("session.sendMessage")); n != 3 {
		t.Errorf("%d sendMessage calls, want 3", n)
	}
}

// TestSendEventsLive proves notifications reach OnEvent before the
// terminal frame: the fake holds the result back until the hook has seen
// the first event.
func TestSendEventsLive(t *testing.T) {
	f := newFake(t)
	seen := make(chan struct{})
	f.on("session.sendMessage", func(n *ndjson, c rpcCall) {
		n.event("evt_2", "provider.request", `{}`)
		select {
		case <-seen:
			n.result(resultJSON(`"ok"`))
		case <-time.After(failsafe):
			n.error(-32000, "event was not delivered live")
		}
	})
	h := f.harness()
	var once sync.Once
	h.OnEvent(func(Event) { once.Do(func() { close(seen) }) })
	reply, err := f.connect(h).Send(context.Background(), "hi")
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if got := reply.Message.Text(); got != "ok" {
		t.Errorf("text = %q, want ok", got)
	}
}

// TestSendDispatchAbsent covers a server predating dispatch: a block is
// ours iff its name is registered.
func TestSendDispatchAbsent(t *testing.T) {
	f := newFake(t)
	var leg atomic.Int32
	f.on("session.sendMessage", func(n *ndjson, c rpcCall) {
		if leg.Add(1) == 1 {
			n.result(resultJSON(`[{"type":"tool_use","id":"tu_1","name":"get_time","input":{}},` +
				`{"type":"tool_use","id":"tu_2","name":"not_mine","input":{},"dispatch":null}]`))
			return
		}
		n.result(resultJSON(`[{"type":"text","text":"fine"}]`))
	})
	h := f.harness()
	h.RegisterTool(ToolDef{Name: "get_time"}, func(context.Context, json.RawMessage) (any, error) { return "noon", nil })
	reply, err := f.connect(h).Send(context.Background(), "hi")
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if reply.Message.Text() != "fine" {
		t.Errorf("text = %q", reply.Message.Text())
	}
	if got, want := sentContent(t, f, 1), `[{"type":"tool_result","tool_use_id":"tu_1","content":"noon"}]`; got != want {
		t.Errorf("resume content = %s, want %s", got, want)
	}
}

// TestSendIgnoresServerDispatched: blocks tagged for another dispatcher are
// informational even when their name is registered locally.
func TestSendIgnoresServerDispatched(t *testing.T) {
	f := newFake(t)
	content := `[{"type":"tool_use","id":"tu_1","name":"get_time","input":{},"dispatch":"mcp"},` +
		`{"type":"tool_use","id":"tu_2","name":"sh","input":{},"dispatch":"sandbox"},` +
		`{"type":"tool_use","id":"tu_3","name":"launch_subagent","input":{},"dispatch":"subagent"}]`
	f.on("session.sendMessage", func(n *ndjson, c rpcCall) { n.result(resultJSON(content)) })
	h := f.harness()
	h.RegisterTool(ToolDef{Name: "get_time"}, func(context.Context, json.RawMessage) (any, error) {
		t.Error("handler ran for an mcp-dispatched block")
		return "", nil
	})
	reply, err := f.connect(h).Send(context.Background(), "hi")
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if n := len(f.callsOf("session.sendMessage")); n != 1 {
		t.Errorf("%d sendMessage calls, want 1", n)
	}
	want := []ToolCall{
		{ID: "tu_1", Name: "get_time", Input: json.RawMessage(`{}`), Dispatch: "mcp"},
		{ID: "tu_2", Name: "sh", Input: json.RawMessage(`{}`), Dispatch: "sandbox"},
		{ID: "tu_3", Name: "launch_subagent", Input: json.RawMessage(`{}`), Dispatch: "subagent"},
	}
	if diff := cmp.Diff(want, reply.Message.ToolCalls()); diff != "" {
		t.Errorf("reply tool calls (-want +got):\n%s", diff)
	}
}

// TestSendToolFailures: handler errors, panics and unregistered client
// tools become is_error results; the loop goes on.
func TestSendToolFailures(t *testing.T) {
	f := newFake(t)
	var leg atomic.Int32
	f.on("session.sendMessage", func(n *ndjson, c rpcCall) {
		if leg.Add(1) == 1 {
			n.result(resultJSON(`[{"type":"tool_use","id":"tu_1","name":"fails","input":{},"dispatch":"client"},` +
				`{"type":"tool_use","id":"tu_2","name":"panics","input":{},"dispatch":"client"},` +
				`{"type":"tool_use","id":"tu_3","name":"missing","input":{},"dispatch":"client"},` +
				`{"type":"tool_use","id":"tu_4","name":"blocks","dispatch":"client"}]`))
			return
		}
		n.result(resultJSON(`"recovered"`))
	})
	h := f.harness()
	h.RegisterTool(ToolDef{Name: "fails"}, func(context.Context, json.RawMessage) (any, error) {
		return nil, errors.New("disk on fire")
	})
	h.RegisterTool(ToolDef{Name: "panics"}, func(context.Context, json.RawMessage) (any, error) { panic("boom") })
	h.RegisterTool(ToolDef{Name: "blocks"}, func(_ context.Context, in json.RawMessage) (any, error) {
		return []Block{{Type: "text", Text: "input " + string(in)}}, nil
	})
	var mu sync.Mutex
	var toolErrs []string
	h.OnError(func(err error) {
		var te *ToolError
		if !errors.As(err, &te) {
			t.Errorf("OnError(%v): not a *ToolError", err)
			return
		}
		mu.Lock()
		toolErrs = append(toolErrs, te.Call.ID)
		mu.Unlock()
	})
	reply, err := f.connect(h).Send(context.Background(), "hi")
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if reply.Message.Text() != "recovered" {
		t.Errorf("text = %q", reply.Message.Text())
	}
	var got []Block
	if err := json.Unmarshal([]byte(sentContent(t, f, 1)), &got); err != nil {
		t.Fatal(err)
	}
	want := []Block{
		{Type: "tool_result", ToolUseID: "tu_1", Content: json.RawMessage(`"disk on fire"`), IsError: true},
		{Type: "tool_result", ToolUseID: "tu_2", Content: json.RawMessage(`"handler panicked: boom"`), IsError: true},
		{Type: "tool_result", ToolUseID: "tu_3", Content: json.RawMessage(`"no handler registered for tool \"missing\""`), IsError: true},
		{Type: "tool_result", ToolUseID: "tu_4", Content: json.RawMessage(`[{"type":"text","text":"input {}"}]`)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tool results (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"tu_1", "tu_2", "tu_3"}, toolErrs); diff != "" {
		t.Errorf("OnError tool calls (-want +got):\n%s", diff)
	}
}

func TestSendProvidersFailed(t *testing.T) {
	f := newFake(t)
	f.on("session.sendMessage", func(n *ndjson, c rpcCall) {
		n.event("evt_2", "provider.response", `{"ok":false}`)
		n.result(resultJSON(`[{"type":"text","text":"The provider is currently unavailable."}]`,
			[3]string{"evt_1", "client.message.send", `{}`},
			[3]string{"evt_2", "provider.response", `{"ok":false}`},
			[3]string{"evt_3", "session.error", `{"reason":"all_providers_failed","attempts":1}`}))
	})
	h := f.harness()
	var hooked error
	h.OnError(func(err error) { hooked = err })
	_, err := f.connect(h).Send(context.Background(), "hi")
	var pf *ProvidersFailedError
	if !errors.As(err, &pf) {
		t.Fatalf("Send error = %v, want *ProvidersFailedError", err)
	}
	if pf.Message.Text() != "The provider is currently unavailable." {
		t.Errorf("message = %q", pf.Message.Text())
	}
	if diff := cmp.Diff([]string{"evt_1", "evt_2", "evt_3"}, eventIDs(pf.Events)); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if hooked != err {
		t.Errorf("OnError got %v, want the Send error", hooked)
	}
}

// TestSendOtherFailureNotProvidersFailed: loop_limit ends the turn with the
// same text but is not ProvidersFailedError (BAE's client API).
func TestSendOtherFailureNotProvidersFailed(t *testing.T) {
	f := newFake(t)
	f.on("session.sendMessage", func(n *ndjson, c rpcCall) {
		n.result(resultJSON(`[{"type":"text","text":"The provider is currently unavailable."}]`,
			[3]string{"evt_3", "session.error", `{"reason":"loop_limit","max_iterations":8}`}))
	})
	reply, err := f.connect(f.harness()).Send(context.Background(), "hi")
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if reply.Events[0].Reason() != "loop_limit" {
		t.Errorf("reason = %q", reply.Events[0].Reason())
	}
}

func TestSendRPCError(t *testing.T) {
	f := newFake(t)
	f.on("session.sendMessage", func(n *ndjson, c rpcCall) {
		n.error(-32001, "call session.registerDriver before session.sendMessage")
	})
	_, err := f.connect(f.harness()).Send(context.Background(), "hi")
	var re *RPCError
	if !errors.As(err, &re) {
		t.Fatalf("Send error = %v, want *RPCError", err)
	}
	if re.Code != -32001 || re.Message != "call session.registerDriver before session.sendMessage" {
		t.Errorf("RPCError = %+v", re)
	}
}

// TestSendNullIDError: a parse error frame has id null; it still ends the
// call as an RPCError.
func TestSendNullIDError(t *testing.T) {
	f := newFake(t)
	f.on("session.sendMessage", func(n *ndjson, c rpcCall) {
		n.raw(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`)
		n.result(`{"never":"read"}`)
	})
	_, err := f.connect(f.harness()).Send(context.Background(), "hi")
	var re *RPCError
	if !errors.As(err, &re) || re.Code != -32700 {
		t.Fatalf("Send error = %v, want RPCError -32700", err)
	}
}

// TestSendStream: deltas are requested, reach fn in order with events, and
// stay out of OnEvent.
func TestSendStream(t *testing.T) {
	f := newFake(t)
	f.on("session.sendMessage", func(n *ndjson, c rpcCall) {
		n.event("evt_2", "provider.request", `{}`)
		n.delta("Hel")
		n.delta("lo")
		n.event("evt_3", "server.message.send", `{}`)
		n.result(resultJSON(`[{"type":"text","text":"Hello"}]`))
	})
	h := f.harness()
	var hooked []string
	h.OnEvent(func(ev Event) { hooked = append(hooked, ev.Type) })
	var streamed []string
	_, err := f.connect(h).SendStream(context.Background(), "hi", func(ev Event) {
		if ev.Type == DeltaType {
			streamed = append(streamed, "delta "+ev.Delta)
			return
		}
		streamed = append(streamed, ev.ID)
	})
	if err != nil {
		t.Fatalf("SendStream: %v", err)
	}
	if diff := cmp.Diff([]string{"evt_2", "delta Hel", "delta lo", "evt_3"}, streamed); diff != "" {
		t.Errorf("streamed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"provider.request", "server.message.send"}, hooked); diff != "" {
		t.Errorf("OnEvent (-want +got):\n%s", diff)
	}
	var p struct {
		StreamDeltas bool `json:"stream_deltas"`
	}
	json.Unmarshal(f.callsOf("session.sendMessage")[0].Params, &p)
	if !p.StreamDeltas {
		t.Error("stream_deltas not requested")
	}
}

// TestSendContent covers the content shapes Send accepts and the dispatch
// stripping of echoed tool_use blocks.
func TestSendContent(t *testing.T) {
	tests := []struct {
		name    string
		content any
		want    string
	}{
		{"string", "hello", `"hello"`},
		{"raw", json.RawMessage(`[{"type":"text","text":"x"}]`), `[{"type":"text","text":"x"}]`},
		{"blocks", []Block{{Type: "text", Text: "y"}}, `[{"type":"text","text":"y"}]`},
		{"echoed tool_use", json.RawMessage(`[{"type":"tool_use","id":"tu_1","name":"n","input":{"a":1},"dispatch":"client"},{"type":"text","text":"dispatch"}]`),
			`[{"id":"tu_1","input":{"a":1},"name":"n","type":"tool_use"},{"type":"text","text":"dispatch"}]`},
		{"tool results", []ToolResult{{ToolUseID: "tu_9", Content: json.RawMessage(`"r"`)}}, `[{"type":"tool_result","tool_use_id":"tu_9","content":"r"}]`},
		{"message", Message{Content: json.RawMessage(`"m"`)}, `"m"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(t)
			f.on("session.sendMessage", func(n *ndjson, c rpcCall) { n.result(resultJSON(`"ok"`)) })
			if _, err := f.connect(f.harness()).Send(context.Background(), tt.content); err != nil {
				t.Fatalf("Send: %v", err)
			}
			if got := sentContent(t, f, 0); got != tt.want {
				t.Errorf("content = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestResultContent(t *testing.T) {
	tests := []struct {
		in   any
		want string
	}{
		{nil, `""`},
		{"plain", `"plain"`},
		{42, `"42"`},
		{map[string]any{"a": []int{1}}, `"{\"a\":[1]}"`},
		{json.RawMessage(`{ "b" : 2 }`), `"{\"b\":2}"`},
		{[]Block{{Type: "text", Text: "t"}}, `[{"type":"text","text":"t"}]`},
	}
	for _, tt := range tests {
		got, err := resultContent(tt.in)
		if err != nil || string(got) != tt.want {
			t.Errorf("resultContent(%#v) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
	if _, err := resultContent(func() {}); err == nil {
		t.Error("resultContent(func) succeeded")
	}
}

// TestSendCancelDuringTools: cancelling while handlers run waits for them
// (they see ctx done), sends nothing more and returns the context's error.
func TestSendCancelDuringTools(t *testing.T) {
	f := newFake(t)
	f.on("session.sendMessage", func(n *ndjson, c rpcCall) {
		n.result(resultJSON(`[{"type":"tool_use","id":"tu_1","name":"slow","input":{},"dispatch":"client"}]`))
	})
	h := f.harness()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var sawCancel atomic.Bool
	h.RegisterTool(ToolDef{Name: "slow"}, func(ctx context.Context, _ json.RawMessage) (any, error) {
		<-ctx.Done()
		sawCancel.Store(true)
		return nil, ctx.Err()
	})
	h.OnToolCall(func(ToolCall) { cancel() })
	_, err := f.connect(h).Send(ctx, "hi")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Send = %v, want context.Canceled", err)
	}
	if !sawCancel.Load() {
		t.Error("Send returned before the handler did")
	}
	if n := len(f.callsOf("session.sendMessage")); n != 1 {
		t.Errorf("%d sendMessage calls, want 1", n)
	}
}
