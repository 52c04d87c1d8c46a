package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-engine/baton"
	"github.com/google/go-cmp/cmp"
)

// memReceipts is an in-memory baton.ReceiptStore.
type memReceipts struct {
	mu   sync.Mutex
	m    map[[2]string]*baton.Receipt
	fail error // BeginReceipt's error when set
}

func newMemReceipts() *memReceipts { return &memReceipts{m: map[[2]string]*baton.Receipt{}} }

func (s *memReceipts) BeginReceipt(_ context.Context, scope, key, fp string) (*baton.Receipt, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return nil, false, s.fail
	}
	if r, ok := s.m[[2]string{scope, key}]; ok {
		c := *r
		return &c, false, nil
	}
	r := &baton.Receipt{Scope: scope, Key: key, Fingerprint: fp, State: baton.ReceiptInFlight, CreatedAt: time.Now()}
	s.m[[2]string{scope, key}] = r
	c := *r
	return &c, true, nil
}

func (s *memReceipts) CompleteReceipt(_ context.Context, scope, key string, status int, ct string, body []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[[2]string{scope, key}]
	if !ok || r.State != baton.ReceiptInFlight {
		return baton.Errorf(baton.ECodeNotFound, "no receipt")
	}
	r.State, r.Status, r.ContentType, r.Body = baton.ReceiptDone, status, ct, append([]byte(nil), body...)
	return nil
}

func (s *memReceipts) AbandonReceipt(_ context.Context, scope, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.m[[2]string{scope, key}]; ok && r.State == baton.ReceiptInFlight {
		delete(s.m, [2]string{scope, key})
	}
	return nil
}

func (s *memReceipts) SweepReceipts(context.Context, time.Time) (int, error) { return 0, nil }

func (s *memReceipts) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// stubHandler answers every request from a table keyed by path and counts
// the executions; /fail answers 500, /slow waits for release.
type stubHandler struct {
	runs    atomic.Int64
	started chan struct{}
	release chan struct{}
}

func (h *stubHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := h.runs.Add(1)
	body := readAll(r)
	switch {
	case strings.HasSuffix(r.URL.Path, "/fail"):
		http.Error(w, "boom", http.StatusInternalServerError)
		return
	case strings.HasSuffix(r.URL.Path, "/slow"):
		h.started <- struct{}{}
		<-h.release
	case strings.HasSuffix(r.URL.Path, "/gone"):
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	out, _ := json.Marshal(map[string]any{"run": n, "echo": body})
	// A session_key and a key in the middle: the replay must drop them and
	// keep the rest in order.
	_, _ = w.Write([]byte(`{"session_id":"ses_1","session_key":"bae_ses_secret","key":"bae_x","data":` + string(out) + `}`))
}

func readAll(r *http.Request) string {
	var sb strings.Builder
	buf := make([]byte, 512)
	for {
		n, err := r.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			return sb.String()
		}
	}
}

type idemReq struct {
	method, path, key, token, body string
}

