//go:build linux

package executor

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// mountOrSkip mounts the view with FUSE only, skipping the test with the
// executor's own reason when FUSE cannot mount here.
func mountOrSkip(t *testing.T, fc *fakeConn, params map[string]any) {
	t.Helper()
	f := fc.call(t, "fs.mount", params)
	if f.Error != nil {
		if (*RPCError)(f.Error).Reason() == "mount_failed" {
			t.Skipf("FUSE cannot mount here: %s", f.Error.Message)
		}
		t.Fatalf("fs.mount: %v", f.Error)
	}
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() {
			n += "/"
		}
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// The FUSE mount reads from and writes through to the file service.
func TestFsFUSE(t *testing.T) {
	h := newHarness(t)
	e, fc, root, _ := machine(t, h, MountFUSE)
	f := newFakeFiles(t, map[string]string{"a.txt": "alpha", "d/b.txt": "beta"})
	f.allow("tok1", "tok2")
	mountOrSkip(t, fc, mountParams("ses_1", view(f, "ses_1", "tok1", false)))
	if got := e.files.mounted("ses_1"); got["workspace"] != MountFUSE {
		t.Fatalf("mounted as %v", got)
	}
	dir := filepath.Join(root, "workspace")

	if b, err := os.ReadFile(filepath.Join(dir, "d/b.txt")); err != nil || string(b) != "beta" {
		t.Errorf("read through the mount: %q %v", b, err)
	}
	if diff := cmp.Diff([]string{"a.txt", "d/"}, names(t, dir)); diff != "" {
		t.Errorf("listing (-want +got):\n%s", diff)
	}
	// A write is on the server once the file is closed.
	if err := os.WriteFile(filepath.Join(dir, "d/new.txt"), []byte("fresh"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := f.snapshot()["d/new.txt"]; got != "fresh" {
		t.Errorf("server after a write: %q", got)
	}
	// Changes on the server show on the next open.
	f.set("a.txt", "ALPHA")
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "ALPHA" {
		t.Errorf("read after a server change: %q", b)
	}
	// Appending keeps what was there.
	af, err := os.OpenFile(filepath.Join(dir, "a.txt"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	af.Write([]byte("+"))
	if err := af.Close(); err != nil {
		t.Fatal(err)
	}
	if got := f.snapshot()["a.txt"]; got != "ALPHA+" {
		t.Errorf("after an append: %q", got)
	}
	// Directories: made here until a file lands in them.
	if err := os.MkdirAll(filepath.Join(dir, "x/y"), 0o755); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a.txt", "d/", "x/"}, names(t, dir)); diff != "" {
		t.Errorf("listing with a new directory (-want +got):\n%s", diff)
	}
	if err := os.WriteFile(filepath.Join(dir, "x/y/z"), []byte("zz"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "d")); !errors.Is(err, syscall.ENOTEMPTY) && !errors.Is(err, syscall.EEXIST) {
		t.Errorf("rmdir of a directory with files: %v", err)
	}
	// Rename and remove.
	if err := os.Rename(filepath.Join(dir, "d/new.txt"), filepath.Join(dir, "x/moved.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "d/b.txt")); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a.txt": "ALPHA+", "x/y/z": "zz", "x/moved.txt": "fresh"}
	if diff := cmp.Diff(want, f.snapshot()); diff != "" {
		t.Errorf("server after rename and remove (-want +got):\n%s", diff)
	}
	// Truncation.
	if err := os.Truncate(filepath.Join(dir, "a.txt"), 2); err != nil {
		t.Fatal(err)
	}
	if got := f.snapshot()["a.txt"]; got != "AL" {
		t.Errorf("after truncate: %q", got)
	}

	// A renewed token is used from then on, without a remount.
	before := e.files.of(func(viewKey) bool { return true })[0]
	fc.result(t, "fs.mount", mountParams("ses_1", view(f, "ses_1", "tok2", false)), nil)
	if after := e.files.of(func(viewKey) bool { return true })[0]; after != before {
		t.Error("a token renewal remounted the view")
	}
	os.ReadFile(filepath.Join(dir, "x/moved.txt"))
	if got := f.tokens(); got[len(got)-1] != "tok2" {
		t.Errorf("tokens used: %v", got)
	}

	// A file held open with unflushed writes is uploaded by an unmount
	// with flush.
	open, err := os.OpenFile(filepath.Join(dir, "held"), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := open.Write([]byte("pending")); err != nil {
		t.Fatal(err)
	}
	fc.result(t, "fs.unmount", map[string]any{"session_id": "ses_1", "flush": true}, nil)
	open.Close()
	if got := f.snapshot()["held"]; got != "pending" {
		t.Errorf("unmount with flush left %q", got)
	}
	// Unmounted: the directory is a plain, empty one again.
	if got := names(t, dir); len(got) != 0 {
		t.Errorf("after unmount the directory holds %v", got)
	}
}

func TestFsFUSEReadonly(t *testing.T) {
	h := newHarness(t)
	_, fc, root, _ := machine(t, h, MountFUSE)
	f := newFakeFiles(t, map[string]string{"a.txt": "alpha"})
	f.allow("t")
	mountOrSkip(t, fc, mountParams("ses_1", view(f, "ses_1", "t", true)))
	dir := filepath.Join(root, "workspace")
	if b, err := os.ReadFile(filepath.Join(dir, "a.txt")); err != nil || string(b) != "alpha" {
		t.Errorf("read: %q %v", b, err)
	}
	for what, err := range map[string]error{
		"write":  os.WriteFile(filepath.Join(dir, "a.txt"), []byte("x"), 0o644),
		"create": os.WriteFile(filepath.Join(dir, "b.txt"), []byte("x"), 0o644),
		"remove": os.Remove(filepath.Join(dir, "a.txt")),
		"mkdir":  os.Mkdir(filepath.Join(dir, "d"), 0o755),
	} {
		if !errors.Is(err, syscall.EROFS) {
			t.Errorf("%s on a read-only view: %v", what, err)
		}
	}
	if diff := cmp.Diff(map[string]string{"a.txt": "alpha"}, f.snapshot()); diff != "" {
		t.Errorf("server (-want +got):\n%s", diff)
	}
	fc.result(t, "fs.unmount", map[string]any{"session_id": "ses_1", "flush": true}, nil)
}
