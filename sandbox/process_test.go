//go:build linux

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/sandbox/sandboxtest"
)

// TestMain lets the test binary act as a sandbox jail when the process
// driver re-executes it.
func TestMain(m *testing.M) {
	Reexec()
	os.Exit(m.Run())
}

// newProcess returns a process driver with a busybox rootfs named
// "busybox" and its state in a temp dir, cleaned up after the test. It
// skips the test where namespaces cannot be made.
func newProcess(t testing.TB, opt ProcessOptions) *Process {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the process driver needs root: namespaces, cgroups and pivot_root")
	}
	probe := exec.Command("/bin/true")
	probe.SysProcAttr = &syscall.SysProcAttr{Cloneflags: nsFlags}
	if err := probe.Run(); err != nil {
		t.Skipf("Linux namespaces unavailable here: %v", err)
	}
	dir := t.TempDir()
	if opt.RootfsDir == "" {
		opt.RootfsDir = filepath.Join(dir, "rootfs")
		sandboxtest.Rootfs(t, opt.RootfsDir, "busybox")
	}
	opt.StateDir = filepath.Join(dir, "state")
	p := NewProcess(opt)
	t.Cleanup(func() {
		if _, err := p.Cleanup(context.Background()); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return p
}

func start(t testing.TB, p *Process) string {
	t.Helper()
	id, err := p.Start(context.Background(), "busybox")
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func run(t testing.TB, p *Process, id, cmd string) baton.ExecResult {
	t.Helper()
	res, err := p.Exec(context.Background(), id, cmd, baton.ExecOptions{})
	if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return res
}

func TestProcessExec(t *testing.T) {
	p := newProcess(t, ProcessOptions{})
	id := start(t, p)
	big := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	tests := []struct {
		cmd   string
		stdin []byte
		want  baton.ExecResult
	}{
		{cmd: "echo hi", want: baton.ExecResult{Stdout: "hi\n"}},
		{cmd: "echo a; echo b >&2; echo c; exit 3", want: baton.ExecResult{Stdout: "a\nc\n", Stderr: "b\n", ExitCode: 3}},
		{cmd: "tr a-z A-Z", stdin: []byte("shout\n"), want: baton.ExecResult{Stdout: "SHOUT\n"}},
		{cmd: "wc -c", stdin: []byte(big), want: baton.ExecResult{Stdout: fmt.Sprint(len(big)) + "\n"}},
		{cmd: "wc -c", want: baton.ExecResult{Stdout: "0\n"}},                                  // nil stdin: empty input
		{cmd: "echo ignored", stdin: []byte(big), want: baton.ExecResult{Stdout: "ignored\n"}}, // input never read
		{cmd: "id -u; hostname; pwd; echo $HOME", want: baton.ExecResult{Stdout: "0\nsandbox\n/work\n/work\n"}},
		{cmd: "sh -c 'kill -9 $$'; exit $?", want: baton.ExecResult{Stderr: "Killed\n", ExitCode: 137}},
		{cmd: "exec nosuchcommand", want: baton.ExecResult{Stderr: "sh: exec: line 0: nosuchcommand: not found\n", ExitCode: 127}},
	}
	for _, tc := range tests {
		got, err := p.Exec(context.Background(), id, tc.cmd, baton.ExecOptions{Stdin: tc.stdin})
		if err != nil {
			t.Fatalf("%s: %v", tc.cmd, err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.cmd, diff)
		}
	}
	// Root of the sandbox is the unprivileged host uid range.
	if got := run(t, p, id, "cat /proc/self/uid_map").Stdout; strings.Fields(got)[1] != fmt.Sprint(DefaultHostUID) {
		t.Errorf("uid_map %q, want 0 → %d", got, DefaultHostUID)
	}
}

func TestProcessOutputCap(t *testing.T) {
	p := newProcess(t, ProcessOptions{OutputCap: 1000})
	id := start(t, p)
	// Cut at the driver's cap, the kept lines make room for a note; the
	// uncut stream is left alone.
	res := run(t, p, id, "yes | head -c 5000; yes e | head -c 50 >&2")
	if res.Stdout != strings.Repeat("y\n", 482)+"[output truncated: 4036 more bytes]" || res.Stderr != strings.Repeat("e\n", 25) || !res.Truncated {
		t.Errorf("driver cap: %d bytes out ending %q, %q err, truncated %v", len(res.Stdout), res.Stdout[max(len(res.Stdout)-40, 0):], res.Stderr, res.Truncated)
	}
	res = run(t, p, id, "echo out; yes e | head -c 5000 >&2")
	if res.Stdout != "out\n" || res.Stderr != strings.Repeat("e\n", 482)+"[output truncated: 4036 more bytes]" || !res.Truncated {
		t.Errorf("driver cap on stderr: %q out, %d bytes err, truncated %v", res.Stdout, len(res.Stderr), res.Truncated)
	}
	// An exec's own limit wins, and a cut never splits a character.
	res, err := p.Exec(context.Background(), id, "printf 'aaé and more'", baton.ExecOptions{Limit: 3})
	if err != nil || res.Stdout != "aa" || !res.Truncated {
		t.Errorf("limit 3: %+v %v", res, err)
	}
}

func TestProcessState(t *testing.T) {
	p := newProcess(t, ProcessOptions{})
	a, b := start(t, p), start(t, p)
	run(t, p, a, "echo work > /work/f; echo tmp > /tmp/f; mkdir -p /work/d/e")
	if got := run(t, p, a, "cat /work/f /tmp/f; ls /work/d"); got.Stdout != "work\ntmp\ne\n" {
		t.Errorf("same sandbox: %+v", got)
	}
	if got := run(t, p, b, "cat /work/f /tmp/f"); got.ExitCode == 0 || got.Stdout != "" {
		t.Errorf("other sandbox sees the files: %+v", got)
	}
	// The image is read-only, and so is the rest of the root.
	res := run(t, p, a, "echo x > /etc/passwd; touch /bin/new; mkdir /new; mount -o remount,rw /")
	for _, want := range []string{"/etc/passwd", "/bin/new", "/new"} {
		if !strings.Contains(res.Stderr, want) {
			t.Errorf("writing %s did not fail: %+v", want, res)
		}
	}
	if res.ExitCode == 0 {
		t.Errorf("remount rw succeeded: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(p.opt.RootfsDir, "busybox", "bin", "new")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the image changed: %v", err)
	}

	// A jail that dies is replaced at the next exec; /work and /tmp stay.
	p.mu.Lock()
	j := p.boxes[a].jail
	p.mu.Unlock()
	j.cmd.Process.Kill()
	<-j.done
	if got := run(t, p, a, "cat /work/f /tmp/f"); got.Stdout != "work\ntmp\n" {
		t.Errorf("after the jail died: %+v", got)
	}
	// A jail that dies during an exec ends it, saying so.
	p.mu.Lock()
	j = p.boxes[a].jail
	p.mu.Unlock()
	started := fifo(t, p, a, "started")
	go func() {
		<-started
		j.cmd.Process.Kill()
	}()
	got := run(t, p, a, "echo go > /work/started; sleep 1000")
	if want := (baton.ExecResult{Stderr: "\nsandbox: command killed: the sandbox's jail ended (every process of the sandbox with it)\n", ExitCode: -1}); got != want {
		t.Errorf("jail killed during an exec: %+v", got)
	}
}

func TestProcessHostUnreachable(t *testing.T) {
	p := newProcess(t, ProcessOptions{})
	id := start(t, p)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("s3cret"), 0o644); err != nil {
		t.Fatal(err)
	}
	res := run(t, p, id, "cat "+secret+"; ls "+filepath.Dir(secret)+"; cat /proc/1/root"+secret)
	if strings.Contains(res.Stdout, "s3cret") || strings.Contains(res.Stdout, "secret") || res.ExitCode == 0 {
		t.Errorf("host file reachable: %+v", res)
	}
	got := strings.Fields(run(t, p, id, "ls -a /").Stdout)
	want := []string{".", "..", "bin", "dev", "etc", "proc", "tmp", "work"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ls / (-want +got):\n%s", diff)
	}
	got = strings.Fields(run(t, p, id, "ls /dev").Stdout)
	want = []string{"fd", "full", "null", "random", "shm", "stderr", "stdin", "stdout", "tty", "urandom", "zero"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ls /dev (-want +got):\n%s", diff)
	}
	// No descriptor of the jail or the driver leaks into a command (3 is
	// ls's own, on the directory it lists).
	if got := run(t, p, id, "ls /proc/self/fd"); got.Stdout != "0\n1\n2\n3\n" {
		t.Errorf("descriptors %q", got.Stdout)
	}
	// /proc is the sandbox's own: the jail is pid 1, no host process shows.
	if got := run(t, p, id, "cat /proc/1/cmdline"); got.Stdout != childArg0+"\x00" {
		t.Errorf("/proc/1/cmdline %q", got.Stdout)
	}
	n := 0
	fmt.Sscan(run(t, p, id, "ls /proc | grep -c '^[0-9]'").Stdout, &n)
	if n == 0 || n > 5 { // the jail, sh, ls, grep
		t.Errorf("%d processes visible", n)
	}
}

func TestProcessNoNetwork(t *testing.T) {
	p := newProcess(t, ProcessOptions{})
	id := start(t, p)
	var ifaces []string
	for _, line := range strings.Split(run(t, p, id, "cat /proc/net/dev").Stdout, "\n")[2:] {
		if name, _, ok := strings.Cut(line, ":"); ok {
			ifaces = append(ifaces, strings.TrimSpace(name))
		}
	}
	if diff := cmp.Diff([]string{"lo"}, ifaces); diff != "" {
		t.Errorf("interfaces (-want +got):\n%s", diff)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	res := run(t, p, id, fmt.Sprintf("echo hello | nc -w 2 127.0.0.1 %d; echo rc=$?", port))
	if !strings.Contains(res.Stdout, "rc=1") || !strings.Contains(res.Stderr, "refused") {
		t.Errorf("connect to the host's loopback: %+v", res)
	}
	ln.(*net.TCPListener).SetDeadline(time.Now())
	if c, err := ln.Accept(); err == nil {
		c.Close()
		t.Error("the host listener got a connection from the sandbox")
	}
	// The sandbox's own loopback works.
	// It polls until the listener is up, however long that takes. The
	// listener reads a FIFO it holds open itself, so its input never
	// ends: busybox nc half-closes on end of input, and a client that
	// saw that before its own "ping" was piped in would leave without
	// sending it.
	res = run(t, p, id, "mkfifo /tmp/in; nc -l -p 7000 <>/tmp/in >/tmp/got & until echo ping | nc 127.0.0.1 7000 2>/dev/null; do :; done; wait; cat /tmp/got")
	if res.Stdout != "ping\n" {
		t.Errorf("loopback inside: %+v", res)
	}
}

func TestProcessPidsLimit(t *testing.T) {
	const limit = 32
	p := newProcess(t, ProcessOptions{Pids: limit})
	id := start(t, p)
	if !p.active.has("pids") {
		t.Skip("no pids cgroup controller here")
	}
	started := fifo(t, p, id, "started")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		// The subshell dies at the first fork the limit refuses; its
		// sleeps live on until the exec ends.
		// One more takes the slot the subshell freed.
		_, err := p.Exec(ctx, id, "(for i in $(seq 1 64); do sleep 1000 & done) 2>/work/err; sleep 1000 & echo go > /work/started; exec sleep 1000", baton.ExecOptions{})
		errc <- err
	}()
	select {
	case <-started:
	case err := <-errc:
		t.Fatalf("exec ended early: %v", err)
	}
	// The commands' cgroup is full: the sleeps and the jail's thread that
	// starts commands.
	p.mu.Lock()
	g := p.boxes[id].cg
	p.mu.Unlock()
	cmd := g.cmd
	if !g.v2 {
		cmd = filepath.Dir(g.tasks)
	}
	tasks := 0
	b, err := os.ReadFile(filepath.Join(cmd, "pids.current"))
	fmt.Sscan(string(b), &tasks)
	if err != nil || tasks != limit {
		t.Errorf("%d tasks (%v) under a limit of %d tasks", tasks, err, limit)
	}
	if b, _ := os.ReadFile(filepath.Join(p.opt.StateDir, id, "work", "err")); !strings.Contains(string(b), "can't fork") {
		t.Errorf("stderr of the loop: %q", b)
	}
	// At the limit no further command starts, but the jail lives on.
	p.mu.Lock()
	j := p.boxes[id].jail
	p.mu.Unlock()
	_, err = p.Exec(context.Background(), id, "echo hi", baton.ExecOptions{})
	if err == nil || !strings.Contains(err.Error(), "resource temporarily unavailable") {
		t.Errorf("exec at the limit: %v", err)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("exec: %v", err)
	}
	if got := run(t, p, id, "cat /proc/self/uid_map"); !strings.Contains(got.Stdout, fmt.Sprint(DefaultHostUID)) {
		t.Errorf("after the limit: %+v", got)
	}
	p.mu.Lock()
	same := p.boxes[id].jail == j
	p.mu.Unlock()
	if !same {
		t.Error("the jail died at the limit")
	}
}

func TestProcessMemoryLimit(t *testing.T) {
	p := newProcess(t, ProcessOptions{Memory: 64 << 20})
	id := start(t, p)
	if !p.active.has("memory") {
		t.Skip("no memory cgroup controller here")
	}
	alloc := func(log2 int) string { // a string of 2^log2 bytes, built by doubling
		return fmt.Sprintf(`awk 'BEGIN { s = "x"; for (i = 0; i < %d; i++) s = s s; print length(s) }'`, log2)
	}
	if got := run(t, p, id, alloc(22)); got.Stdout != "4194304\n" || got.ExitCode != 0 {
		t.Fatalf("4 MiB: %+v", got)
	}
	got := run(t, p, id, alloc(28)) // 256 MiB
	if got.ExitCode == 0 || got.Stdout != "" || !strings.Contains(got.Stderr, "memory limit (64 MiB)") {
		t.Errorf("256 MiB under a 64 MiB limit: %+v", got)
	}
}

// TestProcessRlimits covers hosts where the pids and memory controllers
// cannot be used: rlimits stand in for them.
func TestProcessRlimits(t *testing.T) {
	p := newProcess(t, ProcessOptions{Pids: 100, Memory: 64 << 20})
	// As where the cgroup hierarchies cannot be written.
	p.cg = cgroups{{dir: "/proc/baton-no-cgroup", pids: true, memory: true}}
	id := start(t, p)
	if got := run(t, p, id, "ulimit -u; ulimit -v"); got.Stdout != "100\n65536\n" {
		t.Errorf("limits %+v", got)
	}
	got := run(t, p, id, `awk 'BEGIN { s = "x"; for (i = 0; i < 28; i++) s = s s; print length(s) }'`)
	if got.ExitCode == 0 || got.Stdout != "" {
		t.Errorf("256 MiB under a 64 MiB address space: %+v", got)
	}
	if got := run(t, p, id, "echo ok"); got.Stdout != "ok\n" {
		t.Errorf("after: %+v", got)
	}
}

func TestProcessTimeout(t *testing.T) {
	p := newProcess(t, ProcessOptions{Timeout: 300 * time.Millisecond})
	id := start(t, p)
	got := run(t, p, id, "echo before; sleep 30; echo after")
	want := baton.ExecResult{Stdout: "before\n", Stderr: "\nsandbox: command killed: it ran longer than the exec timeout (300ms)\n", ExitCode: -1}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// fifo makes a FIFO at /work/name of sandbox id and returns a channel
// that gets what a command writes to it first. A FIFO nobody wrote to is
// released at the end of the test.
func fifo(t *testing.T, p *Process, id, name string) <-chan string {
	t.Helper()
	path := filepath.Join(p.opt.StateDir, id, "work", name)
	if err := unix.Mkfifo(path, 0o666); err != nil {
		t.Fatal(err)
	}
	os.Chown(path, int(p.opt.HostUID), int(p.opt.HostUID))
	got := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		f, err := os.Open(path) // blocks until a writer opens it
		if err != nil {
			got <- err.Error()
			return
		}
		defer f.Close()
		b := make([]byte, 64)
		n, _ := f.Read(b)
		got <- string(b[:n])
	}()
	t.Cleanup(func() {
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close() // releases a reader still waiting
		}
		<-done
	})
	return got
}

