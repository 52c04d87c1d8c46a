package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/client"
	"github.com/baton-engine/baton/store"
)

// The SDK crash test: a real `baton serve` process is killed with SIGKILL
// while sessions make client-tool round trips through the Go SDK, and
// restarted on the same data, a few times over.

const (
	crashSDKSessions = 50  // sessions, each with its own harness and subscription
	crashSDKKills    = 3   // SIGKILLs; the run ends on the server started after the last
	crashSDKRounds   = 100 // client-tool round trips per life of the server before its kill
)

// crashSession is one session of the SDK crash test and what its client saw.
type crashSession struct {
	sess    *client.Session
	first   string // id of the session's first event: the subscription replays after it
	abandon bool   // answers a paused turn with a new message instead of results

	mu       sync.Mutex
	noted    []client.Event // sendMessage notifications, in arrival order
	replied  []client.Event // the events of the sendMessage results
	subbed   []client.Event // the subscription's events, across its resumptions
	progress chan struct{}  // signalled after each subscription event
}

func (cs *crashSession) note(ev client.Event) {
	cs.mu.Lock()
	cs.noted = append(cs.noted, ev)
	cs.mu.Unlock()
}

// crashRun coordinates the lives of the server: the tool handlers count
// round trips and the one that reaches the target kills the server; every
// driver and subscriber then reports down, and waits for the restart.
type crashRun struct {
	t  *testing.T
	rt *retarget

	mu     sync.Mutex
	srv    *child
	life   int                // index of the running server
	rounds int                // round trips in this life
	dying  bool               // the server of this life is being killed
	paused [crashSDKKills]int // turns left paused by kill i, answered after it
	cut    [crashSDKKills]int // turns kill i cut short before the model answered

	killed  [crashSDKKills]chan struct{} // closed once the server of life i is dead
	down    [crashSDKKills]sync.WaitGroup
	resumed [crashSDKKills]chan struct{} // closed once the server of life i+1 listens
}

// roundTrip is called by a tool handler: the crashSDKRounds-th round trip
// of a life that is not the last kills the server before it returns, so
// that turn is left paused on its result.
func (r *crashRun) roundTrip() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.life >= crashSDKKills || r.dying {
		return
	}
	r.rounds++
	if r.rounds == crashSDKRounds {
		r.dying = true
		r.srv.kill()
		close(r.killed[r.life])
	}
}

// failed reports whether err is explained by a kill: the server of life
// is being killed or already dead.
func (r *crashRun) failed(life int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.life > life || r.dying
}

