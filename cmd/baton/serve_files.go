package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/baton-engine/baton/auth"
	"github.com/baton-engine/baton/executor"
	"github.com/baton-engine/baton/executor/proto"
	"github.com/baton-engine/baton/filearea"
)

// fileConfig is the session files side of `serve` (bma.executor.v1.1,
// "Files and artifacts"): the size caps and the lifetime of the view
// tokens fs.mount hands executors.
type fileConfig struct {
	Limits       filearea.Limits // BATON_MAX_FILE_BYTES, BATON_MAX_SESSION_FILE_BYTES, BATON_MAX_SESSION_FILES, BATON_MAX_ARTIFACT_BYTES
	ViewTokenTTL time.Duration   // BATON_FS_TOKEN_TTL
}

// viewMinter mints the views fs.mount hands executors, with service URLs
// at the client origin as executors reach it (BATON_PUBLIC_URL, else the
// client listener's URL, known once it listens).
type viewMinter struct {
	tokens filearea.ViewTokens
	origin func() string
}

func (m viewMinter) For(sessionID string, epoch int64) ([]proto.FsView, error) {
	return (&executor.Minter{Origin: m.origin(), Tokens: m.tokens}).For(sessionID, epoch)
}

// loadFileConfig reads the file settings from the environment.
func loadFileConfig(getenv func(string) string) (fileConfig, error) {
	c := fileConfig{Limits: filearea.Limits{}.WithDefaults(), ViewTokenTTL: auth.DefaultViewTokenTTL}
	return c, errors.Join(
		envCount(getenv, "BATON_MAX_FILE_BYTES", &c.Limits.MaxFileBytes),
		envCount(getenv, "BATON_MAX_SESSION_FILE_BYTES", &c.Limits.MaxSessionBytes),
		envCount(getenv, "BATON_MAX_SESSION_FILES", &c.Limits.MaxSessionFiles),
		envCount(getenv, "BATON_MAX_ARTIFACT_BYTES", &c.Limits.MaxArtifactBytes),
		envDuration(getenv, "BATON_FS_TOKEN_TTL", &c.ViewTokenTTL),
	)
}

// envCount sets *dst from the environment variable name when it is set: a
// positive whole number.
func envCount(getenv func(string) string, name string, dst *int64) error {
	v := strings.TrimSpace(getenv(name))
	if v == "" {
		return nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return fmt.Errorf("%s: %q is not a positive whole number", name, v)
	}
	*dst = n
	return nil
}
