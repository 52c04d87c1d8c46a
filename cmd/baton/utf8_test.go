package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
)

// Strict UTF-8 end to end: every client surface refuses JSON whose strings
// are not valid UTF-8 with its malformed-JSON error, and nothing of it is
// stored, so every events page stays valid JSON for strict decoders.

// bad is the invalid UTF-8 every case carries.
const bad = "hi \xff\xfe"

// mustStrictEvents fails unless the session's events page is valid UTF-8
// JSON without the bad bytes.
func mustStrictEvents(t *testing.T, s *server, sid, key string) {
	t.Helper()
	r := s.client("GET", "/api/v1/sessions/"+sid+"/events?limit=200", key, nil)
	mustStatus(t, r, 200)
	if !utf8.Valid(r.body) || !json.Valid(r.body) || bytes.Contains(r.body, []byte("\xff")) {
		t.Fatalf("events page is not strict JSON: %.400q…", r.body)
	}
}

// TestRPCInvalidUTF8 sends session.sendMessage with invalid UTF-8 in a
// text content and in a tool_result block: each is -32700 Parse error
// with id null (serde_json refuses the body while parsing it), and no
// message is stored.
func TestRPCInvalidUTF8(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	sid, sk, _ := s.scriptedSession(t)
	rpcResult(t, s, sid, sk, "session.registerDriver", map[string]any{})
	const parseError = `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`
	for name, body := range map[string]string{
		"text":        `{"jsonrpc":"2.0","id":1,"method":"session.sendMessage","params":{"message":{"content":"` + bad + `"}}}`,
		"tool_result": `{"jsonrpc":"2.0","id":2,"method":"session.sendMessage","params":{"message":{"content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"` + bad + `"}]}}}`,
		"member name": `{"jsonrpc":"2.0","id":3,"method":"session.sendMessage","params":{"message":{"content":"hi","` + bad + `":1}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			frames := rpcAll(t, s, sid, sk, body)
			if len(frames) != 1 || frames[0].raw != parseError {
				var got []string
				for _, f := range frames {
					got = append(got, f.raw)
				}
				t.Fatalf("%d frames, want the one parse error: %.300q…", len(got), strings.Join(got, "\n"))
			}
		})
	}
	mustStrictEvents(t, s, sid, sk)
	// The same message in valid UTF-8 (and a lone surrogate escape, which
	// is valid JSON) is taken.
	frames := rpcAll(t, s, sid, sk, `{"jsonrpc":"2.0","id":4,"method":"session.sendMessage","params":{"message":{"content":"héllo \ud800"}}}`)
	if len(frames) == 0 || frames[len(frames)-1].Result == nil {
		t.Fatalf("valid message: %d frames, last %v", len(frames), frames)
	}
	mustStrictEvents(t, s, sid, sk)
}

// TestRESTInvalidUTF8: a REST body (client and admin port) is refused with
// the plain-text 400 of malformed JSON.
func TestRESTInvalidUTF8(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	pro := s.profile(map[string]any{"name": "utf8", "primary_provider": "script"})
	_, k := s.clientKey("c", pro)
	open := `{"metadata":{"note":"` + bad + `"}}`
	r := rawCall(t, "POST", s.clientURL+"/api/v1/sessions", k, "application/json", open)
	want := fmt.Sprintf("Failed to parse the request body as JSON: invalid UTF-8 at offset %d", len(`{"metadata":{"note":"hi `))
	if r.status != 400 || string(r.body) != want {
		t.Fatalf("open: %d %q, want 400 %q", r.status, r.body, want)
	}
	r = rawCall(t, "POST", s.adminURL+"/admin/v1/profiles", s.adminKey, "application/json",
		`{"name":"p2","primary_provider":"script","system_prompt":"`+bad+`"}`)
	if r.status != 400 || !bytes.HasPrefix(r.body, []byte("Failed to parse the request body as JSON: invalid UTF-8")) {
		t.Fatalf("admin profile: %d %q", r.status, r.body)
	}
	// No session was opened by the refused body.
	r = s.admin("GET", "/admin/v1/sessions?limit=200", nil)
	mustStatus(t, r, 200)
	var page struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(r.body, &page); err != nil || len(page.Items) != 0 {
		t.Fatalf("sessions after a refused open: %s", r.body)
	}
}

// TestClientResultInvalidUTF8: a registered client's result that is not
// valid UTF-8 is 400 invalid_request and does not answer the call; the
// valid result that follows does, and the log stays strict JSON.
func TestClientResultInvalidUTF8(t *testing.T) {
	t.Parallel()
	ctx := loopCtx(t)
	s, sess, _ := clientSession(t)
	base := "/v1/sessions/" + sess.ID + "/clients"
	r := s.client("POST", base, sess.Key, regBody("raw", never(), rtool("echo")))
	mustStatus(t, r, 201)
	id := r.json(t)["id"].(string)
	ch := goSend(ctx, sess, `call client__raw__echo {"v":1}`)
	callID := readClientCall(t, ctx, s, base+"/"+id+"/calls", sess.Key)["call_id"].(string)
	resPath := base + "/" + id + "/calls/" + callID + "/result"
	r = rawCall(t, "POST", s.clientURL+resPath, sess.Key, "application/json", `{"content":"`+bad+`"}`)
	if r.status != 400 || errCode(t, r) != "invalid_request" {
		t.Fatalf("invalid UTF-8 result: %d %s", r.status, r.body)
	}
	r = s.client("POST", resPath, sess.Key, map[string]any{"content": "one"})
	mustStatus(t, r, 200)
	if r.json(t)["accepted"] != true {
		t.Fatalf("valid result after the refused one: %s", r.body)
	}
	mustReply(t, recv(t, ch), "client__raw__echo returned: one")
	mustStrictEvents(t, s, sess.ID, sess.Key)
}

// readClientCall reads the first call from a registered client's calls
// stream.
func readClientCall(t *testing.T, ctx context.Context, s *server, path, key string) map[string]any {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.clientURL+path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