func (q idemReq) do(h http.Handler) *httptest.ResponseRecorder {
	r := httptest.NewRequest(q.method, q.path, strings.NewReader(q.body))
	if q.key != "-" {
		r.Header.Set(IdempotencyKeyHeader, q.key)
	}
	if q.token != "" {
		r.Header.Set("Authorization", "Bearer "+q.token)
	}
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestIdempotency(t *testing.T) {
	const first = `{"session_id":"ses_1","session_key":"bae_ses_secret","key":"bae_x","data":{"echo":"{\"a\":1,\"b\":[1,2]}","run":1}}`
	const replayed = `{"session_id":"ses_1","data":{"echo":"{\"a\":1,\"b\":[1,2]}","run":1}}`
	base := idemReq{"POST", "/v1/sessions/s1/clients", "k1", "tok", `{"a":1,"b":[1,2]}`}
	with := func(f func(*idemReq)) idemReq { q := base; f(&q); return q }
	type step struct {
		req      idemReq
		status   int
		body     string // exact when set
		contains string
		replayed bool
	}
	tests := []struct {
		name  string
		steps []step
		runs  int64
	}{
		{"first then replay omits secrets", []step{
			{req: base, status: 201, body: first},
			{req: base, status: 201, body: replayed, replayed: true},
			{req: base, status: 201, body: replayed, replayed: true},
		}, 1},
		{"canonical body: member order and spaces do not matter", []step{
			{req: base, status: 201},
			{req: with(func(q *idemReq) { q.body = ` { "b" : [1, 2], "a":1 } ` }), status: 201, replayed: true},
		}, 1},
		{"different body is 409 conflict on /v1", []step{
			{req: base, status: 201},
			{req: with(func(q *idemReq) { q.body = `{"a":2}` }), status: 409,
				body: `{"error":{"code":"conflict","message":"Idempotency-Key was already used for a different request"}}`},
		}, 1},
		{"different body is idempotency_conflict on /api/v1", []step{
			{req: with(func(q *idemReq) { q.path = "/api/v1/sessions" }), status: 201},
			{req: with(func(q *idemReq) { q.path = "/api/v1/sessions"; q.body = `{}` }), status: 409, contains: `"type":"idempotency_conflict"`},
		}, 1},
		{"join is covered", []step{
			{req: with(func(q *idemReq) { q.path = "/api/v1/sessions/ses_1/join" }), status: 201},
			{req: with(func(q *idemReq) { q.path = "/api/v1/sessions/ses_1/join" }), status: 201, replayed: true},
		}, 1},
		{"another caller has its own scope", []step{
			{req: base, status: 201},
			{req: with(func(q *idemReq) { q.token = "other" }), status: 201, contains: `"run":2`},
		}, 2},
		{"another path has its own scope", []step{
			{req: base, status: 201},
			{req: with(func(q *idemReq) { q.path = "/v1/sessions/s2/clients" }), status: 201, contains: `"run":2`},
		}, 2},
		{"5xx is not saved, the retry executes", []step{
			{req: with(func(q *idemReq) { q.path = "/v1/x/fail" }), status: 500},
			{req: with(func(q *idemReq) { q.path = "/v1/x/fail" }), status: 500},
		}, 2},
		{"204 replays without a body", []step{
			{req: with(func(q *idemReq) { q.method = "DELETE"; q.path = "/v1/x/gone"; q.body = "" }), status: 204},
			{req: with(func(q *idemReq) { q.method = "DELETE"; q.path = "/v1/x/gone"; q.body = "" }), status: 204, body: "", replayed: true},
		}, 1},
		{"PUT under /v1 is covered", []step{
			{req: with(func(q *idemReq) { q.method = "PUT" }), status: 201},
			{req: with(func(q *idemReq) { q.method = "PUT" }), status: 201, replayed: true},
		}, 1},
		{"non-JSON body is hashed raw", []step{
			{req: with(func(q *idemReq) { q.body = "not json" }), status: 201},
			{req: with(func(q *idemReq) { q.body = "not json" }), status: 201, replayed: true},
			{req: with(func(q *idemReq) { q.body = "not json " }), status: 409},
		}, 1},
		{"empty key is 400 on /v1", []step{
			{req: with(func(q *idemReq) { q.key = "" }), status: 400,
				body: `{"error":{"code":"invalid_request","message":"Idempotency-Key must be 1 to 255 characters of UTF-8 text without control characters"}}`},
		}, 0},
		{"256-char key is 400 bad_request on /api/v1", []step{
			{req: with(func(q *idemReq) { q.path = "/api/v1/sessions"; q.key = strings.Repeat("k", 256) }), status: 400, contains: `"type":"bad_request"`},
		}, 0},
		{"255-char key is accepted", []step{
			{req: with(func(q *idemReq) { q.key = strings.Repeat("k", 255) }), status: 201},
			{req: with(func(q *idemReq) { q.key = strings.Repeat("k", 255) }), status: 201, replayed: true},
		}, 1},
		{"non-ASCII key is accepted and replays", []step{
			{req: with(func(q *idemReq) { q.key = "é" }), status: 201},
			{req: with(func(q *idemReq) { q.key = "é" }), status: 201, replayed: true},
			{req: with(func(q *idemReq) { q.key = "e\u0301" }), status: 201, contains: `"run":2`}, // byte for byte: NFD is another key
		}, 2},
		{"length counts characters: 255 two-byte characters are accepted", []step{
			{req: with(func(q *idemReq) { q.key = strings.Repeat("é", 255) }), status: 201},
			{req: with(func(q *idemReq) { q.key = strings.Repeat("é", 255) }), status: 201, replayed: true},
		}, 1},
		{"256 characters are 400 however few bytes they take", []step{
			{req: with(func(q *idemReq) { q.key = strings.Repeat("é", 256) }), status: 400, contains: `"invalid_request"`},
		}, 0},
		{"spaces inside the key are text", []step{
			{req: with(func(q *idemReq) { q.key = "order 42 / retry" }), status: 201},
			{req: with(func(q *idemReq) { q.key = "order 42 / retry" }), status: 201, replayed: true},
		}, 1},
		{"a tab is a control character: 400", []step{
			{req: with(func(q *idemReq) { q.key = "a\tb" }), status: 400},
		}, 0},
		{"a C1 control character is 400", []step{
			{req: with(func(q *idemReq) { q.key = "a\u0085b" }), status: 400},
		}, 0},
		{"invalid UTF-8 is 400", []step{
			{req: with(func(q *idemReq) { q.key = "caf\xe9" }), status: 400},
		}, 0},
		{"no key: every request executes", []step{
			{req: with(func(q *idemReq) { q.key = "-" }), status: 201},
			{req: with(func(q *idemReq) { q.key = "-" }), status: 201, body: strings.Replace(first, `"run":1`, `"run":2`, 1)},
		}, 2},
		{"no bearer: passes through", []step{
			{req: with(func(q *idemReq) { q.token = "" }), status: 201},
			{req: with(func(q *idemReq) { q.token = "" }), status: 201, contains: `"run":2`},
		}, 2},
		{"rpc is never covered", []step{
			{req: with(func(q *idemReq) { q.path = "/api/v1/sessions/ses_1/rpc" }), status: 201},
			{req: with(func(q *idemReq) { q.path = "/api/v1/sessions/ses_1/rpc" }), status: 201, contains: `"run":2`},
		}, 2},
		{"other /api/v1 routes are not covered", []step{
			{req: with(func(q *idemReq) { q.method = "DELETE"; q.path = "/api/v1/sessions/ses_1" }), status: 201},
			{req: with(func(q *idemReq) { q.method = "DELETE"; q.path = "/api/v1/sessions/ses_1" }), status: 201, contains: `"run":2`},
		}, 2},
		{"GET under /v1 is not covered", []step{
			{req: with(func(q *idemReq) { q.method = "GET" }), status: 201},
			{req: with(func(q *idemReq) { q.method = "GET" }), status: 201, contains: `"run":2`},
		}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stub := &stubHandler{}
			h := Idempotency(IdempotencyOptions{Receipts: newMemReceipts()}, stub)
			for i, s := range tc.steps {
				w := s.req.do(h)
				if w.Code != s.status {
					t.Fatalf("step %d: status %d, want %d; body %s", i, w.Code, s.status, w.Body)
				}
				if s.body != "" || (s.replayed && s.status == 204) {
					if got := w.Body.String(); got != s.body {
						t.Fatalf("step %d: body\n%s\nwant\n%s", i, got, s.body)
					}
				}
				if !strings.Contains(w.Body.String(), s.contains) {
					t.Fatalf("step %d: body %s does not contain %s", i, w.Body, s.contains)
				}
				if got := w.Header().Get(ReplayedHeader) == "true"; got != s.replayed {
					t.Fatalf("step %d: replayed header %v, want %v", i, got, s.replayed)
				}
				if s.replayed && w.Code != 204 && w.Header().Get("Content-Type") != "application/json" {
					t.Fatalf("step %d: replay content type %q", i, w.Header().Get("Content-Type"))
				}
			}
			if got := stub.runs.Load(); got != tc.runs {
				t.Fatalf("handler ran %d times, want %d", got, tc.runs)
			}
		})
	}
}

