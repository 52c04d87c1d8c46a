package client

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"
)

// Dispatch values a server tags tool_use blocks with.
const (
	DispatchClient   = "client"
	DispatchSandbox  = "sandbox"
	DispatchMCP      = "mcp"
	DispatchSubagent = "subagent"
)

// DeltaType is the Type of an Event that carries a piece of streamed
// assistant text (the session.event_delta notification, a Baton
// extension). Deltas arrive only when asked for, have no ID and are never
// persisted: they do not appear in Reply.Events or in Events pages.
const DeltaType = "session.event_delta"

// Message is one conversation turn. Content is the raw wire value: a JSON
// string or an array of content blocks.
type Message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// Blocks returns the content as blocks; string content becomes one text
// block. It returns nil when the content is neither.
func (m Message) Blocks() []Block {
	c := bytes.TrimSpace(m.Content)
	if len(c) == 0 {
		return nil
	}
	if c[0] == '"' {
		var s string
		if json.Unmarshal(c, &s) != nil {
			return nil
		}
		return []Block{{Type: "text", Text: s}}
	}
	var bs []Block
	if json.Unmarshal(c, &bs) != nil {
		return nil
	}
	return bs
}

// Text returns the concatenated text of the message's text blocks.
func (m Message) Text() string {
	var b strings.Builder
	for _, bl := range m.Blocks() {
		if bl.Type == "text" {
			b.WriteString(bl.Text)
		}
	}
	return b.String()
}

// ToolCalls returns the message's tool_use blocks in order, whoever they
// are dispatched to.
func (m Message) ToolCalls() []ToolCall {
	var out []ToolCall
	for _, bl := range m.Blocks() {
		if bl.Type == "tool_use" {
			out = append(out, ToolCall{ID: bl.ID, Name: bl.Name, Input: bl.Input, Dispatch: bl.Dispatch})
		}
	}
	return out
}

// Block is a content block. Only the fields of its Type are set: text has
// Text; tool_use has ID, Name, Input and Dispatch; tool_result has
// ToolUseID, Content and IsError.
type Block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	Dispatch  string          `json:"dispatch,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

// ToolDef declares a client-side tool. A nil InputSchema is sent as an
// empty object schema.
type ToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// ToolCall is a tool_use block the assistant produced.
type ToolCall struct {
	ID    string
	Name  string
	Input json.RawMessage
	// Dispatch is "client", "sandbox", "mcp", "subagent", or "" when the
	// server predates the field.
	Dispatch string
}

// ToolResult is the answer to one ToolCall, sent back as a tool_result
// block. Content is the raw wire value: a JSON string, or an array of
// blocks when a handler returned []Block.
type ToolResult struct {
	ToolUseID string
	Content   json.RawMessage
	IsError   bool
}

// Text returns Content as text when it is a JSON string, else the raw JSON.
func (r ToolResult) Text() string {
	var s string
	if json.Unmarshal(r.Content, &s) == nil {
		return s
	}
	return string(r.Content)
}

func (r ToolResult) block() Block {
	return Block{Type: "tool_result", ToolUseID: r.ToolUseID, Content: r.Content, IsError: r.IsError}
}

// Event is one session event (EventView on the wire), or a text delta
// when Type is DeltaType.
type Event struct {
	ID        string
	SessionID string
	// ClientKeyID is the key the event is attributed to; "" when null.
	ClientKeyID string
	Type        string
	// Payload is the event's payload; from Baton, a payload that would
	// have taken its frame past Config.MaxFrameSize comes as
	// {"omitted_bytes":N} (the whole event stays readable through the
	// admin events API).
	Payload   json.RawMessage
	CreatedAt time.Time
	// Delta is the streamed text of a DeltaType event.
	Delta string
}

type eventView struct {
	ID          string          `json:"id"`
	SessionID   string          `json:"session_id"`
	ClientKeyID *string         `json:"client_key_id"`
	EventType   string          `json:"event_type"`
	Payload     json.RawMessage `json:"payload"`
	CreatedAt   string          `json:"created_at"`
}

// UnmarshalJSON decodes an EventView. An unparsable created_at leaves
// CreatedAt zero rather than failing the whole stream.
func (e *Event) UnmarshalJSON(b []byte) error {
	var ev Event
	if err := decodeEvent(b, &ev, nil, true); err != nil {
		return err
	}
	*e = ev
	return nil
}

// MarshalJSON encodes the event as an EventView (deltas as their
// notification params).
func (e Event) MarshalJSON() ([]byte, error) {
	if e.Type == DeltaType {
		return json.Marshal(deltaParams{SessionID: e.SessionID, ClientKeyID: e.ClientKeyID, Text: e.Delta})
	}
	v := eventView{ID: e.ID, SessionID: e.SessionID, EventType: e.Type, Payload: e.Payload}
	if e.ClientKeyID != "" {
		k := e.ClientKeyID
		v.ClientKeyID = &k
	}
	if !e.CreatedAt.IsZero() {
		v.CreatedAt = e.CreatedAt.UTC().Format("2006-01-02T15:04:05.000Z")
	}
	return json.Marshal(v)
}

type deltaParams struct {
	SessionID   string `json:"session_id"`
	ClientKeyID string `json:"client_key_id"`
	Text        string `json:"text"`
}

// Reason returns payload.reason when the payload is an object with a
// string reason (session.error, session.close, …), else "".
func (e Event) Reason() string {
	var p struct {
		Reason string `json:"reason"`
	}
	if json.Unmarshal(e.Payload, &p) != nil {
		return ""
	}
	return p.Reason
}

// Reply is the outcome of Session.Send: the final assistant message and
// every event the server appended during the exchange (result.events of
// each leg of the tool loop, in order).
type Reply struct {
	Message Message
	Events  []Event
}

// Profile is the sanitized profile a session runs under.
type Profile struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	AllowedTools []string        `json:"allowed_tools"`
	MCPServers   []string        `json:"mcp_servers"`
	Provider     ProfileProvider `json:"provider"`
}

// ProfileProvider names the provider kind and model of a profile.
type ProfileProvider struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
}

// EventPage is one page of GET …/events. NextCursor is "" on the last page.
type EventPage struct {
	Items      []Event
	NextCursor string
}

// SubscribeOptions tune Session.Subscribe.
type SubscribeOptions struct {
	// SinceEventID, when set, replays the persisted events after this id
	// before the live stream.
	SinceEventID string
	// StreamDeltas asks for session.event_delta text previews (Baton
	// extension); they arrive as DeltaType events.
	StreamDeltas bool
}
