package openai

import (
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

const token = "sk-openai-test-secret"

type seen struct {
	Method, Path string
	Header       http.Header
	Body         string
}

// fake starts a loopback Chat Completions server answering with respond.
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
	entry := &baton.ProviderEntry{Name: "o", Provider: baton.ProviderOpenAI, BaseURL: srv.URL + "//", Model: "gpt-entry", MaxTokens: 512}
	return entry, reqs
}

func newClient(t testing.TB) *Client {
	c := New(nil)
	t.Cleanup(func() { c.Close() })
	return c
}

// writeChunks writes each payload as a "data:" event, flushing after each
// and once mid-event.
func writeChunks(w http.ResponseWriter, payloads ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	f := w.(http.Flusher)
	for _, p := range payloads {
		fr := "data: " + p + "\n\n"
		half := len(fr) / 2
		io.WriteString(w, fr[:half])
		f.Flush()
		io.WriteString(w, fr[half:])
		f.Flush()
	}
}

var toolChunks = []string{
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"gpt-test","choices":[{"index":0,"delta":{"content":"Checking "},"finish_reason":null}]}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"gpt-test","choices":[{"index":0,"delta":{"content":"<both>."},"finish_reason":null}]}`,
	`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}]}}]}`,
	`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"get_time","arguments":""}}]}}]}`,
	`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": \"Pa"}}]}}]}`,
	`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"  "}}]}}]}`,
	`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ris\"}"}}]}}]}`,
	`{"id":"chatcmpl-1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
	`{"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":31,"completion_tokens":17,"total_tokens":48}}`,
	`[DONE]`,
}

func TestCallStream(t *testing.T) {
	entry, reqs := fake(t, func(w http.ResponseWriter, r *http.Request) { writeChunks(w, toolChunks...) })
	var deltas []string
	req := &baton.ProviderRequest{
		Model:     "gpt-test",
		MaxTokens: 100,
		System:    "You are <terse>.",
		Messages: []baton.Message{
			msg("user", `"Weather and time in Paris?"`),
			msg("assistant", `[{"type":"tool_use","id":"call_0","name":"get_weather","input":{"city":"Rome"}}]`),
			msg("user", `[{"type":"tool_result","tool_use_id":"call_0","content":"sunny"},{"type":"text","text":"Now Paris."}]`),
		},
		Tools: []json.RawMessage{
			json.RawMessage(`{"name":"get_weather","description":"Weather","input_schema":{"type":"object"}}`),
			json.RawMessage(`{"name":"get_time","description":"Time"}`),
		},
		OnDelta: func(s string) { deltas = append(deltas, s) },
	}
	resp, err := newClient(t).Call(context.Background(), entry, token, req)
	if err != nil {
		t.Fatalf("Call: %v", err)
	}

	got := <-reqs
	if got.Method != http.MethodPost || got.Path != "/v1/chat/completions" {
		t.Errorf("request = %s %s, want POST /v1/chat/completions", got.Method, got.Path)
	}
	for name, want := range map[string]string{
		"Content-Type":  "application/json",
		"Authorization": "Bearer " + token,
		"Accept":        "text/event-stream",
	} {
		if v := got.Header.Get(name); v != want {
			t.Errorf("header %s = %q, want %q", name, v, want)
		}
	}
	wantBody := `{"model":"gpt-test","max_tokens":100,"messages":[` +
		`{"role":"system","content":"You are <terse>."},` +
		`{"role":"user","content":"Weather and time in Paris?"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_0","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}]},` +
		`{"role":"tool","tool_call_id":"call_0","content":"sunny"},` +
		`{"role":"user","content":"Now Paris."}],` +
		`"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather","parameters":{"type":"object"}}},` +
		`{"type":"function","function":{"name":"get_time","description":"Time","parameters":{}}}],` +
		`"stream":true,"stream_options":{"include_usage":true}}`
	if got.Body != wantBody {
		t.Errorf("request body:\n got %s\nwant %s", got.Body, wantBody)
	}

	wantContent := `[{"type":"text","text":"Checking <both>."},` +
		`{"type":"tool_use","id":"call_a","name":"get_weather","input":{"city":"Paris"}},` +
		`{"type":"tool_use","id":"call_b","name":"get_time","input":{}}]`
	if string(resp.Content) != wantContent {
		t.Errorf("Content:\n got %s\nwant %s", resp.Content, wantContent)
	}
	wantReply := `{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant","content":"Checking <both>.","tool_calls":[` +
		`{"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}},` +
		`{"id":"call_b","type":"function","function":{"name":"get_time","arguments":"  "}}]},"finish_reason":"tool_calls"}],` +
		`"usage":{"prompt_tokens":31,"completion_tokens":17,"total_tokens":48}}`
	if string(resp.Body) != wantReply {
		t.Errorf("Body:\n got %s\nwant %s", resp.Body, wantReply)
	}
	if diff := cmp.Diff(&baton.Usage{InputTokens: 31, OutputTokens: 17}, resp.Usage); diff != "" {
		t.Errorf("Usage (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Checking ", "<both>."}, deltas); diff != "" {
		t.Errorf("OnDelta (-want +got):\n%s", diff)
	}
}