// TestIdempotencyCaller: with a Caller, the scope is the caller it names
// (two tokens of one key share receipts) and the route it gives (two
// spellings of one path are one operation, for the fingerprint too); a
// token that does not authenticate passes through without a receipt; a
// failing lookup is 500 and runs nothing.
func TestIdempotencyCaller(t *testing.T) {
	stub := &stubHandler{}
	rs := newMemReceipts()
	h := Idempotency(IdempotencyOptions{Receipts: rs, Caller: func(r *http.Request, token string) (string, string, error) {
		switch token {
		case "bad":
			return "", "", baton.Errorf(baton.ECodeUnauthorized, "invalid credential")
		case "boom":
			return "", "", errors.New("key store is on fire")
		}
		return "key_" + token[:1], strings.ToLower(r.URL.Path), nil
	}}, stub)
	steps := []struct {
		req      idemReq
		status   int
		replayed bool
		contains string
	}{
		{idemReq{"POST", "/v1/sessions/S1/clients", "k", "a1", `{"a":1}`}, 201, false, `"run":1`},
		{idemReq{"POST", "/v1/sessions/s1/clients", "k", "a2", `{"a":1}`}, 201, true, `"run":1`},
		{idemReq{"POST", "/v1/sessions/s1/clients", "k", "b1", `{"a":1}`}, 201, false, `"run":2`},
		{idemReq{"POST", "/v1/sessions/S1/clients", "k", "a1", `{"a":2}`}, 409, false, "different request"},
		{idemReq{"POST", "/v1/sessions/s1/clients", "k", "bad", `{"a":1}`}, 201, false, `"run":3`},
		{idemReq{"POST", "/v1/sessions/s1/clients", "k", "boom", `{"a":1}`}, 500, false, `"code":"internal"`},
	}
	for i, st := range steps {
		w := st.req.do(h)
		if w.Code != st.status || (w.Header().Get(ReplayedHeader) == "true") != st.replayed || !strings.Contains(w.Body.String(), st.contains) {
			t.Fatalf("step %d: %d replayed=%q %s", i, w.Code, w.Header().Get(ReplayedHeader), w.Body)
		}
	}
	if strings.Contains(steps[len(steps)-1].req.do(h).Body.String(), "fire") {
		t.Fatal("the lookup failure reached the caller")
	}
	if n := stub.runs.Load(); n != 3 {
		t.Fatalf("handler ran %d times, want 3", n)
	}
	if n := rs.len(); n != 2 {
		t.Fatalf("%d receipts, want 2 (caller a, caller b)", n)
	}
}

