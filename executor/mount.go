package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/executor/proto"
)

// Session files on machine executors (bma.executor.v1.1 fs.mount / fs.unmount,
// bma.executor.v1.1 "Files and artifacts"). When the hub has
// Options.Files and an executor declared capabilities.fs {fuse: true}
// (bma.executor.v1.1: fs.mount needs the capability fs.fuse), the hub sends
// fs.mount with views of a Baton session's files:
//
//   - a remote shell (Shell.StartFor) right after session.ready, again
//     after every resume, and fs.unmount with flush before session.stop;
//   - a brain after the first turn.start of its agent session, again
//     after every resume, and fs.unmount with flush before session.close
//     (held, like session.close, until the executor answers).
//
// Views carry tokens minted for the binding's current epoch, so each
// resume (a new epoch) mounts them again, and so does a timer before the
// tokens run out (Options.FileRenew). The hub is the file service's
// filearea.Epochs: the tokens of an epoch that is no longer the binding's
// are refused.
//
// Each executor session mounts its views below a directory of its own:
// the path FileViews gives a view (e.g. "/workspace") is sent as
// proto.SessionViewPath, "/sessions/<executor session id>/workspace", so
// that one executor holds the files of several sessions at once — remote
// sandboxes (sbx_…) of different Baton sessions, and a brain session next
// to a sandbox of the same Baton session. A remote shell's commands run in
// its workspace view's directory (Shell.Exec sends it as cwd), and a
// brain's turn.start names it (metadata.workspace_path).

// FileViews mints the views of a session's files that fs.mount hands an
// executor, each with a token for one binding epoch (*Minter
// implements it).
type FileViews interface {
	For(sessionID string, epoch int64) ([]proto.FsView, error)
}

// DefaultFileRenew is how long mounted views serve before the hub sends
// fresh ones: half the default view token lifetime (24h).
const DefaultFileRenew = 12 * time.Hour

// mount is one executor session with a Baton session's files mounted: a
// remote shell's binding or a brain's agent session. Fields are guarded by
// Hub.mu, except ops.
type mount struct {
	area     string        // the Baton session whose files it shows
	cwd      string        // a shell's working directory: its workspace view's path
	b        *Binding      // a remote shell, or
	a        *agentSession // a brain
	epoch    int64         // the epoch of the views the executor has; 0: none yet, or due for renewal
	inflight bool          // a brain's fs.mount is on its way
	gone     bool          // unmounted, or its session ended
	renew    baton.Timer
	renewGen int

	ops sync.Mutex // a shell's fs.mount and fs.unmount, one at a time
}

// currentLocked is the binding's epoch now: the one whose tokens the file
// service takes.
func (m *mount) currentLocked() int64 {
	if m.b != nil {
		return m.b.epoch
	}
	return m.a.epoch()
}

// mounts is the hub's table of mounted session files, guarded by Hub.mu;
// its maps are made on first use.
type mounts struct {
	views     FileViews
	every     time.Duration
	byArea    map[string][]*mount
	byBinding map[*Binding]*mount
	byAgent   map[*agentSession]*mount
}

func (t *mounts) addLocked(m *mount) {
	if t.byArea == nil {
		t.byArea = map[string][]*mount{}
		t.byBinding = map[*Binding]*mount{}
		t.byAgent = map[*agentSession]*mount{}
	}
	t.byArea[m.area] = append(t.byArea[m.area], m)
	if m.b != nil {
		t.byBinding[m.b] = m
	} else {
		t.byAgent[m.a] = m
	}
}

