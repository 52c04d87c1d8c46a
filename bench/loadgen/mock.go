package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// maxMockRequest bounds one request body the mock reads: histories grow
// with every round trip, so this is generous.
const maxMockRequest = 64 << 20

// mock is a zero-latency model speaking Anthropic's Messages API with
// server-sent events. It holds no conversation state: when the last
// message carries tool_result blocks it replies with text, otherwise it
// calls the first advertised tool perTurn times in parallel.
type mock struct {
	addr    string
	perTurn int
	log     *slog.Logger

	ln    net.Listener
	srv   *http.Server
	done  chan error
	calls atomic.Int64 // answered requests
	ids   atomic.Int64 // tool_use id counter
}

// newMock returns a mock that will listen on addr and ask for perTurn
// tool calls (at least one) per reply.
func newMock(addr string, perTurn int, log *slog.Logger) *mock {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &mock{addr: addr, perTurn: max(perTurn, 1), log: log}
}

// Open starts listening and serving.
func (m *mock) Open(ctx context.Context) error {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", m.addr)
	if err != nil {
		return fmt.Errorf("mock provider: %w", err)
	}
	m.ln = ln
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages", m.messages)
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	m.done = make(chan error, 1)
	go func() { m.done <- m.srv.Serve(ln) }()
	return nil
}

// URL is the base URL the mock serves, for bae-config.toml's base_url.
func (m *mock) URL() string { return "http://" + m.ln.Addr().String() }

// Calls returns how many requests the mock answered.
func (m *mock) Calls() int64 { return m.calls.Load() }

// Close stops the server and waits for its goroutine.
func (m *mock) Close() error {
	if m.srv == nil {
		return nil
	}
	err := m.srv.Close()
	if serr := <-m.done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	m.srv = nil
	return err
}

// mockRequest is the part of a Messages API request the mock reads.
type mockRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
	Stream bool `json:"stream"`
}

// answersResults reports whether the request's last message is a user
// message holding tool_result blocks.
func (r *mockRequest) answersResults() bool {
	if len(r.Messages) == 0 {
		return false
	}
	last := r.Messages[len(r.Messages)-1]
	if last.Role != "user" {
		return false
	}
	var blocks []struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(last.Content, &blocks) != nil {
		return false
	}
	for _, b := range blocks {
		if b.Type == "tool_result" {
			return true
		}
	}
	return false
}

func (m *mock) messages(w http.ResponseWriter, r *http.Request) {
	var req mockRequest
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxMockRequest))
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"type":"error","error":{"type":"invalid_request_error","message":"malformed request"}}`)
		m.log.Warn("mock provider: bad request", "err", err)
		return
	}
	n := m.calls.Add(1)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	bw := bufio.NewWriterSize(w, 4096)
	e := sseWriter{w: bw}
	model := req.Model
	if model == "" {
		model = "loadgen-mock"
	}
	e.send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": fmt.Sprintf("msg_loadgen%014d", n), "type": "message", "role": "assistant", "model": model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]int{"input_tokens": len(req.Messages), "output_tokens": 1},
	}})
	stop := "end_turn"
	if req.answersResults() || len(req.Tools) == 0 {
		e.text(0, "done")
	} else {
		stop = "tool_use"
		for i := range m.perTurn {
			e.toolUse(i, fmt.Sprintf("toolu_loadgen%011d", m.ids.Add(1)), req.Tools[0].Name)
		}
	}
	e.send("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]int{"output_tokens": 2}})
	e.send("message_stop", map[string]string{"type": "message_stop"})
	if e.err == nil {
		e.err = bw.Flush()
	}
	if e.err != nil {
		m.log.Debug("mock provider: write", "err", e.err)
	}
}

// sseWriter writes server-sent events and keeps the first error.
type sseWriter struct {
	w   *bufio.Writer
	err error
}

func (e *sseWriter) send(name string, data any) {
	if e.err != nil {
		return
	}
	b, err := json.Marshal(data)
	if err != nil {
		e.err = err
		return
	}
	_, e.err = fmt.Fprintf(e.w, "event: %s\ndata: %s\n\n", name, b)
}

func (e *sseWriter) text(index int, s string) {
	e.send("content_block_start", map[string]any{"type": "content_block_start", "index": index,
		"content_block": map[string]string{"type": "text", "text": ""}})
	e.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": index,
		"delta": map[string]string{"type": "text_delta", "text": s}})
	e.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
}

func (e *sseWriter) toolUse(index int, id, name string) {
	e.send("content_block_start", map[string]any{"type": "content_block_start", "index": index,
		"content_block": map[string]any{"type": "tool_use", "id": id, "name": name, "input": map[string]any{}}})
	e.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": index,
		"delta": map[string]string{"type": "input_json_delta", "partial_json": "{}"}})
	e.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
}
