// Package adminclient is a client of the admin HTTP API (/admin/v1) of a
// running Baton or BAE server: one JSON request at a time with a bearer
// admin key, RFC 7807 error bodies decoded into *APIError, and
// next_cursor pagination followed to the end. It is what `baton admin`
// is built on; it reads no flags, environment or key files — the caller
// resolves the address and the key and turns errors into its own
// messages.
//
// Every response body is bounded (MaxBody), and every error says what
// failed in words a user of the command line can act on.
package adminclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"

	"github.com/baton-engine/baton"
)

const (
	// Timeout bounds one request, body included, of a Client made
	// without an HTTP client of its own.
	Timeout = 30 * time.Second
	// MaxBody bounds a response body; a larger one is an error that
	// says to ask for less.
	MaxBody = 64 << 20
	// maxShownBody is the longest unrecognized error body quoted verbatim.
	maxShownBody = 200
)

// ErrUnexpected reports a 2xx body that does not have the expected shape.
var ErrUnexpected = errors.New("unexpected response from admin API — check that baton and the server are the same version")

// Client talks to the admin API of one server. It is safe for
// concurrent use.
type Client struct {
	base  string // normalized base URL without a trailing slash
	token string // bearer token; empty sends no Authorization header
	http  *http.Client
}

// New returns a client of the admin API at addr (see NormalizeAddr)
// that sends token as its bearer admin key ("" sends none) through hc
// (nil: a client bounded by Timeout).
func New(addr, token string, hc *http.Client) (*Client, error) {
	base, err := NormalizeAddr(addr)
	if err != nil {
		return nil, err
	}
	if hc == nil {
		hc = &http.Client{Timeout: Timeout}
	}
	return &Client{base: base, token: token, http: hc}, nil
}

// BaseURL is the normalized base URL requests go to.
func (c *Client) BaseURL() string { return c.base }

// AddrError is an admin address that is not a usable URL.
type AddrError struct {
	Addr string
	Err  error
}

func (e *AddrError) Error() string { return fmt.Sprintf("invalid admin address %q: %v", e.Addr, e.Err) }

func (e *AddrError) Unwrap() error { return e.Err }

// Page is one page of a paginated list.
type Page struct {
	Items      []json.RawMessage `json:"items"`
	NextCursor *string           `json:"next_cursor"`
}

// Next returns the cursor of the following page, or "" at the end.
func (p *Page) Next() string {
	if p.NextCursor == nil {
		return ""
	}
	return *p.NextCursor
}

// NormalizeAddr turns an admin address into a base URL: "host:port"
// becomes "http://host:port", a value containing "://" is used as it is.
func NormalizeAddr(addr string) (string, error) {
	addr = strings.TrimSpace(addr)
	if addr == "" {
		return "", errors.New("admin address is empty")
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	addr = strings.TrimRight(addr, "/")
	u, err := url.Parse(addr)
	if err != nil {
		return "", &AddrError{Addr: addr, Err: err}
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", &AddrError{Addr: addr, Err: errors.New("want host:port or an http(s) URL")}
	}
	return addr, nil
}

// Get, Post, Put and Delete send one request to path (such as
// "/admin/v1/keys"); out, when non-nil, receives the decoded 2xx body.
func (c *Client) Get(ctx context.Context, path string, query url.Values, out any) error {
	return c.do(ctx, http.MethodGet, path, query, nil, out)
}

func (c *Client) Post(ctx context.Context, path string, in, out any) error {
	return c.do(ctx, http.MethodPost, path, nil, in, out)
}

func (c *Client) Put(ctx context.Context, path string, in, out any) error {
	return c.do(ctx, http.MethodPut, path, nil, in, out)
}

func (c *Client) Delete(ctx context.Context, path string) error {
	return c.do(ctx, http.MethodDelete, path, nil, nil, nil)
}

// do sends one request. A request it cannot build fails with an
// *AddrError, a non-2xx answer with ResponseError's error.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return &AddrError{Addr: c.base, Err: err}
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "baton/"+baton.Version)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return fmt.Errorf("admin API at %s did not answer in time (%v)", c.base, cause(err))
		}
		return fmt.Errorf("could not connect to admin API at %s — is baton running? (%v)", c.base, cause(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxBody+1))
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("read admin API response: %v", cause(err))
	}
	if len(data) > MaxBody {
		return fmt.Errorf("the admin API's answer is larger than %d MiB; ask for fewer items with --limit", MaxBody>>20)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return ResponseError(resp.StatusCode, data, c.base)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return ErrUnexpected
	}
	return nil
}

// cause strips the *url.Error wrapper, whose text repeats the method and URL.
func cause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// Page fetches one page of a list; raw is the body as the server sent it.
func (c *Client) Page(ctx context.Context, path string, query url.Values) (p *Page, raw json.RawMessage, err error) {
	if err := c.Get(ctx, path, query, &raw); err != nil {
		return nil, nil, err
	}
	p = new(Page)
	if err := json.Unmarshal(raw, p); err != nil || p.Items == nil {
		return nil, nil, ErrUnexpected
	}
	return p, raw, nil
}

// All follows next_cursor from the first page to the end and returns
// every item. query is not modified.
func (c *Client) All(ctx context.Context, path string, query url.Values) ([]json.RawMessage, error) {
	q := url.Values{}
	for k, v := range query {
		q[k] = v
	}
	q.Del("cursor")
	items := []json.RawMessage{}
	seen := map[string]bool{}
	for {
		p, _, err := c.Page(ctx, path, q)
		if err != nil {
			return nil, err
		}
		items = append(items, p.Items...)
		next := p.Next()
		if next == "" {
			return items, nil
		}
		if seen[next] {
			// A cursor that comes back would loop forever.
			return nil, ErrUnexpected
		}
		seen[next] = true
		q.Set("cursor", next)
	}
}

// APIError is a non-2xx answer with an RFC 7807 body. Type is the
// server's error code (baton.ECode…).
type APIError struct {
	Status int
	Type   string
	Title  string
	Detail string
}

// Error is the detail, else the title, else the HTTP status.
func (e *APIError) Error() string {
	switch {
	case e.Detail != "":
		return e.Detail
	case e.Title != "":
		return e.Title
	}
	return fmt.Sprintf("HTTP %d %s", e.Status, http.StatusText(e.Status))
}

// ResponseError is the error of a non-2xx answer from the admin API at
// base: an *APIError for an RFC 7807 body, else an error describing the
// body, such as the plain-text 400/415/422 rejections of BAE's JSON
// extractor.
func ResponseError(status int, body []byte, base string) error {
	var p struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}
	if json.Unmarshal(body, &p) == nil && p.Type != "" {
		return &APIError{Status: status, Type: p.Type, Title: p.Title, Detail: p.Detail}
	}
	msg := fmt.Sprintf("admin API returned HTTP %d with an unrecognized body", status)
	text := strings.TrimSpace(string(body))
	switch {
	case text == "" && status == http.StatusNotFound:
		msg += fmt.Sprintf(" (is %s the admin port?)", base)
	case text != "" && len(text) <= maxShownBody && printable(text):
		msg += ": " + text
	}
	return errors.New(msg)
}

func printable(s string) bool {
	for _, r := range s {
		if !unicode.IsPrint(r) && r != '\n' && r != '\t' {
			return false
		}
	}
	return true
}
