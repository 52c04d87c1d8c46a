package machine

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton/client/executor"
)

func TestCapBufKeepsWholeRunes(t *testing.T) {
	b := &capBuf{max: 4}
	b.Write([]byte("ab"))
	b.Write([]byte("é€")) // 2 + 3 bytes: the cap falls inside "€"
	got, cut := b.text()
	if got != "abé" || !cut {
		t.Errorf("text %q cut %v, want %q true", got, cut, "abé")
	}
}

func TestInputValues(t *testing.T) {
	got, err := inputValues(json.RawMessage(`{"s":"x y","n":1.5,"b":true,"z":null,"o":{ "k" : [1, 2] }}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"s": "x y", "n": "1.5", "b": "true", "z": "", "o": `{"k":[1,2]}`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("values (-want +got):\n%s", diff)
	}
}

func TestPlaceholders(t *testing.T) {
	cases := map[string][]string{
		"echo {a} {b_2}":          {"a", "b_2"},
		"echo ${HOME} {x}":        {"x"},
		"awk '{print $1}' {file}": {"file"},
		"{1x} {} {a-b} {a":        nil,
		"{{a}}":                   {"a"},
	}
	for in, want := range cases {
		if diff := cmp.Diff(want, Placeholders(in)); diff != "" {
			t.Errorf("Placeholders(%q) (-want +got):\n%s", in, diff)
		}
	}
}

// BenchmarkToolArgv renders a script command for one call: input
// decoding, placeholder substitution and quoting.
func BenchmarkToolArgv(b *testing.B) {
	r := &toolRunner{spec: ToolSpec{Def: executor.ToolDef{Name: "t"}, Script: "grep -rn -- {text} src | head -n {n}", Params: []string{"gone", "n", "obj", "text"}}}
	input := json.RawMessage(`{"text":"it's a \"pattern\"","n":20}`)
	b.ReportAllocs()
	for b.Loop() {
		vals, err := inputValues(input)
		if err != nil {
			b.Fatal(err)
		}
		_ = r.argv(vals)
	}
}
