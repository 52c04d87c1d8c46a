package client

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
)

// historyFixture returns the messages array of a loadgen conversation
// (user "go", tool_use, tool_result, text reply, repeated) of at least
// size bytes, ending with the user's "go".
func historyFixture(size int) string {
	var b strings.Builder
	b.WriteString(`[`)
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, `{"role":"user","content":"go"},{"role":"assistant","content":[{"dispatch":"client","id":"toolu_loadgen%011d","input":{},"name":"get_time","type":"tool_use"}]},`+
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_loadgen%011d","content":"ok"}]},{"role":"assistant","content":[{"text":"done","type":"text"}]},`, i, i)
	}
	b.WriteString(`{"role":"user","content":"go"}]`)
	return b.String()
}

// sendStreamFixture is the response of a sendMessage that pauses on a
// client tool call, as Baton writes it: session.event notifications for
// provider.request (carrying a history of about histBytes), provider.response,
// tool.call and server.message.send, then the terminal result whose events
// are client.message.send and those four again.
func sendStreamFixture(histBytes int) []byte {
	const ses, key = "ses_0195e1c2a3b47c8d9e0f1a2b3c4d5e6f", "key_55dad586875bbbec52bd7f984a92edea"
	tooluse := `{"dispatch":"client","id":"toolu_loadgen00000009999","input":{},"name":"get_time","type":"tool_use"}`
	payloads := [][2]string{
		{"client.message.send", `{"role":"user","content":"go"}`},
		{"provider.request", `{"attempt":0,"base_url":"http://127.0.0.1:18189","kind":"primary","max_tokens":4096,"messages":` + historyFixture(histBytes) +
			`,"model":"loadgen-mock","provider":"anthropic","tools":[{"name":"get_time","description":"loadgen no-op tool","input_schema":{"type":"object","properties":{}}}]}`},
		{"provider.response", `{"attempt":0,"body":{"content":[{"id":"toolu_loadgen00000009999","input":{},"name":"get_time","type":"tool_use"}],"id":"msg_loadgen00000000009999","model":"loadgen-mock","role":"assistant","stop_reason":"tool_use","stop_sequence":null,"type":"message","usage":{"input_tokens":81,"output_tokens":2}},` +
			`"content":[{"id":"toolu_loadgen00000009999","input":{},"name":"get_time","type":"tool_use"}],"kind":"primary","ok":true,"provider":"anthropic","status":200,"usage":{"input_tokens":81,"output_tokens":2}}`},
		{"tool.call", `{"dispatch":"client","id":"toolu_loadgen00000009999","input":{},"name":"get_time"}`},
		{"server.message.send", `{"role":"assistant","content":[` + tooluse + `]}`},
	}
	views := make([]string, len(payloads))
	for i, p := range payloads {
		views[i] = fmt.Sprintf(`{"id":"evt_01a229d851ce255b2f06d778fef5cb%02d","session_id":%q,"client_key_id":%q,"event_type":%q,"payload":%s,"created_at":"2026-11-30T00:26:12.3%02dZ"}`,
			i, ses, key, p[0], p[1], i)
	}
	var b bytes.Buffer
	for _, v := range views[1:] {
		b.WriteString(`{"jsonrpc":"2.0","method":"session.event","params":` + v + "}\n")
	}
	b.WriteString(`{"jsonrpc":"2.0","id":7,"result":{"message":{"role":"assistant","content":[` + tooluse + `]},"events":[` + strings.Join(views, ",") + "]}}\n")
	return b.Bytes()
}

// BenchmarkSendMessageStream reads a sendMessage response as
// Session.sendMessage does: every notification decoded into an Event,
// then the terminal result decoded into the message and its events. With
// a hook the notified events are handed out (their payloads kept); without
// one, as in loadgen, they are only checked.
func BenchmarkSendMessageStream(b *testing.B) {
	data := sendStreamFixture(4 << 10)
	c := &conn{max: DefaultMaxFrameSize}
	for _, hook := range []bool{true, false} {
		b.Run(map[bool]string{true: "hook", false: "nohook"}[hook], func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				st := newStream(context.Background(), c, "session.sendMessage", io.NopCloser(bytes.NewReader(data)))
				notes := 0
				var note func(Event)
				if hook {
					note = func(Event) { notes++ }
				}
				res, err := st.send(note)
				if err != nil || hook && notes != 4 || len(res.Events) != 5 {
					b.Fatalf("notes %d, result %+v, err %v", notes, res, err)
				}
			}
		})
	}
}
