package baton

import "context"

// SessionSandboxDriver is implemented by a SandboxDriver that wants to
// know whose sandbox it starts — an executor shell mounts the session's
// files in it. The engine calls StartFor instead of Start when its driver
// implements it.
type SessionSandboxDriver interface {
	// StartFor starts a long-lived sandbox of image for session
	// sessionID and returns its id.
	StartFor(ctx context.Context, sessionID, image string) (string, error)
}