func TestCallStreamTextOnly(t *testing.T) {
	entry, reqs := fake(t, func(w http.ResponseWriter, r *http.Request) {
		writeChunks(w,
			`{"id":"c2","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"}}]}`,
			`{"id":"c2","model":"m","choices":[{"index":0,"delta":{"content":"lo"}},{"index":1,"delta":{"content":"other choice"}}]}`,
			`{"id":"c2","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			`[DONE]`)
	})
	resp, err := newClient(t).Call(context.Background(), entry, token, &baton.ProviderRequest{Messages: []baton.Message{msg("user", `"hi"`)}})
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	got := <-reqs
	want := `{"model":"gpt-entry","max_tokens":512,"messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`
	if got.Body != want {
		t.Errorf("request body (no tools key, entry defaults):\n got %s\nwant %s", got.Body, want)
	}
	if string(resp.Content) != `[{"type":"text","text":"Hello"}]` {
		t.Errorf("Content = %s", resp.Content)
	}
	wantReply := `{"id":"c2","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello"},"finish_reason":"stop"}],"usage":null}`
	if string(resp.Body) != wantReply {
		t.Errorf("Body:\n got %s\nwant %s", resp.Body, wantReply)
	}
	if resp.Usage != nil {
		t.Errorf("Usage = %+v, want nil when the server reported none", resp.Usage)
	}
}

func TestCallStreamCallsWithoutIndex(t *testing.T) {
	entry, _ := fake(t, func(w http.ResponseWriter, r *http.Request) {
		writeChunks(w,
			`{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{\"n\":"}}]}}]}`,
			`{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"1}"}}]}}]}`,
			`{"choices":[{"delta":{"tool_calls":[{"id":"b","function":{"name":"g","arguments":"{}"}}]}}]}`,
			`[DONE]`)
	})
	resp, err := newClient(t).Call(context.Background(), entry, token, &baton.ProviderRequest{})
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	want := `[{"type":"tool_use","id":"a","name":"f","input":{"n":1}},{"type":"tool_use","id":"b","name":"g","input":{}}]`
	if string(resp.Content) != want {
		t.Errorf("Content:\n got %s\nwant %s", resp.Content, want)
	}
}

func TestCallPlainJSON(t *testing.T) {
	const reply = `{"id":"c3","object":"chat.completion","model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant","content":"Plain.","tool_calls":[{"id":"x","type":"function","function":{"name":"f","arguments":"{\"a\":true}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":4,"completion_tokens":5}}`
	entry, _ := fake(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, reply)
	})
	var deltas []string
	resp, err := newClient(t).Call(context.Background(), entry, token, &baton.ProviderRequest{OnDelta: func(s string) { deltas = append(deltas, s) }})
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	if string(resp.Body) != reply {
		t.Errorf("Body = %s, want the raw reply", resp.Body)
	}
	if want := `[{"type":"text","text":"Plain."},{"type":"tool_use","id":"x","name":"f","input":{"a":true}}]`; string(resp.Content) != want {
		t.Errorf("Content = %s, want %s", resp.Content, want)
	}
	if diff := cmp.Diff(&baton.Usage{InputTokens: 4, OutputTokens: 5}, resp.Usage); diff != "" {
		t.Errorf("Usage (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Plain."}, deltas); diff != "" {
		t.Errorf("OnDelta (-want +got):\n%s", diff)
	}
}

func TestCallFailures(t *testing.T) {
	tests := []struct {
		name    string
		respond func(w http.ResponseWriter)
		want    baton.ProviderError
	}{
		{
			name: "429 with Retry-After",
			respond: func(w http.ResponseWriter) {
				w.Header().Set("Retry-After", "2")
				w.WriteHeader(http.StatusTooManyRequests)
				io.WriteString(w, `{"error":{"message":"Rate limit","type":"requests"}}`)
			},
			want: baton.ProviderError{Status: 429, Detail: "provider returned HTTP 429", Retryable: true, RetryAfter: 2 * time.Second,
				Body: `{"error":{"message":"Rate limit","type":"requests"}}`},
		},
		{
			name: "503 with retry-after-ms",
			respond: func(w http.ResponseWriter) {
				w.Header().Set("Retry-After-Ms", "1500")
				w.Header().Set("Retry-After", "9")
				w.WriteHeader(http.StatusServiceUnavailable)
			},
			want: baton.ProviderError{Status: 503, Detail: "provider returned HTTP 503", Retryable: true, RetryAfter: 1500 * time.Millisecond},
		},
		{
			name: "400 is final and redacts the key",
			respond: func(w http.ResponseWriter) {
				w.WriteHeader(http.StatusBadRequest)
				io.WriteString(w, `{"error":{"message":"Incorrect API key provided: `+token+`"}}`)
			},
			want: baton.ProviderError{Status: 400, Detail: "provider returned HTTP 400", Body: `{"error":{"message":"Incorrect API key provided: [redacted]"}}`},
		},
		{
			name: "non-JSON 2xx",
			respond: func(w http.ResponseWriter) {
				io.WriteString(w, "OK")
			},
			want: baton.ProviderError{Status: 200, Detail: "provider returned non-JSON body: invalid character 'O' looking for beginning of value", Body: "OK"},
		},
		{
			name: "plain JSON without choices",
			respond: func(w http.ResponseWriter) {
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, `{"object":"list"}`)
			},
			want: baton.ProviderError{Status: 200, Detail: "provider response is missing choices[0].message", Body: `{"object":"list"}`},
		},
		{
			name: "truncated stream",
			respond: func(w http.ResponseWriter) {
				writeChunks(w, toolChunks[:4]...)
			},
			want: baton.ProviderError{Status: 200, Detail: "provider stream ended before [DONE]", Retryable: true},
		},
		{
			name: "error chunk",
			respond: func(w http.ResponseWriter) {
				writeChunks(w, toolChunks[0], `{"error":{"message":"The server had an error","type":"server_error","code":null}}`)
			},
			want: baton.ProviderError{Status: 200, Detail: "provider stream error: server_error: The server had an error", Retryable: true,
				Body: `{"error":{"message":"The server had an error","type":"server_error","code":null}}`},
		},
		{
			name: "unparsable streamed arguments",
			respond: func(w http.ResponseWriter) {
				writeChunks(w, `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{oops"}}]}}]}`, `[DONE]`)
			},
			want: baton.ProviderError{Status: 200, Detail: "provider response tool_calls[0] arguments are not valid JSON: invalid character 'o' looking for beginning of object key string",
				Body: `{"id":"","object":"chat.completion","model":"","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{oops"}}]},"finish_reason":null}],"usage":null}`},
		},
		{
			name: "malformed chunk",
			respond: func(w http.ResponseWriter) {
				writeChunks(w, `{"choices":"x"}`)
			},
			want: baton.ProviderError{Status: 200, Detail: "provider returned a malformed stream chunk: json: cannot unmarshal string into Go struct field chunk.choices of type []openai.chunkChoice",
				Body: `{"choices":"x"}`},
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
			if diff := cmp.Diff(tt.want, *pe); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			for _, s := range []string{pe.Error(), pe.Body} {
				if strings.Contains(s, token) {
					t.Errorf("error leaks the token: %q", s)
				}
			}
			if strings.Contains(pe.Detail, "http://") || strings.Contains(pe.Detail, "/v1/") {
				t.Errorf("detail holds the URL: %q", pe.Detail)
			}
		})
	}
}

