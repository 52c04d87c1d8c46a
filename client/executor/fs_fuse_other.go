//go:build !linux

package executor

import (
	"errors"
	"log/slog"
)

// mountFUSE is not available here: views are synced directories.
func mountFUSE(string, *remote, bool, bool, *slog.Logger) (mountImpl, error) {
	return nil, errors.New("FUSE mounts are supported on Linux only")
}
