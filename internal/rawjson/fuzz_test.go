package rawjson

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// seeds are inputs for every fuzz target here.
var seeds = []string{
	`[{"type":"text","text":"hi <b> & \u2028"},{"type":"tool_use","id":"t1","name":"n","input":{"a":[1,2.5e3,null,true]}}]`,
	` { "a" : 1 , "a" : "\ud83d\ude00" , "\u0041" : [ ] , "k\"": {"x":"}"} } `,
	`"\ud83d"`, "\"\xff\xfe\"", `"\n\u0000\/"`, `-0.5E+2`, `01`, `[1,]`, `{"a"}`, `"abc`, `[[[[]]]]`, ` null `,
	"\"\xe2\x80\xa8\"", `{"a":"b"`, `[`, `tru`, `"\u12g4"`,
	// Invalid UTF-8 in strings (json.Valid takes it, Valid does not), and
	// the valid text and escapes around it.
	"\"hi \xff\xfe\"", "{\"k\xc3\":\"\xe9t\xe9\"}", "[\"\xed\xa0\x80\",\"\xf4\x90\x80\x80\"]", "\"\xf0\x9f\x99\"",
	"\"\xc0\xaf\"", `"日本 🙂"`, `"\ud800"`, "\xff", "[1,\xc3\xa9]",
}

// FuzzValid checks Valid against encoding/json made strict about UTF-8.
// utf8.Valid over the whole input is the exact reference: in JSON that
// encoding/json accepts, bytes of 0x80 and above occur only inside strings,
// and no UTF-8 sequence spans a quote (every byte of one is 0x80 or
// above), so the input is valid UTF-8 exactly when each string is.
func FuzzValid(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), json.Valid(b) && utf8.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json and utf8.Valid say %v", b, got, want)
		}
	})
}

// FuzzUnquote checks the string decoder against encoding/json.
func FuzzUnquote(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		lit := bytes.TrimSpace([]byte(s))
		var want string
		if err := json.Unmarshal(lit, &want); err != nil || lit[0] != '"' { // null decodes too
			return
		}
		got, ok := AppendUnquoted(nil, lit)
		if !ok || string(got) != want {
			t.Fatalf("AppendUnquoted(%q) = %q, %v; encoding/json says %q", s, got, ok, want)
		}
	})
}

// FuzzAppendString checks both escapings against encoding/json.
func FuzzAppendString(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, html := range []bool{true, false} {
			if got, want := AppendString(nil, s, html), marshalString(t, s, html); !bytes.Equal(got, want) {
				t.Fatalf("AppendString(%q, %v) = %s, encoding/json says %s", s, html, got, want)
			}
		}
	})
}

// FuzzAppendCompact checks compaction against json.Marshal of a
// json.RawMessage and against json.Compact.
func FuzzAppendCompact(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		want, err := json.Marshal(json.RawMessage(b))
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendCompact(nil, b, true); !bytes.Equal(got, want) {
			t.Fatalf("AppendCompact(%q, html) = %s, encoding/json says %s", b, got, want)
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, b); err != nil {
			t.Fatal(err)
		}
		if got := AppendCompact(nil, b, false); !bytes.Equal(got, buf.Bytes()) {
			t.Fatalf("AppendCompact(%q) = %s, json.Compact says %s", b, got, buf.Bytes())
		}
	})
}

// FuzzWalk checks that on JSON encoding/json accepts (invalid UTF-8 in
// strings included, which Valid refuses) the walkers cut out exactly the
// elements and members encoding/json sees.
func FuzzWalk(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		var elems []json.RawMessage
		arrErr := json.Unmarshal(b, &elems)
		var got []json.RawMessage
		err := EachElement(b, func(e []byte) { got = append(got, e) })
		if (err == nil) != (arrErr == nil && elems != nil) {
			t.Fatalf("EachElement(%q) error %v, encoding/json error %v", b, err, arrErr)
		}
		if err == nil {
			if len(got) != len(elems) {
				t.Fatalf("EachElement(%q): %d elements, encoding/json %d", b, len(got), len(elems))
			}
			for i := range got {
				if !bytes.Equal(got[i], elems[i]) {
					t.Fatalf("EachElement(%q)[%d] = %s, encoding/json %s", b, i, got[i], elems[i])
				}
			}
		}

		var members map[string]json.RawMessage
		objErr := json.Unmarshal(b, &members)
		last := map[string]json.RawMessage{}
		var rebuilt []byte
		err = EachMember(b, func(k, v []byte) {
			key, ok := AppendUnescaped(nil, k)
			if !ok || !json.Valid(v) || Valid(b) && !Valid(v) {
				t.Fatalf("EachMember(%q): key %q (%v), value %q", b, k, ok, v)
			}
			last[string(key)] = v
			if rebuilt != nil {
				rebuilt = append(rebuilt, ',')
			}
			rebuilt = append(rebuilt, '"')
			rebuilt = append(rebuilt, k...)
			rebuilt = append(rebuilt, '"', ':')
			rebuilt = append(rebuilt, v...)
		})
		if (err == nil) != (objErr == nil && members != nil) {
			t.Fatalf("EachMember(%q) error %v, encoding/json error %v", b, err, objErr)
		}
		if err != nil {
			return
		}
		if len(last) != len(members) {
			t.Fatalf("EachMember(%q): %d keys, encoding/json %d", b, len(last), len(members))
		}
		for k, v := range members {
			if !bytes.Equal(last[k], v) {
				t.Fatalf("EachMember(%q)[%q] = %s, encoding/json %s", b, k, last[k], v)
			}
		}
		// The members, put back together, are the object.
		whole := append(append([]byte{'{'}, rebuilt...), '}')
		if !bytes.Equal(AppendCompact(nil, whole, false), AppendCompact(nil, b, false)) {
			t.Fatalf("EachMember(%q) rebuilt %s", b, whole)
		}
	})
}
