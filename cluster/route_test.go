package cluster

import (
	"net/http"
	"sync"
	"testing"

	"github.com/baton-engine/baton"
)

// TestRouteOwnLease: a session opened on this node is served here from
// its first request, without a takeover: the lease stays at epoch 1 and
// the engine adopts nothing.
func TestRouteOwnLease(t *testing.T) {
	c := newTestCluster(t)
	a := c.start(t, "a", nodeSpec{})
	sid := a.openSession(t)
	for range 2 {
		if url, err := a.n.Route(t.Context(), sid); err != nil || url != "" {
			t.Fatalf("Route of a session opened here: %q %v", url, err)
		}
	}
	if got := a.n.Owned(); got != 1 {
		t.Errorf("a owns %d sessions, want 1", got)
	}
	wantEngine(t, a, nil, nil)
	wantHolder(t, a, sid, "a", 1)
}

// TestRouteMissingSession: a session that does not exist is served here,
// so that the handler says so; nothing is owned or adopted.
func TestRouteMissingSession(t *testing.T) {
	c := newTestCluster(t)
	a := c.start(t, "a", nodeSpec{})
	if url, err := a.n.Route(t.Context(), "ses_nowhere"); err != nil || url != "" {
		t.Errorf("Route of a missing session: %q %v, want here", url, err)
	}
	if got := a.n.Owned(); got != 0 {
		t.Errorf("a owns %d sessions", got)
	}
	wantEngine(t, a, nil, nil)
}

// TestRouteRemoteCached: another node's live lease is remembered, so
// that the next requests do not read the database; a fresh read
// (cached false) sees a change.
func TestRouteRemoteCached(t *testing.T) {
	c := newTestCluster(t)
	a, b, d := c.start(t, "a", nodeSpec{}), c.start(t, "b", nodeSpec{}), c.start(t, "d", nodeSpec{})
	sid := a.openSession(t)
	ctx := t.Context()
	if url, err := b.n.Route(ctx, sid); err != nil || url != a.srv.URL {
		t.Fatalf("b's Route: %q %v, want a at %s", url, err, a.srv.URL)
	}
	c.expire(t, sid)
	if url, err := d.n.route(ctx, sid, false); err != nil || url != "" {
		t.Fatalf("d taking over: %q %v", url, err)
	}
	if url, err := b.n.Route(ctx, sid); err != nil || url != a.srv.URL {
		t.Errorf("b's cached Route: %q %v, want a still", url, err)
	}
	if url, err := b.n.route(ctx, sid, false); err != nil || url != d.srv.URL {
		t.Errorf("b's fresh route: %q %v, want d at %s", url, err, d.srv.URL)
	}
	wantEngine(t, b, nil, nil)
}

// TestRouteNoAddress: a live owner that registered no URL cannot be
// forwarded to: unavailable, rather than a request to nowhere.
func TestRouteNoAddress(t *testing.T) {
	c := newTestCluster(t)
	a, b := c.start(t, "a", nodeSpec{}), c.start(t, "b", nodeSpec{})
	sid := a.openSession(t)
	if err := a.db.RegisterNode(t.Context(), &baton.Node{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.n.Route(t.Context(), sid); baton.ErrorCode(err) != baton.ECodeUnavailable {
		t.Errorf("Route to an owner without a URL: %v, want %s", err, baton.ECodeUnavailable)
	}
	wantEngine(t, b, nil, nil)
}

// TestRouteConcurrentTakeover: many requests, on two nodes at once, for
// a session whose owner died: one node takes it over, once, and every
// request is served there.
func TestRouteConcurrentTakeover(t *testing.T) {
	c := newTestCluster(t)
	a := c.start(t, "a", nodeSpec{})
	nodes := []*testNode{c.start(t, "b", nodeSpec{}), c.start(t, "d", nodeSpec{})}
	sid := a.openSession(t)
	a.kill()
	c.expire(t, sid)

	const perNode = 8
	var mu sync.Mutex
	servedBy := map[string]int{}
	var wg sync.WaitGroup
	for _, tn := range nodes {
		for range perNode {
			wg.Go(func() {
				resp, s, b, err := c.do(t.Context(), tn, http.MethodPost, "/api/v1/sessions/"+sid+"/rpc", nil)
				if err != nil {
					t.Error(err)
					return
				}
				if resp.StatusCode != http.StatusCreated {
					t.Errorf("request to %s: %d %s", tn.id, resp.StatusCode, b)
					return
				}
				mu.Lock()
				servedBy[s.Node]++
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	var adopted []string
	var winner string
	for _, tn := range nodes {
		ad, ev := tn.eng.calls()
		if len(ev) != 0 {
			t.Errorf("%s evicted %v", tn.id, ev)
		}
		if len(ad) > 0 {
			winner = tn.id
		}
		adopted = append(adopted, ad...)
	}
	if len(adopted) != 1 || adopted[0] != sid {
		t.Fatalf("adopted %v across the nodes, want %s once", adopted, sid)
	}
	if servedBy[winner] != 2*perNode || len(servedBy) != 1 {
		t.Errorf("served by %v, want all %d by %s", servedBy, 2*perNode, winner)
	}
	wantHolder(t, nodes[0], sid, winner, 2)
}

// TestRouteRestartSameID: a node restarted under the same id (a stable
// BATON_NODE_ID) before its previous run's leases lapsed does not take
// them for its own: its store does not fence them in and its engine does
// not hold them. They are taken over, at a new epoch, and adopted, so
// that the node can append to the sessions it serves.
func TestRouteRestartSameID(t *testing.T) {
	c := newTestCluster(t)
	first := c.start(t, "a", nodeSpec{})
	sid := first.openSession(t)
	first.kill()

	again := c.start(t, "a", nodeSpec{})
	ctx := t.Context()
	if err := again.n.renew(ctx); err != nil {
		t.Fatal(err)
	}
	if url, err := again.n.Route(ctx, sid); err != nil || url != "" {
		t.Fatalf("Route after the restart: %q %v, want here", url, err)
	}
	wantEngine(t, again, []string{sid}, nil)
	wantHolder(t, again, sid, "a", 2)
	if err := again.db.Append(ctx, baton.NewEvent(sid, "", "x", map[string]string{})); err != nil {
		t.Errorf("the restarted node serves %s but cannot append to it: %v", sid, err)
	}
}
