package rawjson

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/baton-engine/baton"
	"github.com/google/go-cmp/cmp"
)

func TestValid(t *testing.T) {
	good := []string{
		`0`, `-0`, `1.5e+10`, `-12.25E-3`, `""`, `"a\"\\\/\b\f\n\r\t\u00e9"`, ` true `, "\tfalse\n", `null`,
		`[]`, `{}`, `[1,"a",{"b":[null]}]`, ` { "a" : 1 , "b" : [ ] } `, `{"a":{"a":{"a":{}}}}`, `[0.0,1e5,-1E-0]`,
	}
	bad := []string{
		``, ` `, `01`, `-`, `1.`, `.5`, `1e`, `1e+`, `+1`, `0x1`, `tru`, `truex`, `nulll`, `"abc`, "\"a\x01\"", `"\x"`,
		`"\u12"`, `"\u12g4"`, `[1,]`, `[,1]`, `{"a"}`, `{"a":1,}`, `{"a":1 "b":2}`, `{a:1}`, `[1 2]`, `[}`, `{]`, `1 2`, `[`, `{"a":`,
	}
	for _, s := range good {
		if !Valid([]byte(s)) || !json.Valid([]byte(s)) {
			t.Errorf("Valid(%q) = %v, json.Valid %v; want both true", s, Valid([]byte(s)), json.Valid([]byte(s)))
		}
	}
	for _, s := range bad {
		if Valid([]byte(s)) || json.Valid([]byte(s)) {
			t.Errorf("Valid(%q) = %v, json.Valid %v; want both false", s, Valid([]byte(s)), json.Valid([]byte(s)))
		}
	}
	// Strict UTF-8: valid multi-byte text and escapes (a lone surrogate
	// escape included, as encoding/json takes it) pass; invalid UTF-8 in a
	// string, which encoding/json lets through, does not.
	utf8Good := []string{
		`"héllo 日本 🙂"`, `{"ключ":"значение"}`, `"\ud800"`, `"\udfff\ud800"`, "\"\xef\xbf\xbd\"", "\"\xf4\x8f\xbf\xbf\"",
	}
	utf8Bad := []string{
		"\"hi \xff\xfe\"", "\"\x80\"", "\"\xc3\"", "\"\xc3(\"", "\"\xe2\x82\"", "\"\xc0\xaf\"", "\"\xed\xa0\x80\"",
		"\"\xf4\x90\x80\x80\"", "\"\xf0\x9f\x99\"", "{\"k\xff\":1}", "[\"ok\",\"\xfe\"]", "{\"a\":{\"b\":[\"\xe9t\xe9\"]}}",
	}
	for _, s := range utf8Good {
		if !Valid([]byte(s)) {
			t.Errorf("Valid(%q) = false, want true", s)
		}
	}
	for _, s := range utf8Bad {
		if Valid([]byte(s)) || !json.Valid([]byte(s)) {
			t.Errorf("Valid(%q) = %v, json.Valid %v; want false and true", s, Valid([]byte(s)), json.Valid([]byte(s)))
		}
	}
}

// TestValidDepth: nesting is limited exactly where encoding/json limits it.
func TestValidDepth(t *testing.T) {
	for _, n := range []int{maxDepth - 1, maxDepth, maxDepth + 1} {
		for _, pair := range []string{"[]", `{}`} {
			var b []byte
			if pair == "[]" {
				b = []byte(strings.Repeat("[", n) + strings.Repeat("]", n))
			} else {
				b = []byte(strings.Repeat(`{"a":`, n-1) + "{}" + strings.Repeat("}", n-1))
			}
			if got, want := Valid(b), json.Valid(b); got != want || got != (n <= maxDepth) {
				t.Errorf("depth %d %s: Valid %v, json.Valid %v", n, pair, got, want)
			}
		}
	}
}

