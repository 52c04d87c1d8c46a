//go:build linux

package sandbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/baton-engine/baton"
)

// Process runs each sandbox as a Linux namespace jail. Start re-executes
// the current binary as the sandbox's jail: the init of new mount, pid,
// uts, ipc and net namespaces, placed in the sandbox's cgroup (which caps
// its processes and memory), that mounts the image's root filesystem
// read-only with the sandbox's writable /tmp and /work, a minimal /dev and
// a fresh /proc, pivots into it and waits for commands. Each exec is
// `sh -c command` started by the jail in a new user namespace (root there
// is an unprivileged host uid) and a new pid namespace, so everything the
// command starts ends with it. It implements baton.SandboxDriver; the
// binary must call Reexec first thing in main.
type Process struct {
	opt    ProcessOptions
	log    *slog.Logger
	cg     cgroups // as found
	active cgroups // as prepared: without controllers that could not be enabled

	// Limits the cgroups cannot enforce, applied as rlimits instead.
	nproc, as uint64

	prepMu   sync.Mutex
	prepared bool // the parent cgroups exist; Cleanup removes them

	warned atomic.Bool // the missing user namespaces were logged

	mu    sync.Mutex
	boxes map[string]*box
}

// box is one running sandbox.
type box struct {
	id     string
	dir    string // state directory
	rootfs string
	cg     *cgroup

	ctx    context.Context // ends when the sandbox stops
	cancel context.CancelFunc
	wg     sync.WaitGroup // running execs

	mu   sync.Mutex
	jail *jail // nil until started; replaced when it died
}

var _ baton.SandboxDriver = (*Process)(nil)