// procs lists the processes in sandbox id's cgroup.
func procs(p *Process, id string) []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.boxes[id].cg.procs()
}

func TestProcessCancel(t *testing.T) {
	p := newProcess(t, ProcessOptions{})
	id := start(t, p)
	before := procs(p, id) // the jail
	started := fifo(t, p, id, "started")
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-started
		cancel()
	}()
	_, err := p.Exec(ctx, id, "sleep 1000 & sleep 1001 & echo go > /work/started; wait", baton.ExecOptions{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if got := procs(p, id); !cmp.Equal(before, got) {
		t.Errorf("processes after cancel %v, want only the jail %v", got, before)
	}
}

func TestProcessStop(t *testing.T) {
	defer goleak.VerifyNone(t)
	p := newProcess(t, ProcessOptions{})
	id := start(t, p)
	p.mu.Lock()
	b := p.boxes[id]
	p.mu.Unlock()
	jailPid := b.jail.cmd.Process.Pid
	started := fifo(t, p, id, "started")
	errc := make(chan error, 1)
	go func() {
		_, err := p.Exec(context.Background(), id, "echo go > /work/started; sleep 1000", baton.ExecOptions{})
		errc <- err
	}()
	<-started
	for i := 0; i < 2; i++ { // idempotent
		if err := p.Stop(context.Background(), id); err != nil {
			t.Fatalf("stop %d: %v", i, err)
		}
	}
	if err := <-errc; err == nil || !strings.Contains(err.Error(), "the sandbox was stopped") {
		t.Errorf("running exec: %v", err)
	}
	if err := syscall.Kill(jailPid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("jail still there: %v", err)
	}
	for _, d := range append(b.cg.dirs, b.dir) {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left: %v", d, err)
		}
	}
	_, err := p.Exec(context.Background(), id, "true", baton.ExecOptions{})
	if want := `sandbox runtime error: process exec "` + id + `" failed: no such sandbox`; err == nil || err.Error() != want {
		t.Errorf("exec after stop: %v", err)
	}
}