func TestEachMember(t *testing.T) {
	type kv struct{ K, V string }
	var got []kv
	obj := ` { "a" : 1 , "b":{"x":"}"}, "c":[1,"]"], "d":"\"q", "e\\":null, "a":true } `
	if err := EachMember([]byte(obj), func(k, v []byte) { got = append(got, kv{string(k), string(v)}) }); err != nil {
		t.Fatal(err)
	}
	want := []kv{{"a", "1"}, {"b", `{"x":"}"}`}, {"c", `[1,"]"]`}, {"d", `"\"q"`}, {`e\\`, "null"}, {"a", "true"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("members (-want +got):\n%s", d)
	}
	if err := EachMember([]byte(` {} `), func(k, v []byte) { t.Errorf("member of {}: %s", k) }); err != nil {
		t.Errorf("empty object: %v", err)
	}
	for _, bad := range []string{``, `[]`, `"x"`, `{"a"}`, `{"a":1,}`, `{"a":1 "b":2}`, `{"a":"x`, `{"a":{`, `{"a":1`} {
		if err := EachMember([]byte(bad), func(k, v []byte) {}); err == nil || err.Error() != "not a JSON object" {
			t.Errorf("EachMember(%s) = %v", bad, err)
		}
	}
}

func TestEachElement(t *testing.T) {
	var got []string
	arr := ` [ 1 , "a]" ,{"b":[2]} , [ ] ,null, -1.5e3] `
	if err := EachElement([]byte(arr), func(e []byte) { got = append(got, string(e)) }); err != nil {
		t.Fatal(err)
	}
	want := []string{"1", `"a]"`, `{"b":[2]}`, "[ ]", "null", "-1.5e3"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("elements (-want +got):\n%s", d)
	}
	// An element cannot grow into the bytes after it.
	_ = EachElement([]byte(`[[1],[2]]`), func(e []byte) {
		if cap(e) != len(e) {
			t.Errorf("element %s has spare capacity %d", e, cap(e)-len(e))
		}
	})
	for _, bad := range []string{``, `{}`, `[1,]`, `[1 2]`, `[`, `["a]`, `[1`} {
		if err := EachElement([]byte(bad), func([]byte) {}); err == nil {
			t.Errorf("EachElement(%s) accepted", bad)
		}
	}
}

func TestSkip(t *testing.T) {
	tests := []struct {
		in   string
		i    int
		want int
		ok   bool
	}{
		{`"a\"b"x`, 0, 6, true},
		{`"a\\"x`, 0, 5, true},
		{`"a\\\"b"`, 0, 8, true},
		{`"abc`, 0, 0, false},
		{`{"a":"}"} `, 0, 9, true},
		{`[[1],[2]],`, 0, 9, true},
		{`123,`, 0, 3, true},
		{`x: true}`, 3, 7, true},
		{`[1`, 0, 0, false},
		{``, 0, 0, false},
	}
	for _, tt := range tests {
		got, ok := SkipValue([]byte(tt.in), tt.i)
		if got != tt.want || ok != tt.ok {
			t.Errorf("SkipValue(%q, %d) = %d, %v; want %d, %v", tt.in, tt.i, got, ok, tt.want, tt.ok)
		}
	}
	if got := SkipSpace([]byte(" \t\r\nx"), 0); got != 4 {
		t.Errorf("SkipSpace = %d", got)
	}
}

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
		{`"\ud83d\ud83d\ude00"`, "\ufffd😀"},
		{"\"bad\xffbyte\"", "bad\ufffdbyte"},
	}
	for _, tt := range tests {
		got, ok := AppendUnquoted([]byte("x"), []byte(tt.in))
		if !ok || string(got) != "x"+tt.want {
			t.Errorf("AppendUnquoted(%s) = %q, %v; want %q", tt.in, got, ok, "x"+tt.want)
		}
	}
	for _, bad := range []string{``, `"`, `x`, `"\x"`, `"\u12"`, `"\u12g4"`, `"a\"`} {
		if _, ok := AppendUnquoted(nil, []byte(bad)); ok {
			t.Errorf("AppendUnquoted(%s) accepted", bad)
		}
	}
}

// marshalString is encoding/json's encoding of s, with or without HTML
// escaping.
func marshalString(t testing.TB, s string, html bool) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(html)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "plain", "q\"b\\s", "ctl\x00\x01\x1f\b\f\n\r\t\x7f", "<&>", "é😀\u2028\u2029", "bad\xff\xfeutf8", "\xed\xa0\x80"} {
		if got, want := AppendString([]byte("x"), s, true), append([]byte("x"), marshalString(t, s, true)...); !bytes.Equal(got, want) {
			t.Errorf("AppendString(%q, true) = %s, want %s", s, got, want)
		}
		if got, want := AppendString(nil, []byte(s), false), marshalString(t, s, false); !bytes.Equal(got, want) {
			t.Errorf("AppendString([]byte(%q), false) = %s, want %s", s, got, want)
		}
	}
}

