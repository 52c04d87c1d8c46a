package httpapi

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/baton-engine/baton"
)

// grantTokens verifies executor tokens from a table.
type grantTokens map[string]*baton.ExecutorGrant

func (g grantTokens) Issue(context.Context, string, string, string) (string, *baton.ExecutorGrant, error) {
	return "", nil, errors.New("not used")
}

func (g grantTokens) Verify(_ context.Context, token string) (*baton.ExecutorGrant, error) {
	if gr, ok := g[token]; ok {
		return gr, nil
	}
	return nil, baton.Errorf(baton.ECodeUnauthorized, "invalid executor token")
}

// TestIdemCaller: the idempotency scope names the key a token
// authenticates, never the token, and the route spells the session id one
// way.
func TestIdemCaller(t *testing.T) {
	const sid = "ses_0123456789abcdef0123456789abcdef"
	uuid := SessionUUID(sid)
	const sesTok, cliTok, extTok = "bae_ses_s", "bae_c", "bae_ext_e"
	auth := &fakeAuth{
		clients:  map[string]*baton.Key{cliTok: {ID: "key_c"}},
		sessions: map[string]*baton.Key{sid + " " + sesTok: {ID: "key_s"}},
	}
	srv := New(Options{Auth: auth, ExecutorTokens: grantTokens{extTok: {CredentialID: "ecr_1"}}})
	canon := "/v1/sessions/" + sid + "/clients"
	cases := []struct {
		name, path, token string
		caller, route     string
		code              string // the error's code, "" for none
	}{
		{"session key, ses_ form", canon, sesTok, "key:key_s", canon, ""},
		{"session key, UUID form", "/v1/sessions/" + uuid + "/clients", sesTok, "key:key_s", canon, ""},
		{"session key, upper-case UUID, deeper path", "/v1/sessions/" + strings.ToUpper(uuid) + "/clients/c1/calls/k/result", sesTok,
			"key:key_s", canon + "/c1/calls/k/result", ""},
		{"client key, UUID form", "/v1/sessions/" + uuid + "/clients", cliTok, "key:key_c", canon, ""},
		{"client key on /api/v1", "/api/v1/sessions/" + sid + "/join", cliTok, "key:key_c", "/api/v1/sessions/" + sid + "/join", ""},
		{"session key of another session", "/v1/sessions/ses_" + strings.Repeat("f", 32) + "/clients", sesTok, "", "", baton.ECodeUnauthorized},
		{"session key off its session's routes", "/api/v1/sessions", sesTok, "", "", baton.ECodeUnauthorized},
		{"unknown client key", canon, "bae_nope", "", "", baton.ECodeUnauthorized},
		{"executor token", "/v1/environments/env_1/artifacts", extTok, "executor credential:ecr_1", "/v1/environments/env_1/artifacts", ""},
		{"unknown executor token", "/v1/executors/artifacts", "bae_ext_nope", "", "", baton.ECodeUnauthorized},
		{"view token names itself", "/v1/fs/" + sid + "/work/a.txt", "vt.abc", "", "/v1/fs/" + sid + "/work/a.txt", ""},
		{"malformed session id stays as sent", "/v1/sessions/nope/clients", cliTok, "key:key_c", "/v1/sessions/nope/clients", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", c.path, nil)
			caller, route, err := srv.idemCaller(r, c.token)
			if err != nil || c.code != "" {
				if err == nil || baton.ErrorCode(err) != c.code {
					t.Fatalf("err %v, want code %q", err, c.code)
				}
				return
			}
			if caller != c.caller || route != c.route {
				t.Fatalf("caller %q route %q, want %q %q", caller, route, c.caller, c.route)
			}
		})
	}
	// A failing key lookup is an error, not a pass-through.
	auth.err = errors.New("key store down")
	if _, _, err := srv.idemCaller(httptest.NewRequest("POST", canon, nil), cliTok); err == nil || baton.ErrorCode(err) == baton.ECodeUnauthorized {
		t.Fatalf("lookup failure: %v", err)
	}
}
