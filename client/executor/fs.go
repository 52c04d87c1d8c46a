package executor

import (
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/baton-engine/baton/executor/proto"
)

// How a view is mounted (FileMounts.Mode).
const (
	MountAuto = "auto" // FUSE where it can mount, else a synced directory
	MountFUSE = "fuse" // FUSE only: a view that cannot be mounted fails
	MountSync = "sync" // a synced directory only
)

// FileMounts configures how the executor serves fs.mount and fs.unmount:
// the views of a session's files the harness hands a machine-scoped
// executor. With it set, executor.register declares capabilities.fs.
type FileMounts struct {
	// Root is put before every view path: with Root "/srv/baton" the view
	// path "/sessions/sbx_1/workspace" (Baton names a directory of its own
	// for each executor session) is mounted at
	// /srv/baton/sessions/sbx_1/workspace. Empty mounts at the paths as
	// the harness names them. A process.exec cwd in a mounted view is
	// mapped the same way (ExecRequest.Cwd).
	Root string
	// Mode is MountAuto (the default), MountFUSE or MountSync.
	Mode string
	// SyncInterval is how often a synced directory uploads its changes
	// (default 5s). It uploads them at fs.unmount with flush and when the
	// executor closes, too.
	SyncInterval time.Duration
	// AllowOther lets users other than the executor's reach FUSE mounts
	// (the allow_other mount option; it needs user_allow_other in
	// /etc/fuse.conf unless the executor runs as root).
	AllowOther bool
}

func (f *FileMounts) validate() error {
	switch f.Mode {
	case "", MountAuto, MountFUSE, MountSync:
	default:
		return fmt.Errorf("Files.Mode %q must be %q, %q or %q", f.Mode, MountAuto, MountFUSE, MountSync)
	}
	if f.Root != "" && !filepath.IsAbs(f.Root) {
		return fmt.Errorf("Files.Root %q must be absolute", f.Root)
	}
	return nil
}

func (f FileMounts) withDefaults() FileMounts {
	if f.Mode == "" {
		f.Mode = MountAuto
	}
	if f.SyncInterval <= 0 {
		f.SyncInterval = 5 * time.Second
	}
	return f
}

// mountImpl is a mounted view: a FUSE file system or a synced directory.
type mountImpl interface {
	// unmount ends the mount; with flush it first uploads what was
	// written and not yet uploaded.
	unmount(ctx context.Context, flush bool) error
	kind() string // MountFUSE or MountSync
}

type viewKey struct{ session, view string }

// viewMount is one mounted view.
type viewMount struct {
	key      viewKey
	path     string // the view path fs.mount named, cleaned
	dir      string // the local mount point
	url      string
	readonly bool
	remote   *remote
	impl     mountImpl
}

// fileMounts is the executor's table of mounted views, idempotent by
// (session_id, view).
type fileMounts struct {
	e   *Executor
	cfg FileMounts

	ops sync.Mutex // one fs.mount, fs.unmount or shutdown at a time

	mu       sync.Mutex
	views    map[viewKey]*viewMount
	watching bool // the shutdown watcher runs
	closed   bool // the executor stopped: no more mounts
}

func newFileMounts(e *Executor, cfg FileMounts) *fileMounts {
	return &fileMounts{e: e, cfg: cfg.withDefaults(), views: make(map[viewKey]*viewMount)}
}

// unmountTimeout bounds the flush and unmount of one view.
const unmountTimeout = time.Minute

