package anthropic

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/provider"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const token = "sk-ant-test-secret-token"

// seen is the request a fake server received.
type seen struct {
	Method, Path string
	Header       http.Header
	Body         string
}

// fake starts a loopback Messages API server whose handler answers with
// respond; every request it receives is sent on the returned channel.
func fake(t testing.TB, respond func(w http.ResponseWriter, r *http.Request)) (*baton.ProviderEntry, <-chan seen) {
	t.Helper()
	reqs := make(chan seen, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		select {
		case reqs <- seen{r.Method, r.URL.Path, r.Header.Clone(), string(body)}:
		default:
		}
		respond(w, r)
	}))
	t.Cleanup(srv.Close)
	entry := &baton.ProviderEntry{Name: "a", Provider: baton.ProviderAnthropic, BaseURL: srv.URL + "/", Model: "claude-entry", MaxTokens: 2048}
	return entry, reqs
}

// newClient returns a client with its own transport, closed at cleanup.
func newClient(t testing.TB) *Client {
	c := New(nil)
	t.Cleanup(func() { c.Close() })
	return c
}

// sseFrame renders one event.
func sseFrame(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }

// writeStream writes frames as a text/event-stream, flushing after each and
// once in the middle of each frame so the client sees split reads.
func writeStream(w http.ResponseWriter, frames ...string) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	f := w.(http.Flusher)
	for _, fr := range frames {
		half := len(fr) / 2
		io.WriteString(w, fr[:half])
		f.Flush()
		io.WriteString(w, fr[half:])
		f.Flush()
	}
}

