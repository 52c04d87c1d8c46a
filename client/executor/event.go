package executor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// AgentEvent is a durable event of an agent turn: its type plus the
// fields of that type, sent flat as {"type":…, fields…}. ID becomes the
// session.event's event_id; Emit generates one when it is empty.
type AgentEvent struct {
	Type string
	ID   string
	// Fields is a JSON object of the type's fields; nil is {}.
	Fields json.RawMessage
}

// Agent event types (bma.executor.v1.1, AgentEvent).
const (
	EventMessage       = "agent.message"
	EventThinking      = "agent.thinking"
	EventToolUse       = "agent.tool_use"
	EventToolResult    = "agent.tool_result"
	EventCustomToolUse = "agent.custom_tool_use"
	EventError         = "agent.error"
	EventStatusRunning = "session.status_running"
	EventStatusIdle    = "session.status_idle"
	OutcomeCompleted   = "completed"
	OutcomeCanceled    = "canceled"
	OutcomeFailed      = "failed"
	PermissionAllow    = "allow"
	PermissionAsk      = "ask"
	PermissionDeny     = "deny"
)

// NewEvent builds an event of typ whose fields are fields encoded as a
// JSON object (nil for none).
func NewEvent(typ string, fields any) (AgentEvent, error) {
	ev := AgentEvent{Type: typ}
	if fields == nil {
		return ev, nil
	}
	b, err := json.Marshal(fields)
	if err != nil {
		return AgentEvent{}, fmt.Errorf("event %s: %w", typ, err)
	}
	if !isObject(b) {
		return AgentEvent{}, fmt.Errorf("event %s: fields must encode as a JSON object", typ)
	}
	ev.Fields = b
	return ev, nil
}

func mustEvent(typ string, fields any) AgentEvent {
	ev, err := NewEvent(typ, fields)
	if err != nil {
		panic(err) // only for the fixed shapes below
	}
	return ev
}

// MessageEvent is agent.message with content blocks (a JSON array).
func MessageEvent(content json.RawMessage) AgentEvent {
	return mustEvent(EventMessage, struct {
		Content json.RawMessage `json:"content"`
	}{orEmpty(content, "[]")})
}

// TextMessageEvent is agent.message with one text block.
func TextMessageEvent(text string) AgentEvent {
	return MessageEvent(TextResult(text).Content)
}

// ThinkingEvent is agent.thinking.
func ThinkingEvent(text string) AgentEvent {
	return mustEvent(EventThinking, map[string]string{"text": text})
}

// ToolUseEvent is agent.tool_use; permission is PermissionAllow, Ask or
// Deny.
func ToolUseEvent(toolUseID, name string, input json.RawMessage, permission string) AgentEvent {
	return mustEvent(EventToolUse, struct {
		ToolUseID  string          `json:"tool_use_id"`
		Name       string          `json:"name"`
		Input      json.RawMessage `json:"input"`
		Permission string          `json:"evaluated_permission"`
	}{toolUseID, name, orEmpty(input, "{}"), permission})
}

// ToolResultEvent is agent.tool_result.
func ToolResultEvent(toolUseID string, content json.RawMessage, isError bool) AgentEvent {
	return mustEvent(EventToolResult, struct {
		ToolUseID string          `json:"tool_use_id"`
		Content   json.RawMessage `json:"content"`
		IsError   bool            `json:"is_error"`
	}{toolUseID, orEmpty(content, "[]"), isError})
}

// ErrorEvent is agent.error.
func ErrorEvent(message string) AgentEvent {
	return mustEvent(EventError, map[string]string{"message": message})
}

func orEmpty(b json.RawMessage, empty string) json.RawMessage {
	if len(bytes.TrimSpace(b)) == 0 {
		return json.RawMessage(empty)
	}
	return b
}

// MarshalJSON renders {"type":…, fields…}.
func (ev AgentEvent) MarshalJSON() ([]byte, error) {
	if ev.Type == "" {
		return nil, errors.New("agent event without a type")
	}
	t, _ := json.Marshal(ev.Type)
	f := bytes.TrimSpace(ev.Fields)
	if len(f) == 0 || bytes.Equal(f, []byte("null")) {
		f = []byte("{}")
	}
	if !isObject(f) || !json.Valid(f) {
		return nil, fmt.Errorf("agent event %s: fields are not a JSON object", ev.Type)
	}
	inner := bytes.TrimSpace(f[1 : len(f)-1])
	b := make([]byte, 0, len(t)+len(inner)+10)
	b = append(b, `{"type":`...)
	b = append(b, t...)
	if len(inner) > 0 {
		b = append(b, ',')
		b = append(b, inner...)
	}
	return append(b, '}'), nil
}

// UnmarshalJSON reads {"type":…, fields…}; Fields keeps every member but
// type.
func (ev *AgentEvent) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	if err := json.Unmarshal(m["type"], &ev.Type); err != nil {
		return fmt.Errorf("agent event type: %w", err)
	}
	delete(m, "type")
	f, err := json.Marshal(m)
	if err != nil {
		return err
	}
	ev.Fields = f
	return nil
}
