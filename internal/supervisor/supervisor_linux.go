//go:build linux

package supervisor

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// deathSignal is the supervisor's parent-death signal. It is not one a
// caller ends commands with, so forwarding never mistakes it; and since it
// also comes when the thread that started the supervisor exits while its
// process lives, the supervisor believes it only once it has a new parent.
const deathSignal = syscall.SIGUSR2

func wrap(cmd *exec.Cmd, mode string) {
	if cmd.Err != nil || cmd.Path == "" {
		return
	}
	prog := cmd.Path
	if !filepath.IsAbs(prog) && cmd.Dir != "" {
		prog = filepath.Join(cmd.Dir, prog)
	}
	if _, err := exec.LookPath(prog); err != nil {
		return
	}
	if cmd.Dir != "" {
		if fi, err := os.Stat(cmd.Dir); err != nil || !fi.IsDir() {
			return
		}
	}
	env := append(cmd.Environ(), envMarker+"=1")
	cmd.Args = append([]string{arg0, mode, strconv.Itoa(os.Getpid()), cmd.Path}, cmd.Args...)
	cmd.Path = "/proc/self/exe"
	cmd.Env = env
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid, cmd.SysProcAttr.Pgid = true, 0
	cmd.SysProcAttr.Pdeathsig = deathSignal
}

// Reexec turns this process into a supervisor when Wrap started it: it
// runs the command and exits as it did, never returning. In any other
// process it returns at once.
func Reexec() {
	if len(os.Args) < 5 || os.Args[0] != arg0 || os.Getenv(envMarker) != "1" {
		return
	}
	parent, err := strconv.Atoi(os.Args[2])
	if err != nil {
		return
	}
	os.Exit(supervise(os.Args[1] == modeForward, parent, os.Args[3], os.Args[4:]))
}

// supervise runs the command and returns the exit code to leave with.
func supervise(forward bool, parent int, path string, argv []string) int {
	// The command's own parent-death signal fires when the thread that
	// started it exits: this one, locked here, lives as long as the process.
	runtime.LockOSThread()
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, deathSignal, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if os.Getppid() != parent { // gone before the signal was caught
		return 128 + int(syscall.SIGKILL)
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, envMarker+"=") })
	p, err := os.StartProcess(path, argv, &os.ProcAttr{
		Env:   env,
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
		Sys:   &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
		return 127
	}
	ended := make(chan *os.ProcessState, 1)
	go func() {
		st, err := p.Wait()
		if err != nil {
			st = nil
		}
		ended <- st
	}()
	for {
		select {
		case st := <-ended:
			return exitAs(st)
		case sig := <-sigs:
			switch {
			case os.Getppid() != parent:
				// The parent died: everything in the group goes, this
				// process too.
				syscall.Kill(0, syscall.SIGKILL)
			case forward && sig != deathSignal:
				p.Signal(sig)
			}
		}
	}
}

// exitAs returns the command's exit code, or dies of the signal that
// killed it where the Go runtime lets a process die of it.
func exitAs(st *os.ProcessState) int {
	if st == nil {
		return 128 + int(syscall.SIGKILL)
	}
	ws, _ := st.Sys().(syscall.WaitStatus)
	if !ws.Signaled() {
		return ws.ExitStatus()
	}
	switch sig := ws.Signal(); sig {
	case syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM, syscall.SIGKILL:
		signal.Reset(sig)
		syscall.Kill(os.Getpid(), sig)
	}
	return 128 + int(ws.Signal())
}