// downAndWait records that a driver or subscriber lost the server of life
// and waits for the next one.
func (r *crashRun) downAndWait(ctx context.Context, life int) error {
	r.down[life].Done()
	select {
	case <-r.resumed[life]:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func TestCrashSDKRoundTrips(t *testing.T) { testCrashSDKRoundTrips(t, nil) }

// TestCrashSDKRoundTripsOnPostgres runs the SDK crash test with the server
// on PostgreSQL when BATON_TEST_POSTGRES_DSN is set.
func TestCrashSDKRoundTripsOnPostgres(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("crash test starts real processes")
	}
	dsn := postgresSchema(t)
	testCrashSDKRoundTrips(t, map[string]string{"BATON_DATABASE_URL": dsn})
}

// testCrashSDKRoundTrips kills the server crashSDKKills times while
// crashSDKSessions sessions make client-tool round trips through the SDK,
// each kill from inside a tool handler once the life's round trips reach
// crashSDKRounds. While the server is down the test opens the store and
// checks that every session's log is numbered 1…n without gap or
// duplicate and holds every event the client saw. After each restart every
// session answers the turn the crash left paused, if any, from the log,
// and carries on; after the last, each takes one more round trip, and the
// events of every client stream are checked against the log as the
// admin API serves it.
func testCrashSDKRoundTrips(t *testing.T, extra map[string]string) {
	if testing.Short() {
		t.Skip("crash test starts real processes")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*loopWait)
	defer cancel()
	srv, env, adminKey, _ := crashServer(t, extra)
	r := call(t, "POST", srv.adminURL+"/admin/v1/profiles", adminKey,
		map[string]any{"name": "tools", "primary_provider": "script", "allowed_tools": []string{"get_time"}})
	mustStatus(t, r, 201)
	r = call(t, "POST", srv.adminURL+"/admin/v1/keys", adminKey, map[string]any{"name": "sdk", "profile_id": r.json(t)["id"]})
	mustStatus(t, r, 201)
	key := r.json(t)["key"].(string)

	run := &crashRun{t: t, srv: srv, rt: newRetarget(t, srv.clientURL)}
	run.rt.tr.MaxIdleConnsPerHost = 2 * crashSDKSessions
	for i := range crashSDKKills {
		run.killed[i] = make(chan struct{})
		run.resumed[i] = make(chan struct{})
		run.down[i].Add(2 * crashSDKSessions) // a driver and a subscriber per session
	}
	hc := &http.Client{Transport: run.rt}

	sessions := make([]*crashSession, crashSDKSessions)
	for i := range sessions {
		cs := &crashSession{progress: make(chan struct{}, 1), abandon: i%2 == 1}
		h := client.NewHarness(client.Config{BaseURL: "http://baton.test", ClientKey: key, HTTPClient: hc})
		h.OnEvent(cs.note)
		h.RegisterTool(client.ToolDef{Name: "get_time", Description: "time"}, func(_ context.Context, in json.RawMessage) (any, error) {
			run.roundTrip()
			var p struct{ N int }
			json.Unmarshal(in, &p)
			return fmt.Sprintf("n=%d", p.N), nil
		})
		sess, err := h.Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		page, err := sess.Events(ctx, "", 1)
		if err != nil || len(page.Items) != 1 {
			t.Fatalf("first event: %v, %v", page, err)
		}
		cs.sess, cs.first = sess, page.Items[0].ID
		sessions[i] = cs
	}

	var drivers, subscribers sync.WaitGroup
	subCtx, stopSubs := context.WithCancel(ctx)
	defer func() {
		cancel() // a failed run leaves goroutines waiting for a restart
		stopSubs()
		drivers.Wait()
		subscribers.Wait()
	}()
	for _, cs := range sessions {
		drivers.Add(1)
		subscribers.Add(1)
		go func() { defer subscribers.Done(); run.subscribe(subCtx, cs) }()
		go func() { defer drivers.Done(); run.drive(ctx, cs) }()
	}

	for life := range crashSDKKills {
		select {
		case <-run.killed[life]:
		case <-ctx.Done():
			t.Fatalf("life %d: the server was never killed: %v", life, ctx.Err())
		}
		run.down[life].Wait()
		if t.Failed() {
			return // a client failed while the server was up
		}
		storeURL := env["BATON_DATABASE_URL"]
		if storeURL == "" {
			storeURL = env["BAE_DB_PATH"]
		}
		checkCrashLog(t, ctx, storeURL, life, sessions)
		next := startChild(t, env)
		run.rt.point(next.clientURL)
		run.mu.Lock()
		run.srv, run.life, run.rounds, run.dying = next, life+1, 0, false
		run.mu.Unlock()
		close(run.resumed[life])
	}
	drivers.Wait()
	if t.Failed() {
		return
	}
	run.mu.Lock()
	t.Logf("after each kill: paused turns answered %v, turns cut short %v", run.paused, run.cut)
	for life, n := range run.paused {
		if n == 0 { // the killing handler's own turn at least
			t.Errorf("no paused turn was left to answer after kill %d", life+1)
		}
	}
	admin := run.srv.adminURL
	run.mu.Unlock()

	for _, cs := range sessions {
		log := adminEvents(t, admin, adminKey, cs.sess.ID)
		checkSeen(t, cs, log, -1)
		subbed := caughtUp(t, ctx, cs, len(log)-1)
		// The subscription, resumed after each crash from the last event
		// it had, saw the whole log after the first event, once each.
		if got, want := eventIDs(subbed), eventIDs(log[1:]); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("session %s: subscription saw %d events, the log has %d after the first:\n got %v\nwant %v",
				cs.sess.ID, len(got), len(want), got, want)
		}
	}
}

