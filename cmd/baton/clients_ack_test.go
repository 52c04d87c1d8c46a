package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-engine/baton/client"
)

// Acknowledging a registered client's result (docs/api.md, registered session clients): the
// result POST answers once the result is committed, whatever the other
// calls of the same model message are doing.

// ackWait bounds one result POST. It is far below the call timeout these
// tests configure, so a POST held until a sibling call resolves (or times
// out) fails here instead of passing late.
const ackWait = 60 * time.Second

// twoCalls is a model message with two calls to the raw client "lap".
const twoCalls = "call client__lap__echo {\"x\":1}\ncall client__lap__echo {\"x\":2}"

// postResult posts a call's result within ackWait and returns the answer.
func postResult(t *testing.T, url, token string, body any) *response {
	t.Helper()
	raw, _ := json.Marshal(body)
	ctx, cancel := context.WithTimeout(context.Background(), ackWait)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", url, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("result POST not answered within %v: %v", ackWait, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return &response{status: resp.StatusCode, header: resp.Header, body: b}
}

// callFeed is an open calls stream of a registered client.
type callFeed struct {
	body io.Closer
	rd   *bufio.Reader
}

// openCalls opens the calls stream of client id at base (the client
// URL plus the session's clients path).
func openCalls(t *testing.T, ctx context.Context, base, id, token string) *callFeed {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/"+id+"/calls", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("calls stream: %d", resp.StatusCode)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return &callFeed{body: resp.Body, rd: bufio.NewReader(resp.Body)}
}

// next reads one call; x is its input's "x".
func (f *callFeed) next(t *testing.T) (callID string, x float64) {
	t.Helper()
	line, err := f.rd.ReadBytes('\n')
	if err != nil {
		t.Fatalf("calls stream: %v", err)
	}
	var c struct {
		CallID string `json:"call_id"`
		Input  struct{ X float64 }
	}
	if err := json.Unmarshal(line, &c); err != nil {
		t.Fatal(err)
	}
	return c.CallID, c.Input.X
}

// twoCallIDs reads the two calls of twoCalls and returns their ids by x.
func (f *callFeed) twoCallIDs(t *testing.T) map[float64]string {
	t.Helper()
	ids := map[float64]string{}
	for range 2 {
		id, x := f.next(t)
		ids[x] = id
	}
	if ids[1] == "" || ids[2] == "" {
		t.Fatalf("calls %v", ids)
	}
	return ids
}

// loggedResult reports whether the session's log holds the
// client.tool.result of callID, read through url (a client or admin
// events route).
func loggedResult(t *testing.T, url, token, callID string) bool {
	t.Helper()
	for _, it := range eventPage(t, call(t, "GET", url, token, nil)) {
		if it.EventType == "client.tool.result" && strings.Contains(string(it.Payload), `"call_id":"`+callID+`"`) {
			return true
		}
	}
	return false
}

// TestClientResultsAnsweredOneByOne: a client that answers the two calls
// of one model message strictly one after the other (the second POST only
// once the first returned) gets each acknowledged at once, each result is
// in the log when its 200 arrives, a repeated result is not accepted, and
// the model sees the results in tool_use order although they came in the
// other order.
func TestClientResultsAnsweredOneByOne(t *testing.T) {
	t.Parallel()
	ctx := loopCtx(t)
	s, sess, _ := clientSession(t, func(env map[string]string) { env["BATON_CLIENT_CALL_TIMEOUT"] = "600" })
	base := "/v1/sessions/" + sess.ID + "/clients"
	r := s.client("POST", base, sess.Key, regBody("lap", never(), rtool("echo")))
	mustStatus(t, r, 201)
	id := r.json(t)["id"].(string)
	ch := goSend(ctx, sess, twoCalls)
	ids := openCalls(t, ctx, s.clientURL+base, id, sess.Key).twoCallIDs(t)
	events := s.clientURL + "/api/v1/sessions/" + sess.ID + "/events?limit=200"

	start := time.Now()
	for _, step := range []struct {
		x    float64
		text string
	}{{2, "two"}, {1, "one"}} { // the second call first
		url := s.clientURL + base + "/" + id + "/calls/" + ids[step.x] + "/result"
		r := postResult(t, url, sess.Key, map[string]any{"content": step.text})
		mustStatus(t, r, 200)
		if r.json(t)["accepted"] != true {
			t.Fatalf("result %v: %s", step.x, r.body)
		}
		if !loggedResult(t, events, sess.Key, ids[step.x]) {
			t.Fatalf("result %v acknowledged but not in the log", step.x)
		}
		again := postResult(t, url, sess.Key, map[string]any{"content": "late"})
		mustStatus(t, again, 200)
		if again.json(t)["accepted"] != false {
			t.Fatalf("a repeated result %v was accepted: %s", step.x, again.body)
		}
	}
	if el := time.Since(start); el > ackWait {
		t.Errorf("answering took %v", el)
	}
	mustReply(t, recv(t, ch), "client__lap__echo returned: one\nclient__lap__echo returned: two")
}

// TestClientResultSurvivesKillAfterAck kills the server with SIGKILL right
// after the first of two results was acknowledged (the other call still
// waiting) and checks, after a restart, that the acknowledged result is in
// the log.
func TestClientResultSurvivesKillAfterAck(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("crash test starts real processes")
	}
	srv, env, adminKey, clientKey := crashServer(t, map[string]string{"BATON_CLIENT_CALL_TIMEOUT": "600"})
	ctx := loopCtx(t)
	sess, err := client.NewHarness(client.Config{BaseURL: srv.clientURL, ClientKey: clientKey}).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	base := "/v1/sessions/" + sess.ID + "/clients"
	r := call(t, "POST", srv.clientURL+base, sess.Key, regBody("lap", never(), rtool("echo")))
	mustStatus(t, r, 201)
	id := r.json(t)["id"].(string)
	sendCtx, stopSend := context.WithCancel(ctx)
	defer stopSend()
	goSend(sendCtx, sess, twoCalls) // ends with the server
	ids := openCalls(t, ctx, srv.clientURL+base, id, sess.Key).twoCallIDs(t)

	r = postResult(t, srv.clientURL+base+"/"+id+"/calls/"+ids[1]+"/result", sess.Key, map[string]any{"content": "kept"})
	mustStatus(t, r, 200)
	if r.json(t)["accepted"] != true {
		t.Fatalf("result: %s", r.body)
	}
	srv.kill()

	srv2 := startChild(t, env)
	url := fmt.Sprintf("%s/admin/v1/sessions/%s/events?limit=200", srv2.adminURL, sess.ID)
	if !loggedResult(t, url, adminKey, ids[1]) {
		t.Fatal("an acknowledged result was lost in the crash")
	}
}
