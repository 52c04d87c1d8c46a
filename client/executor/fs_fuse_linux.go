//go:build linux

package executor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// maxOpenFile bounds a file held open for writing; the server caps files
// far below it.
const maxOpenFile = 1 << 30

// fuseMount is a view mounted as a FUSE file system that reads from and
// writes to the file service. Directories are implicit on the server, so
// a directory made with mkdir lives here until a file is written in it.
// An open file is held in memory: opened for writing it is uploaded
// whole when it is flushed (close, fsync) and when the view unmounts with
// flush. Remote calls ignore the kernel's interrupts (Go programs reading
// the mount get SIGURG all the time) and are bounded by remoteTimeout.
type fuseMount struct {
	dir    string
	server *fuse.Server
	st     *fuseState
}

// fuseState is what every node of one mount shares.
type fuseState struct {
	r        *remote
	readonly bool
	log      *slog.Logger

	mu      sync.Mutex
	dirs    map[string]bool           // directories made here, not on the server (yet)
	handles map[*fuseHandle]*fuseFile // open files
}

// mountFUSE mounts the view at dir.
func mountFUSE(dir string, r *remote, readonly, allowOther bool, log *slog.Logger) (mountImpl, error) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return nil, fmt.Errorf("no FUSE device: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	st := &fuseState{r: r, readonly: readonly, log: log, dirs: map[string]bool{}, handles: map[*fuseHandle]*fuseFile{}}
	second, none := time.Second, time.Duration(0)
	opts := &fusefs.Options{
		EntryTimeout: &second, AttrTimeout: &second, NegativeTimeout: &none,
		MountOptions: fuse.MountOptions{
			FsName: "baton", Name: "baton", DirectMount: true, AllowOther: allowOther,
			Logger: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		},
	}
	server, err := fusefs.Mount(dir, &fuseDir{st: st}, opts)
	if err != nil {
		return nil, err
	}
	return &fuseMount{dir: dir, server: server, st: st}, nil
}

func (m *fuseMount) kind() string { return MountFUSE }

func (m *fuseMount) unmount(ctx context.Context, flush bool) error {
	var errs []error
	if flush {
		m.st.mu.Lock()
		open := make([]*fuseHandle, 0, len(m.st.handles))
		for h := range m.st.handles {
			open = append(open, h)
		}
		m.st.mu.Unlock()
		for _, h := range open {
			if errno := h.Flush(ctx); errno != 0 {
				errs = append(errs, fmt.Errorf("flush an open file: %w", errno))
			}
		}
	}
	if err := m.server.Unmount(); err != nil {
		// Busy (a process has a file open or its working directory
		// there): detach it now; the kernel finishes when it is left.
		if lerr := syscall.Unmount(m.dir, syscall.MNT_DETACH); lerr != nil {
			return errors.Join(append(errs, fmt.Errorf("unmount: %w", err))...)
		}
		return errors.Join(errs...)
	}
	m.server.Wait()
	return errors.Join(errs...)
}

// call runs a remote call with its own deadline.
func (st *fuseState) call(fn func(ctx context.Context) error) syscall.Errno {
	ctx, cancel := context.WithTimeout(context.Background(), remoteTimeout)
	defer cancel()
	return st.errno(fn(ctx))
}

// errno maps a file service error.
func (st *fuseState) errno(err error) syscall.Errno {
	var errno syscall.Errno
	switch {
	case err == nil:
		return 0
	case errors.As(err, &errno):
		return errno
	case errors.Is(err, fs.ErrNotExist):
		return syscall.ENOENT
	case errors.Is(err, fs.ErrPermission):
		if st.readonly {
			return syscall.EROFS
		}
		return syscall.EACCES
	case errors.Is(err, errRemoteConflict):
		if strings.Contains(err.Error(), "is a directory") {
			return syscall.EISDIR
		}
		return syscall.ENOTDIR
	case errors.Is(err, errRemoteTooLarge):
		return syscall.EFBIG
	case errors.Is(err, errRemoteInvalid):
		return syscall.EINVAL
	}
	st.log.Warn("executor: file service", "err", err)
	return syscall.EIO
}

func (st *fuseState) mode(dir bool) uint32 {
	switch {
	case dir && st.readonly:
		return syscall.S_IFDIR | 0o555
	case dir:
		return syscall.S_IFDIR | 0o755
	case st.readonly:
		return syscall.S_IFREG | 0o444
	}
	return syscall.S_IFREG | 0o644
}

