package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/wire"
)

// heldTurns runs every sendMessage as a turn that ends when finish is
// closed, and reports each call on called.
type heldTurns struct {
	baton.TurnService
	called chan struct{}
	finish chan struct{}
}

func (h heldTurns) SendMessage(context.Context, *baton.Key, json.RawMessage, baton.SendOptions) (*baton.Turn, error) {
	h.called <- struct{}{}
	started := make(chan struct{})
	close(started)
	res := &baton.TurnResult{Message: baton.Message{Role: "assistant", Content: json.RawMessage(`"done"`)}}
	return &baton.Turn{
		Started: started,
		Queued:  true, // the headers go out at once
		Sub:     func() baton.Subscription { return nil },
		Own:     func(*baton.Event) bool { return false },
		Done:    h.finish,
		Result:  func() *baton.TurnResult { return res },
	}, nil
}

// TestInflightBudget: while a sendMessage's turn holds its bytes, a
// request that would take the server past MaxInflightBytes is refused at
// once in its route's shape (a -32000 frame on /rpc, 429 with Retry-After
// on REST and /v1) naming the setting; once the turn ends the budget is
// free again.
func TestInflightBudget(t *testing.T) {
	turns := heldTurns{called: make(chan struct{}, 4), finish: make(chan struct{})}
	key := &baton.Key{ID: "key_s", Role: baton.RoleSession, Name: "ses_1", ClientID: "key_c"}
	srv := New(Options{Addr: "127.0.0.1:0", MaxInflightBytes: 1000,
		Auth:     &fakeAuth{sessions: map[string]*baton.Key{"ses_1 tok": key}, clients: map[string]*baton.Key{"ck": {ID: "key_c", Role: baton.RoleClient}}},
		Sessions: &fakeSessions{}, Turns: turns})
	if err := srv.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	send := `{"jsonrpc":"2.0","id":1,"method":"session.sendMessage","params":{"message":{"content":"` + strings.Repeat("a", 600) + `"}}}`
	post := func(path, token, body string) *http.Response {
		req, _ := http.NewRequest("POST", srv.URL()+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	first := post("/api/v1/sessions/ses_1/rpc", "tok", send)
	defer first.Body.Close()
	<-turns.called // its bytes are charged: the turn holds them

	r := post("/api/v1/sessions/ses_1/rpc", "tok", send)
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	var frame struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(b), &frame); err != nil || r.StatusCode != 200 || frame.Error.Code != -32000 ||
		!strings.Contains(frame.Error.Message, "BATON_MAX_INFLIGHT_BYTES") {
		t.Fatalf("second sendMessage: %d %s, want a -32000 frame naming BATON_MAX_INFLIGHT_BYTES", r.StatusCode, b)
	}
	select {
	case <-turns.called:
		t.Fatal("a refused sendMessage reached the engine")
	default:
	}

	big := `{"client_version":"` + strings.Repeat("x", 600) + `"}`
	for _, path := range []string{"/api/v1/sessions", "/v1/sessions/ses_1/clients"} {
		r := post(path, "ck", big)
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" ||
			!strings.Contains(string(b), "BATON_MAX_INFLIGHT_BYTES") {
			t.Errorf("POST %s: %d %q (Retry-After %q), want 429 naming the setting", path, r.StatusCode, b, r.Header.Get("Retry-After"))
		}
	}
	if r := post("/api/v1/sessions", "ck", `{}`); r.StatusCode != http.StatusCreated {
		t.Errorf("a small request within the budget: %d, want 201", r.StatusCode)
	}

	close(turns.finish)
	if b, _ := io.ReadAll(first.Body); !bytes.Contains(b, []byte(`"result"`)) {
		t.Fatalf("first sendMessage: %s", b)
	}
	r = post("/api/v1/sessions/ses_1/rpc", "tok", send)
	b, _ = io.ReadAll(r.Body)
	r.Body.Close()
	if !bytes.Contains(b, []byte(`"result"`)) {
		t.Fatalf("sendMessage after the turn ended: %s, want a result", b)
	}
}

// TestOmittedTakesLargestFirst: a terminal frame over max_frame_bytes
// leaves out the largest payloads, only as many as it takes, and never
// when it fits.
func TestOmittedTakesLargestFirst(t *testing.T) {
	ev := func(id string, n int) *baton.Event {
		return &baton.Event{ID: id, SessionID: "ses_1", Type: "x", Payload: json.RawMessage(`"` + strings.Repeat("a", n) + `"`)}
	}
	small, mid, big := ev("evt_1", 100), ev("evt_2", 5000), ev("evt_3", 9000)
	msg := baton.Message{Role: "assistant", Content: json.RawMessage(`"hi"`)}
	evs := []*baton.Event{small, mid, big}
	if got := omitted(0, nil, msg, evs); got != nil {
		t.Errorf("no bound: %v", got)
	}
	if got := omitted(1<<20, nil, msg, evs); got != nil {
		t.Errorf("fits: %v", got)
	}
	if got := omitted(8000, nil, msg, evs); len(got) != 1 || !got[big] {
		t.Errorf("8000: %v, want only the largest", got)
	}
	if got := omitted(2000, nil, msg, evs); len(got) != 2 || !got[big] || !got[mid] {
		t.Errorf("2000: %v, want the two largest", got)
	}
	var buf bytes.Buffer
	s := &stream{buf: nil, maxFrame: 2000}
	s.result(json.RawMessage(`1`), msg, evs)
	buf.Write(s.buf)
	var frame struct {
		Result struct {
			Events []struct {
				Payload json.RawMessage `json:"payload"`
			} `json:"events"`
		} `json:"result"`
	}
	if err := json.Unmarshal(buf.Bytes(), &frame); err != nil {
		t.Fatalf("frame %s: %v", buf.Bytes(), err)
	}
	if len(buf.Bytes()) > 2000 || string(frame.Result.Events[2].Payload) != `{"omitted_bytes":9002}` ||
		string(frame.Result.Events[0].Payload) != string(small.Payload) {
		t.Errorf("frame of %d bytes: %s", buf.Len(), buf.Bytes())
	}
}

// TestMaxFrameBytesParam: max_frame_bytes must be a non-negative integer.
func TestMaxFrameBytesParam(t *testing.T) {
	for _, v := range []string{`-1`, `"big"`, `1.5`} {
		rec := httptest.NewRecorder()
		c := &call{req: &wire.Request{ID: json.RawMessage(`1`)}, out: newStream(rec, nil, 0)}
		if c.frameLimit(json.RawMessage(v)) {
			t.Errorf("%s accepted", v)
		}
		if b := rec.Body.Bytes(); !bytes.Contains(b, []byte(`-32602`)) || !bytes.Contains(b, []byte(`max_frame_bytes`)) {
			t.Errorf("%s: %s", v, b)
		}
	}
	c := &call{req: &wire.Request{ID: json.RawMessage(`1`)}, out: newStream(httptest.NewRecorder(), nil, 0)}
	if !c.frameLimit(json.RawMessage(`4096`)) || c.out.maxFrame != 4096 {
		t.Errorf("4096: %d", c.out.maxFrame)
	}
}