func TestProcessCleanup(t *testing.T) {
	p := newProcess(t, ProcessOptions{})
	ids := []string{start(t, p), start(t, p)}
	var jails []*jail
	var dirs []string
	p.mu.Lock()
	for _, id := range ids {
		jails = append(jails, p.boxes[id].jail)
		dirs = append(dirs, p.boxes[id].cg.dirs...)
	}
	p.mu.Unlock()

	// Another driver on another state directory is another instance.
	other := newProcess(t, ProcessOptions{})
	otherID := start(t, other)

	// As after a crash: a new driver on the same state directory finds
	// the sandboxes' state and cgroups, and removes them with their
	// processes.
	again := NewProcess(p.opt)
	n, err := again.Cleanup(context.Background())
	if err != nil || n != 2 {
		t.Fatalf("Cleanup = %d, %v; want 2", n, err)
	}
	for _, j := range jails {
		<-j.done // killed
	}
	for _, d := range append(dirs, filepath.Join(p.opt.StateDir, ids[0]), filepath.Join(p.opt.StateDir, ids[1])) {
		if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left: %v", d, err)
		}
	}
	if got := run(t, other, otherID, "echo alive"); got.Stdout != "alive\n" {
		t.Errorf("other instance's sandbox: %+v", got)
	}
	if n, err := again.Cleanup(context.Background()); n != 0 || err != nil {
		t.Errorf("second Cleanup = %d, %v", n, err)
	}
	// The driver goes on after a cleanup, limits and all.
	id := start(t, again)
	defer again.Stop(context.Background(), id)
	if got := procs(again, id); len(got) != 1 || len(again.active) == 0 {
		t.Errorf("after cleanup: processes %v in the sandbox's cgroups %v", got, again.active)
	}
	if got := run(t, again, id, "cat /proc/self/cgroup | grep pids"); !strings.HasSuffix(got.Stdout, ":pids:/\n") {
		t.Errorf("the command sees more than its cgroup: %+v", got)
	}
}

