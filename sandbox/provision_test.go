package sandbox

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton"
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

// fakeEngine serves the slice of the Docker Engine API that EnsureImage
// uses, on a unix socket.
type fakeEngine struct {
	mu     sync.Mutex
	images map[string]bool
	pulls  []string
	deny   string
}

func (e *fakeEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/images/") && strings.HasSuffix(r.URL.Path, "/json"):
		name := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/images/"), "/json")
		if !e.images[name] {
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"message":"No such image: ` + name + `"}`))
			return
		}
		w.Write([]byte(`{"Id":"sha256:abc"}`))
	case r.Method == http.MethodPost && r.URL.Path == "/images/create":
		ref := r.URL.Query().Get("fromImage") + ":" + r.URL.Query().Get("tag")
		e.pulls = append(e.pulls, ref)
		if ref == e.deny {
			w.Write([]byte(`{"status":"Pulling"}` + "\n" + `{"error":"pull access denied"}` + "\n"))
			return
		}
		e.images[ref] = true
		w.Write([]byte(`{"status":"Pulling"}` + "\n" + `{"status":"Downloaded"}` + "\n"))
	default:
		http.NotFound(w, r)
	}
}

func startFakeEngine(t *testing.T, e *fakeEngine) string {
	dir, err := os.MkdirTemp("", "dk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "docker.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: e}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock
}

func TestDockerEnsureImage(t *testing.T) {
	e := &fakeEngine{images: map[string]bool{"alpine:3": true}, deny: "private/x:latest"}
	d := NewDocker(startFakeEngine(t, e))
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
	if d := cmp.Diff([]string{"localhost:5000/tools:latest", "private/x:latest"}, e.pulls); d != "" {
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