var (
	frameStart = sseFrame("message_start", `{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}`)
	frameStop  = sseFrame("message_stop", `{"type":"message_stop"}`)
	toolFrames = []string{
		frameStart,
		sseFrame("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
		sseFrame("ping", `{"type": "ping"}`),
		sseFrame("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me "}}`),
		sseFrame("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"check \"the\" <weather>."}}`),
		sseFrame("content_block_stop", `{"type":"content_block_stop","index":0}`),
		sseFrame("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01","name":"get_weather","input":{}}}`),
		sseFrame("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}`),
		sseFrame("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"loc"}}`),
		sseFrame("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"ation\": \"Par"}}`),
		sseFrame("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"is\", \"days\": [1, 2]}"}}`),
		sseFrame("content_block_stop", `{"type":"content_block_stop","index":1}`),
		sseFrame("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":42}}`),
		frameStop,
	}
	toolContent = `[{"type":"text","text":"Let me check \"the\" <weather>."},{"type":"tool_use","id":"toolu_01","name":"get_weather","input":{"location":"Paris","days":[1,2]}}]`
	toolBody    = `{"id":"msg_01","type":"message","role":"assistant","model":"claude-test","content":` + toolContent +
		`,"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":42}}`
)

func TestCallStream(t *testing.T) {
	entry, reqs := fake(t, func(w http.ResponseWriter, r *http.Request) { writeStream(w, toolFrames...) })
	var deltas []string
	req := &baton.ProviderRequest{
		Model:     "claude-test",
		MaxTokens: 1024,
		System:    "Be brief & <precise>.",
		Messages: []baton.Message{
			{Role: "user", Content: json.RawMessage(`"What's the weather in <Paris>?"`)},
			{Role: "assistant", Content: json.RawMessage(`[{"type":"text","text":"ok"},{"type":"tool_use","id":"t1","name":"x","input":{}}]`)},
			{Role: "user", Content: json.RawMessage(`[{"type":"tool_result","tool_use_id":"t1","content":"done","cache_control":{"type":"ephemeral"}}]`)},
		},
		Tools:   []json.RawMessage{json.RawMessage(`{"name":"get_weather","description":"Weather","input_schema":{"type":"object"}}`)},
		OnDelta: func(s string) { deltas = append(deltas, s) },
	}
	resp, err := newClient(t).Call(context.Background(), entry, token, req)
	if err != nil {
		t.Fatalf("Call: %v", err)
	}

	got := <-reqs
	if got.Method != http.MethodPost || got.Path != "/v1/messages" {
		t.Errorf("request = %s %s, want POST /v1/messages", got.Method, got.Path)
	}
	for name, want := range map[string]string{
		"Content-Type":      "application/json",
		"X-Api-Key":         token,
		"Anthropic-Version": "2023-06-01",
		"Accept":            "text/event-stream",
	} {
		if v := got.Header.Get(name); v != want {
			t.Errorf("header %s = %q, want %q", name, v, want)
		}
	}
	if got.Header.Get("Authorization") != "" {
		t.Errorf("unexpected Authorization header")
	}
	wantBody := `{"model":"claude-test","max_tokens":1024,"system":"Be brief & <precise>.","messages":[` +
		`{"role":"user","content":"What's the weather in <Paris>?"},` +
		`{"role":"assistant","content":[{"type":"text","text":"ok"},{"type":"tool_use","id":"t1","name":"x","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"done","cache_control":{"type":"ephemeral"}}]}],` +
		`"tools":[{"name":"get_weather","description":"Weather","input_schema":{"type":"object"}}],"stream":true}`
	if got.Body != wantBody {
		t.Errorf("request body:\n got %s\nwant %s", got.Body, wantBody)
	}

	if string(resp.Content) != toolContent {
		t.Errorf("Content:\n got %s\nwant %s", resp.Content, toolContent)
	}
	if string(resp.Body) != toolBody {
		t.Errorf("Body:\n got %s\nwant %s", resp.Body, toolBody)
	}
	if diff := cmp.Diff(&baton.Usage{InputTokens: 25, OutputTokens: 42}, resp.Usage); diff != "" {
		t.Errorf("Usage (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Let me ", `check "the" <weather>.`}, deltas); diff != "" {
		t.Errorf("OnDelta calls (-want +got):\n%s", diff)
	}
}

func TestRequestDefaults(t *testing.T) {
	entry, reqs := fake(t, func(w http.ResponseWriter, r *http.Request) {
		writeStream(w, frameStart, frameStop)
	})
	resp, err := newClient(t).Call(context.Background(), entry, token, &baton.ProviderRequest{})
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	got := <-reqs
	want := `{"model":"claude-entry","max_tokens":2048,"messages":[],"tools":[],"stream":true}`
	if got.Body != want {
		t.Errorf("request body:\n got %s\nwant %s", got.Body, want)
	}
	if got.Path != "/v1/messages" {
		t.Errorf("path = %q (base URL's trailing slash not trimmed?)", got.Path)
	}
	wantBody := `{"id":"msg_01","type":"message","role":"assistant","model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}`
	if string(resp.Body) != wantBody || string(resp.Content) != "[]" {
		t.Errorf("empty reply: Body %s Content %s", resp.Body, resp.Content)
	}
}

func TestStreamBlocks(t *testing.T) {
	tests := []struct {
		name    string
		frames  []string
		content string
	}{
		{
			name: "tool_use without input deltas keeps its input",
			frames: []string{
				`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"n","input":{"a":1}}}`,
				`{"type":"content_block_stop","index":0}`,
			},
			content: `[{"type":"tool_use","id":"t","name":"n","input":{"a":1}}]`,
		},
		{
			name: "blank partial JSON is an empty object",
			frames: []string{
				`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"n","input":{}}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":""}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"  "}}`,
			},
			content: `[{"type":"tool_use","id":"t","name":"n","input":{}}]`,
		},
		{
			name: "thinking with signature, then text with citations",
			frames: []string{
				`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Hmm, "}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"ok."}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"c2ln"}}`,
				`{"type":"content_block_start","index":1,"content_block":{"type":"text","text":"A","citations":[]}}`,
				`{"type":"content_block_delta","index":1,"delta":{"type":"citations_delta","citation":{"type":"char_location","cited_text":"x"}}}`,
				`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"\n\u00e9\u2028"}}`,
			},
			content: `[{"type":"thinking","thinking":"Hmm, ok.","signature":"c2ln"},{"type":"text","text":"A\né\u2028","citations":[{"type":"char_location","cited_text":"x"}]}]`,
		},
		{
			name: "unknown blocks, deltas and events pass through",
			frames: []string{
				`{"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"s","name":"web_search","input":{"q":"go"},"extra":[1,{"b":"}"}]}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"future_delta","x":1}}`,
				`{"type":"future_event","foo":"bar"}`,
				`{"type":"content_block_start","index":1,"content_block":{"type":"redacted_thinking","data":"abc"}}`,
			},
			content: `[{"type":"server_tool_use","id":"s","name":"web_search","input":{"q":"go"},"extra":[1,{"b":"}"}]},{"type":"redacted_thinking","data":"abc"}]`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			frames := []string{frameStart}
			for _, f := range tt.frames {
				frames = append(frames, sseFrame("x", f))
			}
			frames = append(frames, frameStop)
			resp, err := readStream(streamResponse(strings.Join(frames, "")), nil, provider.MaxBody)
			if err != nil {
				t.Fatalf("readStream: %v", err)
			}
			if string(resp.Content) != tt.content {
				t.Errorf("Content:\n got %s\nwant %s", resp.Content, tt.content)
			}
		})
	}
}

// streamResponse is a 200 event-stream response with the given body.
func streamResponse(body string) *http.Response {
	return &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{"Content-Type": {"text/event-stream"}},
		Body:       io.NopCloser(strings.NewReader(body)),
	}
}

func TestCallFailures(t *testing.T) {
	date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	tests := []struct {
		name    string
		respond func(w http.ResponseWriter)
		want    baton.ProviderError
		// retryAfter, when set, bounds RetryAfter from below (HTTP-dates
		// are relative to the clock).
		minRetryAfter time.Duration
	}{
		{
			name: "429 with Retry-After seconds",
			respond: func(w http.ResponseWriter) {
				w.Header().Set("Retry-After", "7")
				w.WriteHeader(http.StatusTooManyRequests)
				io.WriteString(w, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`)
			},
			want: baton.ProviderError{Status: 429, Detail: "provider returned HTTP 429", Retryable: true, RetryAfter: 7 * time.Second,
				Body: `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`},
		},
		{
			name: "529 with Retry-After date",
			respond: func(w http.ResponseWriter) {
				w.Header().Set("Retry-After", date)
				w.WriteHeader(529)
				io.WriteString(w, "overloaded")
			},
			want:          baton.ProviderError{Status: 529, Detail: "provider returned HTTP 529", Retryable: true, Body: "overloaded"},
			minRetryAfter: 80 * time.Second,
		},
		{
			name: "401 echoing the key is not retryable and is redacted",
			respond: func(w http.ResponseWriter) {
				w.Header().Set("Retry-After", "3")
				w.WriteHeader(http.StatusUnauthorized)
				io.WriteString(w, `{"error":"invalid x-api-key `+token+`"}`)
			},
			want: baton.ProviderError{Status: 401, Detail: "provider returned HTTP 401", Body: `{"error":"invalid x-api-key [redacted]"}`},
		},
		{
			name: "non-JSON 2xx",
			respond: func(w http.ResponseWriter) {
				w.Header().Set("Content-Type", "text/html")
				io.WriteString(w, "<html>proxy</html>")
			},
			want: baton.ProviderError{Status: 200, Detail: "provider returned non-JSON body: invalid character '<' looking for beginning of value", Body: "<html>proxy</html>"},
		},
		{
			name: "overloaded error event",
			respond: func(w http.ResponseWriter) {
				writeStream(w, frameStart, sseFrame("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
			},
			want: baton.ProviderError{Status: 200, Detail: "provider stream error: overloaded_error: Overloaded", Retryable: true,
				Body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
		},
		{
			name: "invalid_request error event",
			respond: func(w http.ResponseWriter) {
				writeStream(w, sseFrame("error", `{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}`))
			},
			want: baton.ProviderError{Status: 200, Detail: "provider stream error: invalid_request_error: bad",
				Body: `{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}`},
		},
		{
			name: "truncated stream",
			respond: func(w http.ResponseWriter) {
				writeStream(w, toolFrames[:5]...)
				io.WriteString(w, "event: content_block_delta\ndata: {\"type\":\"content_bl")
			},
			want: baton.ProviderError{Status: 200, Detail: "provider stream ended before message_stop", Retryable: true},
		},
		{
			name: "invalid tool input JSON",
			respond: func(w http.ResponseWriter) {
				writeStream(w, frameStart,
					sseFrame("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"n","input":{}}}`),
					sseFrame("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}`),
					frameStop)
			},
			want: baton.ProviderError{Status: 200, Detail: "provider stream tool input is not valid JSON: unexpected end of JSON input"},
		},
		{
			name: "non-JSON stream event",
			respond: func(w http.ResponseWriter) {
				writeStream(w, frameStart, sseFrame("content_block_delta", "not json"))
			},
			want: baton.ProviderError{Status: 200, Detail: "provider returned a malformed stream event: invalid character 'o' in literal null (expecting 'u')", Body: "not json"},
		},
		{
			name: "delta for an unknown block",
			respond: func(w http.ResponseWriter) {
				writeStream(w, frameStart, sseFrame("content_block_delta", `{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"x"}}`))
			},
			want: baton.ProviderError{Status: 200, Detail: "provider stream has a delta for an unknown content block"},
		},
		{
			name: "stop without start",
			respond: func(w http.ResponseWriter) {
				writeStream(w, frameStop)
			},
			want: baton.ProviderError{Status: 200, Detail: "provider stream has no message_start"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			entry, _ := fake(t, func(w http.ResponseWriter, r *http.Request) { tt.respond(w) })
			_, err := newClient(t).Call(context.Background(), entry, token, &baton.ProviderRequest{})
			var pe *baton.ProviderError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v (%T), want *baton.ProviderError", err, err)
			}
			got := *pe
			if tt.minRetryAfter > 0 {
				if got.RetryAfter < tt.minRetryAfter || got.RetryAfter > 90*time.Second {
					t.Errorf("RetryAfter = %v, want about 90s", got.RetryAfter)
				}
				got.RetryAfter = 0
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			noSecrets(t, pe, entry)
		})
	}
}

// noSecrets fails if the error's text or detail holds the token or a URL.
func noSecrets(t *testing.T, pe *baton.ProviderError, entry *baton.ProviderEntry) {
	t.Helper()
	for _, s := range []string{pe.Error(), pe.Detail, pe.Body} {
		if strings.Contains(s, token) {
			t.Errorf("error leaks the token: %q", s)
		}
	}
	for _, s := range []string{pe.Error(), pe.Detail} {
		if strings.Contains(s, "http://") || strings.Contains(s, "/v1/messages") || strings.Contains(s, strings.TrimSuffix(entry.BaseURL, "/")) {
			t.Errorf("error detail holds the URL: %q", s)
		}
	}
}

func TestTransportFailures(t *testing.T) {
	t.Run("connection refused", func(t *testing.T) {
		entry, _ := fake(t, func(w http.ResponseWriter, r *http.Request) {})
		srv := httptest.NewServer(http.NotFoundHandler())
		srv.Close() // nothing listens there any more
		entry.BaseURL = srv.URL
		_, err := newClient(t).Call(context.Background(), entry, token, &baton.ProviderRequest{})
		pe := asProviderError(t, err)
		if pe.Status != 0 || !pe.Retryable || !strings.Contains(pe.Detail, "connection refused") {
			t.Errorf("error = %+v, want status 0, retryable, connection refused", pe)
		}
		noSecrets(t, pe, entry)
	})
	t.Run("deadline before the call", func(t *testing.T) {
		entry, _ := fake(t, func(w http.ResponseWriter, r *http.Request) {})
		ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		defer cancel()
		_, err := newClient(t).Call(ctx, entry, token, &baton.ProviderRequest{})
		pe := asProviderError(t, err)
		want := baton.ProviderError{Detail: "context deadline exceeded", Retryable: true}
		if diff := cmp.Diff(want, *pe); diff != "" {
			t.Errorf("error (-want +got):\n%s", diff)
		}
	})
	t.Run("cancelled mid-stream", func(t *testing.T) {
		entry, _ := fake(t, func(w http.ResponseWriter, r *http.Request) {
			writeStream(w, toolFrames[:4]...)
			<-r.Context().Done() // hold the stream open until the client goes
		})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req := &baton.ProviderRequest{OnDelta: func(string) { cancel() }}
		_, err := newClient(t).Call(ctx, entry, token, req)
		pe := asProviderError(t, err)
		want := baton.ProviderError{Status: 200, Detail: "context canceled"}
		if diff := cmp.Diff(want, *pe); diff != "" {
			t.Errorf("error (-want +got):\n%s", diff)
		}
	})
}

func asProviderError(t *testing.T, err error) *baton.ProviderError {
	t.Helper()
	var pe *baton.ProviderError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v (%T), want *baton.ProviderError", err, err)
	}
	return pe
}

func TestCallPlainJSON(t *testing.T) {
	const reply = `{"id":"msg_02","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"Hi"},{"type":"text","text":" there"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":2}}`
	entry, _ := fake(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, reply)
	})
	var deltas []string
	resp, err := New(http.DefaultClient).Call(context.Background(), entry, token,
		&baton.ProviderRequest{OnDelta: func(s string) { deltas = append(deltas, s) }})
	http.DefaultClient.CloseIdleConnections()
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	if string(resp.Body) != reply {
		t.Errorf("Body = %s, want the raw reply", resp.Body)
	}
	if want := `[{"type":"text","text":"Hi"},{"type":"text","text":" there"}]`; string(resp.Content) != want {
		t.Errorf("Content = %s, want %s", resp.Content, want)
	}
	if diff := cmp.Diff(&baton.Usage{InputTokens: 3, OutputTokens: 2}, resp.Usage); diff != "" {
		t.Errorf("Usage (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Hi", " there"}, deltas); diff != "" {
		t.Errorf("OnDelta (-want +got):\n%s", diff)
	}

	// A JSON reply without content has an empty content array.
	resp, err = readPlain(&http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(`{"id":"x"}`))}, nil)
	if err != nil || string(resp.Content) != "[]" || resp.Usage != nil {
		t.Errorf("no content: %v, %s, %v", err, resp.Content, resp.Usage)
	}
}

