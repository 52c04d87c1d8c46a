package main

import (
	"math"

	"github.com/baton-engine/baton"

	"github.com/baton-engine/baton/hub"
	"github.com/baton-engine/baton/store"
)

// feedEnder ends a session's subscription feeds on this node.
type feedEnder interface{ EndFeeds(sessionID string) }

// ringFeeds turns the doorbells other nodes ring on commit (store.Listener)
// into rings of this node's subscription feeds, which then read the new
// events from the log (docs/cluster.md). A resync rings every observed
// session; an unsubscribe ends the session's feeds here too; a forget
// drops a revoked key or a changed profile from this node's caches.
func ringFeeds(h *hub.Hub, feeds feedEnder, forget func(id string)) func(store.Notice) {
	return func(n store.Notice) {
		switch {
		case n.Unsubscribe != "":
			feeds.EndFeeds(n.Unsubscribe)
		case n.Ended != "":
			h.End(n.Ended, baton.SubObserver) // the feeds see how it ended
		case n.Forget != "":
			forget(n.Forget)
		case n.Resync:
			for _, id := range h.Observed() {
				h.Ring(id, math.MaxInt64)
			}
		default:
			for id, seq := range n.Seqs {
				h.Ring(id, seq)
			}
		}
	}
}
