//go:build linux

package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// jail is the driver's handle on a sandbox's jail process.
type jail struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been reaped

	mu  sync.Mutex // one control message at a time
	ctl *net.UnixConn
}

// nsFlags are the namespaces of a jail. Each command gets a user and a
// pid namespace of its own from the jail.
const nsFlags = syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWUTS | syscall.CLONE_NEWIPC | syscall.CLONE_NEWNET

// drainWait bounds how long an exec's output is read after the command
// ended: the pipes close with its pid namespace, unless a descriptor was
// smuggled out of it.
const drainWait = 5 * time.Second

// startJail starts the jail of b, places it in b's cgroup before it runs
// anything, sends it its configuration and waits until it reports ready
// (or why not). A goroutine owned by the jail reaps it; close stops it.
func (p *Process) startJail(ctx context.Context, b *box) (*jail, error) {
	nproc, as := p.rlimits()
	jc := jailConfig{
		Rootfs: b.rootfs, State: b.dir, Hostname: "sandbox",
		UserNS: !p.opt.NoUserNS, HostUID: p.opt.HostUID, Nproc: nproc, AS: as,
	}
	if b.cg != nil {
		jc.CmdTasks, jc.CmdCgroup = b.cg.tasks, b.cg.cmd
	}
	cfg, _ := json.Marshal(jc)
	var files []*os.File // the jail's ends, closed once it has them
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	syncR, syncW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer syncW.Close()
	files = append(files, syncR)
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer statusR.Close()
	files = append(files, statusW)
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	mine := os.NewFile(uintptr(fds[0]), "control")
	defer mine.Close()
	files = append(files, os.NewFile(uintptr(fds[1]), "control"))

	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{childArg0}
	cmd.Env = []string{envChild + "=1", "GOMAXPROCS=1"}
	cmd.ExtraFiles = files // fds 3, 4, 5
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: nsFlags}
	if err := cmd.Start(); err != nil {
		if errors.Is(err, syscall.EPERM) {
			return nil, fmt.Errorf("start jail: %w (new namespaces need root)", err)
		}
		return nil, fmt.Errorf("start jail: %w", err)
	}
	j := &jail{cmd: cmd, done: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(j.done)
	}()
	for _, f := range files {
		f.Close()
	}
	files = nil
	fail := func(err error) (*jail, error) {
		j.close()
		return nil, err
	}
	// The jail waits on the config pipe: it enters the cgroup (and so do
	// all its descendants) before it runs anything of the sandbox.
	if err := b.cg.add(cmd.Process.Pid); err != nil {
		return fail(err)
	}
	if _, err := syncW.Write(cfg); err != nil {
		return fail(fmt.Errorf("configure jail: %w", err))
	}
	syncW.Close()
	stop := context.AfterFunc(ctx, func() { cmd.Process.Kill() })
	var st jailStatus
	derr := json.NewDecoder(statusR).Decode(&st)
	stop()
	switch {
	case ctx.Err() != nil:
		return fail(ctx.Err())
	case st.Error != "":
		return fail(errors.New(st.Error))
	case derr != nil || !st.Ready:
		return fail(fmt.Errorf("the jail died during setup (%v)", derr))
	}
	c, err := net.FileConn(mine)
	if err != nil {
		return fail(err)
	}
	j.ctl = c.(*net.UnixConn)
	return j, nil
}

// close kills the jail — and with it, as the init of its pid namespace,
// every process of the sandbox — and waits until it is reaped.
func (j *jail) close() {
	if j == nil {
		return
	}
	j.cmd.Process.Kill()
	<-j.done
	if j.ctl != nil {
		j.ctl.Close()
	}
}

// exec runs command in the jail with stdin and the output streams, until
// it ends, ctx ends or stopped ends (both kill it), or the timeout passes
// (which kills it too and reports timedOut). The end is the jail's report:
// empty (neither exit code nor signal) when the jail died first.
func (j *jail) exec(ctx, stopped context.Context, timeout time.Duration, command string, stdin []byte, stdout, stderr io.Writer) (end jailStatus, timedOut bool, err error) {
	var (
		parent []io.Closer // the driver's ends
		child  []*os.File  // the jail's ends, closed once sent
	)
	defer func() {
		for _, f := range child {
			f.Close()
		}
	}()
	pipe := func() (r, w *os.File, err error) {
		if r, w, err = os.Pipe(); err == nil {
			parent = append(parent, r, w) // closing twice is harmless
		}
		return r, w, err
	}
	defer func() {
		for _, c := range parent {
			c.Close()
		}
	}()
	inR, inW, err := pipe()
	if err != nil {
		return end, false, err
	}
	outR, outW, err := pipe()
	if err != nil {
		return end, false, err
	}
	errR, errW, err := pipe()
	if err != nil {
		return end, false, err
	}
	child = append(child, inR, outW, errW)
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return end, false, err
	}
	mine := os.NewFile(uintptr(sp[0]), "exec")
	child = append(child, os.NewFile(uintptr(sp[1]), "exec"))
	c, err := net.FileConn(mine)
	mine.Close()
	if err != nil {
		return end, false, err
	}
	conn := c.(*net.UnixConn)
	parent = append(parent, conn)

	fds := make([]int, len(child))
	for i, f := range child {
		fds[i] = int(f.Fd())
	}
	j.mu.Lock()
	_, _, err = j.ctl.WriteMsgUnix([]byte{0}, unix.UnixRights(fds...), nil)
	j.mu.Unlock()
	for _, f := range child {
		f.Close()
	}
	child = nil
	if err != nil {
		return end, false, fmt.Errorf("send the command to the jail: %w", err)
	}
	req, _ := json.Marshal(execRequest{Command: command})
	if _, err := conn.Write(req); err != nil {
		return end, false, nil // the jail died: no report
	}

	// From here on every goroutine is waited for before returning.
	var wg sync.WaitGroup
	copyOut := func(w io.Writer, r *os.File) {
		defer wg.Done()
		io.Copy(w, r)
	}
	wg.Add(2)
	go copyOut(stdout, outR)
	go copyOut(stderr, errR)
	if stdin != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A command that exits without reading everything ends the
			// write with EPIPE, which is not the exec's error.
			inW.Write(stdin)
			inW.Close()
		}()
	} else {
		inW.Close()
	}
	ends := make(chan jailStatus, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		var st jailStatus
		json.NewDecoder(conn).Decode(&st) // nothing when the jail died
		ends <- st
	}()

	timer := time.NewTimer(timeout)
	got := false
	select {
	case end = <-ends:
		got = true
	case <-ctx.Done():
	case <-stopped.Done():
	case <-timer.C:
		timedOut = true
	}
	timer.Stop()
	if !got {
		conn.CloseWrite() // kill; the jail reports the end once it is dead
		end = <-ends
	}
	// The command and its pid namespace are gone: its output pipes end
	// now, but for a descriptor it passed out of the namespace.
	drain := time.AfterFunc(drainWait, func() {
		outR.Close()
		errR.Close()
		inW.Close()
	})
	wg.Wait()
	drain.Stop()
	return end, timedOut, nil
}
