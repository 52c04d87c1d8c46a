package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// replay is a subscribe handler that replays the events after
// since_event_id among evt_1..evt_3, then calls end.
func replay(end func(*ndjson)) func(*ndjson, rpcCall) {
	return func(n *ndjson, c rpcCall) {
		var p struct {
			Since string `json:"since_event_id"`
		}
		json.Unmarshal(c.Params, &p)
		started := p.Since == ""
		for _, id := range []string{"evt_1", "evt_2", "evt_3"} {
			if started {
				n.event(id, "server.message.send", `{}`)
			}
			started = started || id == p.Since
		}
		end(n)
	}
}

// drain reads sub until an error and returns the ids read.
func drain(t *testing.T, sub *Subscription) ([]string, error) {
	t.Helper()
	var ids []string
	for {
		ev, err := sub.Next(context.Background())
		if err != nil {
			return ids, err
		}
		ids = append(ids, ev.ID)
	}
}

func TestSubscribeReplayEnded(t *testing.T) {
	f := newFake(t)
	f.on("session.subscribe", replay(func(n *ndjson) { n.result(`{"ended":true,"reason":"unsubscribed"}`) }))
	s := f.connect(f.harness())
	sub, err := s.Subscribe(context.Background(), SubscribeOptions{SinceEventID: "evt_1"})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	defer sub.Close()
	ids, err := drain(t, sub)
	if err != io.EOF {
		t.Fatalf("end = %v, want io.EOF", err)
	}
	if diff := cmp.Diff([]string{"evt_2", "evt_3"}, ids); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if sub.EndReason() != "unsubscribed" || sub.LastEventID() != "evt_3" {
		t.Errorf("reason %q last %q", sub.EndReason(), sub.LastEventID())
	}
	if _, err := sub.Next(context.Background()); err != io.EOF {
		t.Errorf("Next after the end = %v, want io.EOF again", err)
	}
	if got := string(f.callsOf("session.subscribe")[0].Params); got != `{"since_event_id":"evt_1","max_frame_bytes":67108864}` {
		t.Errorf("params = %s", got)
	}
}

// TestSubscribeCleanEnd: BAE never sends a terminal frame; a cleanly
// closed stream is a normal end.
func TestSubscribeCleanEnd(t *testing.T) {
	f := newFake(t)
	f.on("session.subscribe", replay(func(*ndjson) {}))
	sub, err := f.connect(f.harness()).Subscribe(context.Background(), SubscribeOptions{StreamDeltas: true})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	defer sub.Close()
	ids, err := drain(t, sub)
	if err != io.EOF {
		t.Fatalf("end = %v, want io.EOF", err)
	}
	if diff := cmp.Diff([]string{"evt_1", "evt_2", "evt_3"}, ids); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if sub.EndReason() != "" {
		t.Errorf("reason = %q, want none", sub.EndReason())
	}
	if got := string(f.callsOf("session.subscribe")[0].Params); got != `{"stream_deltas":true,"max_frame_bytes":67108864}` {
		t.Errorf("params = %s", got)
	}
}

func TestSubscribeLagged(t *testing.T) {
	f := newFake(t)
	f.on("session.subscribe", replay(func(n *ndjson) { n.lagged() }))
	sub, err := f.connect(f.harness()).Subscribe(context.Background(), SubscribeOptions{})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	defer sub.Close()
	_, err = drain(t, sub)
	if !errors.Is(err, ErrLagged) {
		t.Fatalf("end = %v, want ErrLagged", err)
	}
	var le *LaggedError
	if !errors.As(err, &le) || le.LastEventID != "evt_3" {
		t.Errorf("LaggedError = %+v, want LastEventID evt_3", le)
	}
	var re *RPCError
	if !errors.As(err, &re) || re.Code != -32000 {
		t.Errorf("lagged RPCError = %+v", re)
	}
}

