//go:build unix

package store

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// withUmask runs fn with the process umask set to mask. The umask is
// process-wide, so callers must not run in parallel with other tests.
func withUmask(t *testing.T, mask int, fn func()) {
	t.Helper()
	old := syscall.Umask(mask)
	defer syscall.Umask(old)
	fn()
}

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

// TestSQLiteFilesArePrivate checks that a fresh store's database, WAL and
// shared-memory files are 0600 and the directories it creates 0700,
// whatever the umask: the database holds the key that signs executor
// tokens.
func TestSQLiteFilesArePrivate(t *testing.T) {
	for _, mask := range []int{0o022, 0o002, 0o000} {
		root := t.TempDir()
		path := filepath.Join(root, "data", "nested", "baton.db")
		withUmask(t, mask, func() {
			db, err := Open(context.Background(), Options{URL: path})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			// A committed write, so that the WAL and its index exist.
			if _, err := db.EnsureSetting(context.Background(), "test.mode", "x"); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{path, path + "-wal", path + "-shm"} {
				if m := mode(t, p); m != 0o600 {
					t.Errorf("umask %#o: %s has mode %#o, want 0600", mask, filepath.Base(p), m)
				}
			}
			for _, d := range []string{filepath.Join(root, "data"), filepath.Dir(path)} {
				if m := mode(t, d); m != 0o700 {
					t.Errorf("umask %#o: directory %s has mode %#o, want 0700", mask, d, m)
				}
			}
		})
	}
}

// TestSQLiteKeepsExistingModes checks that Open leaves the mode of an
// existing database alone (the operator is warned, not overruled), and
// that the files SQLite adds beside it follow the database's mode.
func TestSQLiteKeepsExistingModes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "baton.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	db := openURL(t, path)
	if _, err := db.EnsureSetting(context.Background(), "test.mode", "x"); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, path); m != 0o640 {
		t.Errorf("existing database mode changed to %#o, want 0640 kept", m)
	}
	if m := mode(t, path+"-wal"); m != 0o640 {
		t.Errorf("WAL mode %#o, want the database's 0640", m)
	}
}

func TestFiles(t *testing.T) {
	for _, c := range []struct {
		url, dir string
		files    []string
	}{
		{"/var/lib/bae/bae.db", "/var/lib/bae", []string{"/var/lib/bae/bae.db", "/var/lib/bae/bae.db-wal", "/var/lib/bae/bae.db-shm", "/var/lib/bae/bae.db-journal", "/var/lib/bae/bae.db.lock"}},
		{"file:/d/b.db?cache=private", "/d", []string{"/d/b.db", "/d/b.db-wal", "/d/b.db-shm", "/d/b.db-journal", "/d/b.db.lock"}},
		{"file:///d/b.db", "/d", []string{"/d/b.db", "/d/b.db-wal", "/d/b.db-shm", "/d/b.db-journal", "/d/b.db.lock"}},
		{"postgres://u@h/db", "", nil},
		{":memory:", "", nil},
	} {
		dir, files := Files(c.url)
		if dir != c.dir || !slices.Equal(files, c.files) {
			t.Errorf("Files(%q) = %q, %q; want %q, %q", c.url, dir, files, c.dir, c.files)
		}
	}
}
