package engine

import (
	"context"
	"fmt"

	"github.com/baton-engine/baton"
)

// In a cluster (docs/cluster.md) a session's runtime lives on the node
// that holds its lease. The cluster layer tells the engine when this node
// gains a session it did not open (Adopt) and when it loses one (Evict);
// between the two, requests for the session reach this engine only.

// reasonTurnInterrupted is the session.error reason Adopt records for a
// turn that was running on a node that stopped.
const reasonTurnInterrupted = "turn_interrupted"

// interruptTypes are the events that tell whether a turn was running
// when the session's previous owner stopped: a client message with no
// server message, error or close after it.
var interruptTypes = []string{baton.EventClientMessage, baton.EventServerMessage, baton.EventSessionError, baton.EventSessionClose}

// Adopt prepares the runtime of a session this node has just taken over
// from another owner, after the store was told it owns the session. A
// turn the previous owner was running is ended with a session.error
// {"reason":"turn_interrupted"} attributed to the client that sent its
// message: the session stays open and the next message starts a new turn.
// A paused turn is recovered from the log and its abandonment timer armed
// now, so a deadline passes whether or not a request comes in. Brain
// sessions are left to their executor's resume (brain_recover.go).
func (e *Engine) Adopt(ctx context.Context, sessionID string) error {
	s, err := e.store.Session(ctx, sessionID)
	if err != nil {
		return fmt.Errorf("adopt %s: %w", sessionID, err)
	}
	if s.State != baton.StateOpen {
		return nil
	}
	if machine, err := e.brainOf(ctx, s); err != nil || machine != "" {
		return err
	}
	evs, err := e.store.EventsOfType(ctx, sessionID, interruptTypes)
	if err != nil {
		return fmt.Errorf("adopt %s: %w", sessionID, err)
	}
	if n := len(evs); n > 0 && evs[n-1].Type == baton.EventClientMessage {
		last := evs[n-1]
		ev := baton.NewEvent(sessionID, last.ClientKeyID, baton.EventSessionError, map[string]any{
			"reason": reasonTurnInterrupted,
			"detail": "the node running this turn stopped before it ended; send the message again",
		})
		if err := e.store.Append(ctx, ev); err != nil {
			return fmt.Errorf("adopt %s: %w", sessionID, err)
		}
		e.log.Warn("turn interrupted by a node failure", "session_id", sessionID, "client_key_id", last.ClientKeyID)
	}
	a := e.actorFor(sessionID)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil
	}
	return a.loadLocked(ctx)
}

// CloseRevoked closes an open session that no participant can act in any
// more, its keys having been revoked on another node of the cluster: the
// same session.close {"reason":"client_key_revoked"} that RevokeClientKey
// records, attributed to the session's creator, and the same cascade.
func (e *Engine) CloseRevoked(ctx context.Context, sessionID string) error {
	s, err := e.store.Session(ctx, sessionID)
	if err != nil {
		return fmt.Errorf("close revoked %s: %w", sessionID, err)
	}
	if s.State != baton.StateOpen {
		return nil
	}
	ev := baton.NewEvent(sessionID, s.ClientKeyID, baton.EventSessionClose, map[string]string{"reason": "client_key_revoked"})
	closed, err := e.store.EndSession(ctx, sessionID, baton.StateClosed, ev)
	e.dropRow(sessionID)
	if err != nil {
		return fmt.Errorf("close revoked %s: %w", sessionID, err)
	}
	if e.auth != nil {
		e.auth.Forget(s.ClientKeyID)
	}
	if closed {
		e.forget(ctx, sessionID, s.ClientKeyID)
		e.log.Info("session closed: its client key was revoked on another node", "session_id", sessionID, "key_id", s.ClientKeyID)
	}
	return nil
}

// Busy reports whether the session has work in hand on this node: a
// running or queued turn, or a brain session. A session that is not busy
// can be handed to another node at once; a paused turn is in the log.
func (e *Engine) Busy(sessionID string) bool {
	e.mu.Lock()
	a := e.actors[sessionID]
	e.mu.Unlock()
	if a != nil {
		a.mu.Lock()
		busy := a.running != nil || len(a.queue) > 0
		a.mu.Unlock()
		if busy {
			return true
		}
	}
	return e.brains.get(sessionID) != nil
}

// ErrMoved ends the streams of a session this node stopped serving.
var ErrMoved = baton.Errorf(baton.ECodeUnavailable, "the session moved to another node; subscribe again with since_event_id set to the last event received")

// Evict drops the runtime of a session this node no longer owns: its
// lease was taken over (this node was paused or cut off past the lease)
// or handed over. The running turn is cancelled (its appends are refused
// by the store's fence anyway), queued messages fail, live streams end so
// their clients come back through the new owner, and the session's MCP
// connections close. Nothing is recorded: the new owner writes the log.
func (e *Engine) Evict(sessionID string) {
	e.mu.Lock()
	a := e.actors[sessionID]
	delete(e.actors, sessionID)
	e.mu.Unlock()
	if a != nil {
		a.close()
	}
	e.ccMu.Lock()
	delete(e.cc, sessionID)
	e.ccMu.Unlock()
	if e.mcp != nil {
		e.mcp.CloseSession(sessionID)
	}
	if e.hub != nil {
		e.hub.Fail(sessionID, ErrMoved)
	}
	if bs := e.brains.take(sessionID); bs != nil {
		bs.shut(baton.Errorf(baton.ECodeUnavailable, "the session moved to another node; retry"))
	}
}
