package baton

import (
	"encoding/json"
	"testing"
)

// AppendMessages and AppendString write what encoding/json (without HTML
// escaping) writes for the same values.
func TestAppendMessagesMatchesEncodingJSON(t *testing.T) {
	msgs := []Message{
		{Role: "user", Content: json.RawMessage(`"hi"`)},
		{Role: "assistant", Content: json.RawMessage(`[{"type":"text","text":"a<b>&c"}]`)},
		{Role: "we\"ird\\\n\u2028é<", Content: nil},
	}
	want, err := EncodeJSON(msgs)
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

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "user", "a\"b", "tab\there", "\u2028", "é", "<&>", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := EncodeJSON(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString(nil, s); string(got) != string(want) {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got, want)
		}
	})
}
