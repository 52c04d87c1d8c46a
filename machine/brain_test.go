package machine

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestBrainCallTimeout: a gateway that accepts the call but never answers
// fails it once the model call bound passes, not when the turn ends.
func TestBrainCallTimeout(t *testing.T) {
	release := make(chan struct{})
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(gw.Close)
	t.Cleanup(func() { close(release) }) // runs before gw.Close
	b := NewBrain(&AgentSpec{Model: "m", MaxTokens: 10}, nil, nil, slog.New(slog.DiscardHandler))
	b.timeout = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // the turn: far longer
	defer cancel()
	start := time.Now()
	_, err := b.call(ctx, gw.URL, "tok", []chatMessage{{Role: "user", Content: contentBlocks(json.RawMessage(`"hi"`))}}, nil)
	if err == nil || err.Error() != "model gateway: no answer within 200ms" {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("call took %s", d)
	}
	if ctx.Err() != nil {
		t.Error("the turn's context ended first")
	}
}
