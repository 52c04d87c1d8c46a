//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd || windows)

package store

import "os"

// openLocked opens the lock file without locking it: this platform has no
// lock the store uses, so a second process is not refused here (SQLite's own
// locking still keeps the file consistent).
func openLocked(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
}
