package engine

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/baton-engine/baton"
)

// TestUnexpected: JSON values are named as serde_json names them in its
// "invalid type" messages.
func TestUnexpected(t *testing.T) {
	tests := []struct{ raw, want string }{
		{`{"a":1}`, "map"},
		{` [1]`, "sequence"},
		{`null`, "null"},
		{`true`, "boolean `true`"},
		{`false`, "boolean `false`"},
		{`"hi"`, `string "hi"`},
		{`"a\"b\\c\n\t\r\u0000"`, `string "a\"b\\c\n\t\r\0"`},
		{`"é\u0007\u200b'"`, `string "é\u{7}\u{200b}'"`},
		{`5`, "integer `5`"},
		{`-5`, "integer `-5`"},
		{`18446744073709551615`, "integer `18446744073709551615`"},
		{`18446744073709551616`, "floating point `1.8446744073709552e19`"},
		{`-9223372036854775809`, "floating point `-9.223372036854776e18`"},
		{`-0`, "floating point `-0.0`"},
		{`0.0`, "floating point `0.0`"},
		{`1.50`, "floating point `1.5`"},
		{`1e2`, "floating point `100.0`"},
		{`1e15`, "floating point `1000000000000000.0`"},
		{`1e16`, "floating point `1e16`"},
		{`1.25e17`, "floating point `1.25e17`"},
		{`0.001`, "floating point `0.001`"},
		{`0.00001`, "floating point `0.00001`"},
		{`0.000001`, "floating point `1e-6`"},
		{`-1.5e-7`, "floating point `-1.5e-7`"},
		{`123.456`, "floating point `123.456`"},
	}
	for _, tc := range tests {
		if got := unexpected([]byte(tc.raw)); got != tc.want {
			t.Errorf("unexpected(%s) = %s, want %s", tc.raw, got, tc.want)
		}
	}
}

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
