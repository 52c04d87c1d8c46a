package store

import (
	"errors"
	"fmt"
	"os"
)

// ErrLocked is returned by Open when another store handle, in this process
// or another one, already has the SQLite file open: a SQLite database
// serves one Baton process. Several nodes need PostgreSQL.
var ErrLocked = errors.New("store: SQLite database is in use by another Baton process (SQLite is single-node; use PostgreSQL to run several nodes)")

// lockPath is the lock file kept beside a SQLite database.
func lockPath(path string) string { return path + ".lock" }

// fileLock is the exclusive lock an open SQLite store holds on its lock
// file for its whole life; closing the file (or the process ending, however
// it ends) releases it. The file is never removed: removing a lock file
// lets two processes lock two different files of the same name.
type fileLock struct{ f *os.File }

// lockFile takes the lock on path's lock file without waiting, creating
// the file (mode 0600) when it is missing.
func lockFile(path string) (*fileLock, error) {
	f, err := openLocked(lockPath(path))
	if errors.Is(err, errWouldBlock) {
		return nil, fmt.Errorf("%w: %s is locked", ErrLocked, lockPath(path))
	}
	if err != nil {
		return nil, fmt.Errorf("store: lock %s: %w", lockPath(path), err)
	}
	return &fileLock{f: f}, nil
}

func (l *fileLock) release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// errWouldBlock is what openLocked reports when another holder has the lock.
var errWouldBlock = errors.New("lock held")
