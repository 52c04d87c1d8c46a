//go:build !linux

package sandbox

import (
	"context"
	"errors"

	"github.com/baton-engine/baton"
)

// errNoProcess is every operation's error off Linux.
var errNoProcess = errors.New("sandbox driver unsupported: the process driver needs Linux namespaces")

// Process is the process driver; off Linux it only provisions root
// filesystem directories and fails to start sandboxes.
type Process struct{ opt ProcessOptions }

var _ baton.SandboxDriver = (*Process)(nil)

// NewProcess returns a process driver.
func NewProcess(opt ProcessOptions) *Process { return &Process{opt: opt} }

// Reexec does nothing off Linux.
func Reexec() {}

// EnsureImage reports whether the image's root filesystem directory
// exists.
func (p *Process) EnsureImage(ctx context.Context, image string) error {
	return RootfsDir(p.opt.RootfsDir).EnsureImage(ctx, image)
}

// Start fails: there are no namespaces to run a sandbox in.
func (p *Process) Start(context.Context, string) (string, error) { return "", errNoProcess }

// Exec fails: no sandbox can be running.
func (p *Process) Exec(context.Context, string, string, baton.ExecOptions) (baton.ExecResult, error) {
	return baton.ExecResult{}, errNoProcess
}

// Stop does nothing: no sandbox can be running.
func (p *Process) Stop(context.Context, string) error { return nil }

// Cleanup does nothing: no sandbox can be running.
func (p *Process) Cleanup(context.Context) (int, error) { return 0, nil }
