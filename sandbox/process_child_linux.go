//go:build linux

package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// A jail is the current binary run with envChild=1 and argument 0
// childArg0; Reexec recognises it.
const (
	envChild  = "BATON_SANDBOX_CHILD"
	childArg0 = "baton-sandbox"
)

// File descriptors of a jail besides the standard streams.
const (
	fdSync    = 3 // configuration in, closed by the driver once sent
	fdStatus  = 4 // jailStatus lines out: ready, or a setup error
	fdControl = 5 // exec requests in (SOCK_SEQPACKET with descriptors)
)

// jailConfig is what the driver sends a jail once it is in the sandbox's
// cgroup.
type jailConfig struct {
	Rootfs   string `json:"rootfs"`
	State    string `json:"state"`
	Hostname string `json:"hostname"`
	UserNS   bool   `json:"userns"`
	HostUID  uint32 `json:"host_uid"`
	Nproc    uint64 `json:"nproc,omitempty"` // RLIMIT_NPROC; 0 leaves it
	AS       uint64 `json:"as,omitempty"`    // RLIMIT_AS; 0 leaves it
	// Where commands go (see cgroup): the v1 tasks file the starting
	// thread moves itself to, or the v2 directory they are cloned into.
	CmdTasks  string `json:"cmd_tasks,omitempty"`
	CmdCgroup string `json:"cmd_cgroup,omitempty"`

	cmdFD int // CmdCgroup, open in the jail; -1 for none
}

// jailStatus is a message of a jail to the driver, one JSON line: on the
// status pipe, ready or a setup error; on an exec's socket, the command's
// end (exit code or signal) or why it could not run, with a warning when
// it had to run without a user namespace.
type jailStatus struct {
	Ready  bool   `json:"ready,omitempty"`
	Warn   string `json:"warn,omitempty"`
	Error  string `json:"error,omitempty"`
	Exit   *int   `json:"exit,omitempty"`
	Signal int    `json:"signal,omitempty"`
}

// execRequest is what the driver writes on an exec's socket.
type execRequest struct {
	Command string `json:"command"`
}

// Reexec turns this process into a sandbox's jail when the process driver
// started it: it then serves the sandbox until the driver goes away and
// never returns. In any other process it returns at once. Call it first
// thing in main (and in TestMain of tests that run the process driver).
func Reexec() {
	if os.Getenv(envChild) != "1" || len(os.Args) != 1 || os.Args[0] != childArg0 {
		return
	}
	// The capability bounding set and no_new_privs are per thread and pass
	// to a command only from the thread that starts it: commands start on
	// this one (see serve).
	runtime.LockOSThread()
	status := json.NewEncoder(os.NewFile(fdStatus, "status"))
	cfg, err := setup()
	if err != nil {
		status.Encode(jailStatus{Error: err.Error()})
		os.Exit(1)
	}
	serve(cfg, status)
}

// setup runs in the jail, the init of fresh mount, pid, uts, ipc and net
// namespaces and still the host's root: it waits for its configuration
// (sent once the driver has placed it in the sandbox's cgroup), builds the
// sandbox's root, pivots into it, and drops capabilities for the commands
// to come.
func setup() (jailConfig, error) {
	var cfg jailConfig
	sync := os.NewFile(fdSync, "sync")
	b, err := io.ReadAll(sync)
	sync.Close()
	if err != nil || json.Unmarshal(b, &cfg) != nil {
		return cfg, fmt.Errorf("read jail configuration: %v", err)
	}
	cfg.cmdFD = -1
	if cfg.CmdTasks != "" { // this thread, which starts every command
		if err := os.WriteFile(cfg.CmdTasks, []byte("0"), 0); err != nil {
			return cfg, fmt.Errorf("enter the commands' cgroup: %w", err)
		}
	}
	if cfg.CmdCgroup != "" {
		if cfg.cmdFD, err = unix.Open(cfg.CmdCgroup, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
			return cfg, fmt.Errorf("open the commands' cgroup: %w", err)
		}
	}
	// Descriptors past the standard streams stay out of the commands.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return cfg, fmt.Errorf("close descriptors: %w", err)
	}
	// Nothing mounted here may reach the host's mount namespace.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return cfg, fmt.Errorf("make mounts private: %w", err)
	}
	root := filepath.Join(cfg.State, "root")
	if err := buildRoot(root, cfg.Rootfs, cfg.State); err != nil {
		return cfg, err
	}
	if err := unix.Sethostname([]byte(cfg.Hostname)); err != nil {
		return cfg, fmt.Errorf("set hostname: %w", err)
	}
	if err := loopbackUp(); err != nil {
		return cfg, err
	}
	if err := pivot(root); err != nil {
		return cfg, err
	}
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{}); err != nil {
		return cfg, fmt.Errorf("set rlimit core: %w", err)
	}
	return cfg, dropCapabilities()
}

