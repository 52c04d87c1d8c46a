//go:build windows

package store

import (
	"errors"
	"os"
	"syscall"
)

// openLocked opens (or creates) the lock file with no sharing allowed: while
// this handle is open, every other open of the file, from this process or
// another, fails with a sharing violation.
func openLocked(name string) (*os.File, error) {
	p, err := syscall.UTF16PtrFromString(name)
	if err != nil {
		return nil, err
	}
	h, err := syscall.CreateFile(p, syscall.GENERIC_READ|syscall.GENERIC_WRITE, 0, nil,
		syscall.OPEN_ALWAYS, syscall.FILE_ATTRIBUTE_NORMAL, 0)
	if err != nil {
		const errorSharingViolation syscall.Errno = 32
		if errors.Is(err, errorSharingViolation) {
			return nil, errWouldBlock
		}
		return nil, err
	}
	return os.NewFile(uintptr(h), name), nil
}
