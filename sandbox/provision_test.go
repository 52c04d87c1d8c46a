package sandbox

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/sandbox/sandboxtest"
)

// fakeEnsurer blocks each EnsureImage until released, so a test can look at
// the pending state deterministically.
type fakeEnsurer struct {
	release chan struct{}
	fail    map[string]bool
}

func (f *fakeEnsurer) EnsureImage(ctx context.Context, image string) error {
	select {
	case <-f.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	if f.fail[image] {
		return errors.New("pull denied")
	}
	return nil
}

func TestProvisionerPendingThenResolved(t *testing.T) {
	f := &fakeEnsurer{release: make(chan struct{}), fail: map[string]bool{"bad:1": true}}
	p := NewProvisioner(f, nil)
	defer p.Close()
	prof := &baton.Profile{ID: "pro_a", AvailableSandboxes: []string{"ok:1", "bad:1"}}
	p.Provision(context.Background(), prof)
	p.Provision(context.Background(), &baton.Profile{ID: "pro_b"})

	want := []baton.ProfileImages{
		{ProfileID: "pro_a", Images: []baton.ImageStatus{{Name: "bad:1", Status: "pending"}, {Name: "ok:1", Status: "pending"}}},
		{ProfileID: "pro_b", Images: []baton.ImageStatus{}},
	}
	if d := cmp.Diff(want, p.Status()); d != "" {
		t.Fatalf("pending status (-want +got):\n%s", d)
	}
	close(f.release)
	p.Wait()
	got := p.Images("pro_a")
	wantA := []baton.ImageStatus{{Name: "bad:1", Status: "error", Detail: "pull denied"}, {Name: "ok:1", Status: "available"}}
	if d := cmp.Diff(wantA, got); d != "" {
		t.Fatalf("resolved status (-want +got):\n%s", d)
	}
}

func TestProvisionerReplaceWinsOverStaleRun(t *testing.T) {
	f := &fakeEnsurer{release: make(chan struct{})}
	p := NewProvisioner(f, nil)
	defer p.Close()
	p.Provision(context.Background(), &baton.Profile{ID: "pro_a", AvailableSandboxes: []string{"old"}})
	p.Provision(context.Background(), &baton.Profile{ID: "pro_a", AvailableSandboxes: []string{"new"}})
	close(f.release)
	p.Wait()
	want := []baton.ImageStatus{{Name: "new", Status: "available"}}
	if d := cmp.Diff(want, p.Images("pro_a")); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
}

func TestProvisionerCloseStopsRuns(t *testing.T) {
	f := &fakeEnsurer{release: make(chan struct{})}
	p := NewProvisioner(f, nil)
	p.Provision(context.Background(), &baton.Profile{ID: "pro_a", AvailableSandboxes: []string{"x"}})
	p.Close() // must return although EnsureImage never gets released
	if st := p.Images("pro_a")[0]; st.Status != baton.ImageError {
		t.Fatalf("status after close = %+v, want error", st)
	}
}

func TestDockerEnsureImage(t *testing.T) {
	e := &sandboxtest.Engine{Images: []string{"alpine:3"}, Deny: "private/x:latest"}
	d := NewDocker(e.Start(t))
	ctx := context.Background()
	if err := d.EnsureImage(ctx, "alpine:3"); err != nil {
		t.Fatalf("present image: %v", err)
	}
	if err := d.EnsureImage(ctx, "localhost:5000/tools"); err != nil {
		t.Fatalf("pull: %v", err)
	}
	err := d.EnsureImage(ctx, "private/x")
	if err == nil || !strings.Contains(err.Error(), "pull access denied") {
		t.Fatalf("denied pull: err = %v", err)
	}
	if d := cmp.Diff([]string{"localhost:5000/tools:latest", "private/x:latest"}, e.Pulls()); d != "" {
		t.Fatalf("pulls (-want +got):\n%s", d)
	}
}

func TestDockerUnreachable(t *testing.T) {
	d := NewDocker(filepath.Join(t.TempDir(), "nope.sock"))
	err := d.EnsureImage(context.Background(), "alpine")
	if err == nil || !strings.Contains(err.Error(), "docker engine not reachable") {
		t.Fatalf("err = %v", err)
	}
}