// caughtUp waits until cs's subscription has received n events and
// returns them.
func caughtUp(t *testing.T, ctx context.Context, cs *crashSession, n int) []client.Event {
	t.Helper()
	for {
		cs.mu.Lock()
		subbed := cs.subbed
		cs.mu.Unlock()
		if len(subbed) >= n {
			return subbed
		}
		select {
		case <-cs.progress:
		case <-ctx.Done():
			t.Fatalf("session %s: the subscription got %d of the log's %d events after the first: %v", cs.sess.ID, len(subbed), n, ctx.Err())
		}
	}
}

// drive makes round trips on cs until the run ends: after each restart it
// answers the turn the crash left paused, if any, and after the last
// restart it makes one more round trip and returns.
func (r *crashRun) drive(ctx context.Context, cs *crashSession) {
	life, n, recover := 0, 0, false
	var left []string // reply lines the next message owes a turn the crash cut short
	withNew := false  // and whether its own call's line follows them
	for {
		err := func() error {
			if recover {
				var err error
				if left, withNew, err = r.recoverTurn(ctx, cs, life); err != nil {
					return err
				}
				recover = false
			}
			n++
			reply, err := cs.sess.Send(ctx, fmt.Sprintf(`call get_time {"n":%d}`, n))
			if err != nil {
				return err
			}
			cs.mu.Lock()
			cs.replied = append(cs.replied, reply.Events...)
			cs.mu.Unlock()
			want := fmt.Sprintf("get_time returned: n=%d", n)
			switch {
			case left != nil && withNew:
				want = strings.Join(left, "\n") + "\n" + want
			case left != nil:
				want = strings.Join(left, "\n")
			}
			if reply.Message.Text() != want {
				r.t.Errorf("session %s: reply %q, want %q", cs.sess.ID, reply.Message.Text(), want)
			}
			left, withNew = nil, false
			return nil
		}()
		switch {
		case err == nil && life == crashSDKKills:
			return // the new message after the last restart went through
		case err == nil:
		case !r.failed(life):
			r.t.Errorf("session %s, life %d: %v", cs.sess.ID, life, err)
			if life < crashSDKKills {
				r.down[life].Done()
			}
			return
		default:
			if r.downAndWait(ctx, life) != nil {
				return
			}
			life++
			recover = true
		}
	}
}

