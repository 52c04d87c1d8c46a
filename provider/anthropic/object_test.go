package anthropic

import "testing"

// The JSON primitives behind these helpers are tested, and fuzzed against
// encoding/json, in internal/rawjson.

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