// TestSubscribeTruncated: a connection cut inside a chunk is a transport
// error, not a normal end.
func TestSubscribeTruncated(t *testing.T) {
	f := newFake(t)
	f.on("session.subscribe", func(n *ndjson, c rpcCall) {
		n.event("evt_1", "server.message.send", `{}`)
		conn, buf, err := n.w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		buf.WriteString("40\r\n{\"jsonrpc\":\"2.0\"")
		buf.Flush()
		conn.Close()
	})
	sub, err := f.connect(f.harness()).Subscribe(context.Background(), SubscribeOptions{})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	defer sub.Close()
	ids, err := drain(t, sub)
	var te *TransportError
	if !errors.As(err, &te) {
		t.Fatalf("end = %v, want *TransportError", err)
	}
	if diff := cmp.Diff([]string{"evt_1"}, ids); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestSubscribeClose: Close unblocks a waiting Next and hangs up.
func TestSubscribeClose(t *testing.T) {
	f := newFake(t)
	gone := make(chan struct{})
	f.on("session.subscribe", func(n *ndjson, c rpcCall) {
		n.event("evt_1", "server.message.send", `{}`)
		<-n.r.Context().Done()
		close(gone)
	})
	sub, err := f.connect(f.harness()).Subscribe(context.Background(), SubscribeOptions{})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	if _, err := sub.Next(context.Background()); err != nil {
		t.Fatalf("Next: %v", err)
	}
	errc := make(chan error)
	go func() {
		_, err := sub.Next(context.Background())
		errc <- err
	}()
	sub.Close()
	if err := <-errc; err != ErrClosed {
		t.Errorf("blocked Next = %v, want ErrClosed", err)
	}
	if _, err := sub.Next(context.Background()); err != ErrClosed {
		t.Errorf("Next after Close = %v, want ErrClosed", err)
	}
	<-gone
}

// TestSubscribeNextContext: a done ctx ends a waiting Next with its error.
func TestSubscribeNextContext(t *testing.T) {
	f := newFake(t)
	waiting := make(chan struct{})
	f.on("session.subscribe", func(n *ndjson, c rpcCall) {
		n.w.(http.Flusher).Flush()
		close(waiting)
		<-n.r.Context().Done()
	})
	sub, err := f.connect(f.harness()).Subscribe(context.Background(), SubscribeOptions{})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	defer sub.Close()
	<-waiting
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := sub.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next = %v, want context.Canceled", err)
	}
}

// TestSubscribeDeltas: deltas asked for arrive as DeltaType events and do
// not move the resume cursor.
func TestSubscribeDeltas(t *testing.T) {
	f := newFake(t)
	f.on("session.subscribe", func(n *ndjson, c rpcCall) {
		n.event("evt_1", "provider.request", `{}`)
		n.delta("par")
		n.raw(`{"jsonrpc":"2.0","method":"session.future_thing","params":{}}`)
		n.delta("tial")
	})
	sub, err := f.connect(f.harness()).Subscribe(context.Background(), SubscribeOptions{StreamDeltas: true})
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	defer sub.Close()
	var got []string
	for {
		ev, err := sub.Next(context.Background())
		if err != nil {
			if err != io.EOF {
				t.Fatalf("Next: %v", err)
			}
			break
		}
		got = append(got, ev.Type+":"+ev.ID+ev.Delta)
	}
	want := []string{"provider.request:evt_1", DeltaType + ":par", DeltaType + ":tial"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if sub.LastEventID() != "evt_1" {
		t.Errorf("LastEventID = %q", sub.LastEventID())
	}
}

func TestSubscribeAPIError(t *testing.T) {
	f := newFake(t)
	s := f.connect(f.harness())
	s.Key = "bae_ses_bad"
	_, err := s.Subscribe(context.Background(), SubscribeOptions{})
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 401 || !strings.Contains(ae.Error(), "invalid session key") {
		t.Fatalf("Subscribe = %v, want 401", err)
	}
}
