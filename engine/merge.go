package engine

import (
	"encoding/json"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/rawjson"
	"github.com/baton-engine/baton/internal/serde"
)

// abandonedText is the content of a synthesized result for a client tool
// call whose turn was abandoned or cancelled.
const abandonedText = "Client tool call was abandoned before returning a result."

// mergeError is a resume that cannot be merged (BAE's client API).
type mergeError string

func (e mergeError) Error() string { return string(e) }

// resumeContent builds the user content that continues a paused turn
// (BAE's client API): strict merge, or abandonment synthesis when the turn
// was reclaimed after its deadline, cancelled, or given up voluntarily by
// its owner.
func resumeContent(p *parked, role string, content json.RawMessage, reclaimed bool) (json.RawMessage, error) {
	if role != "user" {
		return nil, mergeError("paused tool continuation must have role \"user\", got " + serde.Quote(role))
	}
	if reclaimed || voluntary(content) {
		return abandon(p, content)
	}
	return strictMerge(p, content)
}

// voluntary reports whether the owner sent a plain message instead of tool
// results: a non-empty string, or a non-empty array without tool_result.
func voluntary(content json.RawMessage) bool {
	switch rawjson.Kind(content) {
	case '"':
		s, _ := stringValue(content)
		return s != ""
	case '[':
		bs, _ := blocks(content)
		for _, b := range bs {
			if b.Type == baton.BlockToolResult {
				return false
			}
		}
		return len(bs) > 0
	}
	return false
}

// abandon synthesizes error results for unanswered client calls, appends
// the incoming content, and strict-merges the lot with the server results.
func abandon(p *parked, content json.RawMessage) (json.RawMessage, error) {
	server := make(map[string]bool, len(p.serverResults))
	for _, r := range p.serverResults {
		var b baton.Block
		_ = json.Unmarshal(r, &b)
		server[b.ToolUseID] = true
	}
	var out []json.RawMessage
	for _, tu := range p.toolUses {
		if !server[tu.ID] {
			out = append(out, toolResult(tu.ID, mustJSON(abandonedText), true))
		}
	}
	switch rawjson.Kind(content) {
	case '"':
		if s, _ := stringValue(content); s != "" {
			out = append(out, mustJSON(map[string]string{"type": "text", "text": s}))
		}
	case '[':
		bs, _ := blocks(content)
		for _, b := range bs {
			if b.Type == baton.BlockToolResult {
				return nil, mergeError("timed-out replacement message must not contain tool_result blocks")
			}
			out = append(out, b.Raw)
		}
	default: // null included
		return nil, mergeError("abandonment message content must be a string or content-block array")
	}
	return strictMerge(p, mustJSON(out))
}

// strictMerge returns one result per paused tool_use id, in assistant
// order (server results win), followed by the client's other blocks. Its
// checks run in BAE's order, so that content with several faults is
// rejected for the same one.
func strictMerge(p *parked, content json.RawMessage) (json.RawMessage, error) {
	if len(p.toolUses) == 0 {
		return nil, mergeError("paused assistant turn has no tool_use ids")
	}
	expected := make(map[string]bool, len(p.toolUses))
	for _, tu := range p.toolUses {
		if expected[tu.ID] {
			return nil, mergeError("paused assistant turn contains duplicate tool_use ids")
		}
		expected[tu.ID] = true
	}
	server := make(map[string]json.RawMessage, len(p.serverResults))
	var ids []string // server's, then the client's, in order
	for _, r := range p.serverResults {
		var b baton.Block
		_ = json.Unmarshal(r, &b)
		if _, dup := server[b.ToolUseID]; dup {
			return nil, mergeError("server produced a duplicate tool_result for id " + serde.Quote(b.ToolUseID))
		}
		server[b.ToolUseID] = r
		ids = append(ids, b.ToolUseID)
	}
	client := map[string]json.RawMessage{}
	var extras []json.RawMessage
	bs, _ := blocks(content) // a non-array is treated as empty
	for _, b := range bs {
		if b.Type != baton.BlockToolResult {
			extras = append(extras, b.Raw)
			continue
		}
		if _, ok := server[b.ToolUseID]; ok {
			continue // the server's own result wins
		}
		if _, dup := client[b.ToolUseID]; dup {
			return nil, mergeError("client returned a duplicate tool_result for id " + serde.Quote(b.ToolUseID))
		}
		client[b.ToolUseID] = b.Raw
		ids = append(ids, b.ToolUseID)
	}
	for _, id := range ids {
		if !expected[id] {
			return nil, mergeError("tool_result id " + serde.Quote(id) + " is not in the paused assistant turn")
		}
	}
	out := make([]json.RawMessage, 0, len(p.toolUses)+len(extras))
	for _, tu := range p.toolUses {
		if r, ok := server[tu.ID]; ok {
			out = append(out, r)
		} else if r, ok := client[tu.ID]; ok {
			out = append(out, r)
		} else {
			return nil, mergeError("no tool_result for tool_use id " + serde.Quote(tu.ID))
		}
	}
	return mustJSON(append(out, extras...)), nil
}
