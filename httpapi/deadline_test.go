package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/baton-engine/baton"
)

// openRPCServer serves a session key for ses_1 and turns on loopback.
func openRPCServer(t *testing.T, turns baton.TurnService, body, write time.Duration) string {
	t.Helper()
	key := &baton.Key{ID: "key_s", Role: baton.RoleSession, Name: "ses_1", ClientID: "key_c"}
	srv := New(Options{Addr: "127.0.0.1:0", Auth: &fakeAuth{sessions: map[string]*baton.Key{"ses_1 tok": key}},
		Turns: turns, BodyTimeout: body, WriteTimeout: write})
	if err := srv.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return strings.TrimPrefix(srv.URL(), "http://")
}

// dialRPC sends the head of an /rpc request announcing size body bytes,
// and then body, on a fresh connection.
func dialRPC(t *testing.T, addr string, size int, body string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	head := "POST /api/v1/sessions/ses_1/rpc HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok\r\n" +
		"Content-Type: application/json\r\nContent-Length: " + strconv.Itoa(size) + "\r\n\r\n"
	if _, err := io.WriteString(c, head+body); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRPCStalledBody: an /rpc body that stops short is answered, once the
// body deadline passes, with an Invalid Request frame, and the connection
// is not held.
func TestRPCStalledBody(t *testing.T) {
	addr := openRPCServer(t, nil, 200*time.Millisecond, 0)
	c := dialRPC(t, addr, 100, `{"jsonrpc"`)
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second)) // a safety net far above the deadline under test
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no response to a stalled body: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("response body: %v", err)
	}
	if !strings.Contains(string(b), "timed out reading the request body") {
		t.Errorf("response %d %q, want an Invalid Request frame about the body", resp.StatusCode, b)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("connection after a timed-out body: %v, want EOF", err)
	}
}

// endlessTurns publishes large notices on every subscribe feed for as
// long as it is read, and reports each feed's release.
type endlessTurns struct {
	baton.TurnService
	released chan struct{}
}

func (e endlessTurns) Subscribe(context.Context, *baton.Key, string, bool) (*baton.Feed, error) {
	payload := json.RawMessage(`"` + strings.Repeat("a", 64<<10) + `"`)
	n := 0
	return &baton.Feed{
		Next: func(ctx context.Context) (*baton.Notice, error) {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			n++
			ev := &baton.Event{ID: "evt_" + strconv.Itoa(n), Seq: int64(n), SessionID: "ses_1", Type: "x", Payload: payload}
			return &baton.Notice{Event: ev}, nil
		},
		Closed: func() bool { return false },
		Close:  func() { close(e.released) },
	}, nil
}

// TestSubscribeStalledReader: a subscriber that never reads its stream,
// while events keep coming, has its stream ended by the write deadline
// and its feed released, instead of blocking the server's writer forever.
func TestSubscribeStalledReader(t *testing.T) {
	turns := endlessTurns{released: make(chan struct{})}
	addr := openRPCServer(t, turns, 0, 200*time.Millisecond)
	req := `{"jsonrpc":"2.0","id":1,"method":"session.subscribe"}`
	c := dialRPC(t, addr, len(req), req)
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4 << 10) // fill up sooner; never read
	}
	select {
	case <-turns.released:
	case <-time.After(30 * time.Second): // a safety net, far above the deadline under test
		t.Fatal("the feed of a subscriber that stopped reading was never released")
	}
}