// onFsMount serves fs.mount: it mounts each view (a new view, or one
// whose path, read-only flag or service URL changed) or renews its
// token, on a goroutine of its own, and answers {mounted:[view]}.
func (e *Executor) onFsMount(r *request) (any, *RPCError) {
	if e.files == nil {
		return nil, capabilityMissing("fs.fuse")
	}
	var p proto.FsMountParams
	if rerr := decodeParams(r.params, &p); rerr != nil {
		return nil, rerr
	}
	if rerr := require("session_id", p.SessionID); rerr != nil {
		return nil, rerr
	}
	for i, v := range p.Views {
		switch {
		case v.View == "":
			return nil, rpcErr(CodeInvalidParams, fmt.Sprintf("invalid params: views[%d].view is required", i), nil)
		case !strings.HasPrefix(v.Path, "/"):
			return nil, rpcErr(CodeInvalidParams, fmt.Sprintf("invalid params: views[%d].path must be absolute", i), nil)
		case !strings.HasPrefix(v.ServiceURL, "http://") && !strings.HasPrefix(v.ServiceURL, "https://"):
			return nil, rpcErr(CodeInvalidParams, fmt.Sprintf("invalid params: views[%d].service_url must be http(s)", i), nil)
		}
	}
	if !e.goWork(func() { r.reply(e.files.mount(p)) }) {
		return nil, rpcErr(CodeInternal, "executor is closing", nil)
	}
	return later{}, nil
}

// onFsUnmount serves fs.unmount: every view of the session is unmounted
// (after an upload of pending writes with flush) and its token dropped.
func (e *Executor) onFsUnmount(r *request) (any, *RPCError) {
	if e.files == nil {
		return nil, capabilityMissing("fs.fuse")
	}
	var p proto.FsUnmountParams
	if rerr := decodeParams(r.params, &p); rerr != nil {
		return nil, rerr
	}
	if rerr := require("session_id", p.SessionID); rerr != nil {
		return nil, rerr
	}
	if !e.goWork(func() {
		e.files.unmountSession(p.SessionID, p.Flush)
		r.reply(struct {
			Status string `json:"status"`
		}{"unmounted"}, nil)
	}) {
		return nil, rpcErr(CodeInternal, "executor is closing", nil)
	}
	return later{}, nil
}

func (m *fileMounts) mount(p proto.FsMountParams) (any, *RPCError) {
	m.ops.Lock()
	defer m.ops.Unlock()
	if !m.watch() {
		return nil, rpcErr(CodeInternal, "executor is closing", nil)
	}
	res := proto.FsMountResult{Mounted: []string{}}
	for _, v := range p.Views {
		k := viewKey{p.SessionID, v.View}
		dir := m.localDir(v.Path)
		m.mu.Lock()
		cur := m.views[k]
		var clash *viewMount
		for _, o := range m.views {
			if o.dir == dir && o.key != k {
				clash = o
			}
		}
		m.mu.Unlock()
		if clash != nil {
			return nil, rpcErr(CodeConflict, fmt.Sprintf("%s is where view %s of session %s is mounted", v.Path, clash.key.view, clash.key.session),
				map[string]string{"reason": "path_in_use", "view": v.View})
		}
		if cur != nil && cur.dir == dir && cur.readonly == v.Readonly && cur.url == v.ServiceURL {
			cur.remote.setToken(v.Token) // a renewal: the mount stays
			res.Mounted = append(res.Mounted, v.View)
			continue
		}
		if cur != nil {
			m.drop(cur, true)
		}
		vm, err := m.mountView(k, dir, v)
		if err != nil {
			m.e.log.Error("executor: mount failed", "session", p.SessionID, "view", v.View, "path", dir, "err", err)
			return nil, rpcErr(CodeInternal, fmt.Sprintf("mount view %s at %s: %v", v.View, v.Path, err),
				map[string]string{"reason": "mount_failed", "view": v.View})
		}
		m.mu.Lock()
		m.views[k] = vm
		m.mu.Unlock()
		m.e.log.Info("executor: view mounted", "session", p.SessionID, "view", v.View, "path", dir, "mode", vm.impl.kind(), "readonly", v.Readonly)
		res.Mounted = append(res.Mounted, v.View)
	}
	return res, nil
}

// localDir is where a view path is mounted here.
func (m *fileMounts) localDir(p string) string {
	return filepath.Join(m.cfg.Root, filepath.FromSlash(path.Clean(p)))
}

