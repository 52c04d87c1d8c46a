// Package provider holds the HTTP plumbing Baton's model adapters share: a
// default HTTP client, posting a JSON request, and turning every way a call
// can fail into a *baton.ProviderError carrying the engine's retry
// classification.
//
// The adapters live in sub-packages: anthropic (Messages API) and openai
// (Chat Completions) speak the vendors' streaming wire formats, sse decodes
// server-sent events for both, and scripted is Baton's offline
// deterministic model. anthropic and openai also serve their APIs (the
// model gateway): Reply is the canonical reply they write back.
//
// Classification, as the engine's retry and failover loop reads it:
//
//   - a non-2xx answer is "provider returned HTTP <n>" with the raw body;
//     429 and 5xx are retryable and carry the Retry-After delay;
//   - a transport failure (no answer, or a body that breaks off) carries the
//     error text with the URL stripped and is retryable, unless the caller
//     cancelled the context;
//   - a 2xx answer that cannot be understood (non-JSON, untranslatable) is
//     not retryable.
//
// The auth token never appears in a Detail, and is masked out of the raw
// error bodies kept in Body.
package provider

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/baton-engine/baton"
)

// Size limits of what is read from a provider.
const (
	// MaxBody bounds a non-streamed reply, and the content a streamed reply
	// accumulates.
	MaxBody = 32 << 20
	// maxErrorBody bounds the error body kept in a ProviderError.
	maxErrorBody = 64 << 10
	// maxRetryAfter clamps a Retry-After delay.
	maxRetryAfter = 24 * time.Hour
)

// NewHTTPClient returns the client the adapters use when given none: its own
// transport with dial, TLS and idle limits, the environment's proxy settings
// as net/http reads them, and no overall timeout. A streamed reply can last
// minutes; the caller's context bounds each call. Enough idle connections
// are kept per host for a busy server's concurrent turns over HTTP/1.1 (a
// local model, a proxy) not to redial. A request goes out in one write up
// to 32 KiB (net/http's default buffer, 4 KiB, splits a short conversation
// in two).
func NewHTTPClient() *http.Client {
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          512,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		WriteBufferSize:       32 << 10,
	}}
}

// Endpoint joins a provider entry's effective base URL (trailing slashes
// trimmed) and path.
func Endpoint(entry *baton.ProviderEntry, path string) string {
	return strings.TrimRight(entry.EffectiveBaseURL(), "/") + path
}

// Post sends body to url with header and returns the response when its
// status is 2xx; the caller closes its body. Any other outcome is a
// *baton.ProviderError: StatusError for a non-2xx answer, TransportError
// when none arrived. token is only used to mask it out of an error body.
func Post(ctx context.Context, hc *http.Client, url string, header http.Header, body []byte, token string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, &baton.ProviderError{Detail: "invalid provider URL: " + stripURL(err)}
	}
	req.Header = header
	resp, err := hc.Do(req)
	if err != nil {
		return nil, TransportError(0, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, StatusError(resp, token)
	}
	return resp, nil
}

// StatusError returns the failure of a non-2xx response, reading (a bounded
// prefix of) its body. It does not close the body.
func StatusError(resp *http.Response, token string) *baton.ProviderError {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	code := resp.StatusCode
	e := &baton.ProviderError{
		Status:    code,
		Detail:    fmt.Sprintf("provider returned HTTP %d", code),
		Body:      Redact(string(raw), token),
		Retryable: code == http.StatusTooManyRequests || code >= 500,
	}
	if e.Retryable {
		e.RetryAfter = RetryAfter(resp.Header, time.Now())
	}
	return e
}

// TransportError returns the failure of a call whose answer did not arrive
// or broke off: the error text without the request URL, retryable unless
// the context was cancelled. status is the HTTP status when the failure
// happened while reading a 2xx body, 0 otherwise.
func TransportError(status int, err error) *baton.ProviderError {
	return &baton.ProviderError{
		Status:    status,
		Detail:    stripURL(err),
		Retryable: !errors.Is(err, context.Canceled),
	}
}