func (st *fuseState) fill(a *fuse.Attr, dir bool, size int64, mtime time.Time) {
	a.Mode = st.mode(dir)
	if dir {
		a.Nlink = 2
	} else {
		a.Nlink = 1
		a.Size = uint64(size)
		a.Blocks = (uint64(size) + 511) / 512
	}
	if !mtime.IsZero() {
		a.SetTimes(nil, &mtime, &mtime)
	}
}

// nodePath is the slash path of a node below the view's root ("" for
// the root).
func nodePath(n *fusefs.Inode) string { return n.Path(nil) }

// fuseDir is a directory node.
type fuseDir struct {
	fusefs.Inode
	st *fuseState
}

var (
	_ fusefs.NodeGetattrer = (*fuseDir)(nil)
	_ fusefs.NodeLookuper  = (*fuseDir)(nil)
	_ fusefs.NodeReaddirer = (*fuseDir)(nil)
	_ fusefs.NodeMkdirer   = (*fuseDir)(nil)
	_ fusefs.NodeRmdirer   = (*fuseDir)(nil)
	_ fusefs.NodeCreater   = (*fuseDir)(nil)
	_ fusefs.NodeUnlinker  = (*fuseDir)(nil)
	_ fusefs.NodeRenamer   = (*fuseDir)(nil)
)

func (d *fuseDir) child(name string) string { return path.Join(nodePath(&d.Inode), name) }

func (d *fuseDir) Getattr(_ context.Context, _ fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.st.fill(&out.Attr, true, 0, time.Time{})
	return 0
}

func (d *fuseDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	p := d.child(name)
	var e *remoteEntry
	errno := d.st.call(func(ctx context.Context) (err error) {
		e, err = d.st.r.stat(ctx, p)
		return err
	})
	switch {
	case errno == syscall.ENOENT && d.st.localDir(p):
		e = &remoteEntry{Type: "directory"}
	case errno != 0:
		return nil, errno
	}
	d.st.fill(&out.Attr, e.isDir(), e.Size, e.UpdatedAt)
	if e.isDir() {
		return d.NewInode(ctx, &fuseDir{st: d.st}, fusefs.StableAttr{Mode: syscall.S_IFDIR}), 0
	}
	return d.NewInode(ctx, &fuseFile{st: d.st}, fusefs.StableAttr{Mode: syscall.S_IFREG}), 0
}

func (st *fuseState) localDir(p string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.dirs[p]
}

func (d *fuseDir) Readdir(context.Context) (fusefs.DirStream, syscall.Errno) {
	dir := nodePath(&d.Inode)
	var entries []remoteEntry
	errno := d.st.call(func(ctx context.Context) (err error) {
		entries, err = d.st.r.list(ctx, dir, false)
		return err
	})
	if errno == syscall.ENOENT && (dir == "" || d.st.localDir(dir)) {
		errno = 0 // an empty directory made here
	}
	if errno != 0 {
		return nil, errno
	}
	seen := map[string]bool{}
	list := make([]fuse.DirEntry, 0, len(entries))
	for _, e := range entries {
		if !safePath(e.Name) || strings.Contains(e.Name, "/") {
			continue // not a child name
		}
		seen[e.Name] = true
		list = append(list, fuse.DirEntry{Name: e.Name, Mode: d.st.mode(e.isDir())})
	}
	d.st.mu.Lock()
	for p := range d.st.dirs {
		if path.Dir(p) == dir || (dir == "" && !strings.Contains(p, "/")) {
			if name := path.Base(p); !seen[name] {
				list = append(list, fuse.DirEntry{Name: name, Mode: d.st.mode(true)})
			}
		}
	}
	d.st.mu.Unlock()
	return fusefs.NewListDirStream(list), 0
}

func (d *fuseDir) Mkdir(ctx context.Context, name string, _ uint32, out *fuse.EntryOut) (*fusefs.Inode, syscall.Errno) {
	if d.st.readonly {
		return nil, syscall.EROFS
	}
	p := d.child(name)
	errno := d.st.call(func(ctx context.Context) error {
		_, err := d.st.r.stat(ctx, p)
		return err
	})
	switch {
	case errno == 0 || d.st.localDir(p):
		return nil, syscall.EEXIST
	case errno != syscall.ENOENT:
		return nil, errno
	}
	d.st.mu.Lock()
	d.st.dirs[p] = true
	d.st.mu.Unlock()
	d.st.fill(&out.Attr, true, 0, time.Now())
	return d.NewInode(ctx, &fuseDir{st: d.st}, fusefs.StableAttr{Mode: syscall.S_IFDIR}), 0
}