func TestAppendCompact(t *testing.T) {
	for _, s := range []string{
		` { "a" : [ 1 , 2 ] , "b" : "x y\t<&>\u2028 \u003c" , "\u2029 c":null } `,
		"\"<\xe2\x80\xa8\xe2\x80\xa9\xe2\x80\xaa>\"",
		` "\\" `, `[ "\" " , " \\ " ]`, `1`, ` true `,
	} {
		want, err := json.Marshal(json.RawMessage(s))
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if got := AppendCompact([]byte("x"), []byte(s), true); string(got) != "x"+string(want) {
			t.Errorf("AppendCompact(%s, html) = %s, want x%s", s, got, want)
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, []byte(s)); err != nil {
			t.Fatal(err)
		}
		if got := AppendCompact(nil, []byte(s), false); !bytes.Equal(got, buf.Bytes()) {
			t.Errorf("AppendCompact(%s) = %s, want %s", s, got, buf.Bytes())
		}
	}
}

func BenchmarkValid(b *testing.B) {
	doc := []byte(`[{"type":"text","text":"Let me check both files.\nOne moment <ok>."},` +
		`{"type":"tool_use","id":"toolu_01A09q90qw90lq917835lq9","name":"read_file","input":{"path":"/src/main.go","limit":200}},` +
		`{"type":"tool_use","id":"toolu_01B19q90qw90lq917835lq8","name":"grep","input":{"pattern":"func \\w+\\(","paths":["a","b"],"ci":true,"n":-1.5e3}}]`)
	b.Run("rawjson", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(doc)))
		for b.Loop() {
			if !Valid(doc) {
				b.Fatal("invalid")
			}
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(doc)))
		for b.Loop() {
			if !json.Valid(doc) {
				b.Fatal("invalid")
			}
		}
	})
	// Text that is mostly not ASCII takes the UTF-8 path byte by byte.
	intl := []byte(`[{"type":"text","text":"Größenänderung läuft — 日本語のテキストを確認します。Проверяю оба файла 🙂"}]`)
	b.Run("rawjson_utf8", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(intl)))
		for b.Loop() {
			if !Valid(intl) {
				b.Fatal("invalid")
			}
		}
	})
}

// AppendMessages writes what baton.EncodeJSON writes for the same
// messages; AppendRaw joins values as they are.
func TestAppendMessagesMatchesEncodeJSON(t *testing.T) {
	msgs := []baton.Message{
		{Role: "user", Content: json.RawMessage(`"hi"`)},
		{Role: "assistant", Content: json.RawMessage(`[{"type":"text","text":"a<b>&c"}]`)},
		{Role: "we\"ird\\\n\u2028é<\b\xff", Content: nil},
	}
	want, err := baton.EncodeJSON(msgs)
	if err != nil {
		t.Fatal(err)
	}
	if got := AppendMessages(nil, msgs); string(got) != string(want) {
		t.Errorf("AppendMessages = %s\nwant           %s", got, want)
	}
	if got := AppendMessages([]byte("x"), nil); string(got) != "x[]" {
		t.Errorf("AppendMessages(nil) = %s, want x[]", got)
	}
	raws := []json.RawMessage{json.RawMessage(`{"a":1}`), json.RawMessage(`2`)}
	if got := AppendRaw(nil, raws); string(got) != `[{"a":1},2]` {
		t.Errorf("AppendRaw = %s", got)
	}
}

func TestMemberAndKind(t *testing.T) {
	obj := []byte(` {"a":1, "\u0062":[2], "a":"last", "c\u00e9":null, "x\ud800":3}`)
	for key, want := range map[string]string{
		"a":       `"last"`, // the last of repeated keys
		"b":       `[2]`,    // an escaped key
		"cé":      `null`,
		"x\uFFFD": `3`, // a lone surrogate reads as U+FFFD, as encoding/json
		"z":       ``,
	} {
		if got := string(Member(obj, key)); got != want {
			t.Errorf("Member(%q) = %q, want %q", key, got, want)
		}
	}
	if Member([]byte(`[1]`), "a") != nil || Member(nil, "a") != nil {
		t.Error("Member of a non-object is not nil")
	}
	for raw, want := range map[string]byte{` {}`: '{', "\n[": '[', `"s"`: '"', `-1`: '-', `null`: 'n', ``: 0, `  `: 0} {
		if got := Kind([]byte(raw)); got != want {
			t.Errorf("Kind(%q) = %q, want %q", raw, got, want)
		}
	}
}