func TestTransportFailure(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	entry := &baton.ProviderEntry{Provider: baton.ProviderOpenAI, BaseURL: srv.URL, Model: "m"}
	_, err := newClient(t).Call(context.Background(), entry, token, &baton.ProviderRequest{})
	var pe *baton.ProviderError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want *baton.ProviderError", err)
	}
	if pe.Status != 0 || !pe.Retryable || strings.Contains(pe.Detail, "http://") || strings.Contains(pe.Detail, "/v1/chat") {
		t.Errorf("error = %+v, want status 0, retryable, no URL", pe)
	}
}

func FuzzOpenAIStream(f *testing.F) {
	var all strings.Builder
	for _, c := range toolChunks {
		all.WriteString("data: " + c + "\n\n")
	}
	f.Add(all.String())
	f.Add("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"function\":{\"name\":\"f\"}}]}}]}\n\ndata: [DONE]\n\n")
	f.Add("data: {\"error\":{\"type\":\"server_error\"}}\n\n")
	f.Add("data: [DONE]\n\n")
	f.Fuzz(func(t *testing.T, stream string) {
		resp, err := readStream(&http.Response{
			StatusCode: 200,
			Header:     http.Header{"Content-Type": {"text/event-stream"}},
			Body:       io.NopCloser(strings.NewReader(stream)),
		}, func(string) {}, provider.MaxBody)
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
	})
}

