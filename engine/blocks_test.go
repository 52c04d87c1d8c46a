package engine

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/baton-engine/baton"
	"github.com/google/go-cmp/cmp"
)

// Realistic contents: an assistant message with text and two tool_use
// blocks, and the user message answering it.
const (
	assistantContent = `[{"type":"text","text":"I'll read the config and list the app directory."},` +
		`{"type":"tool_use","id":"toolu_01A09q90qw90lq917835lq9","name":"read_file","input":{"path":"/etc/app/config.toml","max_bytes":65536},"dispatch":"client"},` +
		`{"type":"tool_use","id":"toolu_01B19q90qw90lq917835lq8","name":"list_dir","input":{"path":"/srv/app","recursive":false},"caller":{"type":"direct"}}]`
	userContent = `[{"type":"tool_result","tool_use_id":"toolu_01A09q90qw90lq917835lq9","content":[{"type":"text","text":"[server]\nport = 8080\nhost = \"0.0.0.0\" # <all>\n"}],"is_error":false},` +
		`{"type":"tool_result","tool_use_id":"toolu_01B19q90qw90lq917835lq8","content":"bin\nconfig\nlogs\n","is_error":true}]`
)

// blockSeeds are contents for the tests and fuzzers of this file: real
// block arrays and the edge cases of encoding/json's decoding.
var blockSeeds = []string{
	assistantContent,
	userContent,
	`[{"type":"thinking","thinking":"The user wants the file.","signature":"EqQBCkgIARABGAIiQL"},{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3p"},{"type":"tool_use","id":"t1","name":"n","input":{}}]`,
	`[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"a"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0K"}}]}]`,
	`[{"dispatch":"client","id":"t2","input":{},"name":"get_time","type":"tool_use"}]`,
	`null`, ` [ ] `, `[]`, `"hi"`, `""`, `{}`, `5`, `true`, `[1,"x",null,true,[],{},-2.5e3]`,
	`[{"TYPE":"tool_use","Id":"a","NAME":"n","Input":{"x":1},"Tool_Use_Id":"x","CONTENT":"c","Is_Error":true,"DISPATCH":"client"}]`,
	`[{"type":"a","Type":"b"}]`, `[{"Type":"b","type":"a"}]`, `[{"type":"tool_use","TYPE":"text","type":"tool_use"}]`,
	`[{"type":"tool_use","diſpatch":"mcp","iſ_error":true,"tool_uſe_id":"x","ID":"K","name":"ſ"}]`,
	`[{"\u0074ype":"tool_use","n\u0061me":"x","\u0069d":"y","dispatch\u0000":"z","\u0064ispatch":"sandbox"}]`,
	`[{"type":5,"name":true,"id":5,"input":null,"is_error":"x","tool_use_id":[1],"content":null,"dispatch":{}}]`,
	`[{"id":"a","id":null}]`, `[{"id":null,"id":5}]`, `[{"id":"a","id":5}]`, `[{"id":5}]`, `[{"id":{}}]`, `[{"id":[]}]`, `[{"id":""}]`,
	`[{"type":"tool_use","type":null,"name":"n","name":7}]`,
	`[{"is_error":true,"is_error":null},{"is_error":true,"is_error":"x"},{"is_error":false,"is_error":true}]`,
	" [ { \"type\" : \"tool_use\" , \"input\" : { \"a\" : [ 1 , 2 ] } , \"id\":\"t\" } ,\n\t\"x\" ] ",
	`[{"type":"text","text":"\ud83d\ude00 \u2028 <b>&amp;</b> \u003c"},{"type":"tool_use","name":"\ud83d","id":"\u00e9\n","input":{"q":"a\u0000b<>"}}]`,
	"[{\"type\":\"tool_use\",\"name\":\"\xff\",\"id\":\"\xed\xa0\x80\",\"input\":{\"\xe2\x80\xa8\":\"\xe2\x80\xa9\"}}]",
	`[{"type":"tool_use","name":"x","input":{"caller":1,"dispatch":2},"dispatch":"executor","caller":"me","caller":"you"}]`,
	`[{"type":"tool_use","id":"t","name":"n","input":{},"z":1,"a":2,"m":{"b":1,"a":2},"a":3}]`,
	`[{"type":"tool_use","\u0064ispatch":"client","\u00e9":1,"e\u0301":2,"<k>":3}]`,
	`[{"type":"text"`, `[1,]`, `[{"a":1}]x`, `[{"a":tru}]`, `[{"a" 1}]`, "[\"\x01\"]",
}

