package baton

import (
	"encoding/json"
	"errors"
)

// Notice is one item of a session's live feed: a committed event, a
// streamed text delta of a running model call (never persisted), or, in
// a cluster, a Ring.
type Notice struct {
	Event *Event
	Delta *Delta
	Ring  *Ring
}

// Ring says that another node committed a session's events up to Seq
// (docs/cluster.md): the doorbell, not the events. Only observer
// subscriptions get rings; they read what they have not seen from the
// log, which stays the truth.
type Ring struct {
	SessionID string
	Seq       int64
}

// Delta is a piece of assistant text streamed while a model call runs,
// or a brain's live preview of one of its events: TurnID and EventID name
// the event, and Preview carries a preview that is not text (tool input,
// thinking) as the executor sent it.
type Delta struct {
	SessionID   string          `json:"session_id"`
	ClientKeyID string          `json:"client_key_id"`
	Text        string          `json:"text"`
	TurnID      string          `json:"turn_id,omitempty"`
	EventID     string          `json:"event_id,omitempty"`
	Preview     json.RawMessage `json:"delta,omitempty"`
}

// ErrLagged ends a subscription whose reader fell too far behind.
var ErrLagged = errors.New("lagged; reconnect with since_event_id")

// Subscription kinds: a session.subscribe stream ends on unsubscribe; a
// turn stream (a sendMessage response) does not.
const (
	SubObserver = "observer"
	SubTurn     = "turn"
)

// Subscription is one reader of a session's feed.
type Subscription interface {
	// C delivers notices in commit order; it is closed when the
	// subscription ends.
	C() <-chan Notice
	// Err says why C was closed: ErrLagged, or nil for a normal end.
	Err() error
	// Close ends the subscription.
	Close()
}

// Hub fans committed events out to live subscribers, in order, with a
// bounded buffer per subscriber.
type Hub interface {
	// Publish delivers notices to the current subscribers of their
	// sessions. It never blocks: a full subscriber is ended with ErrLagged.
	Publish(notices ...Notice)
	// Subscribe starts a subscription of the given kind.
	Subscribe(sessionID, kind string) Subscription
	// End ends the session's subscriptions of kind ("" = all kinds).
	End(sessionID, kind string)
	// Fail ends every subscription of the session, or of every session
	// when sessionID is empty, with err, which their Err reports: the
	// session moved to another node, or the server is shutting down.
	Fail(sessionID string, err error)
}
