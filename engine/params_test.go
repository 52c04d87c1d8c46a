package engine

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/baton-engine/baton"
)

// TestParseMessage: the forms serde takes, and role defaulting.
func TestParseMessage(t *testing.T) {
	tests := []struct {
		raw, role, content string
	}{
		{`{"content":"hi"}`, "user", `"hi"`},
		{`{"role":"assistant","content":[1],"extra":null}`, "assistant", `[1]`},
		{`{"content":null}`, "user", `null`},
		{`{"role":"x","role":"user","content":1}`, "user", `1`},
		{`["user","hi"]`, "user", `"hi"`},
	}
	for _, tc := range tests {
		m, err := parseMessage(json.RawMessage(tc.raw))
		if err != nil || m.Role != tc.role || string(m.Content) != tc.content {
			t.Errorf("parseMessage(%s) = %+v, %v; want %s %s", tc.raw, m, err, tc.role, tc.content)
		}
	}
}

// FuzzParams: the params decoders never panic, and refuse with -32602 in
// serde's words, never Go's.
func FuzzParams(f *testing.F) {
	for _, s := range []string{
		`{"content":"hi"}`, `{"role":null}`, `"hi"`, `[]`, `["user"]`, `["user","hi",1]`,
		`[{"name":"a","description":null,"input_schema":{"type":"object"},"cache_control":{}}]`,
		`[{"name":5,"description":6}]`, `[["a"]]`, `null`, `1e400`, `[{"name":" "}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !json.Valid(raw) {
			return // params come from a parsed request
		}
		check := func(err error) {
			if err == nil {
				return
			}
			msg := baton.ErrorMessage(err)
			if baton.ErrorCode(err) != baton.ECodeInvalidParams || !strings.HasPrefix(msg, "Invalid params: ") ||
				strings.Contains(msg, "Go ") || strings.Contains(msg, "json:") {
				t.Fatalf("error %v", err)
			}
		}
		m, err := parseMessage(raw)
		check(err)
		if err == nil && !json.Valid(m.Content) {
			t.Fatalf("content %q is not JSON", m.Content)
		}
		tools, err := parseClientTools(raw)
		check(err)
		for _, td := range tools {
			if strings.TrimSpace(td.Name) == "" || !json.Valid(td.InputSchema) {
				t.Fatalf("accepted tool %+v", td)
			}
		}
	})
}

func BenchmarkParseMessage(b *testing.B) {
	raw := json.RawMessage(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01","content":"` + strings.Repeat("x", 2000) + `"}]}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := parseMessage(raw); err != nil {
			b.Fatal(err)
		}
	}
}