// forgetLocked drops m: its views are unmounted or its session is over.
func (t *mounts) forgetLocked(m *mount) {
	if m.gone {
		return
	}
	m.gone = true
	m.renewGen++
	if m.renew != nil {
		m.renew.Stop()
	}
	list := t.byArea[m.area]
	for i, x := range list {
		if x == m {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(t.byArea, m.area)
	} else {
		t.byArea[m.area] = list
	}
	if m.b != nil && t.byBinding[m.b] == m {
		delete(t.byBinding, m.b)
	}
	if m.a != nil && t.byAgent[m.a] == m {
		delete(t.byAgent, m.a)
	}
}

// dropBindingLocked forgets the mount of a binding that ended.
func (t *mounts) dropBindingLocked(b *Binding) {
	if m := t.byBinding[b]; m != nil {
		t.forgetLocked(m)
	}
}

// dropAgentLocked forgets the mount of an agent session that ended.
func (t *mounts) dropAgentLocked(a *agentSession) {
	if m := t.byAgent[a]; m != nil {
		t.forgetLocked(m)
	}
}

// CurrentEpoch implements filearea.Epochs: the current epoch of the
// binding that has the session's files mounted here (the latest, when
// more than one has: a brain and a remote shell); ok is false when none
// has.
func (h *Hub) CurrentEpoch(sessionID string) (epoch int64, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.fs.byArea[sessionID] {
		if e := m.currentLocked(); !ok || e > epoch {
			epoch, ok = e, true
		}
	}
	return epoch, ok
}

// IsCurrentEpoch implements filearea.EpochSet: whether epoch is the
// current epoch of one of the bindings that have the session's files
// mounted here; bound is false when none has.
func (h *Hub) IsCurrentEpoch(sessionID string, epoch int64) (current, bound bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.fs.byArea[sessionID] {
		bound = true
		if m.currentLocked() == epoch {
			return true, true
		}
	}
	return false, bound
}

// renewLocked arms m's renewal: fresh views once Options.FileRenew has
// passed since the last fs.mount.
func (h *Hub) renewLocked(m *mount) {
	m.renewGen++
	gen := m.renewGen
	if m.renew != nil {
		m.renew.Stop()
	}
	m.renew = h.clock.AfterFunc(h.fs.every, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.closed || m.gone || m.renewGen != gen {
			return
		}
		if m.b != nil {
			h.goWorkLocked(func() {
				if err := h.remountFiles(context.Background(), m.b); err != nil && !errors.Is(err, ErrDetached) {
					h.log.Warn("executor: renewing the views of a session's files", slog.String("session_id", m.b.sessionID), slog.Any("error", err))
				}
			})
			return
		}
		if !m.a.closing {
			m.epoch = 0
			h.flushLocked(m.a)
		}
	})
}

// mountFiles mounts area's files on b's executor (fs.mount, views for
// b's current epoch) when the hub mints views and the executor declared
// capabilities.fs.fuse; otherwise it does nothing. From then on the mount
// follows b: remountFiles after a resume, renewals, unmountFiles.
func (h *Hub) mountFiles(ctx context.Context, b *Binding, area string) error {
	h.mu.Lock()
	if h.fs.views == nil || !fuse(b.rec.caps) || b.ended || h.fs.byBinding[b] != nil {
		h.mu.Unlock()
		return nil
	}
	h.fs.addLocked(&mount{area: area, b: b})
	h.mu.Unlock()
	return h.remountFiles(ctx, b)
}

// remountFiles sends fs.mount again with views for b's current epoch (the
// executor renews the tokens without remounting); a binding without
// mounted files is left alone. ErrDetached: the executor is away, and its
// resume mounts again.
func (h *Hub) remountFiles(ctx context.Context, b *Binding) error {
	h.mu.Lock()
	m := h.fs.byBinding[b]
	h.mu.Unlock()
	if m == nil {
		return nil
	}
	m.ops.Lock()
	defer m.ops.Unlock()
	c, epoch, err := b.current()
	h.mu.Lock()
	gone := m.gone
	h.mu.Unlock()
	if gone || err != nil {
		return err
	}
	views, err := h.fs.views.For(m.area, epoch)
	if err == nil {
		views = proto.SessionViews(b.sessionID, views)
		h.mu.Lock()
		m.cwd = workdir(views)
		h.mu.Unlock()
		ctx, cancel := context.WithTimeout(ctx, h.callTimeout)
		var res proto.FsMountResult
		err = c.peer.Call(ctx, proto.MethodFsMount, proto.FsMountParams{SessionID: b.sessionID, Epoch: epoch, Views: views}, &res)
		cancel()
	}
	var pe *proto.Error
	h.mu.Lock()
	defer h.mu.Unlock()
	if m.gone {
		return err
	}
	if err != nil && !errors.As(err, &pe) && b.conn != c {
		return fmt.Errorf("%w (fs.mount: %v)", ErrDetached, err) // the resume mounts again
	}
	m.epoch = epoch
	h.renewLocked(m)
	if err != nil {
		return fmt.Errorf("fs.mount on executor %s: %w", b.rec.id, err)
	}
	return nil
}

// workdir is where commands run among views: the path of the workspace
// view, else of the first view; "" without views.
func workdir(views []proto.FsView) string {
	for _, v := range views {
		if v.View == WorkspaceView {
			return v.Path
		}
	}
	if len(views) > 0 {
		return views[0].Path
	}
	return ""
}

// fuse reports whether caps declare fs.fuse, the capability fs.mount and
// fs.unmount need (bma.executor.v1.1); fs {fuse: false} does not.
func fuse(caps proto.Capabilities) bool { return caps.FS != nil && caps.FS.Fuse }

