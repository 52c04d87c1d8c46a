package auth

import (
	"strings"
	"testing"

	"github.com/baton-engine/baton"
)

func TestParseBearer(t *testing.T) {
	tests := []struct {
		header string
		token  string
		msg    string // error message; "" on success
	}{
		{"Bearer abc", "abc", ""},
		{"bearer abc", "abc", ""},
		{"Bearer bae_0123", "bae_0123", ""},
		{"Bearer  abc", " abc", ""}, // only the scheme and one space are stripped
		{"Bearer a b", "a b", ""},
		{"Bearer\tabc", "", "Authorization header must be a Bearer token"},
		{"", "", "missing Authorization header"},
		{"Bearer caf\u00e9", "", "missing Authorization header"},
		{"Bearer abc\x00", "", "missing Authorization header"},
		{"Bearer abc\x7f", "", "missing Authorization header"},
		{"Bearer abc\n", "", "missing Authorization header"},
		{"BEARER abc", "", "Authorization header must be a Bearer token"},
		{"Basic dXNlcjpwYXNz", "", "Authorization header must be a Bearer token"},
		{"Bearer", "", "Authorization header must be a Bearer token"},
		{"bearerabc", "", "Authorization header must be a Bearer token"},
		{" Bearer abc", "", "Authorization header must be a Bearer token"},
		{"Token abc", "", "Authorization header must be a Bearer token"},
		{"Bearer ", "", "empty bearer token"},
		{"bearer ", "", "empty bearer token"},
	}
	for _, tt := range tests {
		token, err := ParseBearer(tt.header)
		if tt.msg == "" {
			if err != nil || token != tt.token {
				t.Errorf("ParseBearer(%q) = %q, %v; want %q", tt.header, token, err, tt.token)
			}
			continue
		}
		if err == nil {
			t.Errorf("ParseBearer(%q) = %q, want error %q", tt.header, token, tt.msg)
			continue
		}
		if baton.ErrorCode(err) != baton.ECodeUnauthorized || baton.ErrorMessage(err) != tt.msg {
			t.Errorf("ParseBearer(%q) error = %v, want unauthorized %q", tt.header, err, tt.msg)
		}
	}
}

func FuzzParseBearer(f *testing.F) {
	for _, s := range []string{"", "Bearer x", "bearer x", "Bearer ", "Basic x", "Bearer \xff", "Bearer\t", "bearer  x "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		token, err := ParseBearer(header)
		if err != nil {
			if baton.ErrorCode(err) != baton.ECodeUnauthorized {
				t.Fatalf("ParseBearer(%q) error %v has code %q", header, err, baton.ErrorCode(err))
			}
			return
		}
		if token == "" {
			t.Fatalf("ParseBearer(%q) returned an empty token", header)
		}
		if header != "Bearer "+token && header != "bearer "+token {
			t.Fatalf("ParseBearer(%q) = %q, not the header minus its scheme", header, token)
		}
		if strings.ContainsFunc(header, func(r rune) bool { return (r < 0x20 && r != '\t') || r > 0x7e }) {
			t.Fatalf("ParseBearer(%q) accepted a non-visible-ASCII header", header)
		}
	})
}
