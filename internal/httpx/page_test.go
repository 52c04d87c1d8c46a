package httpx

import (
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/baton-engine/baton"
	"github.com/google/go-cmp/cmp"
)

func TestPageQuery(t *testing.T) {
	tests := []struct {
		query  string
		page   baton.Page
		reject string // framework 400 text
		detail string // bad_request detail
	}{
		{query: "", page: baton.Page{Limit: 50}},
		{query: "limit=10&cursor=42", page: baton.Page{Cursor: "42", Limit: 10}},
		{query: "cursor=", page: baton.Page{Limit: 50}},
		{query: "cursor=not-a-number", page: baton.Page{Cursor: "not-a-number", Limit: 50}},
		{query: "limit=200", page: baton.Page{Limit: 200}},
		{query: "limit=201", page: baton.Page{Limit: 200}},
		{query: "limit=9223372036854775807", page: baton.Page{Limit: 200}},
		{query: "limit=%2B5", page: baton.Page{Limit: 5}},
		{query: "limit=1&limit=x", reject: "Failed to deserialize query string: duplicate field `limit`"},
		{query: "cursor=1&cursor=2", reject: "Failed to deserialize query string: duplicate field `cursor`"},
		{query: "other=1&other=2", page: baton.Page{Limit: 50}},
		{query: "limit=0", detail: "limit must be a positive integer"},
		{query: "limit=-3", detail: "limit must be a positive integer"},
		{query: "limit=abc", reject: "Failed to deserialize query string: limit: invalid digit found in string"},
		{query: "limit=1.5", reject: "Failed to deserialize query string: limit: invalid digit found in string"},
		{query: "limit=", reject: "Failed to deserialize query string: limit: cannot parse integer from empty string"},
		{query: "limit=99999999999999999999", reject: "Failed to deserialize query string: limit: number too large to fit in target type"},
		{query: "limit=%zz", reject: "Failed to deserialize query string: "},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "/x?"+tt.query, nil)
		q, err := ParsePageQuery(r)
		if tt.reject != "" {
			var rej *Rejection
			if !errors.As(err, &rej) || rej.Status != 400 || len(rej.Text) < len(tt.reject) || rej.Text[:len(tt.reject)] != tt.reject {
				t.Errorf("%q: err = %v, want rejection %q", tt.query, err, tt.reject)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tt.query, err)
		}
		page, err := q.Page()
		if tt.detail != "" {
			if baton.ErrorCode(err) != baton.ECodeBadRequest || baton.ErrorMessage(err) != tt.detail {
				t.Errorf("%q: err = %v, want bad_request %q", tt.query, err, tt.detail)
			}
			continue
		}
		if err != nil || page != tt.page {
			t.Errorf("%q: Page = %+v, %v; want %+v", tt.query, page, err, tt.page)
		}
	}
	q, _ := ParsePageQuery(httptest.NewRequest("GET", "/x?state=open", nil))
	if q.Get("state") != "open" {
		t.Errorf("Get(state) = %q", q.Get("state"))
	}
}

func TestNewPage(t *testing.T) {
	b, err := marshal(NewPage[string](nil, ""))
	if err != nil || string(b) != `{"items":[],"next_cursor":null}` {
		t.Errorf("empty page = %s, %v", b, err)
	}
	b, _ = marshal(NewPage([]int{1, 2}, "7"))
	if diff := cmp.Diff(`{"items":[1,2],"next_cursor":"7"}`, string(b)); diff != "" {
		t.Errorf("page (-want +got):\n%s", diff)
	}
}