func TestValidIdempotencyKey(t *testing.T) {
	for k, want := range map[string]bool{
		"k": true, "é": true, "日本語のキー": true, "a b": true, "🔑": true, "\u200b": true,
		strings.Repeat("🔑", 255): true, strings.Repeat("🔑", 256): false,
		strings.Repeat("k", 255): true, strings.Repeat("k", 256): false,
		"": false, "a\tb": false, "a\x00b": false, "a\x7fb": false, "a\u009fb": false,
		"\xff": false, "caf\xe9": false,
	} {
		if got := ValidIdempotencyKey(k); got != want {
			t.Errorf("ValidIdempotencyKey(%q) = %v, want %v", k, got, want)
		}
	}
}

func TestIdempotencyInFlight(t *testing.T) {
	stub := &stubHandler{started: make(chan struct{}), release: make(chan struct{})}
	rs := newMemReceipts()
	h := Idempotency(IdempotencyOptions{Receipts: rs}, stub)
	slow := idemReq{"POST", "/v1/x/slow", "k", "tok", `{}`}
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- slow.do(h) }()
	<-stub.started
	for _, path := range []string{"/v1/x/slow", "/api/v1/sessions"} {
		q := slow
		q.path = path
		if path != slow.path {
			// Put an in-flight receipt for the /api/v1 path in place by hand.
			_, _, _ = rs.BeginReceipt(context.Background(), receiptScope("token:tok", "POST", path), "k", Fingerprint("POST", path, []byte(`{}`)))
		}
		w := q.do(h)
		if w.Code != 409 {
			t.Fatalf("%s while in flight: %d %s", path, w.Code, w.Body)
		}
		if !strings.Contains(w.Body.String(), "still in flight") {
			t.Fatalf("%s: body %s", path, w.Body)
		}
	}
	close(stub.release)
	if w := <-done; w.Code != 201 {
		t.Fatalf("first request: %d", w.Code)
	}
	if w := slow.do(h); w.Code != 201 || w.Header().Get(ReplayedHeader) != "true" {
		t.Fatalf("after completion: %d replayed=%q", w.Code, w.Header().Get(ReplayedHeader))
	}
	if n := stub.runs.Load(); n != 1 {
		t.Fatalf("runs = %d", n)
	}
}