// TestBlocksEdgeCases pins down some of the encoding/json behaviour blocks
// reproduces.
func TestBlocksEdgeCases(t *testing.T) {
	str := func(s string) *string { return &s }
	tests := []struct {
		in   string
		want []baton.Block
		ok   bool
	}{
		{`"hi"`, nil, false},
		{`{}`, nil, false},
		{`[1,]`, nil, false},
		{`null`, []baton.Block{}, true},
		{` [ ] `, []baton.Block{}, true},
		{`[ 1 , {"a":1} ]`, []baton.Block{{Raw: json.RawMessage(`1`)}, {Raw: json.RawMessage(`{"a":1}`)}}, true},
		{`[{"id":5,"type":"tool_use","type":null,"TYPE":3}]`, []baton.Block{{Type: "tool_use", ID: str(""), Raw: json.RawMessage(`{"id":5,"type":"tool_use","type":null,"TYPE":3}`)}}, true},
		{`[{"id":"a","id":null}]`, []baton.Block{{Raw: json.RawMessage(`{"id":"a","id":null}`)}}, true},
		{`[{"id":"a","id":[1]}]`, []baton.Block{{ID: str("a"), Raw: json.RawMessage(`{"id":"a","id":[1]}`)}}, true},
		{`[{"Is_Error":true,"is_error":"x","input":null,"diſpatch":"mcp"}]`, []baton.Block{{IsError: true, Input: json.RawMessage(`null`), Dispatch: "mcp", Raw: json.RawMessage(`{"Is_Error":true,"is_error":"x","input":null,"diſpatch":"mcp"}`)}}, true},
		{`[{"n\u0061me":"\ud83d!","input" : { "a" : 1 } }]`, []baton.Block{{Name: "\ufffd!", Input: json.RawMessage(`{ "a" : 1 }`), Raw: json.RawMessage(`{"n\u0061me":"\ud83d!","input" : { "a" : 1 } }`)}}, true},
	}
	for _, tt := range tests {
		got, ok := blocks(json.RawMessage(tt.in))
		if ok != tt.ok {
			t.Errorf("blocks(%s) ok = %v", tt.in, ok)
		}
		if d := cmp.Diff(tt.want, got); d != "" {
			t.Errorf("blocks(%s) (-want +got):\n%s", tt.in, d)
		}
	}
}

func TestBlocksMatchReference(t *testing.T) {
	for _, s := range blockSeeds {
		checkBlocks(t, []byte(s))
	}
	// encoding/json nests at most 10000 deep (too big a seed for fuzzing).
	for _, depth := range []int{9999, 10000} {
		checkBlocks(t, []byte(`[1,`+strings.Repeat(`[`, depth)+strings.Repeat(`]`, depth)+`]`))
	}
}

func checkBlocks(t *testing.T, content []byte) {
	t.Helper()
	got, ok := blocks(content)
	want, wantOK := refBlocks(content)
	if ok != wantOK {
		t.Fatalf("blocks(%q) ok = %v, reference %v", content, ok, wantOK)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("blocks(%q) (-reference +new):\n%s", content, d)
	}
	for _, b := range got {
		for _, raw := range []json.RawMessage{b.Raw, b.Input, b.Content} {
			if cap(raw) != len(raw) {
				t.Fatalf("blocks(%q): %s can grow into the content", content, raw)
			}
		}
	}
}

// FuzzBlocks compares blocks with the encoding/json reference on
// arbitrary input (toolUses and hasDispatch only read what it returns).
func FuzzBlocks(f *testing.F) {
	for _, s := range blockSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, content []byte) {
		checkBlocks(t, content)
	})
}

