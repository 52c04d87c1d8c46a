package engine

import (
	"encoding/json"
	"testing"
)

// TestResumeContentErrors: a resume that cannot be merged is rejected with
// BAE's reason, checked in BAE's order.
func TestResumeContentErrors(t *testing.T) {
	uses := func(ids ...string) []toolUse {
		out := make([]toolUse, len(ids))
		for i, id := range ids {
			out[i] = toolUse{ID: id, Name: "t"}
		}
		return out
	}
	server := func(id string) json.RawMessage { return toolResult(id, mustJSON("srv"), false) }
	tests := []struct {
		name      string
		p         parked
		role      string
		content   string
		reclaimed bool
		want      string
	}{
		{"wrong role", parked{toolUses: uses("a")}, "assistant", `[]`, false,
			`paused tool continuation must have role "user", got "assistant"`},
		{"reclaimed with a number", parked{toolUses: uses("a")}, "user", `42`, true,
			"abandonment message content must be a string or content-block array"},
		{"reclaimed with null", parked{toolUses: uses("a")}, "user", `null`, true,
			"abandonment message content must be a string or content-block array"},
		{"reclaimed with an object", parked{toolUses: uses("a")}, "user", `{"type":"text"}`, true,
			"abandonment message content must be a string or content-block array"},
		{"reclaimed with results", parked{toolUses: uses("a")}, "user", `[{"type":"tool_result","tool_use_id":"a"}]`, true,
			"timed-out replacement message must not contain tool_result blocks"},
		{"no tool uses", parked{}, "user", `[]`, false, "paused assistant turn has no tool_use ids"},
		{"duplicate tool uses", parked{toolUses: uses("a", "a")}, "user", `[]`, false,
			"paused assistant turn contains duplicate tool_use ids"},
		{"duplicate server results", parked{toolUses: uses("a", "b"), serverResults: []json.RawMessage{server("a"), server("a")}}, "user", `[]`, false,
			`server produced a duplicate tool_result for id "a"`},
		{"duplicate before unexpected", parked{toolUses: uses("a")}, "user",
			`[{"type":"tool_result","tool_use_id":"x"},{"type":"tool_result","tool_use_id":"a"},{"type":"tool_result","tool_use_id":"a"}]`, false,
			`client returned a duplicate tool_result for id "a"`},
		{"unexpected server result", parked{toolUses: uses("a"), serverResults: []json.RawMessage{server("z")}}, "user",
			`[{"type":"tool_result","tool_use_id":"a"}]`, false,
			`tool_result id "z" is not in the paused assistant turn`},
		{"missing", parked{toolUses: uses("a", "b")}, "user", `[{"type":"tool_result","tool_use_id":"a"}]`, false,
			`no tool_result for tool_use id "b"`},
		{"null is no results", parked{toolUses: uses("a")}, "user", `null`, false,
			`no tool_result for tool_use id "a"`},
		{"id quoted as Rust does", parked{toolUses: uses("a")}, "user", `[{"type":"tool_result","tool_use_id":"é\u0001"}]`, false,
			`tool_result id "é\u{1}" is not in the paused assistant turn`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resumeContent(&tc.p, tc.role, json.RawMessage(tc.content), tc.reclaimed)
			if err == nil {
				t.Fatalf("merged to %s, want error %q", got, tc.want)
			}
			if err.Error() != tc.want {
				t.Fatalf("error %q, want %q", err, tc.want)
			}
		})
	}
}

// TestResumeContentAbandons: a reclaimed turn's pending calls get error
// results and the new text follows.
func TestResumeContentAbandons(t *testing.T) {
	p := &parked{toolUses: []toolUse{{ID: "a", Name: "t"}}}
	got, err := resumeContent(p, "user", json.RawMessage(`"next"`), true)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"type":"tool_result","tool_use_id":"a","content":"` + abandonedText + `","is_error":true},{"text":"next","type":"text"}]`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