func TestIdempotencyPanicAbandons(t *testing.T) {
	rs := newMemReceipts()
	h := Idempotency(IdempotencyOptions{Receipts: rs}, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic("handler bug")
	}))
	func() {
		defer func() { _ = recover() }()
		idemReq{"POST", "/v1/x", "k", "tok", `{}`}.do(h)
	}()
	if n := rs.len(); n != 0 {
		t.Fatalf("%d receipts left after a panic, want 0", n)
	}
}

func TestIdempotencyUnauthorizedNotSaved(t *testing.T) {
	rs := newMemReceipts()
	h := Idempotency(IdempotencyOptions{Receipts: rs}, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
	}))
	idemReq{"POST", "/v1/x", "k", "bad", `{}`}.do(h)
	if n := rs.len(); n != 0 {
		t.Fatalf("a 401 left %d receipts", n)
	}
}

func TestIdempotencyStoreError(t *testing.T) {
	rs := newMemReceipts()
	rs.fail = errors.New("database is on fire")
	stub := &stubHandler{}
	h := Idempotency(IdempotencyOptions{Receipts: rs}, stub)
	w := idemReq{"POST", "/v1/x", "k", "tok", `{}`}.do(h)
	if w.Code != 500 || strings.Contains(w.Body.String(), "fire") || !strings.Contains(w.Body.String(), `"code":"internal"`) {
		t.Fatalf("store failure: %d %s", w.Code, w.Body)
	}
	if stub.runs.Load() != 0 {
		t.Fatal("handler ran although the receipt could not be recorded")
	}
}

func TestIdempotencyBodyLimit(t *testing.T) {
	stub := &stubHandler{}
	rs := newMemReceipts()
	h := Idempotency(IdempotencyOptions{Receipts: rs, MaxBody: 8}, stub)
	big := idemReq{"POST", "/v1/x", "k", "tok", `{"a":"0123456789"}`}
	w := big.do(h)
	// The handler saw the whole body and answered; nothing was recorded.
	if w.Code != 201 || !strings.Contains(w.Body.String(), `0123456789`) {
		t.Fatalf("oversized body: %d %s", w.Code, w.Body)
	}
	if rs.len() != 0 {
		t.Fatal("an oversized request got a receipt")
	}
}