// rewriter returns the f of a mapToolUses call, chosen by mode; it records
// the blocks it was given in seen.
func rewriter(mode uint8, extra []byte, seen *[]baton.Block) func(b baton.Block) json.RawMessage {
	i := 0
	return func(b baton.Block) json.RawMessage {
		*seen = append(*seen, b)
		i++
		switch mode % 7 {
		case 0: // stripDispatch
			return setKey(setKey(b.Raw, "dispatch", nil), "caller", nil)
		case 1: // tagDispatch
			return setKey(b.Raw, "dispatch", string(extra))
		case 2:
			return extra // maybe invalid JSON
		case 3:
			if i%2 == 0 {
				return nil
			}
			return json.RawMessage{}
		case 4:
			return b.Raw
		case 5:
			return setKey(b.Raw, string(extra), i)
		default:
			return setKey(b.Raw, "input", json.RawMessage(extra))
		}
	}
}

func checkMapToolUses(t *testing.T, content []byte, mode uint8, extra []byte) {
	t.Helper()
	var seen, refSeen []baton.Block
	got := mapToolUses(content, rewriter(mode, extra, &seen))
	want := refMapToolUses(content, rewriter(mode, extra, &refSeen))
	if string(got) != string(want) || (got == nil) != (want == nil) {
		t.Fatalf("mapToolUses(%q, %d, %q) = %q, reference %q", content, mode, extra, got, want)
	}
	if d := cmp.Diff(refSeen, seen); d != "" {
		t.Fatalf("mapToolUses(%q) gave f (-reference +new):\n%s", content, d)
	}
}

func TestMapToolUsesMatchesReference(t *testing.T) {
	for _, s := range blockSeeds {
		for mode := range uint8(7) {
			for _, extra := range []string{"client", `{"a" : "<b>"}`, `{"a":`, ""} {
				checkMapToolUses(t, []byte(s), mode, []byte(extra))
			}
		}
	}
}

// FuzzMapToolUses compares mapToolUses (with setKey inside most of its
// rewriters) with the encoding/json reference on arbitrary input.
func FuzzMapToolUses(f *testing.F) {
	for i, s := range blockSeeds {
		f.Add([]byte(s), uint8(i), []byte([]string{"client", `{"a" : "<b>"}`, `{"a":`, ""}[i%4]))
	}
	f.Fuzz(checkMapToolUses)
}

// setKeyValue is the value a setKey test passes, chosen by mode.
func setKeyValue(mode uint8, val string) any {
	switch mode % 6 {
	case 0:
		return nil
	case 1, 2:
		return val
	case 3:
		return json.RawMessage(val) // maybe invalid: json.Marshal fails
	case 4:
		return len(val)
	default:
		return map[string]any{"v": val, "n": nil}
	}
}

func checkSetKey(t *testing.T, obj []byte, key, val string, mode uint8) {
	t.Helper()
	v := setKeyValue(mode, val)
	got, want := setKey(obj, key, v), refSetKey(obj, key, v)
	if string(got) != string(want) || (got == nil) != (want == nil) {
		t.Fatalf("setKey(%q, %q, %#v) = %q, reference %q", obj, key, v, got, want)
	}
}

func TestSetKeyMatchesReference(t *testing.T) {
	objs := []string{
		`{"type":"tool_use","id":"t","name":"n","input":{ "a" : [1, 2] },"dispatch":"client","caller":{"type":"direct"}}`,
		` { "b" : 1 , "a" : 2 , "b" : 3 } `, `{}`, ` {} `, `null`, `[]`, `"x"`, `{"a":1`, `{"a":"<&>\u2028"}`,
		`{"\u0061":1,"a":2,"\ud83d":3,"` + "\xff" + `":4,"<":5,"A":6,"":7}`, "{\"\xe2\x80\xa8\":\"\xe2\x80\xa9\"}",
	}
	for _, obj := range objs {
		for mode := range uint8(6) {
			for _, key := range []string{"dispatch", "caller", "a", "b", "", "<", "\xff", "\ufffd", "\u2028"} {
				for _, val := range []string{"client", "<x&y>", "\xff\u2029", `{"a" : 1}`, `{"a":`} {
					checkSetKey(t, []byte(obj), key, val, mode)
				}
			}
		}
	}
}

// FuzzSetKey compares setKey with the encoding/json reference on arbitrary
// input.
func FuzzSetKey(f *testing.F) {
	for i, s := range blockSeeds {
		f.Add([]byte(s), "dispatch", "client", uint8(i))
		if bs, _ := refBlocks([]byte(s)); len(bs) > 0 {
			f.Add([]byte(bs[0].Raw), []string{"dispatch", "caller", "type", "a"}[i%4], `{"x" : "<&>"}`, uint8(i))
		}
	}
	f.Fuzz(checkSetKey)
}

