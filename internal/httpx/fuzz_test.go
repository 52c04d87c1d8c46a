package httpx

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"

	"github.com/baton-engine/baton"
)

// Fuzz targets of the request decoders every REST handler starts with.

// FuzzDecodeObject: a body decodes as an Object exactly when encoding/json
// takes it as an object; a refusal is a 400 rejection for bad syntax and a
// 422 one otherwise; a string member reads back as encoding/json reads it.
func FuzzDecodeObject(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":"x","b":[1,2],"c":null}`, `[]`, `null`, `"s"`, `{"a":`, `{"a":"\ud800"}`, ` {"a":1} `, `{"a":1}{}`} {
		f.Add([]byte(s), "a")
	}
	f.Fuzz(func(t *testing.T, body []byte, key string) {
		obj, err := DecodeObject(body)
		var m map[string]json.RawMessage
		refErr := json.Unmarshal(body, &m)
		if (err == nil) != (refErr == nil && m != nil) {
			t.Fatalf("DecodeObject(%q) = %v; encoding/json: %v, %v", body, err, m, refErr)
		}
		if err != nil {
			var rej *Rejection
			if !errors.As(err, &rej) {
				t.Fatalf("error %T %v, want a *Rejection", err, err)
			}
			var syn *json.SyntaxError
			want := http.StatusUnprocessableEntity
			if errors.As(refErr, &syn) {
				want = http.StatusBadRequest
			}
			if rej.Status != want {
				t.Fatalf("DecodeObject(%q): status %d, want %d (%v)", body, rej.Status, want, refErr)
			}
			return
		}
		s, err := obj.String(key)
		var ref string
		raw, present := m[key]
		refOK := present && len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &ref) == nil
		if (err == nil) != refOK || s != ref {
			t.Fatalf("String(%q) = %q, %v; encoding/json: %q, %v", key, s, err, ref, refOK)
		}
		if _, err := obj.Array(key); err != nil && !errors.As(err, new(*Rejection)) {
			t.Fatalf("Array: %T %v", err, err)
		}
		if _, err := obj.OptUint(key); err != nil && !errors.As(err, new(*Rejection)) {
			t.Fatalf("OptUint: %T %v", err, err)
		}
	})
}

// FuzzParsePageQuery: any query string either is refused with a 400 or
// yields a page whose limit is in [1, MaxLimit] (or a bad_request for a
// non-positive one) and whose cursor is the query's.
func FuzzParsePageQuery(f *testing.F) {
	for _, s := range []string{"", "limit=5&cursor=12", "limit=0", "limit=-1", "limit=99999999999999999999", "limit=1&limit=2", "cursor=%zz", "limit=x", "cursor=a;b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		r := httptest.NewRequest("GET", "/x", nil)
		r.URL.RawQuery = raw
		q, err := ParsePageQuery(r)
		if err != nil {
			var rej *Rejection
			if !errors.As(err, &rej) || rej.Status != http.StatusBadRequest {
				t.Fatalf("ParsePageQuery(%q): %v", raw, err)
			}
			return
		}
		values, _ := url.ParseQuery(raw)
		page, err := q.Page()
		if err != nil {
			n, perr := strconv.ParseInt(values.Get("limit"), 10, 64)
			if baton.ErrorCode(err) != baton.ECodeBadRequest || perr != nil || n > 0 {
				t.Fatalf("Page of %q: %v", raw, err)
			}
			return
		}
		if page.Limit < 1 || page.Limit > MaxLimit || page.Cursor != values.Get("cursor") {
			t.Fatalf("Page of %q = %+v", raw, page)
		}
	})
}