// WorkspaceView is the name of the default view of a session's files.
const WorkspaceView = "workspace"

// mountedCwd is the working directory of b's commands: its workspace
// view's path when the Baton session's files are mounted, else "".
func (h *Hub) mountedCwd(b *Binding) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if m := h.fs.byBinding[b]; m != nil && !m.gone {
		return m.cwd
	}
	return ""
}

// workspaceOf is turn.start's workspace_path for brain session
// sessionID on rec: the path its workspace view is mounted at, or "" when
// the hub mints no views or the executor has no capabilities.fs.fuse.
func (h *Hub) workspaceOf(rec *execRec, sessionID string, epoch int64) string {
	h.mu.Lock()
	views := h.fs.views
	fs := rec != nil && fuse(rec.caps)
	h.mu.Unlock()
	if views == nil || !fs {
		return ""
	}
	vs, err := views.For(sessionID, epoch) // for their paths; the tokens go unused
	if err != nil {
		return ""
	}
	return workdir(proto.SessionViews(sessionID, vs))
}

// unmountFiles sends fs.unmount with flush for b, so that what was
// written reaches the file service, and forgets the mount. ErrDetached
// keeps it for after the resume.
func (h *Hub) unmountFiles(ctx context.Context, b *Binding) error {
	h.mu.Lock()
	m := h.fs.byBinding[b]
	h.mu.Unlock()
	if m == nil {
		return nil
	}
	m.ops.Lock()
	defer m.ops.Unlock()
	err := b.Unmount(ctx, true)
	if errors.Is(err, ErrDetached) {
		return err
	}
	h.mu.Lock()
	h.fs.forgetLocked(m)
	h.mu.Unlock()
	if err != nil {
		return fmt.Errorf("fs.unmount on executor %s: %w", b.rec.id, err)
	}
	return nil
}

// mountGateLocked sends fs.mount to a brain's live connection c when the
// views its executor has are not for the agent session's current epoch —
// the first mount after turn.start, a resume, a renewal — and reports
// whether the session's held requests wait for the answer (so that a
// held fs.unmount flushes with tokens the file service takes).
func (h *Hub) mountGateLocked(a *agentSession, rec *execRec, c *conn) bool {
	m := h.fs.byAgent[a]
	if m == nil {
		if h.fs.views == nil || rec == nil || !fuse(rec.caps) || a.ended || a.closing || len(a.turns) == 0 && a.acked == 0 {
			return false
		}
		m = &mount{area: a.id, a: a}
		h.fs.addLocked(m)
	}
	switch {
	case m.gone:
		return false
	case m.inflight:
		return true
	}
	epoch := a.epoch()
	if m.epoch == epoch {
		return false
	}
	m.inflight = true
	h.goWorkLocked(func() { h.mountAgent(m, c, epoch) })
	return true
}

// mountAgent sends one brain fs.mount on c, then lets the held requests
// go.
func (h *Hub) mountAgent(m *mount, c *conn, epoch int64) {
	views, err := h.fs.views.For(m.area, epoch)
	if err == nil {
		views = proto.SessionViews(m.a.id, views)
		ctx, cancel := context.WithTimeout(context.Background(), h.callTimeout)
		var res proto.FsMountResult
		err = c.peer.Call(ctx, proto.MethodFsMount, proto.FsMountParams{SessionID: m.a.id, Epoch: epoch, Views: views}, &res)
		cancel()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	m.inflight = false
	var pe *proto.Error
	_, cur := h.agentConnLocked(m.a)
	if !m.gone && (err == nil || errors.As(err, &pe) || cur == c) { // else the next connection mounts again
		m.epoch = epoch
		h.renewLocked(m)
		if err != nil {
			h.log.Warn("executor: fs.mount of a brain session", slog.String("session_id", m.a.id), slog.Any("error", err))
		}
	}
	h.flushLocked(m.a)
}

// unmountBeforeLocked is the held request that closes a brain session
// whose files are mounted: fs.unmount with flush, and next once the
// executor answers it. Without mounted files it is next itself.
func (h *Hub) unmountBeforeLocked(a *agentSession, next *delivery) *delivery {
	m := h.fs.byAgent[a]
	if m == nil || m.gone {
		return next
	}
	return &delivery{key: "unmount", method: proto.MethodFsUnmount, params: proto.FsUnmountParams{SessionID: a.id, Flush: true},
		after: func() {
			h.fs.forgetLocked(m)
			h.holdLocked(a, next)
		}}
}
