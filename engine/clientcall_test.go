package engine

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton"
)

// TestRebuildKeepsToolUseOrder: results of one message are committed as
// their calls complete (a registered client's result as soon as it is
// posted), so the log may hold them out of order; the transcript rebuilt
// from it gives them in tool_use order, as the turn gave them to the
// model.
func TestRebuildKeepsToolUseOrder(t *testing.T) {
	uses := `[{"type":"tool_use","id":"t1","name":"client__lap__echo","input":{"x":1}},` +
		`{"type":"tool_use","id":"t2","name":"client__lap__echo","input":{"x":2}},` +
		`{"type":"tool_use","id":"t3","name":"search","input":{}}]`
	res := func(id, text string) string {
		return `{"tool_use_id":"` + id + `","dispatch":"registered","is_error":false,"content":` + string(textContent(text)) + `}`
	}
	log := []*baton.Event{
		ev(baton.EventClientMessage, "k", `{"role":"user","content":"go"}`),
		ev(baton.EventProviderResp, "k", `{"ok":true,"content":`+uses+`}`),
		ev(baton.EventToolResult, "k", res("t2", "two")),
		ev(baton.EventToolResult, "k", res("t3", "three")),
		ev(baton.EventToolResult, "k", res("t1", "one")),
		ev(baton.EventProviderResp, "k", `{"ok":true,"content":[{"type":"text","text":"done"}]}`),
		ev(baton.EventServerMessage, "k", `{"role":"assistant","content":[{"type":"text","text":"done"}]}`),
	}
	text := func(s string) json.RawMessage { return textContent(s) }
	live := newConvo([]baton.Message{{Role: "user", Content: json.RawMessage(`"go"`)}})
	live.add(baton.Message{Role: "assistant", Content: json.RawMessage(uses)})
	live.add(userResults([]json.RawMessage{
		toolResult("t1", text("one"), false), toolResult("t2", text("two"), false), toolResult("t3", text("three"), false),
	}))
	live.add(baton.Message{Role: "assistant", Content: json.RawMessage(`[{"type":"text","text":"done"}]`)})

	rebuilt := newConvo(rebuild(log).messages)
	if d := cmp.Diff(string(mustJSON(live.ready)), string(mustJSON(rebuilt.ready))); d != "" {
		t.Fatalf("rebuilt transcript differs (-live +rebuilt):\n%s", d)
	}
}

func TestInUseOrder(t *testing.T) {
	uses := json.RawMessage(`[{"type":"tool_use","id":"a","name":"x"},{"type":"tool_use","id":"b","name":"x"}]`)
	r := func(s string) json.RawMessage { return json.RawMessage(`"` + s + `"`) }
	tests := []struct {
		ids, want []string
	}{
		{[]string{"b", "a"}, []string{"a", "b"}},
		{[]string{"a", "b"}, []string{"a", "b"}},
		{[]string{"zz", "b", "a"}, []string{"a", "b", "zz"}}, // unknown ids go last, in log order
		{[]string{"b"}, []string{"b"}},
	}
	for _, tc := range tests {
		in := make([]json.RawMessage, len(tc.ids))
		for i, id := range tc.ids {
			in[i] = r(id)
		}
		var got []string
		for _, raw := range inUseOrder(uses, in, tc.ids) {
			var s string
			_ = json.Unmarshal(raw, &s)
			got = append(got, s)
		}
		if !cmp.Equal(got, tc.want) {
			t.Errorf("inUseOrder(%v) = %v, want %v", tc.ids, got, tc.want)
		}
	}
}
