package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/httpx"
)

// Idempotency headers.
const (
	IdempotencyKeyHeader = "Idempotency-Key"
	ReplayedHeader       = "Idempotent-Replayed"
)

// MaxIdempotencyKey is the longest Idempotency-Key accepted, in
// characters.
const MaxIdempotencyKey = 255

// idempotencyConflict is the problem type of a 409 on /api/v1.
const idempotencyConflict = "idempotency_conflict"

// secretFields are the top-level members of a JSON object response that
// only the first answer may carry: a fresh session key, a plaintext key.
var secretFields = map[string]bool{"session_key": true, "key": true}

// IdempotencyOptions configure Idempotency.
type IdempotencyOptions struct {
	Receipts baton.ReceiptStore // nil turns the middleware off
	MaxBody  int64              // request body limit; <= 0 means httpx.DefaultMaxBody
	Logger   *slog.Logger       // nil discards
	// Caller names the authenticated caller of a covered request from its
	// bearer token — the key id — and gives the request's route: its path
	// with every resource id in one spelling, so that a retry spelling an
	// id another accepted way is the same operation. An empty caller
	// lets the token name the caller. An ECodeUnauthorized error means
	// the token does not authenticate: the request passes through
	// untouched and the handler refuses it; any other error is a 500.
	// Nil names callers by token and takes the path as sent.
	Caller func(r *http.Request, token string) (caller, route string, err error)
}

// Idempotency makes mutating calls retry-safe (docs/api.md, registered session clients,
// "Idempotency keys"). A covered request — POST, PUT or DELETE under /v1,
// POST /api/v1/sessions and POST /api/v1/sessions/{id}/join — that carries
// an Idempotency-Key and a bearer token runs once per (caller, method,
// route, key), caller and route as opts.Caller names them: its status and
// body are saved as a receipt and later requests with the same key and
// the same input (method, route, canonical JSON body) get that response
// again with Idempotent-Replayed: true, without session_key or key
// members. A different input, or a key still in flight, is 409. A 5xx (or
// 401) response is not saved, so a retry runs. Executor token exchanges
// are not covered.
// Requests without the header, without a bearer token or with one that
// does not authenticate (the handler answers 401), or with a body over
// the limit (the handler answers 413) pass through untouched. A key that
// is not 1 to 255 characters of text is 400 (see ValidIdempotencyKey).
func Idempotency(opts IdempotencyOptions, next http.Handler) http.Handler {
	if opts.Receipts == nil {
		return next
	}
	max := opts.MaxBody
	if max <= 0 {
		max = httpx.DefaultMaxBody
	}
	log := discardNil(opts.Logger)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		vals := r.Header.Values(IdempotencyKeyHeader)
		if len(vals) == 0 || !idempotent(r.Method, r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		key := vals[0]
		if !ValidIdempotencyKey(key) {
			guardBadRequest("Idempotency-Key must be 1 to 255 characters of UTF-8 text without control characters").write(w, r)
			return
		}
		token, err := httpx.Bearer(r)
		if err != nil {
			next.ServeHTTP(w, r)
			return
		}
		caller, route := "", r.URL.Path
		if opts.Caller != nil {
			caller, route, err = opts.Caller(r, token)
			if baton.ErrorCode(err) == baton.ECodeUnauthorized {
				next.ServeHTTP(w, r)
				return
			}
			if err != nil {
				writeGuardInternal(w, r, log, err)
				return
			}
		}
		if caller == "" {
			caller = "token:" + token
		}
		body, whole := bufferBody(r, max)
		if !whole {
			next.ServeHTTP(w, r)
			return
		}
		scope := receiptScope(caller, r.Method, route)
		fp := Fingerprint(r.Method, route, body)
		rec, fresh, err := opts.Receipts.BeginReceipt(r.Context(), scope, key, fp)
		if err != nil {
			writeGuardInternal(w, r, log, err)
			return
		}
		if !fresh {
			replay(w, r, rec, fp)
			return
		}
		execute(w, r, next, opts.Receipts, log, scope, key)
	})
}

// idempotent reports whether a request is covered by idempotency keys.
func idempotent(method, path string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodDelete:
	default:
		return false
	}
	if isV1(path) {
		// A token exchange (POST /v1/…/token) mints a fresh secret each
		// time: repeating it is harmless and its answer is never stored.
		// The routes other packages mount (the model gateway, session
		// tools) never reach the guard (Server.mountedBypass).
		return !strings.HasSuffix(path, "/token")
	}
	if method != http.MethodPost {
		return false
	}
	if path == "/api/v1/sessions" {
		return true
	}
	rest, ok := strings.CutPrefix(path, "/api/v1/sessions/")
	if !ok {
		return false
	}
	id, ok := strings.CutSuffix(rest, "/join")
	return ok && id != "" && !strings.Contains(id, "/")
}

// bufferBody reads r's body (up to max bytes) so it can be fingerprinted,
// and puts back a reader that yields it again. whole is false when the
// body is larger than max or could not be read; the handler then reads
// the rest and answers as it would without the middleware.
func bufferBody(r *http.Request, max int64) (body []byte, whole bool) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, true
	}
	if r.ContentLength > max {
		return nil, false
	}
	orig := r.Body
	body, err := io.ReadAll(io.LimitReader(orig, max+1))
	if err != nil || int64(len(body)) > max {
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), orig), orig}
		return nil, false
	}
	r.Body = struct {
		io.Reader
		io.Closer
	}{bytes.NewReader(body), orig}
	return body, true
}