// TestStreamTooLarge: a streamed reply whose text or tool calls pass the cap
// fails, not retryable, before more than the cap reaches OnDelta.
func TestStreamTooLarge(t *testing.T) {
	const limit = 16 << 10
	piece := strings.Repeat("x", 1000)
	blank := strings.Repeat(" ", 1000) // arguments must end up valid JSON
	args := func(s string) string { return `{"tool_calls":[{"index":0,"function":{"arguments":"` + s + `"}}]}` }
	for _, tc := range []struct{ name, delta, last string }{
		{"text", `{"content":"` + piece + `"}`, `{}`},
		{"tool arguments", args(blank), args("{}")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stream strings.Builder
			for range 2 * limit / len(piece) {
				stream.WriteString(`data: {"id":"c","choices":[{"index":0,"delta":` + tc.delta + "}]}\n\n")
			}
			stream.WriteString(`data: {"id":"c","choices":[{"index":0,"delta":` + tc.last + "}]}\n\n")
			stream.WriteString("data: [DONE]\n\n")
			resp := func() *http.Response {
				return &http.Response{
					StatusCode: 200,
					Header:     http.Header{"Content-Type": {"text/event-stream"}},
					Body:       io.NopCloser(strings.NewReader(stream.String())),
				}
			}
			if _, err := readStream(resp(), nil, provider.MaxBody); err != nil {
				t.Fatalf("under the default cap: %v", err)
			}
			var got int
			_, err := readStream(resp(), func(s string) { got += len(s) }, limit)
			var pe *baton.ProviderError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want a ProviderError", err)
			}
			if pe.Retryable || pe.Detail != "provider response is larger than 16384 bytes" {
				t.Errorf("error = %+v", pe)
			}
			if got > limit {
				t.Errorf("OnDelta got %d bytes, more than the cap", got)
			}
		})
	}
}
