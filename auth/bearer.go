package auth

import (
	"strings"

	"github.com/baton-engine/baton"
)

// ParseBearer extracts the token of an Authorization header value, with
// BAE's messages (spec-client §1.2): an empty value or one with bytes that
// are not visible ASCII is "missing", the scheme must be exactly "Bearer "
// or "bearer ", and the token must not be empty. Errors are
// ECodeUnauthorized.
func ParseBearer(header string) (string, error) {
	if header == "" || !visibleASCII(header) {
		return "", baton.Errorf(baton.ECodeUnauthorized, "missing Authorization header")
	}
	token, ok := strings.CutPrefix(header, "Bearer ")
	if !ok {
		token, ok = strings.CutPrefix(header, "bearer ")
	}
	if !ok {
		return "", baton.Errorf(baton.ECodeUnauthorized, "Authorization header must be a Bearer token")
	}
	if token == "" {
		return "", baton.Errorf(baton.ECodeUnauthorized, "empty bearer token")
	}
	return token, nil
}

// visibleASCII reports whether s holds only visible ASCII, spaces and tabs,
// the bytes an HTTP header value may be read as text with.
func visibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t') || c > 0x7e {
			return false
		}
	}
	return true
}