// NewProcess returns a process driver. It finds the cgroup hierarchies it
// will use now; a limit no cgroup can enforce falls back to an rlimit,
// with a warning.
func NewProcess(opt ProcessOptions) *Process {
	if opt.Pids <= 0 {
		opt.Pids = DefaultPids
	}
	if opt.Memory <= 0 {
		opt.Memory = DefaultMemory
	}
	if opt.Timeout <= 0 {
		opt.Timeout = DefaultExecTimeout
	}
	if opt.HostUID == 0 {
		opt.HostUID = DefaultHostUID
	}
	if opt.Instance == "" {
		abs, _ := filepath.Abs(opt.StateDir)
		sum := sha256.Sum256([]byte(abs))
		opt.Instance = hex.EncodeToString(sum[:8])
	}
	p := &Process{opt: opt, log: opt.Logger, boxes: map[string]*box{}}
	if p.log == nil {
		p.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cg, err := detectCgroups(opt.Instance)
	if err != nil {
		p.log.Warn("sandbox cgroups unavailable; limits fall back to rlimits", "err", err)
	}
	p.cg = cg
	return p
}

// prepare creates the driver's parent cgroups and state directory on
// first use (and again after Cleanup removed them), and settles which
// limits need rlimits.
func (p *Process) prepare() error {
	p.prepMu.Lock()
	defer p.prepMu.Unlock()
	if p.prepared {
		return nil
	}
	cg, err := p.cg.prepare()
	if err != nil {
		p.log.Warn("sandbox cgroup controllers unavailable; limits fall back to rlimits", "err", err)
	}
	p.nproc, p.as = 0, 0
	if !cg.has("pids") {
		p.nproc = uint64(p.opt.Pids)
	}
	if !cg.has("memory") {
		p.as = uint64(p.opt.Memory)
	}
	if err := os.MkdirAll(p.opt.StateDir, 0o700); err != nil {
		return err
	}
	p.active, p.prepared = cg, true
	return nil
}

// rlimits returns the limits that need rlimits (0 for none).
func (p *Process) rlimits() (nproc, as uint64) {
	p.prepMu.Lock()
	defer p.prepMu.Unlock()
	return p.nproc, p.as
}

// EnsureImage reports whether the image's root filesystem directory
// exists.
func (p *Process) EnsureImage(ctx context.Context, image string) error {
	return RootfsDir(p.opt.RootfsDir).EnsureImage(ctx, image)
}

// Start creates a sandbox of image — its state directory (writable /tmp
// and /work) and its cgroup — and starts its jail.
func (p *Process) Start(ctx context.Context, image string) (string, error) {
	if err := p.EnsureImage(ctx, image); err != nil {
		return "", err
	}
	fail := func(err error) (string, error) {
		return "", fmt.Errorf("sandbox runtime error: process run %q failed: %v", image, err)
	}
	if err := p.prepare(); err != nil {
		return fail(err)
	}
	id := baton.NewID("")
	dir := filepath.Join(p.opt.StateDir, id)
	if err := p.makeState(dir); err != nil {
		os.RemoveAll(dir)
		return fail(err)
	}
	p.prepMu.Lock()
	cg, err := p.active.create(id, p.opt.Pids, p.opt.Memory)
	p.prepMu.Unlock()
	if err != nil {
		os.RemoveAll(dir)
		return fail(err)
	}
	b := &box{id: id, dir: dir, rootfs: filepath.Join(p.opt.RootfsDir, image), cg: cg}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	if _, err := p.jailOf(ctx, b); err != nil {
		b.cancel()
		cg.destroy(context.WithoutCancel(ctx))
		os.RemoveAll(dir)
		return fail(err)
	}
	p.mu.Lock()
	p.boxes[id] = b
	p.mu.Unlock()
	return id, nil
}

// makeState creates a sandbox's state directory: root (where the jail
// builds its root), tmp and work, owned by the user namespace's root.
func (p *Process) makeState(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	for _, d := range []struct {
		name string
		mode os.FileMode
	}{{"", 0o700}, {"root", 0o755}, {"tmp", 0o1777}, {"work", 0o755}} {
		path := filepath.Join(dir, d.name)
		if d.name != "" {
			if err := os.Mkdir(path, d.mode); err != nil {
				return err
			}
		}
		if err := os.Chmod(path, d.mode); err != nil { // past the umask
			return err
		}
		if !p.opt.NoUserNS {
			if err := os.Chown(path, int(p.opt.HostUID), int(p.opt.HostUID)); err != nil {
				return err
			}
		}
	}
	return nil
}

// jailOf returns the sandbox's running jail, starting one when there is
// none yet or the last one died (its /tmp and /work persist on disk).
func (p *Process) jailOf(ctx context.Context, b *box) (*jail, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctx.Err() != nil {
		return nil, errors.New("the sandbox was stopped")
	}
	if b.jail != nil {
		select {
		case <-b.jail.done:
			b.jail.close()
		default:
			return b.jail, nil
		}
	}
	j, err := p.startJail(ctx, b)
	if err != nil {
		return nil, err
	}
	b.jail = j
	return j, nil
}

// Stop kills every process of the sandbox and removes its cgroup and state
// directory. An unknown id is not an error.
func (p *Process) Stop(ctx context.Context, id string) error {
	p.mu.Lock()
	b := p.boxes[id]
	delete(p.boxes, id)
	p.mu.Unlock()
	if b == nil {
		return nil
	}
	b.cancel() // no new jail from here on
	b.mu.Lock()
	j := b.jail
	b.mu.Unlock()
	j.close() // its death ends every exec at once
	b.wg.Wait()
	err := errors.Join(b.cg.destroy(ctx), os.RemoveAll(b.dir))
	if err != nil {
		return fmt.Errorf("sandbox runtime error: process stop %q failed: %v", id, err)
	}
	return nil
}

// Cleanup stops every running sandbox of this driver and removes what
// sandboxes of an earlier run of this server left behind: state
// directories and cgroups (killing any process still in them). It returns
// how many sandboxes it removed.
func (p *Process) Cleanup(ctx context.Context) (int, error) {
	p.mu.Lock()
	ids := make([]string, 0, len(p.boxes))
	for id := range p.boxes {
		ids = append(ids, id)
	}
	p.mu.Unlock()
	var errs []error
	removed := map[string]bool{}
	for _, id := range ids {
		if err := p.Stop(ctx, id); err != nil {
			errs = append(errs, err)
			continue
		}
		removed[id] = true
	}
	for id, dirs := range p.cg.leftovers() {
		if err := removeCgroups(ctx, dirs); err != nil {
			errs = append(errs, fmt.Errorf("remove cgroup of %s: %w", id, err))
			continue
		}
		removed[id] = true
	}
	p.prepMu.Lock()
	for _, h := range p.cg {
		if err := os.Remove(h.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	p.prepared = false
	p.prepMu.Unlock()
	ents, err := os.ReadDir(p.opt.StateDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(p.opt.StateDir, e.Name())); err != nil {
			errs = append(errs, err)
			continue
		}
		removed[e.Name()] = true
	}
	return len(removed), errors.Join(errs...)
}

// acquire returns the running sandbox id and counts an exec in it.
func (p *Process) acquire(id string) *box {
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.boxes[id]
	if b != nil {
		b.wg.Add(1)
	}
	return b
}

// Exec runs `sh -c command` in the sandbox, each output stream capped at
// opt.Limit or OutputCap as Docker.Exec caps them. A non-zero exit is a
// result; so is a command killed by the exec timeout (exit -1, with a
// note on stderr). ctx cancellation kills the command and everything it
// started, and returns ctx's error.
func (p *Process) Exec(ctx context.Context, id, command string, opt baton.ExecOptions) (baton.ExecResult, error) {
	fail := func(err error) (baton.ExecResult, error) {
		return baton.ExecResult{}, fmt.Errorf("sandbox runtime error: process exec %q failed: %v", id, err)
	}
	b := p.acquire(id)
	if b == nil {
		return fail(errors.New("no such sandbox"))
	}
	defer b.wg.Done()
	j, err := p.jailOf(ctx, b)
	if err != nil {
		if ctx.Err() != nil {
			return baton.ExecResult{}, ctx.Err()
		}
		return fail(err)
	}
	stdout, stderr := outputBuffers(opt.Limit, p.opt.OutputCap)
	ooms := b.cg.oomKills()
	end, timedOut, err := j.exec(ctx, b.ctx, p.opt.Timeout, command, opt.Stdin, stdout, stderr)
	switch {
	case ctx.Err() != nil:
		return baton.ExecResult{}, ctx.Err()
	case b.ctx.Err() != nil:
		return fail(errors.New("the sandbox was stopped"))
	case err != nil:
		return fail(err)
	case end.Error != "":
		return fail(errors.New(end.Error))
	}
	if end.Warn != "" && !p.warned.Swap(true) {
		p.log.Warn("sandbox user namespaces unavailable; commands run as root with reduced capabilities", "detail", end.Warn)
	}
	code := -1 // a signal, or the jail died
	if end.Exit != nil {
		code = *end.Exit
	}
	res := execResult(stdout, stderr, code)
	switch {
	case end.Exit == nil && end.Signal == 0:
		res.Stderr += "\nsandbox: command killed: the sandbox's jail ended (every process of the sandbox with it)\n"
	case timedOut:
		res.ExitCode = -1
		res.Stderr += fmt.Sprintf("\nsandbox: command killed: it ran longer than the exec timeout (%s)\n", p.opt.Timeout)
	case b.cg.oomKills() > ooms:
		res.Stderr += fmt.Sprintf("\nsandbox: a process was killed: the sandbox reached its memory limit (%d MiB)\n", p.opt.Memory>>20)
	}
	return res, nil
}
