package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-engine/baton/client"
)

// End-to-end tests of registered session clients (the registered-clients contract, docs/api.md,
// docs/api.md, registered session clients), through the Go SDK and raw HTTP.

// clientSession opens a session on a scripted profile and returns the
// server, the session and the profile id.
func clientSession(t *testing.T, mutate ...func(map[string]string)) (*server, *client.Session, string) {
	t.Helper()
	s := startServer(t, mutate...)
	pro := loopProfile(t, s, map[string]any{"primary_provider": "script"})
	h, _ := loopHarness(t, s, pro)
	sess, err := h.Connect(loopCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return s, sess, pro
}

func never() map[string]any { return map[string]any{"type": "never"} }

func regBody(name string, lifetime map[string]any, tools ...map[string]any) map[string]any {
	if tools == nil {
		tools = []map[string]any{}
	}
	return map[string]any{"name": name, "lifetime": lifetime, "tools": tools}
}

func rtool(name string) map[string]any {
	return map[string]any{"name": name, "description": "d", "parameters": map[string]any{"type": "object"}}
}

// errCode returns the /v1 error code of r.
func errCode(t *testing.T, r *response) string {
	t.Helper()
	m := r.json(t)
	e, _ := m["error"].(map[string]any)
	if e == nil || e["message"] == nil {
		t.Fatalf("not a /v1 error envelope: %s", r.body)
	}
	code, _ := e["code"].(string)
	return code
}

func sessionUUID(id string) string {
	h := strings.TrimPrefix(id, "ses_")
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func TestClientRegisterErrors(t *testing.T) {
	t.Parallel()
	s, sess, pro := clientSession(t, func(env map[string]string) { env["BATON_MAX_CLIENTS_PER_SESSION"] = "2" })
	_, other, _ := func() (*server, *client.Session, string) {
		h, _ := loopHarness(t, s, pro)
		o, err := h.Connect(loopCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		return s, o, ""
	}()
	otherPro := loopProfile(t, s, map[string]any{"primary_provider": "script"})
	_, otherProKey := s.clientKey("other-profile", otherPro)
	r := s.admin("POST", "/admin/v1/keys", map[string]any{"name": "noscope", "profile_id": pro, "scopes": []string{"other.scope"}})
	mustStatus(t, r, 201)
	noScope := r.json(t)["key"].(string)
	_, manager := s.clientKey("manager", pro)

	uuid := sessionUUID(sess.ID)
	path := "/v1/sessions/" + uuid + "/clients"
	long := strings.Repeat("a", 4097)
	cases := []struct {
		name   string
		path   string
		token  string
		body   any
		status int
		code   string
	}{
		{"bad session id", "/v1/sessions/not-a-uuid/clients", sess.Key, regBody("a", never()), 400, "invalid_request"},
		{"uuid with bad hex", "/v1/sessions/zzzzzzzz-0000-0000-0000-000000000000/clients", sess.Key, regBody("a", never()), 400, "invalid_request"},
		{"missing auth", path, "", regBody("a", never()), 401, "unauthorized"},
		{"unknown session key", path, "bae_ses_" + strings.Repeat("0", 48), regBody("a", never()), 401, "unauthorized"},
		{"unknown client key", path, "bae_" + strings.Repeat("0", 48), regBody("a", never()), 401, "unauthorized"},
		{"another session's key", path, other.Key, regBody("a", never()), 404, "not_found"},
		{"another profile's client key", path, otherProKey, regBody("a", never()), 404, "not_found"},
		{"client key without scope", path, noScope, regBody("a", never()), 403, "forbidden"},
		{"not an object", path, sess.Key, "[]", 400, "invalid_request"},
		{"bad json", path, sess.Key, "{", 400, "invalid_request"},
		{"missing lifetime", path, sess.Key, map[string]any{"name": "a"}, 400, "invalid_request"},
		{"unknown lifetime type", path, sess.Key, regBody("a", map[string]any{"type": "forever"}), 400, "invalid_request"},
		{"ttl without data", path, sess.Key, regBody("a", map[string]any{"type": "ttl"}), 400, "invalid_request"},
		{"ttl 4", path, sess.Key, regBody("a", map[string]any{"type": "ttl", "data": map[string]any{"seconds": 4}}), 400, "invalid_request"},
		{"ttl 3601", path, sess.Key, regBody("a", map[string]any{"type": "ttl", "data": map[string]any{"seconds": 3601}}), 400, "invalid_request"},
		{"ttl fractional", path, sess.Key, regBody("a", map[string]any{"type": "ttl", "data": map[string]any{"seconds": 5.5}}), 400, "invalid_request"},
		{"missing name", path, sess.Key, map[string]any{"lifetime": never()}, 400, "invalid_request"},
		{"empty name", path, sess.Key, regBody("", never()), 400, "invalid_request"},
		{"name 33", path, sess.Key, regBody(strings.Repeat("a", 33), never()), 400, "invalid_request"},
		{"name upper case", path, sess.Key, regBody("Laptop", never()), 400, "invalid_request"},
		{"name underscore", path, sess.Key, regBody("my_laptop", never()), 400, "invalid_request"},
		{"tools not array", path, sess.Key, map[string]any{"name": "a", "lifetime": never(), "tools": "x"}, 400, "invalid_request"},
		{"65 tools", path, sess.Key, regBody("a", never(), manyTools(65)...), 400, "invalid_request"},
		{"tool name empty", path, sess.Key, regBody("a", never(), rtool("")), 400, "invalid_request"},
		{"tool name 65", path, sess.Key, regBody("a", never(), rtool(strings.Repeat("t", 65))), 400, "invalid_request"},
		{"tool name dot", path, sess.Key, regBody("a", never(), rtool("read.file")), 400, "invalid_request"},
		{"tool twice", path, sess.Key, regBody("a", never(), rtool("x"), rtool("x")), 400, "invalid_request"},
		{"description missing", path, sess.Key, regBody("a", never(), map[string]any{"name": "x", "parameters": map[string]any{}}), 400, "invalid_request"},
		{"description 4097", path, sess.Key, regBody("a", never(), map[string]any{"name": "x", "description": long, "parameters": map[string]any{}}), 400, "invalid_request"},
		{"parameters missing", path, sess.Key, regBody("a", never(), map[string]any{"name": "x", "description": "d"}), 400, "invalid_request"},
		{"parameters not object", path, sess.Key, regBody("a", never(), map[string]any{"name": "x", "description": "d", "parameters": "s"}), 400, "invalid_request"},
		{"schema bad type", path, sess.Key, regBody("a", never(), map[string]any{"name": "x", "description": "d", "parameters": map[string]any{"type": "thing"}}), 400, "invalid_request"},
		{"schema bad properties", path, sess.Key, regBody("a", never(), map[string]any{"name": "x", "description": "d", "parameters": map[string]any{"properties": map[string]any{"p": 1}}}), 400, "invalid_request"},
		{"schema bad required", path, sess.Key, regBody("a", never(), map[string]any{"name": "x", "description": "d", "parameters": map[string]any{"required": []int{1}}}), 400, "invalid_request"},
		{"ses_ form with client key", "/v1/sessions/" + sess.ID + "/clients", manager, regBody("a", never(), manyTools(64)...), 201, ""},
		{"uuid form ttl 5", path, sess.Key, regBody("b", map[string]any{"type": "ttl", "data": map[string]any{"seconds": 5}}), 201, ""},
		{"cap reached", path, sess.Key, regBody("c", never()), 409, "conflict"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := call(t, "POST", s.clientURL+c.path, c.token, c.body)
			mustStatus(t, r, c.status)
			if c.code != "" {
				if got := errCode(t, r); got != c.code {
					t.Errorf("code %q, want %q", got, c.code)
				}
			}
		})
	}
	// A closed session refuses registration.
	if err := other.Close(loopCtx(t)); err != nil {
		t.Fatal(err)
	}
	r = s.client("POST", "/v1/sessions/"+other.ID+"/clients", manager, regBody("a", never()))
	mustStatus(t, r, 409)
	if errCode(t, r) != "conflict" {
		t.Errorf("closed session: %s", r.body)
	}
}

func manyTools(n int) []map[string]any {
	out := make([]map[string]any, n)
	for i := range out {
		out[i] = rtool(fmt.Sprintf("t%d", i))
	}
	return out
}

// TestClientNamesAndLifecycle: the assigned-name counter over spent names,
// list, ping, tools replacement, delete and their events.
func TestClientNamesAndLifecycle(t *testing.T) {
	t.Parallel()
	s, sess, _ := clientSession(t)
	base := "/v1/sessions/" + sess.ID + "/clients"
	reg := func(name string) map[string]any {
		r := s.client("POST", base, sess.Key, regBody(name, never(), rtool("x")))
		mustStatus(t, r, 201)
		m := r.json(t)
		if m["expires_at"] != nil {
			t.Errorf("never lifetime has expires_at %v", m["expires_at"])
		}
		return m
	}
	first := reg("laptop")
	second := reg("laptop")
	long := strings.Repeat("z", 32)
	reg(long)
	if first["name"] != "laptop" || second["name"] != "laptop-2" {
		t.Fatalf("names %v %v", first["name"], second["name"])
	}
	mustStatus(t, s.client("DELETE", base+"/"+first["id"].(string), sess.Key, nil), 204)
	if third := reg("laptop"); third["name"] != "laptop-3" {
		t.Errorf("after delete: %v, want laptop-3 (spent names stay spent)", third["name"])
	}
	if m := reg(long); m["name"] != strings.Repeat("z", 30)+"-2" {
		t.Errorf("long name counter: %v", m["name"])
	}
	mustStatus(t, s.client("DELETE", base+"/"+first["id"].(string), sess.Key, nil), 404)

	r := s.client("GET", base, sess.Key, nil)
	mustStatus(t, r, 200)
	var list struct {
		Items []struct {
			ID, Name string
			Tools    []map[string]any
		}
	}
	json.Unmarshal(r.body, &list)
	var names []string
	for _, it := range list.Items {
		names = append(names, it.Name)
	}
	if strings.Join(names, ",") != "laptop-2,"+long+",laptop-3,"+strings.Repeat("z", 30)+"-2" {
		t.Errorf("live list %v", names)
	}

	id := second["id"].(string)
	r = s.client("POST", base+"/"+id+"/ping", sess.Key, nil)
	mustStatus(t, r, 200)
	r = s.client("PUT", base+"/"+id+"/tools", sess.Key, map[string]any{"tools": []any{rtool("y"), rtool("z")}})
	mustStatus(t, r, 200)
	mustStatus(t, s.client("PUT", base+"/"+id+"/tools", sess.Key, map[string]any{"tools": []any{rtool("bad.name")}}), 400)
	mustStatus(t, s.client("POST", base+"/"+first["id"].(string)+"/ping", sess.Key, nil), 404)

	evs, err := sess.Events(loopCtx(t), "", 200)
	if err != nil {
		t.Fatal(err)
	}
	var reasons, tools []string
	for _, ev := range evs.Items {
		p := payload(t, ev)
		switch ev.Type {
		case "session.client.expire":
			reasons = append(reasons, p["reason"].(string))
		case "session.client.tools":
			tools = append(tools, fmt.Sprint(p["tools"]))
		case "session.client.register":
			if p["requested_name"] == nil || p["lifetime"] == nil {
				t.Errorf("register payload %v", p)
			}
		}
	}
	if strings.Join(reasons, ",") != "deleted" || strings.Join(tools, ",") != "[y z]" {
		t.Errorf("expire reasons %v, tools events %v", reasons, tools)
	}
}

// laptopTool is a read_file tool whose answer names its client.
func laptopTool(who string, arrived chan<- string, release <-chan struct{}) client.RegisteredTool {
	return client.RegisteredTool{
		Name: "read_file", Description: "read a file",
		Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`),
		Handler: func(ctx context.Context, in json.RawMessage) (any, error) {
			var p struct{ Path string }
			json.Unmarshal(in, &p)
			if arrived != nil {
				arrived <- who
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return who + ":" + p.Path, nil
		},
	}
}

// TestClientsSameToolConcurrent: two clients with the same tool name are
// both reachable under their namespaced names in one turn, and their calls
// run at the same time (each handler waits until both have started).
func TestClientsSameToolConcurrent(t *testing.T) {
	t.Parallel()
	ctx := loopCtx(t)
	s, sess, _ := clientSession(t)
	cfg := client.Config{BaseURL: s.clientURL}
	arrived := make(chan string, 2)
	release := make(chan struct{})
	a, err := client.RegisterClient(ctx, cfg, sessionUUID(sess.ID), sess.Key, "laptop", client.Never(), laptopTool("A", arrived, release))
	if err != nil {
		t.Fatal(err)
	}
	b, err := client.RegisterClient(ctx, cfg, sess.ID, sess.Key, "laptop", client.TTL(30*time.Second), laptopTool("B", arrived, release))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	defer b.Close(ctx)
	if a.Name != "laptop" || b.Name != "laptop-2" {
		t.Fatalf("names %s %s", a.Name, b.Name)
	}
	go func() {
		<-arrived
		<-arrived // both calls are in flight at once
		close(release)
	}()
	r, err := sess.Send(ctx, "call client__laptop__read_file {\"path\":\"a\"}\ncall client__laptop-2__read_file {\"path\":\"b\"}")
	out := mustReply(t, sent{r, err}, "client__laptop__read_file returned: A:a\nclient__laptop-2__read_file returned: B:b")
	calls := ofType(out.Events, "tool.call")
	if len(calls) != 2 {
		t.Fatalf("tool.call events %d", len(calls))
	}
	for _, c := range calls {
		if p := payload(t, c); p["dispatch"] != "registered" {
			t.Errorf("tool.call %v", p)
		}
	}
	if n := len(ofType(out.Events, "client.tool.result")); n != 2 {
		t.Errorf("client.tool.result events %d", n)
	}
}

// TestClientTTL: a ttl client that pings (the SDK handle) outlives its
// ttl; one that never pings and has no stream is swept with reason ttl.
func TestClientTTL(t *testing.T) {
	t.Parallel()
	ctx := loopCtx(t)
	s, sess, _ := clientSession(t)
	pinging, err := client.RegisterClient(ctx, client.Config{BaseURL: s.clientURL}, sess.ID, sess.Key, "pinger", client.TTL(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer pinging.Close(ctx)
	// The silent client opens no stream: it only registers.
	r := s.client("POST", "/v1/sessions/"+sess.ID+"/clients", sess.Key,
		regBody("silent", map[string]any{"type": "ttl", "data": map[string]any{"seconds": 5}}))
	mustStatus(t, r, 201)
	silent := r.json(t)["id"].(string)
	start := time.Now()
	for {
		r := s.client("GET", "/v1/sessions/"+sess.ID+"/clients", sess.Key, nil)
		if !strings.Contains(string(r.body), silent) {
			break
		}
		if time.Since(start) > 20*time.Second {
			t.Fatal("silent ttl client never expired")
		}
		waitFor(ctx, 100*time.Millisecond)
	}
	if el := time.Since(start); el < 4*time.Second {
		t.Errorf("silent client expired after %v, before its ttl", el)
	}
	// Past the ttl of its registration, the pinging client is still live.
	waitFor(ctx, time.Until(start.Add(6*time.Second)))
	r = s.client("GET", "/v1/sessions/"+sess.ID+"/clients", sess.Key, nil)
	if !strings.Contains(string(r.body), pinging.ID) {
		t.Errorf("pinging client lapsed: %s", r.body)
	}
	evs, _ := sess.Events(ctx, "", 200)
	var exp []string
	for _, ev := range evs.Items {
		if ev.Type == "session.client.expire" {
			p := payload(t, ev)
			exp = append(exp, p["client_id"].(string)+":"+p["reason"].(string))
		}
	}
	if strings.Join(exp, ",") != silent+":ttl" {
		t.Errorf("expire events %v", exp)
	}
}

// waitFor waits d or until ctx ends (polling intervals, not
// synchronization).
func waitFor(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// TestClientKilledMidCall: a client dies with a call in flight; deleting
// it fails the call at once with an error result; a replacement (with a
// fresh name) serves the next call.
func TestClientKilledMidCall(t *testing.T) {
	t.Parallel()
	ctx := loopCtx(t)
	s, sess, _ := clientSession(t)
	cfg := client.Config{BaseURL: s.clientURL}
	arrived := make(chan string, 1)
	dead, err := client.RegisterClient(ctx, cfg, sess.ID, sess.Key, "laptop", client.TTL(60*time.Second), laptopTool("A", arrived, make(chan struct{})))
	if err != nil {
		t.Fatal(err)
	}
	ch := goSend(ctx, sess, `call client__laptop__read_file {"path":"x"}`)
	<-arrived
	dead.Abort() // killed: no DELETE, no result
	mustStatus(t, s.client("DELETE", "/v1/sessions/"+sess.ID+"/clients/"+dead.ID, sess.Key, nil), 204)
	out := recv(t, ch)
	if out.err != nil {
		t.Fatal(out.err)
	}
	if got := out.reply.Message.Text(); !strings.HasPrefix(got, "client__laptop__read_file failed: registered client error") {
		t.Fatalf("reply %q", got)
	}
	repl, err := client.RegisterClient(ctx, cfg, sess.ID, sess.Key, "laptop", client.Never(), laptopTool("B", nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer repl.Close(ctx)
	if repl.Name != "laptop-2" {
		t.Fatalf("replacement name %s", repl.Name)
	}
	r, err := sess.Send(ctx, `call client__laptop-2__read_file {"path":"y"}`)
	mustReply(t, sent{r, err}, "client__laptop-2__read_file returned: B:y")
	// The dead client's name is no longer advertised.
	r, err = sess.Send(ctx, `call client__laptop__read_file {"path":"y"}`)
	mustReply(t, sent{r, err}, "I don't have a tool named client__laptop__read_file.")
}

// TestClientCallsStream: raw protocol — the call is re-sent on reconnect
// while unanswered; the first result wins.
func TestClientCallsStream(t *testing.T) {
	t.Parallel()
	ctx := loopCtx(t)
	s, sess, _ := clientSession(t)
	base := "/v1/sessions/" + sess.ID + "/clients"
	r := s.client("POST", base, sess.Key, regBody("raw", never(), rtool("echo")))
	mustStatus(t, r, 201)
	id := r.json(t)["id"].(string)
	ch := goSend(ctx, sess, `call client__raw__echo {"v":1}`)
	read := func() map[string]any {
		req, _ := http.NewRequestWithContext(ctx, "GET", s.clientURL+base+"/"+id+"/calls", nil)
		req.Header.Set("Authorization", "Bearer "+sess.Key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
			t.Fatalf("content type %q", ct)
		}
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
	first := read()
	again := read() // reconnect: the unanswered call comes again
	if first["call_id"] != again["call_id"] || first["tool"] != "echo" || fmt.Sprint(first["input"]) != "map[v:1]" {
		t.Fatalf("calls %v / %v", first, again)
	}
	resPath := base + "/" + id + "/calls/" + first["call_id"].(string) + "/result"
	mustStatus(t, s.client("POST", resPath, sess.Key, map[string]any{"content": 7}), 400)
	r = s.client("POST", resPath, sess.Key, map[string]any{"content": "one", "is_error": false})
	mustStatus(t, r, 200)
	if r.json(t)["accepted"] != true {
		t.Errorf("first result: %s", r.body)
	}
	// An accepted result is already durable: the log has it.
	ev := s.client("GET", "/api/v1/sessions/"+sess.ID+"/events?limit=200", sess.Key, nil)
	if !strings.Contains(string(ev.body), `"event_type":"client.tool.result"`) ||
		!strings.Contains(string(ev.body), first["call_id"].(string)) {
		t.Fatalf("accepted result not in the log yet: %s", ev.body)
	}
	r = s.client("POST", resPath, sess.Key, map[string]any{"content": "two"})
	if r.json(t)["accepted"] != false {
		t.Errorf("second result: %s", r.body)
	}
	mustReply(t, recv(t, ch), "client__raw__echo returned: one")
	mustStatus(t, s.client("POST", base+"/"+id+"/calls/call_nope/result", sess.Key, map[string]any{"content": "x"}), 404)
}

// BenchmarkRegisteredToolRoundTrip measures a whole turn whose one tool
// call goes to a registered client over loopback: model call, call out on
// the stream, result back, second model call.
func BenchmarkRegisteredToolRoundTrip(b *testing.B) {
	s := startServer(b)
	r := call(b, "POST", s.adminURL+"/admin/v1/profiles", s.adminKey, map[string]any{"name": "bench", "primary_provider": "script"})
	mustStatus(b, r, 201)
	_, key := s.clientKey("bench", r.json(b)["id"].(string))
	ctx := context.Background()
	sess, err := client.NewHarness(client.Config{BaseURL: s.clientURL, ClientKey: key}).Connect(ctx)
	if err != nil {
		b.Fatal(err)
	}
	c, err := client.RegisterClient(ctx, client.Config{BaseURL: s.clientURL}, sess.ID, sess.Key, "bench", client.Never(),
		client.RegisteredTool{Name: "echo", Description: "echo", Handler: func(context.Context, json.RawMessage) (any, error) { return "ok", nil }})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	b.ReportAllocs()
	for b.Loop() {
		r, err := sess.Send(ctx, "call client__bench__echo {}")
		if err != nil || r.Message.Text() != "client__bench__echo returned: ok" {
			b.Fatalf("%v %v", r, err)
		}
	}
}

// TestClientEndsWithSession: closing the session ends its registered
// clients: the calls stream ends and the expiry is logged.
func TestClientEndsWithSession(t *testing.T) {
	t.Parallel()
	ctx := loopCtx(t)
	s, sess, _ := clientSession(t)
	base := "/v1/sessions/" + sess.ID + "/clients"
	r := s.client("POST", base, sess.Key, regBody("gone", never(), rtool("echo")))
	mustStatus(t, r, 201)
	id := r.json(t)["id"].(string)
	req, _ := http.NewRequestWithContext(ctx, "GET", s.clientURL+base+"/"+id+"/calls", nil)
	req.Header.Set("Authorization", "Bearer "+sess.Key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ended := make(chan error, 1)
	go func() {
		_, err := bufio.NewReader(resp.Body).ReadBytes('\n')
		ended <- err
	}()
	if err := sess.Close(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ended:
		if err == nil {
			t.Fatal("the calls stream delivered a call instead of ending")
		}
	case <-ctx.Done():
		t.Fatal("the calls stream did not end when the session closed")
	}
	r = s.client("GET", "/api/v1/sessions/"+sess.ID+"/events?limit=200", sess.Key, nil)
	if !strings.Contains(string(r.body), `"reason":"session_closed"`) || !strings.Contains(string(r.body), `"event_type":"session.client.expire"`) {
		t.Fatalf("no session_closed expiry in %s", r.body)
	}
	mustStatus(t, s.client("POST", base+"/"+id+"/ping", sess.Key, nil), 404)
}
