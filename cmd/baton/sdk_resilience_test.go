package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-engine/baton/client"
)

// End-to-end tests of the Go SDK across a server restart and a revoked
// key.

// retarget sends every request to the server it is currently pointed at:
// a restarted test server listens on a new port, and the SDK keeps the
// base URL it was configured with.
type retarget struct {
	tr *http.Transport

	mu   sync.Mutex
	host string
}

func newRetarget(t *testing.T, base string) *retarget {
	rt := &retarget{tr: http.DefaultTransport.(*http.Transport).Clone()}
	rt.point(base)
	t.Cleanup(rt.tr.CloseIdleConnections)
	return rt
}

// point aims rt at base, an http://host:port URL.
func (rt *retarget) point(base string) {
	rt.mu.Lock()
	rt.host = strings.TrimPrefix(base, "http://")
	rt.mu.Unlock()
}

func (rt *retarget) RoundTrip(req *http.Request) (*http.Response, error) {
	rt.mu.Lock()
	host := rt.host
	rt.mu.Unlock()
	r := req.Clone(req.Context())
	r.URL.Host, r.Host = host, ""
	return rt.tr.RoundTrip(r)
}

// TestSDKSendSurvivesRestart: the server restarts while a client tool
// handler runs, so the results go to a server that has forgotten the
// driver registration. Send registers again, sends the same results, and
// ends with the model's reply built on them; nothing is abandoned.
func TestSDKSendSurvivesRestart(t *testing.T) {
	t.Parallel()
	ctx := loopCtx(t)
	s := startServer(t)
	pro := loopProfile(t, s, map[string]any{"primary_provider": "script", "allowed_tools": []string{"get_time"}})
	_, key := s.clientKey("restart", pro)
	rt := newRetarget(t, s.clientURL)
	h := client.NewHarness(client.Config{BaseURL: "http://baton.test", ClientKey: key, HTTPClient: &http.Client{Transport: rt}})
	paused, resume := make(chan struct{}), make(chan struct{})
	h.RegisterTool(client.ToolDef{Name: "get_time", Description: "time"}, func(context.Context, json.RawMessage) (any, error) {
		close(paused)
		<-resume // the test restarts the server meanwhile
		return "12:00", nil
	})
	sess, err := h.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ch := goSend(ctx, sess, `call get_time {}`)
	select {
	case <-paused:
	case out := <-ch:
		t.Fatalf("Send returned before the tool ran: %v", out.err)
	case <-time.After(loopWait):
		t.Fatal("the tool was never called")
	}
	s.stop()
	s2 := runServer(t, s.dir, s.env)
	rt.point(s2.clientURL)
	close(resume)

	reply := mustReply(t, recv(t, ch), "get_time returned: 12:00")
	var results []string
	for _, ev := range sessionEvents(t, ctx, sess) {
		if ev.Type == "tool.result" {
			results = append(results, string(ev.Payload))
		}
	}
	if len(results) != 1 || !strings.Contains(results[0], "12:00") || strings.Contains(results[0], abandoned) {
		t.Errorf("tool.result events %v, want the one handler result", results)
	}
	if n := len(ofType(reply.Events, "server.message.send")); n != 2 {
		t.Errorf("%d server messages in the reply's events, want 2 (pause, answer)", n)
	}
	drivers, err := sess.Participants(ctx)
	if err != nil || len(drivers) != 1 {
		t.Errorf("participants after restart %v, %v; want the re-registered driver", drivers, err)
	}
}

// TestSDKRegisteredClientStopsWhenKeyRevoked: revoking the client key
// revokes the session key a registered client uses and closes the
// session; the handle stops (Done closes) and Err reports the 401
// instead of reconnecting forever.
func TestSDKRegisteredClientStopsWhenKeyRevoked(t *testing.T) {
	t.Parallel()
	ctx := loopCtx(t)
	s := startServer(t)
	pro := loopProfile(t, s, map[string]any{"primary_provider": "script"})
	keyID, key := s.clientKey("revoked", pro)
	sess, err := client.NewHarness(client.Config{BaseURL: s.clientURL, ClientKey: key}).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := client.RegisterClient(ctx, client.Config{BaseURL: s.clientURL}, sess.ID, sess.Key, "laptop", client.Never(),
		client.RegisteredTool{Name: "echo", Description: "echo", Handler: func(context.Context, json.RawMessage) (any, error) { return "ok", nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Abort()
	mustStatus(t, s.admin("DELETE", "/admin/v1/keys/"+keyID, nil), 204)
	select {
	case <-rc.Done():
	case <-time.After(loopWait):
		t.Fatal("the registered client kept retrying after its key was revoked")
	}
	// Revoking the key closes its session, which ends the client: the
	// next connect hears either (401 for the session key, 404 for the
	// client), whichever the server notices first.
	var v1 *client.V1Error
	if err := rc.Err(); !errors.As(err, &v1) || v1.Status != http.StatusUnauthorized && v1.Status != http.StatusNotFound {
		t.Fatalf("Err = %v, want the 401 or 404", err)
	}
}