// localPath maps p, a path the harness names for session sessionID (such
// as process.exec's cwd), to the local directory when it lies in one of
// the session's mounted views: with Root "/srv/baton", the view path
// "/sessions/sbx_1/workspace" and p "/sessions/sbx_1/workspace/src" it is
// "/srv/baton/sessions/sbx_1/workspace/src". Any other p is returned as
// it is.
func (m *fileMounts) localPath(sessionID, p string) string {
	if !strings.HasPrefix(p, "/") {
		return p
	}
	clean := path.Clean(p)
	for _, vm := range m.of(func(k viewKey) bool { return k.session == sessionID }) {
		if rel, ok := strings.CutPrefix(clean, vm.path); ok && (rel == "" || strings.HasPrefix(rel, "/") || vm.path == "/") {
			return filepath.Join(vm.dir, filepath.FromSlash(rel))
		}
	}
	return p
}

// mountView mounts one view as the mode says.
func (m *fileMounts) mountView(k viewKey, dir string, v proto.FsView) (*viewMount, error) {
	if dir == filepath.Clean(m.cfg.Root) || dir == string(filepath.Separator) {
		return nil, errors.New("a view cannot be mounted at the root")
	}
	vm := &viewMount{key: k, path: path.Clean(v.Path), dir: dir, url: v.ServiceURL, readonly: v.Readonly,
		remote: newRemote(v.ServiceURL, v.Token, m.e.cfg.HTTPClient)}
	var err error
	if m.cfg.Mode != MountSync {
		vm.impl, err = mountFUSE(dir, vm.remote, v.Readonly, m.cfg.AllowOther, m.e.log)
		if err == nil || m.cfg.Mode == MountFUSE {
			return vm, err
		}
		m.e.log.Warn("executor: FUSE cannot mount; syncing a directory instead", "path", dir, "err", err)
	}
	vm.impl, err = startSync(m.e, dir, vm.remote, v.Readonly, m.cfg.SyncInterval)
	return vm, err
}

// drop unmounts vm and forgets it and its token.
func (m *fileMounts) drop(vm *viewMount, flush bool) {
	m.mu.Lock()
	if m.views[vm.key] == vm {
		delete(m.views, vm.key)
	}
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), unmountTimeout)
	defer cancel()
	if err := vm.impl.unmount(ctx, flush && !vm.readonly); err != nil {
		m.e.log.Error("executor: unmount", "session", vm.key.session, "view", vm.key.view, "path", vm.dir, "err", err)
	}
	vm.remote.setToken("")
}

func (m *fileMounts) unmountSession(sessionID string, flush bool) {
	m.ops.Lock()
	defer m.ops.Unlock()
	for _, vm := range m.of(func(k viewKey) bool { return k.session == sessionID }) {
		m.drop(vm, flush)
	}
}

// of returns the mounted views whose key matches.
func (m *fileMounts) of(match func(viewKey) bool) []*viewMount {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*viewMount
	for k, vm := range m.views {
		if match(k) {
			out = append(out, vm)
		}
	}
	return out
}

// watch starts, once, the goroutine that unmounts every view (flushing
// writes) when the executor stops; false means it is stopping already.
func (m *fileMounts) watch() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	if m.watching {
		return true
	}
	m.watching = m.e.goWork(func() {
		<-m.e.life.Done()
		m.ops.Lock()
		defer m.ops.Unlock()
		m.mu.Lock()
		m.closed = true
		m.mu.Unlock()
		for _, vm := range m.of(func(viewKey) bool { return true }) {
			m.drop(vm, true)
		}
	})
	return m.watching
}

// mounted reports the views of a session mounted now and how, for tests
// and diagnostics: view name → MountFUSE or MountSync.
func (m *fileMounts) mounted(sessionID string) map[string]string {
	out := map[string]string{}
	for _, vm := range m.of(func(k viewKey) bool { return k.session == sessionID }) {
		out[vm.key.view] = vm.impl.kind()
	}
	return out
}
