package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/wire"
)

// flushCounter is a ResponseWriter that counts flushes.
type flushCounter struct {
	*httptest.ResponseRecorder
	flushes int
}

func (f *flushCounter) Flush() { f.flushes++; f.ResponseRecorder.Flush() }

// feed is a Subscription over a channel the test fills.
type feed chan baton.Notice

func (f feed) C() <-chan baton.Notice { return f }
func (f feed) Err() error             { return nil }
func (f feed) Close()                 {}

func notice(typ string) baton.Notice {
	return baton.Notice{Event: &baton.Event{ID: "evt_" + typ, SessionID: "ses_1", Type: typ, Payload: []byte(`{}`)}}
}

// TestForwardHoldsTheReply: notices go out in one flush per batch, but
// once the turn's server.message.send is queued nothing is flushed: the
// reply leaves with the terminal result.
func TestForwardHoldsTheReply(t *testing.T) {
	for _, tc := range []struct {
		name    string
		batch   []string
		own     bool // the batch is the caller's own events, which it skips
		flushes int
	}{
		{"reply", []string{baton.EventProviderResp, baton.EventServerMessage}, false, 0},
		{"no reply yet", []string{baton.EventProviderReq}, false, 1},
		{"own events only: not even the headers", []string{baton.EventClientMessage, baton.EventToolResult}, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &flushCounter{ResponseRecorder: httptest.NewRecorder()}
			c := &call{out: newStream(w, nil, 0), ctx: context.Background()}
			c.out.started = !tc.own // the headers are out already
			ch := make(feed, len(tc.batch))
			for _, typ := range tc.batch {
				ch <- notice(typ)
			}
			done := make(chan struct{})
			turn := &baton.Turn{Done: done, Own: func(*baton.Event) bool { return tc.own }}
			ok := make(chan bool)
			go func() { ok <- c.forward(ch, turn, false) }()
			// Once forward has taken the whole batch it decides on the flush
			// before it looks at Done again.
			for len(ch) > 0 {
				runtime.Gosched()
			}
			close(done)
			if !<-ok {
				t.Fatal("forward ended the stream early")
			}
			if w.flushes != tc.flushes {
				t.Errorf("%d flushes, want %d", w.flushes, tc.flushes)
			}
			written := w.Body.String() + string(c.out.buf)
			if tc.own {
				if written != "" || c.out.started {
					t.Errorf("own events wrote %q (headers started: %v)", written, c.out.started)
				}
				return
			}
			for _, typ := range tc.batch {
				if !strings.Contains(written, `"event_type":"`+typ+`"`) {
					t.Errorf("notice %s neither written nor queued: %q", typ, written)
				}
			}
		})
	}
}

var _ http.Flusher = (*flushCounter)(nil)

// feedTurns serves one subscribe feed; the other methods are not used.
type feedTurns struct {
	baton.TurnService
	feed *baton.Feed
}

func (f feedTurns) Subscribe(context.Context, *baton.Key, string, bool) (*baton.Feed, error) {
	return f.feed, nil
}

// TestSubscribeBatchesReadyNotices: notices that are ready together (a
// replay chunk, one commit's events) leave in one write.
func TestSubscribeBatchesReadyNotices(t *testing.T) {
	ready := []baton.Notice{notice(baton.EventProviderReq), notice(baton.EventProviderResp), notice(baton.EventServerMessage)}
	nexts := 0
	feed := &baton.Feed{
		Next: func(context.Context) (*baton.Notice, error) {
			nexts++
			if nexts == 1 {
				n := ready[0]
				ready = ready[1:]
				return &n, nil
			}
			return nil, nil // ended
		},
		Poll: func() (*baton.Notice, bool) {
			if len(ready) == 0 {
				return nil, false
			}
			n := ready[0]
			ready = ready[1:]
			return &n, true
		},
		Closed: func() bool { return false },
		Close:  func() {},
	}
	s := &Server{opts: Options{Turns: feedTurns{feed: feed}}}
	req, perr := wire.Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"session.subscribe"}`))
	if perr != nil {
		t.Fatal(perr)
	}
	w := &flushCounter{ResponseRecorder: httptest.NewRecorder()}
	c := &call{s: s, req: req, out: newStream(w, nil, 0), ctx: context.Background()}
	c.subscribe()
	body := w.Body.String()
	if got := strings.Count(body, `"method":"session.event"`); got != 3 {
		t.Fatalf("%d notices in %q, want 3", got, body)
	}
	// One flush for the headers, one for the three notices; the terminal
	// result is written without one.
	if w.flushes != 2 {
		t.Errorf("%d flushes, want 2 (headers, then the three ready notices together)", w.flushes)
	}
	if !strings.Contains(body, `"reason":"unsubscribed"`) {
		t.Errorf("no terminal result in %q", body)
	}
}
