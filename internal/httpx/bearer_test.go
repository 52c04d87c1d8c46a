package httpx

import (
	"strings"
	"testing"

	"github.com/baton-engine/baton"
)

func TestParseBearer(t *testing.T) {
	tests := []struct {
		name   string
		values []string
		token  string
		detail string
	}{
		{"absent", nil, "", "missing Authorization header"},
		{"non-ascii", []string{"Bearer bae_é"}, "", "missing Authorization header"},
		{"control char", []string{"Bearer a\x01b"}, "", "missing Authorization header"},
		{"basic", []string{"Basic dXNlcg=="}, "", "Authorization header must be a Bearer token"},
		{"upper", []string{"BEARER bae_x"}, "", "Authorization header must be a Bearer token"},
		{"no space", []string{"Bearer"}, "", "Authorization header must be a Bearer token"},
		{"tab", []string{"Bearer\tbae_x"}, "", "Authorization header must be a Bearer token"},
		{"empty value", []string{""}, "", "Authorization header must be a Bearer token"},
		{"empty token", []string{"Bearer "}, "", "empty bearer token"},
		{"empty lower", []string{"bearer "}, "", "empty bearer token"},
		{"ok", []string{"Bearer bae_x"}, "bae_x", ""},
		{"ok lower", []string{"bearer bae_x"}, "bae_x", ""},
		{"first only", []string{"Bearer one", "Bearer two"}, "one", ""},
		{"untrimmed", []string{"Bearer  x "}, " x ", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := ParseBearer(tt.values)
			if tt.detail == "" {
				if err != nil || tok != tt.token {
					t.Fatalf("ParseBearer = %q, %v; want %q", tok, err, tt.token)
				}
				return
			}
			if baton.ErrorCode(err) != baton.ECodeUnauthorized || baton.ErrorMessage(err) != tt.detail || tok != "" {
				t.Fatalf("ParseBearer = %q, %v; want unauthorized %q", tok, err, tt.detail)
			}
		})
	}
}

func FuzzBearer(f *testing.F) {
	for _, s := range []string{"", "Bearer ", "bearer x", "Bearer bae_0123", "Basic x", "Bearer \x7f", "bearer  é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		tok, err := ParseBearer([]string{v})
		if err != nil {
			if baton.ErrorCode(err) != baton.ECodeUnauthorized || tok != "" {
				t.Fatalf("ParseBearer(%q) = %q, %v", v, tok, err)
			}
			return
		}
		if tok == "" || !(v == "Bearer "+tok || v == "bearer "+tok) {
			t.Fatalf("ParseBearer(%q) = %q", v, tok)
		}
		for i := 0; i < len(v); i++ {
			if c := v[i]; c != '\t' && (c < ' ' || c > '~') {
				t.Fatalf("accepted a non-visible byte in %q", v)
			}
		}
		if strings.ContainsAny(tok, "\r\n") {
			t.Fatalf("token %q holds a line break", tok)
		}
	})
}
