package anthropic

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestAppendUnquoted(t *testing.T) {
	tests := []struct{ in, want string }{
		{`""`, ""},
		{`"plain"`, "plain"},
		{`"a\"b\\c\/d\b\f\n\r\t"`, "a\"b\\c/d\b\f\n\r\t"},
		{`"\u00e9\u2028"`, "é\u2028"},
		{`"\ud83d\ude00!"`, "😀!"},
		{`"\ud83d!"`, "\ufffd!"},
		{`"\ud83d\u0041"`, "\ufffdA"},
		{`"\ude00"`, "\ufffd"},
		{"\"bad\xffbyte\"", "bad\ufffdbyte"},
	}
	for _, tt := range tests {
		got, ok := appendUnquoted(nil, []byte(tt.in))
		if !ok || string(got) != tt.want {
			t.Errorf("appendUnquoted(%s) = %q, %v; want %q", tt.in, got, ok, tt.want)
		}
	}
	for _, bad := range []string{``, `"`, `x`, `"\x"`, `"\u12"`, `"\u12g4"`, `"a\"`} {
		if _, ok := appendUnquoted(nil, []byte(bad)); ok {
			t.Errorf("appendUnquoted(%s) accepted", bad)
		}
	}
}

func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "plain", "q\"b\\s", "ctl\x00\x01\x1f\n\r\t", "<&>", "é😀\u2028", "bad\xff\xfeutf8"} {
		enc := appendString(nil, s)
		var back string
		if err := json.Unmarshal(enc, &back); err != nil {
			t.Fatalf("appendString(%q) = %s: %v", s, enc, err)
		}
		var want string
		std, _ := json.Marshal(s)
		json.Unmarshal(std, &want)
		if back != want {
			t.Errorf("appendString(%q) round-trips to %q, want %q", s, back, want)
		}
	}
}

func TestPatch(t *testing.T) {
	obj := []byte(` { "a" : 1 , "b":{"x":"}"}, "c":[1,"]"], "d":"\"q" } `)
	got, err := appendPatched(nil, obj, []member{{"c", []byte(`null`)}, {"e", []byte(`true`)}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"a":1,"b":{"x":"}"},"c":null,"d":"\"q","e":true}`; string(got) != want {
		t.Errorf("appendPatched = %s, want %s", got, want)
	}
	if got, _ := appendPatched(nil, []byte(`{}`), []member{{"k", []byte(`1`)}}); string(got) != `{"k":1}` {
		t.Errorf("patch of empty object = %s", got)
	}
	for _, bad := range []string{``, `[]`, `{"a"}`, `{"a":1,}`, `{"a":1 "b":2}`, `{"a":"x`, `{"a":{`} {
		if _, err := appendPatched(nil, []byte(bad), nil); err == nil {
			t.Errorf("appendPatched(%s) accepted", bad)
		}
	}
	if v := field([]byte(`{"a":1,"usage":{"n":2}}`), "usage"); string(v) != `{"n":2}` {
		t.Errorf("field = %s", v)
	}
}

// FuzzUnquote checks the fast string decoder against encoding/json.
func FuzzUnquote(f *testing.F) {
	for _, s := range []string{`"a"`, `"\ud83d\ude00"`, `"\ud83d"`, "\"\xff\"", `"\n\u0000"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var want string
		if err := json.Unmarshal([]byte(s), &want); err != nil {
			return
		}
		got, ok := appendUnquoted(nil, bytes.TrimSpace([]byte(s)))
		if !ok || string(got) != want {
			t.Fatalf("appendUnquoted(%q) = %q, %v; encoding/json says %q", s, got, ok, want)
		}
	})
}
