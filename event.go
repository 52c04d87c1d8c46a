package baton

import (
	"bytes"
	"context"
	"encoding/json"
	"time"
)

// Event is one entry of a session's append-only log. Seq is the event's
// position in its session, starting at 1, with no gaps.
type Event struct {
	ID          string
	SessionID   string
	Seq         int64
	ClientKeyID string // attribution; empty means none
	Type        string
	Payload     json.RawMessage
	CreatedAt   time.Time
}

// NewEvent builds an unsaved event; payload is marshalled to JSON without
// HTML escaping, so stored bytes match what BAE writes.
func NewEvent(sessionID, clientKeyID, typ string, payload any) *Event {
	return &Event{SessionID: sessionID, ClientKeyID: clientKeyID, Type: typ, Payload: MarshalJSON(payload)}
}

// MarshalJSON encodes v without HTML escaping. Values that cannot be
// encoded (never the plain data Baton builds) become {}.
func MarshalJSON(v any) json.RawMessage {
	b, err := EncodeJSON(v)
	if err != nil {
		return json.RawMessage("{}")
	}
	return b
}

// EncodeJSON is json.Marshal without HTML escaping, so stored and served
// bytes match what BAE writes.
func EncodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// EventLog is the durable, ordered event log.
type EventLog interface {
	// Append durably appends events (possibly of several sessions) and
	// fills in ID (if empty), Seq and CreatedAt. It returns only after the
	// events are committed; concurrent appends share one transaction.
	Append(ctx context.Context, events ...*Event) error
	// AppendQueued is Append that returns as soon as the events are queued
	// for commit; wait blocks until they are committed and reports how it
	// went. What one goroutine queues is committed in the order it queued.
	AppendQueued(ctx context.Context, events ...*Event) (wait func() error)
	// Events returns a page of a session's events, oldest first.
	Events(ctx context.Context, sessionID string, page Page) (items []*Event, next string, err error)
	// EventsAfter returns up to limit events of a session with Seq > after.
	EventsAfter(ctx context.Context, sessionID string, after int64, limit int) ([]*Event, error)
	// EventsOfType returns all of a session's events of the given types.
	EventsOfType(ctx context.Context, sessionID string, types []string) ([]*Event, error)
	// EventSeq returns the Seq of an event of the session, or 0 when the
	// session has no event with that id.
	EventSeq(ctx context.Context, sessionID, eventID string) (int64, error)
	// LastSeq returns the Seq of the session's last committed event (0
	// for none).
	LastSeq(ctx context.Context, sessionID string) (int64, error)
}

// Stats are catalogue counts for the activity summary log.
type Stats struct {
	Profiles     int64
	ClientKeys   int64
	OpenSessions int64
	Sessions     int64
	Events       int64
}

// Store is the whole durable store.
type Store interface {
	ProfileStore
	KeyStore
	SessionStore
	EventLog
	Stats(ctx context.Context) (Stats, error)
	Close() error
}

// OneLine returns a JSON value without line breaks: as it is when it has
// none, else compacted (a raw line break in valid JSON is always
// whitespace between tokens). Values copied into NDJSON frames as they are
// — payloads, message contents, the history a provider.request repeats —
// must not split their line, and a client may send its message
// pretty-printed. A value that is not valid JSON is returned unchanged.
func OneLine(raw json.RawMessage) json.RawMessage {
	if bytes.IndexByte(raw, '\n') < 0 && bytes.IndexByte(raw, '\r') < 0 {
		return raw
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}
