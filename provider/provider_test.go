package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/baton-engine/baton"
	"github.com/google/go-cmp/cmp"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration
	}{
		{"none", nil, 0},
		{"seconds", map[string]string{"Retry-After": "7"}, 7 * time.Second},
		{"padded", map[string]string{"Retry-After": " 3 "}, 3 * time.Second},
		{"fraction", map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond},
		{"zero", map[string]string{"Retry-After": "0"}, 0},
		{"negative", map[string]string{"Retry-After": "-5"}, 0},
		{"words", map[string]string{"Retry-After": "soon"}, 0},
		{"exponent rejected", map[string]string{"Retry-After": "1e3"}, 0},
		{"huge clamps to a day", map[string]string{"Retry-After": "99999999999999999999"}, 24 * time.Hour},
		{"http date", map[string]string{"Retry-After": now.Add(2 * time.Minute).Format(http.TimeFormat)}, 2 * time.Minute},
		{"past date", map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0},
		{"far date clamps", map[string]string{"Retry-After": now.Add(72 * time.Hour).Format(http.TimeFormat)}, 24 * time.Hour},
		{"milliseconds win", map[string]string{"Retry-After-Ms": "250", "Retry-After": "9"}, 250 * time.Millisecond},
		{"bad milliseconds fall back", map[string]string{"Retry-After-Ms": "x", "Retry-After": "9"}, 9 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			if got := RetryAfter(h, now); got != tt.want {
				t.Errorf("RetryAfter = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestStatusError(t *testing.T) {
	tests := []struct {
		status    int
		retryable bool
	}{
		{400, false}, {401, false}, {404, false}, {408, false}, {429, true},
		{500, true}, {502, true}, {503, true}, {529, true},
	}
	for _, tt := range tests {
		resp := &http.Response{
			StatusCode: tt.status,
			Header:     http.Header{"Retry-After": {"4"}},
			Body:       io.NopCloser(strings.NewReader("oops key=secret-token-1")),
		}
		got := StatusError(resp, "secret-token-1")
		want := &baton.ProviderError{
			Status:    tt.status,
			Detail:    fmt.Sprintf("provider returned HTTP %d", tt.status),
			Body:      "oops key=[redacted]",
			Retryable: tt.retryable,
		}
		if tt.retryable {
			want.RetryAfter = 4 * time.Second
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("HTTP %d (-want +got):\n%s", tt.status, diff)
		}
	}

	long := &http.Response{StatusCode: 500, Body: io.NopCloser(strings.NewReader(strings.Repeat("x", 1<<20)))}
	if got := StatusError(long, ""); len(got.Body) != maxErrorBody {
		t.Errorf("error body kept %d bytes, want %d", len(got.Body), maxErrorBody)
	}
}

func TestTransportError(t *testing.T) {
	ue := &url.Error{Op: "Post", URL: "https://user:pw@api.example.com/v1/messages", Err: errors.New("dial tcp 10.0.0.1:443: connect: connection refused")}
	got := TransportError(0, ue)
	want := &baton.ProviderError{Detail: "dial tcp 10.0.0.1:443: connect: connection refused", Retryable: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	echo := &url.Error{Op: "Post", URL: "http://h/p", Err: errors.New("bad thing at http://h/p")}
	if got := TransportError(0, echo).Detail; strings.Contains(got, "http://h/p") {
		t.Errorf("inner error's URL kept: %q", got)
	}

	cancelled := &url.Error{Op: "Post", URL: "http://h/p", Err: context.Canceled}
	if got := TransportError(0, cancelled); got.Retryable || got.Detail != "context canceled" {
		t.Errorf("cancellation = %+v, want not retryable", got)
	}
	if got := TransportError(200, context.DeadlineExceeded); !got.Retryable || got.Status != 200 {
		t.Errorf("deadline = %+v, want retryable with status", got)
	}
}

func TestRedact(t *testing.T) {
	for _, tt := range []struct{ s, token, want string }{
		{"a sk-123456 b sk-123456", "sk-123456", "a [redacted] b [redacted]"},
		{"nothing here", "sk-123456", "nothing here"},
		{"abc", "", "abc"},
		{"a b a", "a", "a b a"}, // too short to mask
	} {
		if got := Redact(tt.s, tt.token); got != tt.want {
			t.Errorf("Redact(%q, %q) = %q, want %q", tt.s, tt.token, got, tt.want)
		}
	}
}

func TestEventStream(t *testing.T) {
	for ct, want := range map[string]bool{
		"text/event-stream":                true,
		"Text/Event-Stream; charset=utf-8": true,
		"application/json":                 false,
		"":                                 false,
		"text/event-stream-ish":            false,
	} {
		resp := &http.Response{Header: http.Header{"Content-Type": {ct}}}
		if got := EventStream(resp); got != want {
			t.Errorf("EventStream(%q) = %v, want %v", ct, got, want)
		}
	}
}

func TestEndpoint(t *testing.T) {
	for base, want := range map[string]string{
		"":                    "https://api.anthropic.com/v1/messages",
		"http://127.0.0.1:9/": "http://127.0.0.1:9/v1/messages",
		"http://h/proxy//":    "http://h/proxy/v1/messages",
	} {
		e := &baton.ProviderEntry{Provider: baton.ProviderAnthropic, BaseURL: base}
		if got := Endpoint(e, "/v1/messages"); got != want {
			t.Errorf("Endpoint(%q) = %q, want %q", base, got, want)
		}
	}
}

func TestReadBody(t *testing.T) {
	resp := &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(strings.Repeat("x", MaxBody+1)))}
	_, err := ReadBody(resp)
	var pe *baton.ProviderError
	if !errors.As(err, &pe) || pe.Retryable || !strings.Contains(pe.Detail, "larger than") {
		t.Errorf("oversized body: err = %v", err)
	}
}

func TestPostInvalidURL(t *testing.T) {
	_, err := Post(context.Background(), http.DefaultClient, "::bad/v1/messages", http.Header{}, nil, "")
	var pe *baton.ProviderError
	if !errors.As(err, &pe) || pe.Retryable || pe.Status != 0 || strings.Contains(pe.Detail, "::bad") ||
		!strings.HasPrefix(pe.Detail, "invalid provider URL: ") {
		t.Errorf("err = %#v", err)
	}
}