func FuzzStream(f *testing.F) {
	f.Add(strings.Join(toolFrames, ""))
	f.Add(frameStart + frameStop)
	f.Add(frameStart + sseFrame("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3,"x":{}}}`) + frameStop)
	f.Add(frameStart + sseFrame("content_block_start", `{"type":"content_block_start","index":2,"content_block":{"type":"text","text":"a\"b"}}`) +
		sseFrame("content_block_delta", `{"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"c"}}`) + frameStop)
	f.Add("data: {\"type\":\"error\",\"error\":{\"type\":\"api_error\"}}\n\n")
	f.Fuzz(func(t *testing.T, stream string) {
		resp, err := readStream(streamResponse(stream), func(string) {}, provider.MaxBody)
		if err != nil {
			var pe *baton.ProviderError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T is not a ProviderError", err)
			}
			return
		}
		if !json.Valid(resp.Body) || !json.Valid(resp.Content) {
			t.Fatalf("invalid JSON: body %q content %q", resp.Body, resp.Content)
		}
		var m struct{ Content json.RawMessage }
		if err := json.Unmarshal(resp.Body, &m); err != nil {
			t.Fatalf("body: %v", err)
		}
		var a, b bytes.Buffer
		json.Compact(&a, m.Content)
		json.Compact(&b, resp.Content)
		if a.String() != b.String() {
			t.Fatalf("Body's content %s differs from Content %s", a.String(), b.String())
		}
	})
}

func BenchmarkCallStream(b *testing.B) {
	frames := []string{frameStart, sseFrame("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)}
	for range 50 {
		frames = append(frames, sseFrame("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"word "}}`))
	}
	frames = append(frames, toolFrames[5:]...)
	stream := []byte(strings.Join(frames, ""))
	entry, _ := fake(b, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(stream)
	})
	c := newClient(b)
	req := &baton.ProviderRequest{
		Model:     "claude-test",
		MaxTokens: 1024,
		Messages:  []baton.Message{{Role: "user", Content: json.RawMessage(`"hello"`)}},
		OnDelta:   func(string) {},
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(stream)))
	for b.Loop() {
		if _, err := c.Call(context.Background(), entry, token, req); err != nil {
			b.Fatal(err)
		}
	}
}

// TestStreamTooLarge: a streamed reply whose content passes the cap fails,
// not retryable, before more than the cap reaches OnDelta.
func TestStreamTooLarge(t *testing.T) {
	const limit = 16 << 10
	piece := strings.Repeat("x", 1000)
	blank := strings.Repeat(" ", 1000) // tool input must stay valid JSON
	for _, tc := range []struct{ name, start, delta string }{
		{"text", `{"type":"text","text":""}`, `{"type":"text_delta","text":"` + piece + `"}`},
		{"tool input", `{"type":"tool_use","id":"t","name":"n","input":{}}`, `{"type":"input_json_delta","partial_json":"` + blank + `"}`},
		{"thinking", `{"type":"thinking","thinking":""}`, `{"type":"thinking_delta","thinking":"` + piece + `"}`},
		{"citations", `{"type":"text","text":""}`, `{"type":"citations_delta","citation":{"cited_text":"` + piece + `"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			frames := []string{frameStart, sseFrame("content_block_start", `{"type":"content_block_start","index":0,"content_block":`+tc.start+`}`)}
			for range 2 * limit / len(piece) {
				frames = append(frames, sseFrame("content_block_delta", `{"type":"content_block_delta","index":0,"delta":`+tc.delta+`}`))
			}
			frames = append(frames, frameStop)
			stream := strings.Join(frames, "")
			if _, err := readStream(streamResponse(stream), nil, provider.MaxBody); err != nil {
				t.Fatalf("under the default cap: %v", err)
			}
			var got int
			_, err := readStream(streamResponse(stream), func(s string) { got += len(s) }, limit)
			pe := asProviderError(t, err)
			if pe.Retryable || pe.Detail != "provider response is larger than 16384 bytes" {
				t.Errorf("error = %+v", pe)
			}
			if got > limit {
				t.Errorf("OnDelta got %d bytes, more than the cap", got)
			}
		})
	}
}

// FuzzReadPlain: a non-streamed reply body is either refused as not JSON
// (only for a syntax error) or yields valid JSON content and the body as
// received; text deltas are the content's text blocks.
func FuzzReadPlain(f *testing.F) {
	f.Add(`{"content":[{"type":"text","text":"Hi"},{"type":"tool_use","id":"t","name":"n","input":{}}],"usage":{"input_tokens":3,"output_tokens":2}}`)
	f.Add(`{"id":"x"}`)
	f.Add(`{"content":null,"usage":"many"}`)
	f.Add(`{"content":"text"}`)
	f.Add(`not json`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, body string) {
		var deltas []string
		resp, err := readPlain(&http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(body))}, func(s string) { deltas = append(deltas, s) })
		var syn *json.SyntaxError
		if err != nil {
			if !errors.As(json.Unmarshal([]byte(body), new(any)), &syn) {
				t.Fatalf("readPlain(%q) refused a JSON body: %v", body, err)
			}
			return
		}
		if !json.Valid(resp.Content) || string(resp.Body) != body {
			t.Fatalf("readPlain(%q): content %s, body %s", body, resp.Content, resp.Body)
		}
		for _, d := range deltas {
			if d == "" {
				t.Fatalf("empty delta from %q", body)
			}
		}
	})
}
