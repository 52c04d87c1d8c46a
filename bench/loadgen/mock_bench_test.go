package main

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// mockRequestFixture is a Messages API request as Baton's Anthropic client
// encodes it: a loadgen history of at least histBytes, then either the
// user's "go" (answered with a tool call) or the tool results (answered
// with text).
func mockRequestFixture(histBytes int, results bool) []byte {
	var b strings.Builder
	b.WriteString(`{"model":"loadgen-mock","max_tokens":4096,"messages":[`)
	for i := 0; b.Len() < histBytes; i++ {
		fmt.Fprintf(&b, `{"role":"user","content":"go"},{"role":"assistant","content":[{"id":"toolu_loadgen%011d","input":{},"name":"get_time","type":"tool_use"}]},`+
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_loadgen%011d","content":"ok"}]},{"role":"assistant","content":[{"text":"done","type":"text"}]},`, i, i)
	}
	b.WriteString(`{"role":"user","content":"go"}`)
	if results {
		b.WriteString(`,{"role":"assistant","content":[{"id":"toolu_loadgen00000009999","input":{},"name":"get_time","type":"tool_use"}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_loadgen00000009999","content":"ok"}]}`)
	}
	b.WriteString(`],"tools":[{"name":"get_time","description":"loadgen no-op tool","input_schema":{"type":"object","properties":{}}}],"stream":true}`)
	return []byte(b.String())
}

// discardWriter is a ResponseWriter that counts what it is given.
type discardWriter struct {
	h      http.Header
	status int
	writes int
	n      int
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) WriteHeader(s int)   { w.status = s }
func (w *discardWriter) Write(p []byte) (int, error) {
	w.writes++
	w.n += len(p)
	return len(p), nil
}

// BenchmarkMockMessages runs the mock's handler on the two requests of a
// round trip with a 4 KB history.
func BenchmarkMockMessages(b *testing.B) {
	m := newMock("127.0.0.1:0", 1, nil)
	bodies := [][]byte{mockRequestFixture(4<<10, false), mockRequestFixture(4<<10, true)}
	b.ReportAllocs()
	b.SetBytes(int64(len(bodies[0]) + len(bodies[1])))
	w := &discardWriter{h: http.Header{}}
	for b.Loop() {
		for _, body := range bodies {
			r, err := http.NewRequest(http.MethodPost, "/v1/messages", bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			clear(w.h)
			w.n = 0
			m.messages(w, r)
			if w.n == 0 {
				b.Fatal("no reply")
			}
		}
	}
}