// argv is the command line of command: `sh -c command`, or, where
// rlimits stand in for missing cgroup controllers, a shell that sets them
// first (ulimit) and execs that. (The jail itself, a Go program that keeps
// address space in reserve, cannot run under RLIMIT_AS; RLIMIT_NPROC
// counts every process of a uid, so only a user namespace's uid can take
// it.)
func argv(cfg jailConfig, command string, userns bool) []string {
	var set []string
	if cfg.AS > 0 {
		set = append(set, fmt.Sprintf("ulimit -v %d", cfg.AS>>10))
	}
	if cfg.Nproc > 0 && userns {
		set = append(set, fmt.Sprintf("ulimit -u %d", cfg.Nproc))
	}
	if len(set) == 0 {
		return []string{"sh", "-c", command}
	}
	return []string{"sh", "-c", strings.Join(set, " && ") + ` && exec sh -c "$1"`, "sh", command}
}

// spawn asks the jail's main thread to start a command.
type spawn struct {
	argv  []string
	attr  *os.ProcAttr
	reply chan spawned
}

type spawned struct {
	proc *os.Process
	end  <-chan syscall.WaitStatus
	err  error
}

// reaper collects the ends of the jail's children in one SIGCHLD-driven
// loop, so that a waiting exec holds no thread: a jail at its sandbox's
// pids limit could not get a new one, and the Go runtime dies of that.
type reaper struct {
	mu     sync.Mutex
	wait   map[int]chan syscall.WaitStatus
	exited map[int]syscall.WaitStatus // reaped before anyone watched
}

func newReaper() *reaper {
	r := &reaper{wait: map[int]chan syscall.WaitStatus{}, exited: map[int]syscall.WaitStatus{}}
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGCHLD)
	go func() {
		for range sigc {
			for {
				var ws syscall.WaitStatus
				pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
				r.mu.Lock()
				if c, ok := r.wait[pid]; ok {
					c <- ws
					delete(r.wait, pid)
				} else {
					r.exited[pid] = ws
				}
				r.mu.Unlock()
			}
		}
	}()
	return r
}

// watch returns a channel that gets the wait status of child pid once it
// has ended. Call it right after starting the child, before another
// child can start (and so reuse the pid).
func (r *reaper) watch(pid int) <-chan syscall.WaitStatus {
	c := make(chan syscall.WaitStatus, 1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if ws, ok := r.exited[pid]; ok {
		delete(r.exited, pid)
		c <- ws
	} else {
		r.wait[pid] = c
	}
	return c
}

// serve reports the jail ready and runs exec requests until the driver
// closes the control socket (or dies), then exits, which kills every
// process of the sandbox. Commands start on this, the locked main thread.
func serve(cfg jailConfig, status *json.Encoder) {
	f := os.NewFile(fdControl, "control")
	c, err := net.FileConn(f)
	f.Close()
	ctl, ok := c.(*net.UnixConn)
	if err != nil || !ok {
		status.Encode(jailStatus{Error: fmt.Sprintf("control socket: %v", err)})
		os.Exit(1)
	}
	status.Encode(jailStatus{Ready: true})
	spawns := make(chan spawn)
	go func() {
		var noUserNS atomic.Bool
		oob := make([]byte, unix.CmsgSpace(4*4))
		for {
			var b [1]byte
			n, oobn, _, _, err := ctl.ReadMsgUnix(b[:], oob)
			if err != nil || (n == 0 && oobn == 0) {
				os.Exit(0) // the driver is gone, or stopped the sandbox
			}
			fds := rights(oob[:oobn])
			if len(fds) != 4 {
				for _, fd := range fds {
					unix.Close(fd)
				}
				continue
			}
			go runExec(cfg, fds, spawns, &noUserNS)
		}
	}()
	reap := newReaper()
	for s := range spawns {
		p, err := os.StartProcess("/bin/sh", s.argv, s.attr)
		if err != nil {
			s.reply <- spawned{err: err}
			continue
		}
		s.reply <- spawned{proc: p, end: reap.watch(p.Pid)}
	}
}

// rights returns the descriptors passed in a control message.
func rights(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if r, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, r...)
		}
	}
	return fds
}

