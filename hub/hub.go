// Package hub is Baton's in-process fan-out of committed session events.
// The store publishes each committed batch here, from its single writer,
// so every subscriber sees a session's events in sequence order. Each
// subscriber has a bounded buffer; one that falls behind is ended with
// baton.ErrLagged instead of slowing the publisher or the others.
package hub

import (
	"sync"

	"github.com/baton-engine/baton"
)

// DefaultBuffer is the per-subscriber buffer, as BAE's broadcast capacity.
const DefaultBuffer = 256

// shards spreads sessions over independent locks so publishing to one
// session never waits for another.
const shards = 64

// Hub implements baton.Hub.
type Hub struct {
	buffer int
	shard  [shards]struct {
		mu   sync.Mutex
		subs map[string]map[*sub]struct{}
	}
}

var _ baton.Hub = (*Hub)(nil)

// New returns a Hub whose subscribers buffer up to buffer notices
// (DefaultBuffer when ≤ 0).
func New(buffer int) *Hub {
	if buffer <= 0 {
		buffer = DefaultBuffer
	}
	h := &Hub{buffer: buffer}
	for i := range h.shard {
		h.shard[i].subs = make(map[string]map[*sub]struct{})
	}
	return h
}

func (h *Hub) shardOf(sessionID string) int {
	// FNV-1a over the id; ids are random, so any mix spreads well.
	var x uint32 = 2166136261
	for i := 0; i < len(sessionID); i++ {
		x ^= uint32(sessionID[i])
		x *= 16777619
	}
	return int(x % shards)
}

type sub struct {
	h       *Hub
	session string
	kind    string
	ch      chan baton.Notice
	err     error // set before ch is closed; read after
	closed  bool  // guarded by the shard lock
}

func (s *sub) C() <-chan baton.Notice { return s.ch }
func (s *sub) Err() error             { return s.err }
func (s *sub) Close() {
	sh := &s.h.shard[s.h.shardOf(s.session)]
	sh.mu.Lock()
	s.h.endLocked(s, nil)
	sh.mu.Unlock()
}

// Subscribe starts a subscription to sessionID's feed.
func (h *Hub) Subscribe(sessionID, kind string) baton.Subscription {
	s := &sub{h: h, session: sessionID, kind: kind, ch: make(chan baton.Notice, h.buffer)}
	sh := &h.shard[h.shardOf(sessionID)]
	sh.mu.Lock()
	m := sh.subs[sessionID]
	if m == nil {
		m = make(map[*sub]struct{})
		sh.subs[sessionID] = m
	}
	m[s] = struct{}{}
	sh.mu.Unlock()
	return s
}

// endLocked removes s and closes its channel; the shard lock is held.
func (h *Hub) endLocked(s *sub, err error) {
	if s.closed {
		return
	}
	s.closed = true
	s.err = err
	close(s.ch)
	sh := &h.shard[h.shardOf(s.session)]
	if m := sh.subs[s.session]; m != nil {
		delete(m, s)
		if len(m) == 0 {
			delete(sh.subs, s.session)
		}
	}
}

// Publish delivers notices to their sessions' subscribers.
func (h *Hub) Publish(notices ...baton.Notice) {
	for _, n := range notices {
		id := sessionOf(n)
		sh := &h.shard[h.shardOf(id)]
		sh.mu.Lock()
		for s := range sh.subs[id] {
			select {
			case s.ch <- n:
			default:
				h.endLocked(s, baton.ErrLagged)
			}
		}
		sh.mu.Unlock()
	}
}

// End ends the session's subscriptions of kind, or all of them when kind
// is empty.
func (h *Hub) End(sessionID, kind string) {
	sh := &h.shard[h.shardOf(sessionID)]
	sh.mu.Lock()
	for s := range sh.subs[sessionID] {
		if kind == "" || s.kind == kind {
			h.endLocked(s, nil)
		}
	}
	sh.mu.Unlock()
}

// Fail ends every subscription of sessionID, or of every session when
// sessionID is empty, with err.
func (h *Hub) Fail(sessionID string, err error) {
	if sessionID != "" {
		sh := &h.shard[h.shardOf(sessionID)]
		sh.mu.Lock()
		for s := range sh.subs[sessionID] {
			h.endLocked(s, err)
		}
		sh.mu.Unlock()
		return
	}
	for i := range h.shard {
		sh := &h.shard[i]
		sh.mu.Lock()
		for _, m := range sh.subs {
			for s := range m {
				h.endLocked(s, err)
			}
		}
		sh.mu.Unlock()
	}
}

// Ring tells the session's observer subscriptions that another node
// committed its events up to seq (a baton.Ring). A subscriber whose
// buffer is full is ended with baton.ErrLagged, as by Publish.
func (h *Hub) Ring(sessionID string, seq int64) {
	n := baton.Notice{Ring: &baton.Ring{SessionID: sessionID, Seq: seq}}
	sh := &h.shard[h.shardOf(sessionID)]
	sh.mu.Lock()
	for s := range sh.subs[sessionID] {
		if s.kind != baton.SubObserver {
			continue
		}
		select {
		case s.ch <- n:
		default:
			h.endLocked(s, baton.ErrLagged)
		}
	}
	sh.mu.Unlock()
}

// Observed returns the sessions that have observer subscriptions, which
// a resync rings.
func (h *Hub) Observed() []string {
	var out []string
	for i := range h.shard {
		sh := &h.shard[i]
		sh.mu.Lock()
		for id, m := range sh.subs {
			for s := range m {
				if s.kind == baton.SubObserver {
					out = append(out, id)
					break
				}
			}
		}
		sh.mu.Unlock()
	}
	return out
}

func sessionOf(n baton.Notice) string {
	if n.Event != nil {
		return n.Event.SessionID
	}
	if n.Delta != nil {
		return n.Delta.SessionID
	}
	if n.Ring != nil {
		return n.Ring.SessionID
	}
	return ""
}
