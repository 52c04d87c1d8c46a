package httpx

import (
	"net/http"
	"strings"

	"github.com/baton-engine/baton"
)

// Bearer returns the bearer token of r's Authorization header, checked as
// BAE checks it on both ports (BAE's client API). Every failure is an
// ECodeUnauthorized error with BAE's detail.
func Bearer(r *http.Request) (string, error) {
	return ParseBearer(r.Header.Values("Authorization"))
}

// ParseBearer is Bearer for the Authorization header values; only the first
// counts.
func ParseBearer(values []string) (string, error) {
	if len(values) == 0 || !visible(values[0]) {
		return "", baton.Errorf(baton.ECodeUnauthorized, "missing Authorization header")
	}
	v := values[0]
	token, ok := strings.CutPrefix(v, "Bearer ")
	if !ok {
		token, ok = strings.CutPrefix(v, "bearer ")
	}
	if !ok {
		return "", baton.Errorf(baton.ECodeUnauthorized, "Authorization header must be a Bearer token")
	}
	if token == "" {
		return "", baton.Errorf(baton.ECodeUnauthorized, "empty bearer token")
	}
	return token, nil
}

// visible reports whether a header value holds only visible ASCII, space
// and tab — what BAE's framework can read as text.
func visible(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != '\t' && (c < ' ' || c > '~') {
			return false
		}
	}
	return true
}