// recoverTurn reads cs's log after a restart and deals with the turn the
// crash left, by the last message event of the log:
//
//   - a server message calling tools is a paused turn. recoverTurn answers
//     its calls with "recovered" results and checks that the turn
//     completes; or, on every other session, leaves it to the next round
//     trip's message, which continues the paused turn (the owner's new
//     message answers its pending calls as abandoned), so the reply is a
//     "failed" line for each call;
//   - a client message is a turn the crash cut short before the model
//     answered it. The engine keeps that message in the history and the
//     next one is merged with it (the same as after a failed turn), so
//     recoverTurn returns what the next reply owes it (see cutShort);
//   - otherwise the last turn ended before the crash and nothing is left.
func (r *crashRun) recoverTurn(ctx context.Context, cs *crashSession, life int) (left []string, withNew bool, err error) {
	var last client.Event
	cursor := ""
	for {
		page, err := cs.sess.Events(ctx, cursor, 200)
		if err != nil {
			return nil, false, err
		}
		for _, ev := range page.Items {
			if ev.Type == baton.EventClientMessage || ev.Type == baton.EventServerMessage {
				last = ev
			}
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	var msg client.Message
	if err := json.Unmarshal(last.Payload, &msg); err != nil {
		r.t.Errorf("session %s: %s %s: %v", cs.sess.ID, last.Type, last.Payload, err)
		return nil, false, nil
	}
	if last.Type == baton.EventClientMessage {
		r.mu.Lock()
		r.cut[life-1]++
		r.mu.Unlock()
		left, withNew = cutShort(msg)
		return left, withNew, nil
	}
	calls := msg.ToolCalls()
	if len(calls) == 0 {
		return nil, false, nil
	}
	r.mu.Lock()
	r.paused[life-1]++
	r.mu.Unlock()
	if cs.abandon {
		for _, c := range calls {
			left = append(left, c.Name+" failed: "+abandoned)
		}
		return left, false, nil
	}
	results := make([]client.ToolResult, len(calls))
	var want []string
	for i, c := range calls {
		results[i] = client.ToolResult{ToolUseID: c.ID, Content: json.RawMessage(`"recovered"`)}
		want = append(want, c.Name+" returned: recovered")
	}
	reply, err := cs.sess.Send(ctx, results)
	if err != nil {
		return nil, false, err
	}
	cs.mu.Lock()
	cs.replied = append(cs.replied, reply.Events...)
	cs.mu.Unlock()
	if got := reply.Message.Text(); got != strings.Join(want, "\n") {
		r.t.Errorf("session %s: the turn paused at the crash ended with %q, want %q", cs.sess.ID, got, strings.Join(want, "\n"))
	}
	// The results resumed the paused turn (a tool.result for each of its
	// calls), not a new turn that happens to hold them.
	var resumed []string
	for _, ev := range ofType(reply.Events, baton.EventToolResult) {
		var p struct {
			ToolUseID string `json:"tool_use_id"`
		}
		json.Unmarshal(ev.Payload, &p)
		resumed = append(resumed, p.ToolUseID)
	}
	var ids []string
	for _, c := range calls {
		ids = append(ids, c.ID)
	}
	if fmt.Sprint(resumed) != fmt.Sprint(ids) {
		r.t.Errorf("session %s: answering the turn paused at the crash logged results for %v, want %v (events %v)", cs.sess.ID, resumed, ids, types(reply.Events))
	}
	return nil, false, nil
}

// cutShort returns the reply lines the scripted model gives for the client
// message msg, left unanswered by a crash, when the next round trip's
// message is merged with it, and whether the new call's line follows
// them: left-over tool results get a line each and the new call line goes
// unanswered (results come first); a left-over call line gets its line,
// followed by the new call's.
func cutShort(msg client.Message) ([]string, bool) {
	var lines []string
	for _, b := range msg.Blocks() {
		if b.Type == "tool_result" {
			var text string
			json.Unmarshal(b.Content, &text)
			verb := " returned: "
			if b.IsError {
				verb = " failed: "
			}
			lines = append(lines, "get_time"+verb+text)
		}
	}
	if len(lines) > 0 {
		return lines, false
	}
	var in struct{ N int }
	json.Unmarshal([]byte(strings.TrimPrefix(msg.Text(), "call get_time ")), &in)
	return []string{fmt.Sprintf("get_time returned: n=%d", in.N)}, true
}

// subscribe follows cs's events from its first one until ctx ends,
// resuming after each crash (or lag) from the last event it received.
func (r *crashRun) subscribe(ctx context.Context, cs *crashSession) {
	life, since := 0, cs.first
	for {
		err := func() error {
			sub, err := cs.sess.Subscribe(ctx, client.SubscribeOptions{SinceEventID: since})
			if err != nil {
				return err
			}
			defer sub.Close()
			for {
				ev, err := sub.Next(ctx)
				if err != nil {
					return err
				}
				since = ev.ID
				cs.mu.Lock()
				cs.subbed = append(cs.subbed, ev)
				cs.mu.Unlock()
				select {
				case cs.progress <- struct{}{}:
				default:
				}
			}
		}()
		switch {
		case ctx.Err() != nil:
			if life < crashSDKKills {
				r.down[life].Done()
			}
			return
		case errors.Is(err, client.ErrLagged):
		case life < crashSDKKills && r.failed(life):
			if r.downAndWait(ctx, life) != nil {
				return
			}
			life++
		default:
			r.t.Errorf("session %s, life %d: subscription: %v", cs.sess.ID, life, err)
			if life < crashSDKKills {
				r.down[life].Done()
			}
			return
		}
	}
}

// checkCrashLog opens the store of the dead server and checks every
// session's log: numbered 1…n without gap or duplicate, holding every
// event its client saw.
func checkCrashLog(t *testing.T, ctx context.Context, url string, life int, sessions []*crashSession) {
	t.Helper()
	db, err := store.Open(ctx, store.Options{URL: url})
	if err != nil {
		t.Fatalf("open the store after kill %d: %v", life+1, err)
	}
	defer db.Close()
	for _, cs := range sessions {
		var log []client.Event
		cursor := ""
		for {
			items, next, err := db.Events(ctx, cs.sess.ID, baton.Page{Cursor: cursor, Limit: 500})
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range items {
				if ev.Seq != int64(len(log)+1) {
					t.Fatalf("after kill %d, session %s: event %d of the log has seq %d", life+1, cs.sess.ID, len(log)+1, ev.Seq)
				}
				log = append(log, client.Event{ID: ev.ID, SessionID: ev.SessionID, ClientKeyID: ev.ClientKeyID, Type: ev.Type, Payload: ev.Payload})
			}
			if next == "" {
				break
			}
			cursor = next
		}
		checkSeen(t, cs, log, life)
	}
}

// checkSeen checks that every event cs's client saw (notifications,
// results, subscription) is in log with the same type, attribution and
// payload, and that each stream saw them in log order, once each.
func checkSeen(t *testing.T, cs *crashSession, log []client.Event, life int) {
	t.Helper()
	at := make(map[string]int, len(log))
	for i, ev := range log {
		if _, dup := at[ev.ID]; dup {
			t.Errorf("session %s: event %s twice in the log", cs.sess.ID, ev.ID)
		}
		at[ev.ID] = i
	}
	when := "after the last restart"
	if life >= 0 {
		when = fmt.Sprintf("after kill %d", life+1)
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for _, stream := range []struct {
		name string
		evs  []client.Event
	}{{"notification", cs.noted}, {"result", cs.replied}, {"subscription", cs.subbed}} {
		prev := -1
		for _, ev := range stream.evs {
			i, ok := at[ev.ID]
			if !ok {
				t.Errorf("%s, session %s: %s event %s (%s) the client saw is not in the log", when, cs.sess.ID, stream.name, ev.ID, ev.Type)
				continue
			}
			got := log[i]
			if got.Type != ev.Type || got.ClientKeyID != ev.ClientKeyID || string(got.Payload) != string(ev.Payload) {
				t.Errorf("%s, session %s: %s event %s differs from the log:\n saw %s %s %s\n log %s %s %s", when, cs.sess.ID,
					stream.name, ev.ID, ev.Type, ev.ClientKeyID, ev.Payload, got.Type, got.ClientKeyID, got.Payload)
			}
			if i <= prev {
				t.Errorf("%s, session %s: %s event %s (log position %d) came after position %d", when, cs.sess.ID, stream.name, ev.ID, i, prev)
			}
			prev = i
		}
	}
}

// adminEvents reads a session's whole log through the admin events API.
func adminEvents(t testing.TB, adminURL, adminKey, sid string) []client.Event {
	t.Helper()
	var out []client.Event
	cursor := ""
	for {
		r := call(t, "GET", fmt.Sprintf("%s/admin/v1/sessions/%s/events?limit=200&cursor=%s", adminURL, sid, cursor), adminKey, nil)
		mustStatus(t, r, 200)
		var page struct {
			Items []client.Event `json:"items"`
			Next  *string        `json:"next_cursor"`
		}
		if err := json.Unmarshal(r.body, &page); err != nil {
			t.Fatal(err)
		}
		out = append(out, page.Items...)
		if page.Next == nil {
			return out
		}
		cursor = *page.Next
	}
}

func eventIDs(evs []client.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}
