package main

import (
	"time"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/auth"
)

// executorConfig is the executor side of `serve`: what executor tokens
// live (BATON_EXECUTOR_TOKEN_TTL, a Go duration or whole seconds).
type executorConfig struct {
	TokenTTL time.Duration
}

// loadExecutorConfig reads the executor settings from the environment.
func loadExecutorConfig(getenv func(string) string) (executorConfig, error) {
	c := executorConfig{TokenTTL: auth.DefaultExecutorTokenTTL}
	err := envDuration(getenv, "BATON_EXECUTOR_TOKEN_TTL", &c.TokenTTL)
	return c, err
}

// revokers tells each of its members of a revoked executor credential: the
// token service (so its tokens stop verifying at once) and whatever holds
// live executor connections.
type revokers []baton.ExecutorRevoker

func (rs revokers) RevokeCredential(id string) {
	for _, r := range rs {
		r.RevokeCredential(id)
	}
}