func checkConcat(t *testing.T, a, b []byte) {
	t.Helper()
	if got, want := concatContent(a, b), refConcatContent(a, b); string(got) != string(want) {
		t.Fatalf("concatContent(%q, %q) = %q, reference %q", a, b, got, want)
	}
}

func TestConcatContentMatchesReference(t *testing.T) {
	for _, a := range blockSeeds {
		for _, b := range []string{`"more <text>\u2028"`, `""`, `null`, "\"\xff\"", userContent, ` "x" `, `7`} {
			checkConcat(t, []byte(a), []byte(b))
			checkConcat(t, []byte(b), []byte(a))
		}
	}
}

// FuzzConcatContent compares concatContent with the encoding/json
// reference on arbitrary input.
func FuzzConcatContent(f *testing.F) {
	for i, s := range blockSeeds {
		f.Add([]byte(s), []byte(blockSeeds[(i+7)%len(blockSeeds)]))
		f.Add([]byte(`"text <1>"`), []byte(s))
	}
	f.Fuzz(checkConcat)
}

// benchImpl is one implementation of the functions benchmarked here.
type benchImpl struct {
	name        string
	blocks      func(json.RawMessage) ([]baton.Block, bool)
	mapToolUses func(json.RawMessage, func(baton.Block) json.RawMessage) json.RawMessage
	setKey      func(json.RawMessage, string, any) json.RawMessage
}

var benchImpls = []benchImpl{
	{"ref", refBlocks, refMapToolUses, refSetKey},
	{"new", blocks, mapToolUses, setKey},
}

func BenchmarkBlocks(b *testing.B) {
	for _, msg := range []struct{ name, content string }{{"assistant", assistantContent}, {"user", userContent}} {
		for _, impl := range benchImpls {
			b.Run(fmt.Sprintf("%s/%s", msg.name, impl.name), func(b *testing.B) {
				b.ReportAllocs()
				content := json.RawMessage(msg.content)
				for b.Loop() {
					if bs, ok := impl.blocks(content); !ok || len(bs) < 2 {
						b.Fatal("not decoded")
					}
				}
			})
		}
	}
}

// BenchmarkMapToolUses strips the dispatch tags of an assistant message
// (stripDispatch, with two setKey calls per tool_use block) and tags one
// (tagDispatch); a user message has no tool_use block to rewrite.
func BenchmarkMapToolUses(b *testing.B) {
	for _, c := range []struct {
		name, content, key string
		value              any
	}{
		{"strip/assistant", assistantContent, "", nil},
		{"tag/assistant", assistantContent, "dispatch", "mcp"},
		{"strip/user", userContent, "", nil},
	} {
		for _, impl := range benchImpls {
			b.Run(fmt.Sprintf("%s/%s", c.name, impl.name), func(b *testing.B) {
				b.ReportAllocs()
				content := json.RawMessage(c.content)
				f := func(bl baton.Block) json.RawMessage { return impl.setKey(bl.Raw, c.key, c.value) }
				if c.key == "" {
					f = func(bl baton.Block) json.RawMessage {
						return impl.setKey(impl.setKey(bl.Raw, "dispatch", nil), "caller", nil)
					}
				}
				for b.Loop() {
					if impl.mapToolUses(content, f) == nil {
						b.Fatal("nil")
					}
				}
			})
		}
	}
}

func BenchmarkSetKey(b *testing.B) {
	tu, _ := refBlocks(json.RawMessage(assistantContent))
	tr, _ := refBlocks(json.RawMessage(userContent))
	for _, c := range []struct {
		name  string
		obj   json.RawMessage
		key   string
		value any
	}{
		{"set/tool_use", tu[2].Raw, "dispatch", "client"},
		{"remove/tool_use", tu[1].Raw, "dispatch", nil},
		{"absent/tool_result", tr[0].Raw, "dispatch", nil},
	} {
		for _, impl := range benchImpls {
			b.Run(fmt.Sprintf("%s/%s", c.name, impl.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if impl.setKey(c.obj, c.key, c.value) == nil {
						b.Fatal("nil")
					}
				}
			})
		}
	}
}
