package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/baton-engine/baton/internal/httpx"
)

// ClientVersionHeader is the request header a client states its version in.
const ClientVersionHeader = "Client-Version"

// Version is a MAJOR.MINOR.PATCH version, compared numerically.
type Version [3]uint64

// ParseVersion reads "MAJOR.MINOR.PATCH", optionally followed by a
// pre-release ("-rc.1") or build ("+abc") suffix, which is ignored.
func ParseVersion(s string) (Version, error) {
	core := s
	if i := strings.IndexAny(core, "-+"); i >= 0 {
		core = core[:i]
	}
	parts := strings.Split(core, ".")
	var v Version
	if len(parts) != 3 {
		return v, fmt.Errorf("version %q is not MAJOR.MINOR.PATCH", s)
	}
	for i, p := range parts {
		if p == "" || p[0] == '+' || (len(p) > 1 && p[0] == '0') {
			return v, fmt.Errorf("version %q is not MAJOR.MINOR.PATCH", s)
		}
		n, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return v, fmt.Errorf("version %q is not MAJOR.MINOR.PATCH", s)
		}
		v[i] = n
	}
	return v, nil
}

// Less reports whether v is below o.
func (v Version) Less(o Version) bool {
	for i := range v {
		if v[i] != o[i] {
			return v[i] < o[i]
		}
	}
	return false
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2]) }

// ClientVersion refuses requests whose Client-Version header is below min
// with 426 client_outdated, and a header that is not a version with 400.
// Requests without the header, /healthz and GET /api/v1/meta (where a
// client learns what the server speaks) are not checked. A nil min turns
// the check off.
func ClientVersion(min *Version, next http.Handler) http.Handler {
	if min == nil {
		return next
	}
	outdated := guardError{http.StatusUpgradeRequired, httpx.V1ClientOutdated, httpx.V1ClientOutdated,
		"Client-Version is below the minimum this server accepts (" + min.String() + ")"}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		vals := r.Header.Values(ClientVersionHeader)
		if len(vals) == 0 || r.URL.Path == "/healthz" || r.URL.Path == "/api/v1/meta" {
			next.ServeHTTP(w, r)
			return
		}
		v, err := ParseVersion(strings.TrimSpace(vals[0]))
		if err != nil {
			guardBadRequest("Client-Version must be MAJOR.MINOR.PATCH").write(w, r)
			return
		}
		if v.Less(*min) {
			outdated.write(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}