// NonJSON returns the failure of a 2xx reply that is not JSON.
func NonJSON(status int, body []byte, err error) *baton.ProviderError {
	if len(body) > maxErrorBody {
		body = body[:maxErrorBody]
	}
	return &baton.ProviderError{
		Status: status,
		Detail: "provider returned non-JSON body: " + err.Error(),
		Body:   string(body),
	}
}

// Truncated returns the failure of a stream that ended before its final
// event; the call can be retried.
func Truncated(status int, what string) *baton.ProviderError {
	return &baton.ProviderError{
		Status:    status,
		Detail:    "provider stream ended before " + what,
		Retryable: true,
	}
}

// stripURL returns err's text without the URL a *url.Error wraps it in.
func stripURL(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		msg := ue.Err.Error()
		if ue.URL != "" {
			msg = strings.ReplaceAll(msg, ue.URL, "")
		}
		return msg
	}
	return err.Error()
}

// EventStream reports whether resp carries server-sent events.
func EventStream(resp *http.Response) bool {
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return err == nil && mt == "text/event-stream"
}

// ReadBody reads a non-streamed 2xx reply, at most MaxBody bytes.
func ReadBody(resp *http.Response) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody+1))
	if err != nil {
		return nil, TransportError(resp.StatusCode, err)
	}
	if len(body) > MaxBody {
		return nil, TooLarge(resp.StatusCode, MaxBody)
	}
	return body, nil
}

// TooLarge is the failure of a reply larger than max bytes: not retryable,
// since the same request would likely get the same reply.
func TooLarge(status, max int) *baton.ProviderError {
	return &baton.ProviderError{Status: status, Detail: fmt.Sprintf("provider response is larger than %d bytes", max)}
}

// RetryAfter returns the delay a 429 or 5xx response asks for: the
// retry-after-ms header (milliseconds) when present, else Retry-After as
// delay-seconds or an HTTP-date relative to now. Missing, malformed or past
// values are 0; the delay is clamped to a day.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if d, ok := seconds(strings.TrimSpace(h.Get("Retry-After-Ms")), time.Millisecond); ok {
		return d
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if d, ok := seconds(v, time.Second); ok {
		return d
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	d := t.Sub(now)
	if d <= 0 {
		return 0
	}
	return min(d, maxRetryAfter)
}

// seconds parses a non-negative decimal number of units ("3", "1.5"),
// rejecting the signs, exponents and words strconv would accept.
func seconds(v string, unit time.Duration) (time.Duration, bool) {
	if v == "" || strings.Trim(v, "0123456789.") != "" {
		return 0, false
	}
	n, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return 0, false
	}
	n *= float64(unit)
	if n >= float64(maxRetryAfter) {
		return maxRetryAfter, true
	}
	return time.Duration(n), true
}

// Redact masks every occurrence of token in s. Tokens shorter than four
// bytes are left alone: masking them would mangle ordinary text.
func Redact(s, token string) string {
	if len(token) < 4 || !strings.Contains(s, token) {
		return s
	}
	return strings.ReplaceAll(s, token, "[redacted]")
}

// HTTP is the HTTP client of a vendor adapter: its own, made with
// NewHTTPClient's settings, or one the caller lent it.
type HTTP struct {
	hc  *http.Client
	own bool // made by NewHTTP; Close releases it
}

// NewHTTP wraps hc, or a new client of its own when hc is nil (no overall
// timeout: each call's context bounds it).
func NewHTTP(hc *http.Client) HTTP {
	if hc == nil {
		return HTTP{hc: NewHTTPClient(), own: true}
	}
	return HTTP{hc: hc}
}

// Post sends one provider request with Post.
func (h HTTP) Post(ctx context.Context, url string, header http.Header, body []byte, token string) (*http.Response, error) {
	return Post(ctx, h.hc, url, header, body, token)
}

// Close closes the idle connections of a client NewHTTP made; a lent
// client is left to its owner.
func (h HTTP) Close() error {
	if h.own {
		h.hc.CloseIdleConnections()
	}
	return nil
}