// runExec runs one exec: fds are its stdin, stdout, stderr and socket.
// The command runs as the init of a new pid namespace (in a new user
// namespace where allowed, and a cgroup namespace), so everything it
// starts ends with it. Closing
// the socket's write side (or any byte on it) kills the command; its end
// goes back on the socket.
func runExec(cfg jailConfig, fds []int, spawns chan<- spawn, noUserNS *atomic.Bool) {
	stdio := []*os.File{os.NewFile(uintptr(fds[0]), "stdin"), os.NewFile(uintptr(fds[1]), "stdout"), os.NewFile(uintptr(fds[2]), "stderr")}
	defer func() {
		for _, f := range stdio {
			f.Close()
		}
	}()
	sf := os.NewFile(uintptr(fds[3]), "exec")
	conn, err := net.FileConn(sf)
	sf.Close()
	if err != nil {
		return
	}
	defer conn.Close()
	var req execRequest
	dec := json.NewDecoder(conn)
	if err := dec.Decode(&req); err != nil {
		return
	}
	out := json.NewEncoder(conn)
	attr := &os.ProcAttr{
		Dir:   "/work",
		Files: stdio,
		Env: []string{
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"HOME=/work", "HOSTNAME=" + cfg.Hostname,
		},
	}
	start := func(userns bool) spawned {
		// Its cgroup namespace makes the sandbox's cgroup its root.
		sys := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWCGROUP}
		if cfg.cmdFD >= 0 {
			sys.UseCgroupFD, sys.CgroupFD = true, cfg.cmdFD
		}
		if userns {
			m := []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(cfg.HostUID), Size: 65536}}
			sys.Cloneflags |= syscall.CLONE_NEWUSER
			sys.UidMappings, sys.GidMappings, sys.GidMappingsEnableSetgroups = m, m, true
			sys.Credential = &syscall.Credential{Uid: 0, Gid: 0} // the namespace's root
		}
		a := *attr
		a.Sys = sys
		reply := make(chan spawned, 1)
		spawns <- spawn{argv: argv(cfg, req.Command, userns), attr: &a, reply: reply}
		return <-reply
	}
	var st jailStatus
	userns := cfg.UserNS && !noUserNS.Load()
	r := start(userns)
	// A full sandbox (EAGAIN at its pids limit, ENOMEM) says nothing
	// about user namespaces.
	if r.err != nil && userns && !errors.Is(r.err, syscall.EAGAIN) && !errors.Is(r.err, syscall.ENOMEM) {
		if r = start(false); r.err == nil {
			noUserNS.Store(true)
			st.Warn = fmt.Sprintf("no user namespace for sandbox commands: %v", r.err)
		}
	}
	for _, f := range stdio {
		f.Close()
	}
	if r.err != nil {
		out.Encode(jailStatus{Error: fmt.Sprintf("run /bin/sh in the sandbox: %v", r.err)})
		return
	}
	go func() {
		// Returns on the driver's kill, or when conn closes below.
		io.Copy(io.Discard, io.MultiReader(dec.Buffered(), conn))
		r.proc.Kill()
	}()
	ws := <-r.end
	r.proc.Release()
	if ws.Signaled() {
		st.Signal = int(ws.Signal())
	} else {
		code := ws.ExitStatus()
		st.Exit = &code
	}
	out.Encode(st)
}

// Top-level names of the sandbox's root that the jail provides itself.
var ownTopLevel = map[string]bool{"proc": true, "dev": true, "sys": true, "tmp": true, "work": true}

// buildRoot assembles the sandbox's root in dir: a small tmpfs holding a
// read-only bind mount of each top-level entry of rootfs (symlinks copied),
// the state directory's tmp and work (writable), a minimal /dev and a
// fresh /proc. The tmpfs itself ends up read-only too (see pivot).
func buildRoot(dir, rootfs, state string) error {
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=755,size=64k"); err != nil {
		return fmt.Errorf("mount sandbox root: %w", err)
	}
	ents, err := os.ReadDir(rootfs)
	if err != nil {
		return fmt.Errorf("read rootfs: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		if ownTopLevel[name] {
			continue
		}
		src, dst := filepath.Join(rootfs, name), filepath.Join(dir, name)
		switch {
		case e.Type()&os.ModeSymlink != 0:
			target, err := os.Readlink(src)
			if err == nil {
				err = os.Symlink(target, dst)
			}
			if err != nil {
				return fmt.Errorf("rootfs /%s: %w", name, err)
			}
		case e.IsDir() || e.Type().IsRegular():
			if err := bindPoint(dst, e.IsDir()); err != nil {
				return err
			}
			if err := bind(src, dst, unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV); err != nil {
				return fmt.Errorf("rootfs /%s: %w", name, err)
			}
		}
	}
	for _, w := range []string{"tmp", "work"} {
		dst := filepath.Join(dir, w)
		if err := os.Mkdir(dst, 0o755); err != nil {
			return err
		}
		if err := bind(filepath.Join(state, w), dst, unix.MS_NOSUID|unix.MS_NODEV); err != nil {
			return fmt.Errorf("mount /%s: %w", w, err)
		}
	}
	if err := makeDev(filepath.Join(dir, "dev")); err != nil {
		return err
	}
	proc := filepath.Join(dir, "proc")
	if err := os.Mkdir(proc, 0o555); err != nil {
		return err
	}
	if err := unix.Mount("proc", proc, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	// Kernel knobs stay out of reach even of a root without a user
	// namespace.
	for _, ro := range []string{"sys", "sysrq-trigger"} {
		p := filepath.Join(proc, ro)
		if err := bind(p, p, unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("protect /proc/%s: %w", ro, err)
		}
	}
	return nil
}

