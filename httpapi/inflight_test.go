package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/baton-engine/baton"
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
