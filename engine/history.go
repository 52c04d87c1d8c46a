package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/baton-engine/baton"
)

// toolUse is one tool_use block of an assistant message.
type toolUse struct {
	ID    string
	Name  string
	Input json.RawMessage
}

// toolUses returns the tool_use blocks (with a string name) of content.
func toolUses(content json.RawMessage) []toolUse {
	bs, _ := blocks(content)
	var out []toolUse
	for _, b := range bs {
		if b.Type != baton.BlockToolUse || b.Name == "" {
			continue
		}
		tu := toolUse{Name: b.Name, Input: b.Input}
		if b.ID != nil {
			tu.ID = *b.ID
		}
		if len(tu.Input) == 0 || string(tu.Input) == "null" {
			tu.Input = json.RawMessage(`{}`)
		}
		out = append(out, tu)
	}
	return out
}

// toolResult builds a server-produced tool_result block.
func toolResult(id string, content json.RawMessage, isError bool) json.RawMessage {
	b, _ := json.Marshal(struct {
		Type      string          `json:"type"`
		ToolUseID string          `json:"tool_use_id"`
		Content   json.RawMessage `json:"content"`
		IsError   bool            `json:"is_error"`
	}{baton.BlockToolResult, id, content, isError})
	return b
}

// textContent is a one-text-block content array.
func textContent(text string) json.RawMessage {
	b, _ := json.Marshal([]map[string]string{{"type": "text", "text": text}})
	return b
}

// stripDispatch removes Baton's routing keys from tool_use blocks before
// content goes to a provider.
func stripDispatch(content json.RawMessage) json.RawMessage {
	if !bytes.Contains(content, []byte(`"dispatch"`)) && !bytes.Contains(content, []byte(`"caller"`)) {
		return content // nothing to strip: skip decoding every block
	}
	return mapToolUses(content, func(b baton.Block) json.RawMessage {
		return setKey(setKey(b.Raw, "dispatch", nil), "caller", nil)
	})
}

// transcript rebuilds the conversation from a session's log: client and
// server messages, and every server-side tool round (which BAE forgets).
// It also reports a paused turn when the log ends in one.
type transcript struct {
	messages []baton.Message
	paused   *parked // non-nil when the log ends in a paused turn
}

// rebuild folds the events of types transcriptTypes, in order.
func rebuild(events []*baton.Event) transcript {
	var (
		tr        transcript
		assistant json.RawMessage   // content of the latest successful provider response
		results   []json.RawMessage // server tool results since then, as logged
		ids       []string          // their tool_use ids
	)
	for _, ev := range events {
		switch ev.Type {
		case baton.EventClientMessage:
			var m baton.Message
			if json.Unmarshal(ev.Payload, &m) != nil {
				continue
			}
			if m.Role == "" {
				m.Role = "user"
			}
			assistant, results, ids = nil, nil, nil // an unfinished round is dropped
			tr.paused = nil
			tr.messages = append(tr.messages, m)
		case baton.EventProviderResp:
			var p struct {
				OK      bool            `json:"ok"`
				Content json.RawMessage `json:"content"`
			}
			if json.Unmarshal(ev.Payload, &p) != nil || !p.OK || p.Content == nil {
				continue
			}
			if assistant != nil && len(results) > 0 {
				tr.messages = append(tr.messages, baton.Message{Role: "assistant", Content: assistant},
					userResults(inUseOrder(assistant, results, ids)))
			}
			assistant, results, ids = p.Content, nil, nil
		case baton.EventToolResult:
			var p struct {
				ToolUseID string          `json:"tool_use_id"`
				Dispatch  baton.Dispatch  `json:"dispatch"`
				IsError   bool            `json:"is_error"`
				Content   json.RawMessage `json:"content"`
			}
			if json.Unmarshal(ev.Payload, &p) != nil || p.Dispatch == baton.DispatchClient {
				continue
			}
			results = append(results, toolResult(p.ToolUseID, p.Content, p.IsError))
			ids = append(ids, p.ToolUseID)
		case baton.EventServerMessage:
			var m baton.Message
			if json.Unmarshal(ev.Payload, &m) != nil {
				continue
			}
			tr.messages = append(tr.messages, baton.Message{Role: "assistant", Content: m.Content})
			tr.paused = nil
			if uses := toolUses(m.Content); len(uses) > 0 && hasDispatch(m.Content) {
				tr.paused = &parked{owner: ev.ClientKeyID, since: ev.CreatedAt, toolUses: uses, serverResults: results}
			}
			assistant, results, ids = nil, nil, nil
		}
	}
	return tr
}

// inUseOrder returns the results of one round (ids their tool_use ids),
// logged as their calls completed, in the order of assistant's tool_use
// blocks: the order a turn gives them to the model. A result no block
// asked for keeps its place after the others.
func inUseOrder(assistant json.RawMessage, results []json.RawMessage, ids []string) []json.RawMessage {
	if len(results) < 2 {
		return results
	}
	uses := toolUses(assistant)
	pos := make(map[string]int, len(uses))
	for i, u := range uses {
		if _, dup := pos[u.ID]; !dup {
			pos[u.ID] = i
		}
	}
	order := make([]int, len(results))
	for i := range order {
		order[i] = i
	}
	at := func(i int) int {
		if p, ok := pos[ids[i]]; ok {
			return p
		}
		return len(uses)
	}
	slices.SortStableFunc(order, func(a, b int) int { return at(a) - at(b) })
	out := make([]json.RawMessage, len(results))
	for i, j := range order {
		out[i] = results[j]
	}
	return out
}

// transcriptTypes are the event types rebuild reads.
var transcriptTypes = []string{baton.EventClientMessage, baton.EventProviderResp, baton.EventToolResult, baton.EventServerMessage}

func userResults(results []json.RawMessage) baton.Message {
	raw, _ := json.Marshal(results)
	return baton.Message{Role: "user", Content: raw}
}

// hasDispatch reports whether any tool_use block carries a dispatch tag,
// which the server only adds to paused turns.
func hasDispatch(content json.RawMessage) bool {
	bs, _ := blocks(content)
	for _, b := range bs {
		if b.Type == baton.BlockToolUse && b.Dispatch != "" {
			return true
		}
	}
	return false
}

// convo is a session's conversation in two forms kept side by side: as
// logged (dispatch tags kept; provider.request events record it) and as
// providers see it (tags stripped, consecutive messages of one role merged,
// since a cancelled or failed turn can leave two user messages in a row).
// Appending keeps both current, so a turn never re-reads or re-strips the
// history it already has.
type convo struct {
	logged []baton.Message
	ready  []baton.Message
	size   int // bytes of content held
}

func newConvo(history []baton.Message) *convo {
	c := &convo{}
	for _, m := range history {
		c.add(m)
	}
	return c
}

// add appends one message.
func (c *convo) add(m baton.Message) {
	m.Content = baton.OneLine(m.Content) // provider.request payloads copy it into NDJSON frames
	c.logged = append(c.logged, m)
	c.size += len(m.Content)
	m.Content = stripDispatch(m.Content)
	if n := len(c.ready); n > 0 && c.ready[n-1].Role == m.Role {
		c.ready[n-1].Content = concatContent(c.ready[n-1].Content, m.Content)
		return
	}
	c.ready = append(c.ready, m)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("engine: marshal %T: %v", v, err)) // only plain data is marshalled
	}
	return b
}