// bindPoint creates an empty directory or file to bind mount on.
func bindPoint(path string, dir bool) error {
	if dir {
		return os.Mkdir(path, 0o755)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// bind bind-mounts src on dst and remounts it with flags. A mount copied
// from a more privileged namespace keeps its locked flags (nosuid, nodev,
// noexec, atime), so the remount carries them over.
func bind(src, dst string, flags uintptr) error {
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dst, &st); err != nil {
		return err
	}
	for _, f := range []struct{ st, ms uintptr }{
		{unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV}, {unix.ST_NOEXEC, unix.MS_NOEXEC},
		{unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME},
		{unix.ST_RDONLY, unix.MS_RDONLY},
	} {
		if uintptr(st.Flags)&f.st != 0 {
			flags |= f.ms
		}
	}
	return unix.Mount("", dst, "", unix.MS_REMOUNT|unix.MS_BIND|flags, "")
}

// makeDev builds a minimal /dev: the host's null, zero, full, random,
// urandom and tty nodes bound into a tmpfs, the usual fd links, and a
// fresh /dev/shm.
func makeDev(dev string) error {
	if err := os.Mkdir(dev, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=755,size=64k"); err != nil {
		return fmt.Errorf("mount /dev: %w", err)
	}
	for _, n := range []string{"null", "zero", "full", "random", "urandom", "tty"} {
		p := filepath.Join(dev, n)
		if err := bindPoint(p, false); err != nil {
			return err
		}
		if err := unix.Mount("/dev/"+n, p, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("mount /dev/%s: %w", n, err)
		}
	}
	for link, target := range map[string]string{
		"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2",
	} {
		if err := os.Symlink(target, filepath.Join(dev, link)); err != nil {
			return err
		}
	}
	shm := filepath.Join(dev, "shm")
	if err := os.Mkdir(shm, 0o1777); err != nil {
		return err
	}
	if err := unix.Mount("shm", shm, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=1777,size=64m"); err != nil {
		return fmt.Errorf("mount /dev/shm: %w", err)
	}
	return unix.Mount("", dev, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NOEXEC, "")
}

// pivot makes dir the root: pivot_root with the old root stacked under
// the new one, then detached, so no path leads back to the host's
// filesystem. The new root's tmpfs is then made read-only.
func pivot(dir string) error {
	if err := unix.Chdir(dir); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the host root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	if err := unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("make the root read-only: %w", err)
	}
	return nil
}

// loopbackUp brings up lo, the only interface of the new network
// namespace, so that the sandbox can talk to itself and nothing else.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback up: %w", err)
	}
	return nil
}

// keptCaps are the capabilities a sandbox's root keeps (Docker's default
// set without mknod, raw sockets and audit writes); every other one leaves
// the bounding set, and no_new_privs stops set-uid programs from adding
// any back.
var keptCaps = map[int]bool{
	unix.CAP_CHOWN: true, unix.CAP_DAC_OVERRIDE: true, unix.CAP_FOWNER: true, unix.CAP_FSETID: true,
	unix.CAP_KILL: true, unix.CAP_SETGID: true, unix.CAP_SETUID: true, unix.CAP_SETPCAP: true,
	unix.CAP_NET_BIND_SERVICE: true, unix.CAP_SYS_CHROOT: true, unix.CAP_SETFCAP: true,
}

// dropCapabilities shrinks the bounding set to keptCaps, so that the
// command, when it runs without a user namespace (as root, without file
// capabilities), gets exactly those; in a user namespace it has every
// capability, but only over that namespace, which owns nothing.
func dropCapabilities() error {
	last := unix.CAP_LAST_CAP
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		fmt.Sscanf(strings.TrimSpace(string(b)), "%d", &last)
	}
	for c := 0; c <= last; c++ {
		if keptCaps[c] {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("drop capability %d: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	return nil
}