func TestRedact(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"session_key":"s","a":1}`, `{"a":1}`},
		{`{"a":{"key":"nested stays"},"key":"k","b":[1]}`, `{"a":{"key":"nested stays"},"b":[1]}`},
		{`{"a":1}`, `{"a":1}`},
		{`[{"key":1}]`, `[{"key":1}]`},
		{`not json`, `not json`},
		{``, ``},
		{`{"key":"x"}`, `{}`},
		{`{"key":`, `{"key":`},
	}
	for _, tc := range tests {
		if got := string(redact([]byte(tc.in))); got != tc.want {
			t.Errorf("redact(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestFingerprint(t *testing.T) {
	a := Fingerprint("POST", "/p", []byte(`{"x":1,"y":{"b":2,"a":1}}`))
	same := []string{`{"y":{"a":1,"b":2},"x":1}`, " {\"x\" : 1 ,\n\"y\":{\"b\":2,\"a\":1}} "}
	for _, b := range same {
		if got := Fingerprint("POST", "/p", []byte(b)); got != a {
			t.Errorf("fingerprint of %s differs", b)
		}
	}
	differ := map[string]string{
		"body":   Fingerprint("POST", "/p", []byte(`{"x":2,"y":{"b":2,"a":1}}`)),
		"method": Fingerprint("PUT", "/p", []byte(`{"x":1,"y":{"b":2,"a":1}}`)),
		"path":   Fingerprint("POST", "/q", []byte(`{"x":1,"y":{"b":2,"a":1}}`)),
		"number": Fingerprint("POST", "/p", []byte(`{"x":1.0,"y":{"b":2,"a":1}}`)),
		"trail":  Fingerprint("POST", "/p", []byte(`{"x":1,"y":{"b":2,"a":1}} {}`)),
	}
	for what, fp := range differ {
		if fp == a {
			t.Errorf("a different %s has the same fingerprint", what)
		}
	}
}

func TestIdempotentRoutes(t *testing.T) {
	got := map[string]bool{}
	for _, c := range []string{
		"POST /v1/sessions/x/clients", "PUT /v1/a", "DELETE /v1/a/b", "GET /v1/a", "PATCH /v1/a",
		"POST /api/v1/sessions", "POST /api/v1/sessions/ses_1/join", "POST /api/v1/sessions/ses_1/rpc",
		"POST /api/v1/sessions//join", "POST /api/v1/sessions/a/b/join", "DELETE /api/v1/sessions/ses_1",
		"POST /admin/v1/keys", "POST /v1x",
		"POST /v1/environments/env_1/token", "POST /v1/machines/mch_1/token", "POST /v1/executors/token",
	} {
		m, p, _ := strings.Cut(c, " ")
		got[c] = idempotent(m, p)
	}
	want := map[string]bool{
		"POST /v1/sessions/x/clients": true, "PUT /v1/a": true, "DELETE /v1/a/b": true, "GET /v1/a": false, "PATCH /v1/a": false,
		"POST /api/v1/sessions": true, "POST /api/v1/sessions/ses_1/join": true, "POST /api/v1/sessions/ses_1/rpc": false,
		"POST /api/v1/sessions//join": false, "POST /api/v1/sessions/a/b/join": false, "DELETE /api/v1/sessions/ses_1": false,
		"POST /admin/v1/keys": false, "POST /v1x": false,
		"POST /v1/environments/env_1/token": false, "POST /v1/machines/mch_1/token": false, "POST /v1/executors/token": false,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("coverage (-want +got):\n%s", diff)
	}
}

// TestIdempotencyMountedRoutes runs the routes another package mounts (the
// model gateway and session tools) every time, key or not, while the
// server's own /v1 routes keep their receipts.
func TestIdempotencyMountedRoutes(t *testing.T) {
	mounted := &stubHandler{}
	receipts := newMemReceipts()
	srv := New(Options{Auth: &fakeAuth{}, Receipts: receipts, Mount: func(mux *http.ServeMux) {
		mux.Handle("POST /v1/model/v1/messages", mounted)
		mux.Handle("POST /v1/model/v1/chat/completions", mounted)
		mux.Handle("POST /v1/sessions/{id}/mcp", mounted)
	}})
	h := srv.Handler()
	for _, path := range []string{"/v1/model/v1/messages", "/v1/model/v1/chat/completions", "/v1/sessions/ses_1/mcp"} {
		for range 2 {
			if w := (idemReq{"POST", path, "k1", "tok", `{}`}).do(h); w.Code != http.StatusCreated {
				t.Fatalf("POST %s: %d %s", path, w.Code, w.Body)
			}
		}
	}
	if got := mounted.runs.Load(); got != 6 {
		t.Errorf("mounted routes ran %d times, want 6 (never replayed)", got)
	}
	if n := receipts.len(); n != 0 {
		t.Errorf("%d receipts saved for mounted routes", n)
	}
}

func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `[1,2]`, `"x"`, `{`, ``, `{"a":{"b":[1,{"c":null}]}}`, `1e400`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c := canonicalJSON(b)
		if c[0] == 'j' {
			// Canonical form is a fixed point.
			if again := canonicalJSON(c[1:]); string(again) != string(c) {
				t.Fatalf("canonical form of %q is not stable: %q then %q", b, c, again)
			}
		}
		_ = redact(b)
	})
}

func benchIdem(b *testing.B, replay bool) {
	b.ReportAllocs()
	h := Idempotency(IdempotencyOptions{Receipts: newMemReceipts()}, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(201)
		_, _ = w.Write([]byte(`{"session_id":"ses_1","session_key":"bae_ses_x","profile":{"name":"p"}}`))
	}))
	body := `{"lifetime":{"type":"never"},"name":"laptop","tools":[{"name":"t","description":"d","parameters":{"type":"object"}}]}`
	if replay {
		idemReq{"POST", "/v1/sessions/s/clients", "k", "tok", body}.do(h)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		key := "k"
		if !replay {
			key = "k" + strconv.Itoa(i)
		}
		if w := (idemReq{"POST", "/v1/sessions/s/clients", key, "tok", body}).do(h); w.Code != 201 {
			b.Fatal(w.Code)
		}
	}
}

func BenchmarkIdempotencyFirst(b *testing.B)  { benchIdem(b, false) }
func BenchmarkIdempotencyReplay(b *testing.B) { benchIdem(b, true) }
