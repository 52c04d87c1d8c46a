package sandboxtest

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Busybox returns the path of a statically linked busybox for building a
// root filesystem: Debian's busybox-static at /bin/busybox when that
// package is installed, else one unpacked from the package (apt-get
// download, dpkg-deb -x) into a cache directory. It skips t, saying why,
// when neither works.
func Busybox(t testing.TB) string {
	t.Helper()
	var reasons []string
	for _, p := range []string{"/bin/busybox", "/usr/bin/busybox"} {
		err := static(p)
		if err == nil {
			return p
		}
		reasons = append(reasons, err.Error())
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "baton-test", "busybox-static")
	if p, err := findStatic(dir); err == nil {
		return p
	}
	if err := unpackBusybox(dir); err != nil {
		reasons = append(reasons, err.Error())
		t.Skipf("no statically linked busybox for a test rootfs (install Debian's busybox-static): %s", strings.Join(reasons, "; "))
	}
	p, err := findStatic(dir)
	if err != nil {
		t.Skipf("no statically linked busybox in Debian's busybox-static package: %v", err)
	}
	return p
}

func findStatic(dir string) (string, error) {
	var errs []error
	for _, p := range []string{"bin/busybox", "usr/bin/busybox"} {
		err := static(filepath.Join(dir, p))
		if err == nil {
			return filepath.Join(dir, p), nil
		}
		errs = append(errs, err)
	}
	return "", errors.Join(errs...)
}

// static reports why the ELF file at path is not a statically linked
// executable (nil when it is).
func static(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked", path)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		return fmt.Errorf("%s needs %v", path, libs)
	}
	return nil
}

// unpackBusybox downloads Debian's busybox-static package and unpacks it
// into dir (atomically, so concurrent test binaries do not collide).
func unpackBusybox(dir string) error {
	for _, tool := range []string{"apt-get", "dpkg-deb"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found, so busybox-static cannot be downloaded", tool)
		}
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "unpack")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	dl := exec.Command("apt-get", "download", "busybox-static")
	dl.Dir = tmp
	if out, err := dl.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get download busybox-static: %v: %s", err, strings.TrimSpace(string(out)))
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, "busybox-static_*.deb"))
	if len(debs) != 1 {
		return fmt.Errorf("apt-get download busybox-static left %d packages", len(debs))
	}
	root := filepath.Join(tmp, "root")
	if out, err := exec.Command("dpkg-deb", "-x", debs[0], root).CombinedOutput(); err != nil {
		return fmt.Errorf("dpkg-deb -x: %v: %s", err, strings.TrimSpace(string(out)))
	}
	if err := os.Rename(root, dir); err != nil && !errors.Is(err, os.ErrExist) {
		if _, serr := os.Stat(dir); serr != nil { // another test binary won the race otherwise
			return err
		}
	}
	return nil
}

// Rootfs builds a minimal root filesystem named name under dir for the
// process sandbox driver: /bin/busybox (see Busybox) with a link for each
// applet, and /etc with root's passwd and group entries. It returns the
// rootfs path.
func Rootfs(t testing.TB, dir, name string) string {
	t.Helper()
	bb := Busybox(t)
	root := filepath.Join(dir, name)
	for _, d := range []string{"bin", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "busybox"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	list, err := exec.Command(bb, "--list").Output()
	if err != nil {
		t.Fatalf("busybox --list: %v", err)
	}
	for _, applet := range strings.Fields(string(list)) {
		if applet == "busybox" {
			continue
		}
		if err := os.Symlink("busybox", filepath.Join(root, "bin", applet)); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		"etc/passwd": "root:x:0:0:root:/work:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n",
		"etc/group":  "root:x:0:\nnogroup:x:65534:\n",
	}
	for p, content := range files {
		if err := os.WriteFile(filepath.Join(root, p), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}
