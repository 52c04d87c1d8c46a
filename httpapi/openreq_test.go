package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/httpx"
	"github.com/google/go-cmp/cmp"
)

// compactRaw compares raw JSON by its compacted form.
var compactRaw = cmp.Transformer("compact", func(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return "invalid: " + string(raw)
	}
	return b.String()
})

func FuzzDecodeOpenRequest(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `[]`, `null`, `{"tools":null}`, `{"tools":[{}]}`, `{"tools":[{"name":"a"}]}`,
		`{"client_version":"v","tools":[{"name":"a","description":"d","input_schema":{"type":"object","properties":{}}}]}`,
		`{"sandbox_tools":[{"name":"sh","input_schema":[1,2]}]}`,
		`{"subagent_tools":[{"name":"l","image":"i","subagents":[{"harness":"h","command_template":"c {prompt}","prompt_via":"arg","timeout_secs":5}]}]}`,
		`{"subagent_tools":[{"name":"l","image":"i","subagents":[{"harness":"h","command_template":"c","timeout_secs":-1}]}]}`,
		`{"tools":[{"name":"\u00e9\ud800"}],"Tools":5}`, `{"tools":[` + strings.Repeat(`{"name":"x"},`, 5) + `{"name":"y"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeOpenRequest(body)
		if err != nil {
			var rej *httpx.Rejection
			if !errors.As(err, &rej) || (rej.Status != 400 && rej.Status != 422) {
				t.Fatalf("error %v is not a 400/422 rejection", err)
			}
			if rej.Status == 400 && json.Valid(body) {
				t.Fatalf("valid JSON %q rejected as a syntax error", body)
			}
			return
		}
		if req.Tools == nil || req.SandboxTools == nil || req.SubagentTools == nil {
			t.Fatalf("nil list in %+v", req)
		}
		for _, tool := range append(append([]baton.ToolDef{}, req.Tools...), req.SandboxTools...) {
			if !json.Valid(tool.InputSchema) {
				t.Fatalf("invalid input_schema %q", tool.InputSchema)
			}
		}
		for _, st := range req.SubagentTools {
			for _, sa := range st.Subagents {
				if sa.PromptVia == "" {
					t.Fatal("prompt_via left empty")
				}
			}
		}
		// What was decoded survives a round trip through its own JSON.
		again, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		req2, err := decodeOpenRequest(again)
		if err != nil {
			t.Fatalf("re-decoding %s: %v", again, err)
		}
		if diff := cmp.Diff(req, req2, compactRaw); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
	})
}

// benchBody is a typical SDK open body: ten client tools with schemas.
func benchBody() []byte {
	var b strings.Builder
	b.WriteString(`{"client_version":"bae-ts/0.4.0","tools":[`)
	for i := range 10 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"name":"tool_` + string(rune('a'+i)) + `","description":"Reads a file from the workspace and returns its content.",` +
			`"input_schema":{"type":"object","properties":{"path":{"type":"string"},"limit":{"type":"integer"}},"required":["path"]}}`)
	}
	b.WriteString(`],"sandbox_tools":[],"subagent_tools":[]}`)
	return []byte(b.String())
}

func BenchmarkDecodeOpenRequest(b *testing.B) {
	body := benchBody()
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := decodeOpenRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}
