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
