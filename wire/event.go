package wire

import (
	"encoding/json"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/rawjson"
)

// Events go out as EventView objects (spec-client §2.5):
// {"id","session_id","client_key_id"(null when unattributed),"event_type",
// "payload","created_at"}. The appenders below write them directly; the
// tests check them against encoding/json.

// AppendEventNotification appends the session.event notification frame of
// ev to dst without building intermediate values: this is the hot path of
// every stream.
func AppendEventNotification(dst []byte, ev *baton.Event) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","method":"session.event","params":`...)
	dst = AppendEventView(dst, ev)
	return append(dst, '}')
}

// AppendEventView appends ev's EventView JSON to dst. The payload is
// copied as stored: the store only holds valid JSON.
func AppendEventView(dst []byte, ev *baton.Event) []byte {
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
	dst = append(dst, `,"payload":`...)
	if len(ev.Payload) == 0 {
		dst = append(dst, "{}"...)
	} else {
		dst = append(dst, baton.OneLine(ev.Payload)...)
	}
	dst = append(dst, `,"created_at":"`...)
	dst = ev.CreatedAt.UTC().AppendFormat(dst, baton.TimeLayout)
	return append(dst, `"}`...)
}

// AppendTurnResult appends the terminal frame of a sendMessage:
// {"jsonrpc":"2.0","id":id,"result":{"message":…,"events":[…]}}. The
// events, which carry whole provider requests, are copied, not re-encoded.
func AppendTurnResult(dst []byte, id json.RawMessage, msg baton.Message, events []*baton.Event) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = append(dst, nullID(id)...)
	dst = append(dst, `,"result":{"message":{"role":`...)
	dst = rawjson.AppendString(dst, msg.Role, false)
	dst = append(dst, `,"content":`...)
	if len(msg.Content) == 0 {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, baton.OneLine(msg.Content)...)
	}
	dst = append(dst, `},"events":[`...)
	for i, ev := range events {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendEventView(dst, ev)
	}
	return append(dst, "]}}"...)
}

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
