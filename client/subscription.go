package client

import (
	"context"
	"encoding/json"
	"io"
	"sync"
)

// Subscription is a live session.subscribe stream. Next is not safe for
// concurrent use; the other methods may be called at any time from any
// goroutine.
type Subscription struct {
	st     *stream
	cancel context.CancelFunc

	mu      sync.Mutex
	err     error // sticky: the error that ended the stream
	reason  string
	last    string
	reading bool
}

type subscribeParams struct {
	SinceEventID  string `json:"since_event_id,omitempty"`
	StreamDeltas  bool   `json:"stream_deltas,omitempty"`
	MaxFrameBytes int    `json:"max_frame_bytes,omitempty"` // see sendParams
}

// Subscribe opens a session.subscribe stream: with SinceEventID, the
// persisted events after that id first, then live events. ctx governs the
// whole subscription. No driver registration is needed. Close the
// subscription when done with it.
func (s *Session) Subscribe(ctx context.Context, opts SubscribeOptions) (*Subscription, error) {
	ctx, cancel := context.WithCancel(ctx)
	params := subscribeParams{SinceEventID: opts.SinceEventID, StreamDeltas: opts.StreamDeltas, MaxFrameBytes: s.h.c.max}
	st, err := s.h.c.openRPC(ctx, s.ID, s.Key, s.nextID.Add(1), "session.subscribe", params)
	if err != nil {
		cancel()
		return nil, err
	}
	return &Subscription{st: st, cancel: cancel, last: opts.SinceEventID}, nil
}

// Next returns the next event. When the server ends the stream — with a
// terminal result (Baton) or by closing it cleanly (BAE, after an
// unsubscribe or a session close) — it returns io.EOF. It returns a
// *LaggedError (errors.Is ErrLagged) when the subscriber fell behind, an
// *RPCError for an error frame and a *TransportError for a broken stream.
// If ctx is done first, the subscription is closed and ctx's error
// returned. After an error every call returns the same error.
func (sub *Subscription) Next(ctx context.Context) (Event, error) {
	sub.mu.Lock()
	if sub.err != nil {
		defer sub.mu.Unlock()
		return Event{}, sub.err
	}
	sub.reading = true
	sub.mu.Unlock()

	stop := context.AfterFunc(ctx, sub.cancel)
	ev, res, err := sub.st.next()
	stop()

	sub.mu.Lock()
	defer sub.mu.Unlock()
	sub.reading = false
	switch {
	case sub.err != nil: // closed meanwhile
	case err == nil && res == nil:
		if ev.ID != "" {
			sub.last = ev.ID
		}
		return ev, nil
	case ctx.Err() != nil:
		sub.err = ctx.Err()
	case res != nil:
		var r struct {
			Reason string `json:"reason"`
		}
		if json.Unmarshal(res, &r) == nil {
			sub.reason = r.Reason
		}
		sub.err = io.EOF
	default:
		sub.err = err
	}
	sub.cancel()
	sub.st.close()
	return Event{}, sub.err
}

// EndReason returns the reason of a terminal result that ended the
// stream ("unsubscribed", "session_closed", …), or "".
func (sub *Subscription) EndReason() string {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	return sub.reason
}

// LastEventID returns the id of the last event received (initially
// SinceEventID): the SinceEventID to resubscribe with after ErrLagged.
func (sub *Subscription) LastEventID() string {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	return sub.last
}

// Close ends the subscription on this side; a blocked Next returns. It
// does not end other subscriptions (see Session.Unsubscribe).
func (sub *Subscription) Close() error {
	sub.mu.Lock()
	if sub.err == nil {
		sub.err = ErrClosed
	}
	reading := sub.reading
	sub.mu.Unlock()
	sub.cancel()
	if !reading {
		sub.st.close()
	}
	return nil
}
