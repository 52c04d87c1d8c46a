package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// token is a short-lived executor token.
type token struct {
	Value     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

// maxTokenBody bounds the token endpoint's answer.
const maxTokenBody = 64 << 10

// exchange trades the credential for a fresh executor token at
// POST /v1/{environments|machines}/{id}/token.
func (e *Executor) exchange(ctx context.Context) (token, error) {
	const op = "token exchange"
	kind := "environments"
	if e.cfg.Scope.Kind == ScopeMachine {
		kind = "machines"
	}
	u := e.cfg.BaseURL + "/v1/" + kind + "/" + url.PathEscape(e.cfg.Scope.ID) + "/token"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, http.NoBody)
	if err != nil {
		return token{}, fmt.Errorf("executor: %s: %w", op, err)
	}
	req.Header.Set("Authorization", "Bearer "+e.cfg.Credential)
	req.Header.Set("Accept", "application/json")
	resp, err := e.cfg.HTTPClient.Do(req)
	if err != nil {
		return token{}, fmt.Errorf("executor: %s: %w", op, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenBody))
	if err != nil {
		return token{}, fmt.Errorf("executor: %s: %w", op, err)
	}
	if resp.StatusCode != http.StatusOK {
		return token{}, httpError(op, resp.StatusCode, body)
	}
	var t token
	if err := json.Unmarshal(body, &t); err != nil {
		return token{}, fmt.Errorf("executor: %s: decode: %w", op, err)
	}
	if t.Value == "" {
		return token{}, fmt.Errorf("executor: %s: %w", op, errors.New("answer has no token"))
	}
	return t, nil
}

// refreshDelay is how long to wait before refreshing a token that
// expires at exp: RefreshBefore ahead of expiry, but never later than
// half its remaining life.
func refreshDelay(now, exp time.Time, before time.Duration) time.Duration {
	left := exp.Sub(now)
	if left <= 0 {
		return 0
	}
	d := left - before
	if d < left/2 {
		d = left / 2
	}
	return d
}