func (d *fuseDir) Rmdir(_ context.Context, name string) syscall.Errno {
	if d.st.readonly {
		return syscall.EROFS
	}
	p := d.child(name)
	var e *remoteEntry
	errno := d.st.call(func(ctx context.Context) (err error) {
		e, err = d.st.r.stat(ctx, p)
		return err
	})
	switch {
	case errno == 0 && e.isDir():
		return syscall.ENOTEMPTY // the server has files below it
	case errno == 0:
		return syscall.ENOTDIR
	case errno != syscall.ENOENT:
		return errno
	}
	d.st.mu.Lock()
	defer d.st.mu.Unlock()
	if !d.st.dirs[p] {
		return syscall.ENOENT
	}
	for q := range d.st.dirs {
		if strings.HasPrefix(q, p+"/") {
			return syscall.ENOTEMPTY
		}
	}
	delete(d.st.dirs, p)
	return 0
}

// Create makes the file on the server at once (empty), so that it shows
// in listings and a refusal (read-only, a file in the way) comes now.
func (d *fuseDir) Create(ctx context.Context, name string, _, _ uint32, out *fuse.EntryOut) (*fusefs.Inode, fusefs.FileHandle, uint32, syscall.Errno) {
	if d.st.readonly {
		return nil, nil, 0, syscall.EROFS
	}
	p := d.child(name)
	if errno := d.st.call(func(ctx context.Context) error { return d.st.r.write(ctx, p, nil) }); errno != 0 {
		return nil, nil, 0, errno
	}
	d.st.dropDirsAbove(p)
	f := &fuseFile{st: d.st}
	d.st.fill(&out.Attr, false, 0, time.Now())
	n := d.NewInode(ctx, f, fusefs.StableAttr{Mode: syscall.S_IFREG})
	return n, d.st.open(f, []byte{}, false), 0, 0
}

// dropDirsAbove forgets the local directories above p: the server has
// them now.
func (st *fuseState) dropDirsAbove(p string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for q := path.Dir(p); q != "." && q != "/" && q != ""; q = path.Dir(q) {
		delete(st.dirs, q)
	}
}

func (d *fuseDir) Unlink(_ context.Context, name string) syscall.Errno {
	if d.st.readonly {
		return syscall.EROFS
	}
	p := d.child(name)
	return d.st.call(func(ctx context.Context) error { return d.st.r.remove(ctx, p) })
}

// Rename moves a file (a copy and a delete on the server). Directories
// answer EXDEV, which makes mv(1) and friends copy them instead.
func (d *fuseDir) Rename(_ context.Context, name string, newParent fusefs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if d.st.readonly {
		return syscall.EROFS
	}
	if flags&fusefs.RENAME_EXCHANGE != 0 {
		return syscall.EINVAL
	}
	to, ok := newParent.(*fuseDir)
	if !ok {
		return syscall.EXDEV
	}
	from, dst := d.child(name), to.child(newName)
	return d.st.call(func(ctx context.Context) error {
		e, err := d.st.r.stat(ctx, from)
		if errors.Is(err, fs.ErrNotExist) && d.st.localDir(from) {
			return syscall.EXDEV
		}
		if err != nil {
			return err
		}
		if e.isDir() {
			return syscall.EXDEV
		}
		if flags&1 != 0 { // RENAME_NOREPLACE
			if _, err := d.st.r.stat(ctx, dst); err == nil {
				return syscall.EEXIST
			}
		}
		content, err := d.st.r.read(ctx, from)
		if err != nil {
			return err
		}
		if err := d.st.r.write(ctx, dst, content); err != nil {
			return err
		}
		d.st.dropDirsAbove(dst)
		return d.st.r.remove(ctx, from)
	})
}

// fuseFile is a file node.
type fuseFile struct {
	fusefs.Inode
	st *fuseState
}

var (
	_ fusefs.NodeGetattrer = (*fuseFile)(nil)
	_ fusefs.NodeOpener    = (*fuseFile)(nil)
	_ fusefs.NodeSetattrer = (*fuseFile)(nil)
)

func (f *fuseFile) Getattr(ctx context.Context, fh fusefs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if h, ok := fh.(*fuseHandle); ok {
		return h.Getattr(ctx, out)
	}
	p := nodePath(&f.Inode)
	var e *remoteEntry
	errno := f.st.call(func(ctx context.Context) (err error) {
		e, err = f.st.r.stat(ctx, p)
		return err
	})
	if errno != 0 {
		return errno
	}
	f.st.fill(&out.Attr, false, e.Size, e.UpdatedAt)
	return 0
}