func TestProcessImages(t *testing.T) {
	p := newProcess(t, ProcessOptions{})
	for _, img := range []string{"missing", "../busybox", ""} {
		if _, err := p.Start(context.Background(), img); err == nil || !strings.HasPrefix(err.Error(), fmt.Sprintf("sandbox image %q error: ", img)) {
			t.Errorf("Start(%q) = %v", img, err)
		}
	}
	// A rootfs without a shell starts, but cannot run commands.
	if err := os.MkdirAll(filepath.Join(p.opt.RootfsDir, "empty", "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	id, err := p.Start(context.Background(), "empty")
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Exec(context.Background(), id, "true", baton.ExecOptions{})
	if err == nil || !strings.Contains(err.Error(), "run /bin/sh in the sandbox") {
		t.Errorf("exec without a shell: %v", err)
	}
}

func TestProcessWithoutUserNS(t *testing.T) {
	p := newProcess(t, ProcessOptions{NoUserNS: true})
	id := start(t, p)
	res := run(t, p, id, "cat /proc/self/uid_map; grep CapBnd /proc/self/status; echo x > /work/f && cat /work/f; mount -t tmpfs t /tmp")
	var capBnd uint64
	for c := range keptCaps {
		capBnd |= 1 << c
	}
	want := fmt.Sprintf("0 0 4294967295\nCapBnd:\t%016x\nx\n", capBnd)
	if got := strings.Join(strings.Fields(res.Stdout)[:3], " ") + "\n" + strings.SplitN(res.Stdout, "\n", 2)[1]; got != want {
		t.Errorf("stdout %q, want %q", got, want)
	}
	if res.ExitCode == 0 {
		t.Errorf("mount succeeded without CAP_SYS_ADMIN: %+v", res)
	}
}

func TestProcessConcurrentExecs(t *testing.T) {
	p := newProcess(t, ProcessOptions{})
	id := start(t, p)
	var wg sync.WaitGroup
	got := make([]string, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := p.Exec(context.Background(), id, fmt.Sprintf("echo %d > /tmp/%d; cat /tmp/%d", i, i, i), baton.ExecOptions{})
			if err != nil {
				got[i] = err.Error()
				return
			}
			got[i] = strings.TrimSpace(res.Stdout)
		}()
	}
	wg.Wait()
	want := []string{"0", "1", "2", "3", "4", "5", "6", "7"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestCgroupV2 runs a sandbox cgroup's life — create, add the jail, clone
// a command into cmd, kill and remove — on the unified hierarchy where it
// is mounted beside v1 ones (without controllers: limits are the v1 tests'
// business).
func TestCgroupV2(t *testing.T) {
	const unified = "/sys/fs/cgroup/unified"
	var st unix.Statfs_t
	if err := unix.Statfs(unified, &st); err != nil || st.Type != unix.CGROUP2_SUPER_MAGIC || os.Geteuid() != 0 {
		t.Skipf("no writable cgroup v2 hierarchy at %s", unified)
	}
	own, err := ownCgroups()
	if err != nil {
		t.Fatal(err)
	}
	cs := cgroups{{dir: filepath.Join(unified, own[""], "baton-test-"+baton.NewID("")[:8]), v2: true}}
	if _, err := cs.prepare(); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(cs[0].dir)
	g, err := cs.create("box", 10, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	// The jail is added; commands are cloned into cmd.
	jail := exec.Command("sleep", "1000")
	if err := jail.Start(); err != nil {
		t.Fatal(err)
	}
	if err := g.add(jail.Process.Pid); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(g.cmd, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "1001")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	err = cmd.Start()
	unix.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	in := func(dir string) string {
		b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		return strings.TrimSpace(string(b))
	}
	if in(g.jail[0]) != fmt.Sprint(jail.Process.Pid) || in(g.cmd) != fmt.Sprint(cmd.Process.Pid) {
		t.Errorf("jail has %q, cmd has %q", in(g.jail[0]), in(g.cmd))
	}
	if got := cs.leftovers(); len(got["box"]) != 1 {
		t.Errorf("leftovers %v", got)
	}
	done := make(chan error, 2)
	go func() { done <- jail.Wait() }()
	go func() { done <- cmd.Wait() }()
	if err := g.destroy(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := <-done; err == nil || !strings.Contains(err.Error(), "killed") {
			t.Errorf("sleep: %v", err)
		}
	}
	if _, err := os.Stat(g.dirs[0]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cgroup left: %v", err)
	}
}

func TestDetectCgroups(t *testing.T) {
	cs, err := detectCgroups("i1")
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range cs {
		if filepath.Base(h.dir) != "baton-i1" || !strings.HasPrefix(h.dir, cgroupMount+"/") {
			t.Errorf("hierarchy %+v", h)
		}
	}
	t.Logf("%+v", cs)
}

// BenchmarkProcessExec measures an `echo hi` round trip in a running
// sandbox and reports its median.
func BenchmarkProcessExec(b *testing.B) {
	p := newProcess(b, ProcessOptions{})
	id := start(b, p)
	b.ReportAllocs()
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		res, err := p.Exec(context.Background(), id, "echo hi", baton.ExecOptions{})
		if err != nil || res.Stdout != "hi\n" {
			b.Fatalf("%+v %v", res, err)
		}
		ds = append(ds, time.Since(t0))
	}
	b.StopTimer()
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds())/1000, "p99-ms")
}
