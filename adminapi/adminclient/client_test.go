package adminclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNormalizeAddr(t *testing.T) {
	tests := []struct{ in, want string }{
		{"127.0.0.1:8081", "http://127.0.0.1:8081"},
		{"localhost:9", "http://localhost:9"},
		{"[::1]:8081", "http://[::1]:8081"},
		{" 10.0.0.1:1 ", "http://10.0.0.1:1"},
		{"https://admin.example:8443/", "https://admin.example:8443"},
		{"http://127.0.0.1:8081/prefix", "http://127.0.0.1:8081/prefix"},
		{"", ""},
		{"ftp://x:1", ""},
		{"://x", ""},
		{"http://", ""},
	}
	for _, tt := range tests {
		got, err := NormalizeAddr(tt.in)
		if tt.want == "" {
			if err == nil {
				t.Errorf("NormalizeAddr(%q) = %q, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("NormalizeAddr(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// TestAllFollowsCursors: All walks next_cursor to the end, keeps the
// caller's query, drops a cursor it was given, and refuses a cursor
// that comes back.
func TestAllFollowsCursors(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.URL.RawQuery)
		if r.Header.Get("Authorization") != "Bearer k" {
			t.Errorf("Authorization %q", r.Header.Get("Authorization"))
		}
		switch r.URL.Query().Get("cursor") {
		case "":
			fmt.Fprint(w, `{"items":[1],"next_cursor":"c1"}`)
		case "c1":
			fmt.Fprint(w, `{"items":[2],"next_cursor":"c2"}`)
		case "c2":
			fmt.Fprint(w, `{"items":[3],"next_cursor":null}`)
		}
	}))
	defer srv.Close()
	c, err := New(srv.URL, "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	items, err := c.All(context.Background(), "/admin/v1/keys", map[string][]string{"limit": {"1"}, "cursor": {"c1"}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, it := range items {
		ids = append(ids, string(it))
	}
	if diff := cmp.Diff([]string{"1", "2", "3"}, ids); diff != "" {
		t.Errorf("items (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"limit=1", "cursor=c1&limit=1", "cursor=c2&limit=1"}, got); diff != "" {
		t.Errorf("queries (-want +got):\n%s", diff)
	}
	srvLoop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"items":[],"next_cursor":"again"}`)
	}))
	defer srvLoop.Close()
	c, _ = New(srvLoop.URL, "", nil)
	if _, err := c.All(context.Background(), "/admin/v1/keys", nil); !errors.Is(err, ErrUnexpected) {
		t.Errorf("a cursor that comes back: %v, want ErrUnexpected", err)
	}
}

// TestResponseError: an RFC 7807 body is an *APIError whose message
// falls back from detail to title to the status; anything else is
// described, quoted when short and printable.
func TestResponseError(t *testing.T) {
	cases := []struct {
		status int
		body   string
		api    *APIError
		msg    string
	}{
		{401, `{"type":"unauthorized","title":"Unauthorized","detail":"invalid admin key"}`, &APIError{401, "unauthorized", "Unauthorized", "invalid admin key"}, "invalid admin key"},
		{409, `{"type":"profile_in_use","title":"Conflict"}`, &APIError{409, "profile_in_use", "Conflict", ""}, "Conflict"},
		{500, `{"type":"internal"}`, &APIError{500, "internal", "", ""}, "HTTP 500 Internal Server Error"},
		{422, "Failed to deserialize", nil, "admin API returned HTTP 422 with an unrecognized body: Failed to deserialize"},
		{404, "", nil, "admin API returned HTTP 404 with an unrecognized body (is http://h:1 the admin port?)"},
		{500, strings.Repeat("x", 201), nil, "admin API returned HTTP 500 with an unrecognized body"},
		{400, "bad\x00", nil, "admin API returned HTTP 400 with an unrecognized body"},
	}
	for _, tc := range cases {
		err := ResponseError(tc.status, []byte(tc.body), "http://h:1")
		var ae *APIError
		if errors.As(err, &ae) != (tc.api != nil) || (tc.api != nil && *ae != *tc.api) {
			t.Errorf("ResponseError(%d, %q) = %#v, want %#v", tc.status, tc.body, err, tc.api)
		}
		if err.Error() != tc.msg {
			t.Errorf("ResponseError(%d, %q) says %q, want %q", tc.status, tc.body, err, tc.msg)
		}
	}
}
