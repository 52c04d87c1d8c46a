package main

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
	// adminTimeout bounds one admin API request, body included.
	adminTimeout = 30 * time.Second
	// maxAdminBody bounds a response body; a larger one is an error that
	// says to ask for less.
	maxAdminBody = 64 << 20
	// maxShownBody is the longest unrecognized error body quoted verbatim.
	maxShownBody = 200
)

// errUnexpected reports a 2xx body that does not have the expected shape.
var errUnexpected = errors.New("unexpected response from admin API — check that baton and the server are the same version")

// adminClient talks to BAE's admin HTTP API (/admin/v1) of a running server.
type adminClient struct {
	base   string // normalized base URL without a trailing slash
	token  string // bearer token; empty sends no Authorization header
	source string // where token came from, for error messages
	note   string // why a default key file was skipped, for error messages
	http   *http.Client
}

// page is one page of a paginated list.
type page struct {
	Items      []json.RawMessage `json:"items"`
	NextCursor *string           `json:"next_cursor"`
}

// next returns the cursor of the following page, or "" at the end.
func (p *page) next() string {
	if p.NextCursor == nil {
		return ""
	}
	return *p.NextCursor
}

// normalizeAddr turns an admin address into a base URL: "host:port" becomes
// "http://host:port", a value containing "://" is used as it is.
func normalizeAddr(addr string) (string, error) {
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
		return "", fmt.Errorf("invalid admin address %q: %v", addr, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("invalid admin address %q: want host:port or an http(s) URL", addr)
	}
	return addr, nil
}

// get, post, put and del send one request; out, when non-nil, receives the
// decoded 2xx body.
func (c *adminClient) get(ctx context.Context, path string, query url.Values, out any) error {
	return c.do(ctx, http.MethodGet, path, query, nil, out)
}

func (c *adminClient) post(ctx context.Context, path string, in, out any) error {
	return c.do(ctx, http.MethodPost, path, nil, in, out)
}

func (c *adminClient) put(ctx context.Context, path string, in, out any) error {
	return c.do(ctx, http.MethodPut, path, nil, in, out)
}

func (c *adminClient) del(ctx context.Context, path string) error {
	return c.do(ctx, http.MethodDelete, path, nil, nil, nil)
}

// do sends one request. Every error it returns carries an exit code.
func (c *adminClient) do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return runtimeErr(fmt.Errorf("encode request: %w", err))
		}
		body = bytes.NewReader(b)
	}
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return usageErr(fmt.Errorf("invalid admin address %q: %v", c.base, err))
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
			return runtimeErr(ctx.Err())
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return runtimeErr(fmt.Errorf("admin API at %s did not answer in time (%v)", c.base, cause(err)))
		}
		return runtimeErr(fmt.Errorf("could not connect to admin API at %s — is baton running? (%v)", c.base, cause(err)))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAdminBody+1))
	if err != nil {
		if ctx.Err() != nil {
			return runtimeErr(ctx.Err())
		}
		return runtimeErr(fmt.Errorf("read admin API response: %v", cause(err)))
	}
	if len(data) > maxAdminBody {
		return runtimeErr(fmt.Errorf("the admin API's answer is larger than %d MiB; ask for fewer items with --limit", maxAdminBody>>20))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return runtimeErr(c.apiError(resp.StatusCode, data))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return runtimeErr(errUnexpected)
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

// page fetches one page of a list; raw is the body as the server sent it.
func (c *adminClient) page(ctx context.Context, path string, query url.Values) (p *page, raw json.RawMessage, err error) {
	if err := c.get(ctx, path, query, &raw); err != nil {
		return nil, nil, err
	}
	p = new(page)
	if err := json.Unmarshal(raw, p); err != nil || p.Items == nil {
		return nil, nil, runtimeErr(errUnexpected)
	}
	return p, raw, nil
}

// all follows next_cursor from the first page to the end and returns every
// item. query is not modified.
func (c *adminClient) all(ctx context.Context, path string, query url.Values) ([]json.RawMessage, error) {
	q := url.Values{}
	for k, v := range query {
		q[k] = v
	}
	q.Del("cursor")
	items := []json.RawMessage{}
	seen := map[string]bool{}
	for {
		p, _, err := c.page(ctx, path, q)
		if err != nil {
			return nil, err
		}
		items = append(items, p.Items...)
		next := p.next()
		if next == "" {
			return items, nil
		}
		if seen[next] {
			// A cursor that comes back would loop forever.
			return nil, runtimeErr(errUnexpected)
		}
		seen[next] = true
		q.Set("cursor", next)
	}
}

// problem is an RFC 7807 error body.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
}

// apiError turns a non-2xx response into the message the user sees.
func (c *adminClient) apiError(status int, body []byte) error {
	var p problem
	if json.Unmarshal(body, &p) != nil || p.Type == "" {
		return unrecognized(status, body, c.base)
	}
	detail := p.Detail
	if detail == "" {
		detail = p.Title
	}
	if detail == "" {
		detail = fmt.Sprintf("HTTP %d %s", status, http.StatusText(status))
	}
	switch p.Type {
	case baton.ECodeUnauthorized:
		return c.unauthorized(detail)
	case baton.ECodeProfileInUse:
		return fmt.Errorf("%s\nlist the keys bound to it with `baton admin keys list` and revoke them with `baton admin keys revoke <key_id>`", detail)
	case baton.ECodeProfileUnavailable:
		return fmt.Errorf("%s (the referenced profile does not exist or was deleted)", detail)
	}
	return errors.New(detail)
}

// unrecognized describes an error body that is not RFC 7807, such as the
// plain-text 400/415/422 rejections of the server's JSON extractor.
func unrecognized(status int, body []byte, base string) error {
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

// unauthorized explains the ways to give an admin token.
func (c *adminClient) unauthorized(detail string) error {
	var b strings.Builder
	if c.token == "" {
		fmt.Fprintf(&b, "the admin API requires an admin key and none was found (%s)", detail)
	} else {
		fmt.Fprintf(&b, "the admin API rejected the admin key from %s (%s)", c.source, detail)
	}
	if c.note != "" {
		fmt.Fprintf(&b, "; %s", c.note)
	}
	b.WriteString("\ngive an admin key in one of three ways:\n" +
		"  1. --admin-token <key>\n" +
		"  2. the BAE_ADMIN_TOKEN environment variable\n" +
		"  3. a key file: --admin-key-file <path> or BAE_ADMIN_KEY_FILE (default " +
		devKeyFile + ", then " + defaultKeyFile + ")")
	return errors.New(b.String())
}
