// Package sandbox runs sandboxes for sessions: the image provisioning that
// tracks each profile's available_sandboxes, and the drivers that make an
// image ready and run containers (Docker Engine API; Linux namespaces).
package sandbox

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/baton-engine/baton"
)

// ImageEnsurer makes an image available locally (pulling it if needed).
type ImageEnsurer interface {
	EnsureImage(ctx context.Context, image string) error
}

// Provisioner implements baton.ImageProvisioner: it keeps the in-memory
// status map of every profile written since start and resolves it in the
// background, one goroutine per provisioning request, all owned by the
// Provisioner and stopped by Close.
type Provisioner struct {
	driver ImageEnsurer
	log    *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	status map[string]map[string]baton.ImageStatus // profile → image → status
	gen    map[string]uint64                       // profile → generation, so a stale run cannot overwrite a newer one
}

var _ baton.ImageProvisioner = (*Provisioner)(nil)

// NewProvisioner returns a Provisioner using driver to ensure images.
func NewProvisioner(driver ImageEnsurer, log *slog.Logger) *Provisioner {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Provisioner{
		driver: driver, log: log, ctx: ctx, cancel: cancel,
		status: make(map[string]map[string]baton.ImageStatus),
		gen:    make(map[string]uint64),
	}
}

// Close cancels running provisioning and waits for it to stop.
func (p *Provisioner) Close() error {
	p.cancel()
	p.wg.Wait()
	return nil
}

// Wait blocks until every provisioning run started so far has finished.
func (p *Provisioner) Wait() { p.wg.Wait() }

// Provision resets the profile's images to pending and ensures them one by
// one in the background. The ctx argument is not used for the background
// work, which is bounded by the Provisioner's own lifetime.
func (p *Provisioner) Provision(_ context.Context, prof *baton.Profile) {
	images := append([]string(nil), prof.AvailableSandboxes...)
	p.mu.Lock()
	p.gen[prof.ID]++
	gen := p.gen[prof.ID]
	m := make(map[string]baton.ImageStatus, len(images))
	for _, img := range images {
		m[img] = baton.ImageStatus{Name: img, Status: baton.ImagePending}
	}
	p.status[prof.ID] = m
	p.mu.Unlock()
	if len(images) == 0 || p.ctx.Err() != nil {
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for _, img := range images {
			st := baton.ImageStatus{Name: img, Status: baton.ImageAvailable}
			if err := p.driver.EnsureImage(p.ctx, img); err != nil {
				st = baton.ImageStatus{Name: img, Status: baton.ImageError, Detail: err.Error()}
				p.log.Warn("sandbox image unavailable", "profile_id", prof.ID, "image", img, "err", err)
			} else {
				p.log.Info("sandbox image available", "profile_id", prof.ID, "image", img)
			}
			p.mu.Lock()
			if p.gen[prof.ID] == gen {
				p.status[prof.ID][img] = st
			}
			p.mu.Unlock()
		}
	}()
}

// Status returns every tracked profile sorted by id, images sorted by name.
func (p *Provisioner) Status() []baton.ProfileImages {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]baton.ProfileImages, 0, len(p.status))
	for id := range p.status {
		out = append(out, baton.ProfileImages{ProfileID: id, Images: p.imagesLocked(id)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProfileID < out[j].ProfileID })
	return out
}

// Images returns the tracked images of one profile, sorted by name.
func (p *Provisioner) Images(profileID string) []baton.ImageStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.imagesLocked(profileID)
}

func (p *Provisioner) imagesLocked(profileID string) []baton.ImageStatus {
	m := p.status[profileID]
	out := make([]baton.ImageStatus, 0, len(m))
	for _, st := range m {
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// RootfsDir ensures images for the process driver: an image is the name of
// a root filesystem directory under the given directory.
type RootfsDir string

// EnsureImage reports whether the image's root filesystem directory exists.
func (d RootfsDir) EnsureImage(_ context.Context, image string) error {
	if image == "" || image == "." || image == ".." || strings.ContainsRune(image, '/') {
		return fmt.Errorf("sandbox image %q error: not a valid rootfs directory name", image)
	}
	fi, err := os.Stat(filepath.Join(string(d), image))
	if err != nil {
		return fmt.Errorf("sandbox image %q error: no root filesystem at %s", image, filepath.Join(string(d), image))
	}
	if !fi.IsDir() {
		return fmt.Errorf("sandbox image %q error: %s is not a directory", image, filepath.Join(string(d), image))
	}
	return nil
}
