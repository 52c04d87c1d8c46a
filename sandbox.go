package baton

import "context"

// Image provisioning states.
const (
	ImagePending   = "pending"
	ImageAvailable = "available"
	ImageError     = "error"
)

// ImageStatus is the provisioning state of one sandbox image of a profile.
type ImageStatus struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"` // only for ImageError
}

// ProfileImages is the image status list of one profile.
type ProfileImages struct {
	ProfileID string        `json:"profile_id"`
	Images    []ImageStatus `json:"images"`
}

// ImageProvisioner makes a profile's available_sandboxes images ready in the
// background and reports their state.
type ImageProvisioner interface {
	// Provision resets the profile's images to pending and ensures each in
	// the background, recording available or error.
	Provision(ctx context.Context, p *Profile)
	// Status returns every tracked profile sorted by id, images by name.
	Status() []ProfileImages
	// Images returns the tracked images of one profile.
	Images(profileID string) []ImageStatus
}

// ExecResult is the outcome of a command run in a sandbox. A non-zero exit
// is a result, not an error; a signal is ExitCode -1. Each stream is cut
// at the exec's output limit on a UTF-8 boundary; Truncated reports a cut.
type ExecResult struct {
	Stdout    string `json:"stdout"`
	Stderr    string `json:"stderr"`
	ExitCode  int    `json:"exit_code"`
	Truncated bool   `json:"-"`
}

// ExecOptions tunes one sandbox exec.
type ExecOptions struct {
	// Stdin is written to the command's standard input, which is then
	// closed; nil gives the command an empty input.
	Stdin []byte
	// Limit caps each output stream in bytes; 0 means the driver default,
	// under which a cut stream ends with a line "[output truncated: N more
	// bytes]" within the cap. A stream cut at a Limit given here is cut bare.
	Limit int
}

// SandboxDriver runs remote sandboxes for sessions: one container (or
// namespace jail) per session, started from an allowlisted image.
type SandboxDriver interface {
	EnsureImage(ctx context.Context, image string) error
	// Start starts a long-lived sandbox of image and returns its id.
	Start(ctx context.Context, image string) (string, error)
	// Exec runs `sh -c command` in the sandbox.
	Exec(ctx context.Context, id, command string, opt ExecOptions) (ExecResult, error)
	// Stop stops and removes the sandbox; an unknown id is not an error.
	Stop(ctx context.Context, id string) error
}