// ValidIdempotencyKey reports whether k is an acceptable Idempotency-Key.
// The registered-clients contract (docs/api.md) gives the key as a
// string of length 1 to 255 and no charset;
// the length counts characters (Unicode code points, as a JSON Schema
// string length does), so k must be valid UTF-8. Control characters (C0,
// DEL, C1; a tab) are refused. Keys compare byte for byte.
func ValidIdempotencyKey(k string) bool {
	if k == "" || len(k) > utf8.UTFMax*MaxIdempotencyKey || !utf8.ValidString(k) {
		return false
	}
	n := 0
	for _, c := range k {
		if unicode.IsControl(c) {
			return false
		}
		n++
	}
	return n <= MaxIdempotencyKey
}

// receiptScope is the digest naming the caller (its key id) and the
// operation (method and route).
func receiptScope(caller, method, route string) string {
	h := sha256.New()
	for _, s := range []string{"baton receipt scope", caller, method, route} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Fingerprint is the digest of a request's input: method, path and body,
// the body in canonical form when it is JSON (members sorted, insignificant
// whitespace dropped), as sent otherwise.
func Fingerprint(method, path string, body []byte) string {
	h := sha256.New()
	h.Write([]byte(method))
	h.Write([]byte{0})
	h.Write([]byte(path))
	h.Write([]byte{0})
	h.Write(canonicalJSON(body))
	return hex.EncodeToString(h.Sum(nil))
}

// canonicalJSON re-encodes a JSON body with sorted object members and
// numbers as written; anything that is not one JSON value is returned
// unchanged (with a marker byte, so it never equals a JSON encoding).
func canonicalJSON(body []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err == nil {
		if _, err := dec.Token(); errors.Is(err, io.EOF) {
			if out, err := baton.EncodeJSON(v); err == nil {
				return append([]byte{'j'}, out...)
			}
		}
	}
	return append([]byte{'r'}, body...)
}

// replay answers a request whose key already has a receipt.
func replay(w http.ResponseWriter, r *http.Request, rec *baton.Receipt, fp string) {
	switch {
	case rec.Fingerprint != fp:
		conflict("Idempotency-Key was already used for a different request").write(w, r)
	case rec.State != baton.ReceiptDone:
		conflict("a request with this Idempotency-Key is still in flight").write(w, r)
	default:
		h := w.Header()
		if rec.ContentType != "" {
			h.Set("Content-Type", rec.ContentType)
		}
		h.Set(ReplayedHeader, "true")
		w.WriteHeader(rec.Status)
		_, _ = w.Write(rec.Body)
	}
}

func conflict(msg string) guardError {
	return guardError{http.StatusConflict, httpx.V1Conflict, idempotencyConflict, msg}
}

// execute runs the first request under a key and saves its receipt, or
// abandons it when the response must not be replayed (5xx, 401, a panic).
func execute(w http.ResponseWriter, r *http.Request, next http.Handler, rs baton.ReceiptStore, log *slog.Logger, scope, key string) {
	ctx := context.WithoutCancel(r.Context()) // save the outcome even if the caller left
	cw := &capture{ResponseWriter: w}
	saved := false
	defer func() {
		if saved {
			return
		}
		if err := rs.AbandonReceipt(ctx, scope, key); err != nil {
			log.LogAttrs(ctx, slog.LevelError, "abandon idempotency receipt",
				slog.String("request_id", httpx.RequestID(ctx)), slog.String("error", err.Error()))
		}
	}()
	next.ServeHTTP(cw, r)
	status := cw.code()
	if status >= 500 || status == http.StatusUnauthorized {
		return
	}
	ct := cw.Header().Get("Content-Type")
	if err := rs.CompleteReceipt(ctx, scope, key, status, ct, redact(cw.body.Bytes())); err != nil {
		log.LogAttrs(ctx, slog.LevelError, "save idempotency receipt",
			slog.String("request_id", httpx.RequestID(ctx)), slog.String("error", err.Error()))
		return
	}
	saved = true
}

// redact removes the fresh-only secrets from a JSON object body, keeping
// every other member byte for byte and in order. Anything else is
// returned unchanged.
func redact(body []byte) []byte {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return body
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if _, err := dec.Token(); err != nil {
		return body
	}
	out := make([]byte, 0, len(body))
	out = append(out, '{')
	dropped := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return body
		}
		name, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return body
		}
		if secretFields[name] {
			dropped = true
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		n, _ := baton.EncodeJSON(name) // a string: cannot fail
		out = append(out, n...)
		out = append(out, ':')
		out = append(out, v...)
	}
	if !dropped {
		return body
	}
	return append(out, '}')
}

// capture passes a response through and keeps a copy of its status and
// body.
type capture struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (c *capture) WriteHeader(code int) {
	if c.status == 0 && code >= 200 {
		c.status = code
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *capture) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	c.body.Write(p)
	return c.ResponseWriter.Write(p)
}

// Flush sends buffered data to the client.
func (c *capture) Flush() {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	_ = http.NewResponseController(c.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (c *capture) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// code is the response status: what was written, or 200 when nothing was.
func (c *capture) code() int {
	if c.status == 0 {
		return http.StatusOK
	}
	return c.status
}
