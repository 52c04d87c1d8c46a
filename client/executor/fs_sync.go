package executor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// maxSyncFile bounds the local files a synced directory uploads; the
// server caps files far below it.
const maxSyncFile = 1 << 30

// syncMount is a view mirrored into a local directory, for hosts where
// FUSE cannot mount: at mount the directory is made a copy of the view
// (files the view lacks are removed), and from then on local changes —
// new, changed and removed files — are uploaded every interval, at
// fs.unmount with flush and when the executor closes. Changes made on
// the server after the mount are not fetched. Only regular files are
// synced; symbolic links and other special files are left alone.
type syncMount struct {
	dir      string
	r        *remote
	readonly bool
	log      *slog.Logger

	mu   sync.Mutex        // one pass at a time
	base map[string]string // slash path → SHA-256 both sides had at the last pass
	bad  map[string]string // slash path → SHA-256 the server refused (not retried until it changes)

	stop chan struct{}
	done chan struct{}
}

// startSync downloads the view into dir and starts the upload loop, a
// goroutine of e's.
func startSync(e *Executor, dir string, r *remote, readonly bool, every time.Duration) (*syncMount, error) {
	s := &syncMount{dir: dir, r: r, readonly: readonly, log: e.log, base: map[string]string{}, bad: map[string]string{},
		stop: make(chan struct{}), done: make(chan struct{})}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), unmountTimeout)
	defer cancel()
	if err := s.pull(ctx); err != nil {
		return nil, err
	}
	if readonly {
		close(s.done)
		return s, nil
	}
	if !e.goWork(func() { s.loop(every) }) {
		return nil, ErrClosed
	}
	return s, nil
}

func (s *syncMount) kind() string { return MountSync }

func (s *syncMount) loop(every time.Duration) {
	defer close(s.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), unmountTimeout)
			if err := s.push(ctx); err != nil {
				s.log.Warn("executor: sync upload", "path", s.dir, "err", err)
			}
			cancel()
		}
	}
}

func (s *syncMount) unmount(ctx context.Context, flush bool) error {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
	if flush && !s.readonly {
		return s.push(ctx)
	}
	return nil
}

// local returns the local path of a slash path below the directory.
func (s *syncMount) local(p string) string { return filepath.Join(s.dir, filepath.FromSlash(p)) }

// pull makes the directory a copy of the view.
func (s *syncMount) pull(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	entries, err := s.r.list(ctx, "", true)
	if err != nil {
		return fmt.Errorf("list the view: %w", err)
	}
	want := make(map[string]bool, len(entries))
	for _, e := range entries {
		if e.isDir() {
			continue
		}
		if !safePath(e.Path) {
			return fmt.Errorf("the file service listed an unsafe path %q", e.Path)
		}
		want[e.Path] = true
		if sum, _, err := fileSum(s.local(e.Path)); err == nil && sum == e.SHA256 {
			s.base[e.Path] = sum
			if s.readonly {
				if err := os.Chmod(s.local(e.Path), 0o444); err != nil {
					return err
				}
			}
			continue
		}
		content, err := s.r.read(ctx, e.Path)
		if err != nil {
			return fmt.Errorf("download %s: %w", e.Path, err)
		}
		if err := writeAtomic(s.local(e.Path), content, s.readonly); err != nil {
			return fmt.Errorf("write %s: %w", e.Path, err)
		}
		s.base[e.Path] = sha(content)
	}
	return s.walk(func(p string) error {
		if want[p] {
			return nil
		}
		return os.Remove(s.local(p))
	})
}

// push uploads what changed in the directory since the last pass.
func (s *syncMount) push(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	seen := map[string]bool{}
	err := s.walk(func(p string) error {
		seen[p] = true
		sum, content, err := fileSum(s.local(p))
		if err != nil || sum == s.base[p] || sum == s.bad[p] {
			return nil // gone meanwhile, unchanged, or refused before
		}
		err = s.r.write(ctx, p, content)
		switch {
		case err == nil:
			s.base[p] = sum
			delete(s.bad, p)
		case errors.Is(err, errRemoteInvalid), errors.Is(err, errRemoteTooLarge), errors.Is(err, errRemoteConflict):
			s.bad[p] = sum
			s.log.Warn("executor: the file service refused a file", "path", p, "err", err)
		default:
			errs = append(errs, fmt.Errorf("upload %s: %w", p, err))
		}
		return nil
	})
	if err != nil {
		errs = append(errs, err)
	}
	for p := range s.base {
		if seen[p] {
			continue
		}
		if err := s.r.remove(ctx, p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("delete %s: %w", p, err))
			continue
		}
		delete(s.base, p)
	}
	return errors.Join(errs...)
}

// walk calls fn with the slash path of every regular file below the
// directory.
func (s *syncMount) walk(fn func(p string) error) error {
	return filepath.WalkDir(s.dir, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(s.dir, name)
		if err != nil {
			return err
		}
		return fn(filepath.ToSlash(rel))
	})
}

// fileSum reads a regular file and returns its SHA-256 and content.
func fileSum(name string) (string, []byte, error) {
	fi, err := os.Lstat(name)
	if err != nil {
		return "", nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxSyncFile {
		return "", nil, fmt.Errorf("%s is not a regular file of at most %d bytes", name, maxSyncFile)
	}
	content, err := os.ReadFile(name)
	if err != nil {
		return "", nil, err
	}
	return sha(content), content, nil
}

func sha(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// writeAtomic writes content at name through a temporary file and a
// rename, creating the directories above it.
func writeAtomic(name string, content []byte, readonly bool) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(name), "."+strings.TrimPrefix(filepath.Base(name), ".")+".baton-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(content)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	mode := os.FileMode(0o644)
	if readonly {
		mode = 0o444
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), mode)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), name)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
	}
	return err
}