func (f *fuseFile) Open(_ context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	write := flags&(syscall.O_WRONLY|syscall.O_RDWR) != 0
	trunc := flags&syscall.O_TRUNC != 0
	if f.st.readonly && (write || trunc) {
		return nil, 0, syscall.EROFS
	}
	if trunc {
		return f.st.open(f, []byte{}, true), 0, 0
	}
	p := nodePath(&f.Inode)
	var content []byte
	errno := f.st.call(func(ctx context.Context) (err error) {
		content, err = f.st.r.read(ctx, p)
		return err
	})
	if errno != 0 {
		return nil, 0, errno
	}
	return f.st.open(f, content, false), 0, 0
}

// Setattr changes the size (truncate); modes, owners and times are
// accepted and not kept.
func (f *fuseFile) Setattr(ctx context.Context, fh fusefs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	size, resize := in.GetSize()
	if resize && f.st.readonly {
		return syscall.EROFS
	}
	if h, ok := fh.(*fuseHandle); ok {
		if resize {
			if errno := h.truncate(int64(size)); errno != 0 {
				return errno
			}
		}
		return h.Getattr(ctx, out)
	}
	if resize {
		p := nodePath(&f.Inode)
		errno := f.st.call(func(ctx context.Context) error {
			content, err := f.st.r.read(ctx, p)
			if err != nil {
				return err
			}
			return f.st.r.write(ctx, p, resized(content, int64(size)))
		})
		if errno != 0 {
			return errno
		}
	}
	return f.Getattr(ctx, nil, out)
}

func resized(b []byte, n int64) []byte {
	if int64(len(b)) >= n {
		return b[:n]
	}
	return append(b, make([]byte, n-int64(len(b)))...)
}

// fuseHandle is an open file: its content in memory.
type fuseHandle struct {
	st   *fuseState
	node *fuseFile

	mu    sync.Mutex
	data  []byte
	dirty bool
	mtime time.Time
}

var (
	_ fusefs.FileReader    = (*fuseHandle)(nil)
	_ fusefs.FileWriter    = (*fuseHandle)(nil)
	_ fusefs.FileFlusher   = (*fuseHandle)(nil)
	_ fusefs.FileFsyncer   = (*fuseHandle)(nil)
	_ fusefs.FileReleaser  = (*fuseHandle)(nil)
	_ fusefs.FileGetattrer = (*fuseHandle)(nil)
)

func (st *fuseState) open(f *fuseFile, content []byte, dirty bool) *fuseHandle {
	h := &fuseHandle{st: st, node: f, data: content, dirty: dirty, mtime: time.Now()}
	st.mu.Lock()
	st.handles[h] = f
	st.mu.Unlock()
	return h
}

func (h *fuseHandle) Getattr(_ context.Context, out *fuse.AttrOut) syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.st.fill(&out.Attr, false, int64(len(h.data)), h.mtime)
	return 0
}

func (h *fuseHandle) Read(_ context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if off >= int64(len(h.data)) {
		return fuse.ReadResultData(nil), 0
	}
	end := min(off+int64(len(dest)), int64(len(h.data)))
	return fuse.ReadResultData(append([]byte(nil), h.data[off:end]...)), 0
}

func (h *fuseHandle) Write(_ context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if h.st.readonly {
		return 0, syscall.EROFS
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	end := off + int64(len(data))
	if end > maxOpenFile {
		return 0, syscall.EFBIG
	}
	if end > int64(len(h.data)) {
		h.data = resized(h.data, end)
	}
	copy(h.data[off:], data)
	h.dirty, h.mtime = true, time.Now()
	return uint32(len(data)), 0
}

func (h *fuseHandle) truncate(n int64) syscall.Errno {
	if n > maxOpenFile {
		return syscall.EFBIG
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.data = resized(h.data, n)
	h.dirty, h.mtime = true, time.Now()
	return 0
}

// Flush uploads the content when it changed since the last upload.
func (h *fuseHandle) Flush(context.Context) syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.dirty {
		return 0
	}
	p := nodePath(&h.node.Inode)
	if p == "" {
		h.dirty = false // the file was removed while open
		return 0
	}
	content := h.data
	errno := h.st.call(func(ctx context.Context) error { return h.st.r.write(ctx, p, content) })
	if errno == 0 {
		h.dirty = false
		h.st.dropDirsAbove(p)
	}
	return errno
}

func (h *fuseHandle) Fsync(ctx context.Context, _ uint32) syscall.Errno { return h.Flush(ctx) }

func (h *fuseHandle) Release(ctx context.Context) syscall.Errno {
	errno := h.Flush(ctx)
	h.st.mu.Lock()
	delete(h.st.handles, h)
	h.st.mu.Unlock()
	return errno
}
