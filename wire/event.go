package wire

import (
	"encoding/json"
	"strconv"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/rawjson"
)

// Events go out as EventView objects (BAE's client API):
// {"id","session_id","client_key_id"(null when unattributed),"event_type",
// "payload","created_at"}. The appenders below write them directly; the
// tests check them against encoding/json.

// AppendEventNotification appends the session.event notification frame of
// ev to dst without building intermediate values: this is the hot path of
// every stream.
func AppendEventNotification(dst []byte, ev *baton.Event) []byte {
	dst = append(dst, NotificationHead...)
	dst = AppendEventView(dst, ev)
	return append(dst, '}')
}

// NotificationHead opens a session.event notification frame; the event
// view and a closing brace follow.
const NotificationHead = `{"jsonrpc":"2.0","method":"session.event","params":`

// AppendEventView appends ev's EventView JSON to dst. The payload is
// copied as stored: the store only holds valid JSON.
func AppendEventView(dst []byte, ev *baton.Event) []byte {
	dst = AppendEventHead(dst, ev)
	dst = append(dst, EventPayload(ev)...)
	return AppendEventTail(dst, ev)
}

// An EventView goes out in three parts, so that a stream can write a
// large payload as it is instead of copying it into a frame buffer:
// AppendEventHead, EventPayload, AppendEventTail.

// AppendEventHead appends ev's EventView up to its payload.
func AppendEventHead(dst []byte, ev *baton.Event) []byte {
	dst = append(dst, `{"id":`...)
	dst = rawjson.AppendString(dst, ev.ID, false)
	dst = append(dst, `,"session_id":`...)
	dst = rawjson.AppendString(dst, ev.SessionID, false)
	dst = append(dst, `,"client_key_id":`...)
	if ev.ClientKeyID == "" {
		dst = append(dst, "null"...)
	} else {
		dst = rawjson.AppendString(dst, ev.ClientKeyID, false)
	}
	dst = append(dst, `,"event_type":`...)
	dst = rawjson.AppendString(dst, ev.Type, false)
	return append(dst, `,"payload":`...)
}

// EventPayload is ev's payload as an EventView carries it: on one line,
// {} when there is none.
func EventPayload(ev *baton.Event) []byte {
	if len(ev.Payload) == 0 {
		return []byte("{}")
	}
	return baton.OneLine(ev.Payload)
}

// AppendEventTail appends what follows an EventView's payload.
func AppendEventTail(dst []byte, ev *baton.Event) []byte {
	dst = append(dst, `,"created_at":"`...)
	dst = ev.CreatedAt.UTC().AppendFormat(dst, baton.TimeLayout)
	return append(dst, `"}`...)
}

// EventViewSize bounds the length of ev's EventView beyond its payload.
func EventViewSize(ev *baton.Event) int {
	// Escaping at most doubles a string (\u00XX is six bytes for one, but
	// ids, keys and types are ASCII names); the fixed text and the time are
	// under 128 bytes.
	return 128 + 2*(len(ev.ID)+len(ev.SessionID)+len(ev.ClientKeyID)+len(ev.Type))
}

// AppendOmitted appends the payload that stands in for one of n bytes
// left out of a frame to keep it under a client's max_frame_bytes
// (Baton extension): {"omitted_bytes":n}.
func AppendOmitted(dst []byte, n int) []byte {
	dst = append(dst, `{"omitted_bytes":`...)
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, '}')
}

// AppendTurnResult appends the terminal frame of a sendMessage:
// {"jsonrpc":"2.0","id":id,"result":{"message":…,"events":[…]}}. The
// events, which carry whole provider requests, are copied, not re-encoded.
func AppendTurnResult(dst []byte, id json.RawMessage, msg baton.Message, events []*baton.Event) []byte {
	dst = AppendTurnResultHead(dst, id, msg)
	dst = append(dst, MessageContent(msg)...)
	dst = append(dst, TurnResultEvents...)
	for i, ev := range events {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendEventView(dst, ev)
	}
	return append(dst, TurnResultTail...)
}

// The terminal frame of a sendMessage goes out in parts too:
// AppendTurnResultHead, MessageContent, TurnResultEvents, the event
// views separated by commas, TurnResultTail.

// AppendTurnResultHead appends the terminal frame up to the message's
// content.
func AppendTurnResultHead(dst []byte, id json.RawMessage, msg baton.Message) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, nullID(id)...)
	dst = append(dst, `,"result":{"message":{"role":`...)
	dst = rawjson.AppendString(dst, msg.Role, false)
	return append(dst, `,"content":`...)
}

// MessageContent is msg's content as a frame carries it: on one line, null
// when there is none.
func MessageContent(msg baton.Message) []byte {
	if len(msg.Content) == 0 {
		return []byte("null")
	}
	return baton.OneLine(msg.Content)
}

// TurnResultEvents and TurnResultTail are the terminal frame's text
// between the message's content and the first event view, and after the
// last.
const (
	TurnResultEvents = `},"events":[`
	TurnResultTail   = "]}}"
)

// DeltaNotification is the opt-in session.event_delta frame (Baton
// extension) carrying streamed assistant text; a brain's deltas also
// name their turn_id and event_id, and a preview that is not text comes
// as delta.
func DeltaNotification(d *baton.Delta) ([]byte, error) {
	return Notification("session.event_delta", d)
}

// AppendEventPage appends an events page, {"items":[…],"next_cursor":…},
// as both ports serve it. Payloads are copied as stored, not re-encoded:
// pages of a long session carry every provider request's history.
func AppendEventPage(dst []byte, events []*baton.Event, next string) []byte {
	dst = append(dst, `{"items":[`...)
	for i, ev := range events {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendEventView(dst, ev)
	}
	dst = append(dst, `],"next_cursor":`...)
	if next == "" {
		dst = append(dst, "null"...)
	} else {
		dst = rawjson.AppendString(dst, next, false)
	}
	return append(dst, '}')
}
