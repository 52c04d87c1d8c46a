package supervisor

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

// TestMain lets the test binary be the supervisor that Wrap starts.
func TestMain(m *testing.M) {
	Reexec()
	os.Exit(m.Run())
}

// TestWrapExitsAsTheCommand: the supervised command's exit code, its
// death by a signal, its streams and its environment are the caller's
// to see as without the supervisor.
func TestWrapExitsAsTheCommand(t *testing.T) {
	cases := []struct {
		script string
		code   int            // for an exit
		sig    syscall.Signal // for a death by a signal
	}{
		{script: "exit 3", code: 3},
		{script: `kill -TERM $$`, sig: syscall.SIGTERM},
		{script: `kill -KILL $$`, sig: syscall.SIGKILL},
		{script: `kill -ABRT $$`, code: 128 + int(syscall.SIGABRT)},
	}
	for _, tc := range cases {
		cmd := exec.Command("/bin/sh", "-c", tc.script)
		Wrap(cmd)
		if cmd.Path != "/proc/self/exe" {
			t.Fatalf("Wrap left the path %s", cmd.Path)
		}
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("%s: %v, want an exit error", tc.script, err)
		}
		ws := ee.Sys().(syscall.WaitStatus)
		switch {
		case tc.sig != 0 && (!ws.Signaled() || ws.Signal() != tc.sig):
			t.Errorf("%s: %v, want killed by %v", tc.script, ws, tc.sig)
		case tc.sig == 0 && (!ws.Exited() || ws.ExitStatus() != tc.code):
			t.Errorf("%s: %v, want exit %d", tc.script, ws, tc.code)
		}
	}

	cmd := exec.Command("sh", "-c", `read line; echo "$line $X ${BATON_SUPERVISOR:-unmarked} $(pwd)"; echo oops >&2`)
	dir := t.TempDir()
	cmd.Dir, cmd.Env = dir, []string{"X=x", "PATH=/usr/bin:/bin"}
	cmd.Stdin = strings.NewReader("in\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	Wrap(cmd)
	out, err := cmd.Output()
	if want := "in x unmarked " + dir + "\n"; err != nil || string(out) != want || stderr.String() != "oops\n" {
		t.Errorf("output %q, stderr %q, %v; want %q, \"oops\\n\"", out, stderr.String(), err, want)
	}
}

// TestWrapLeavesUnstartable: a command that cannot start fails in Start
// as it would without the supervisor.
func TestWrapLeavesUnstartable(t *testing.T) {
	for _, cmd := range []*exec.Cmd{exec.Command("/no/such/program"), exec.Command("no-such-program-here")} {
		Wrap(cmd)
		if err := cmd.Start(); err == nil || cmd.Path == "/proc/self/exe" {
			t.Errorf("%v started (%v)", cmd.Args, err)
			cmd.Process.Kill()
			cmd.Wait()
		}
	}
	cmd := exec.Command("/bin/true")
	cmd.Dir = "/no/such/dir"
	Wrap(cmd)
	if cmd.Path == "/proc/self/exe" {
		t.Error("a command in a missing directory was wrapped")
	}
}

// TestWrapForwardPassesSignals: a SIGTERM sent to the supervisor alone
// reaches the command under WrapForward.
func TestWrapForwardPassesSignals(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", `trap 'kill $!; exit 7' TERM; sleep 300 & echo ready; wait`)
	WrapForward(cmd)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // a failing run leaves nothing
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("read %q, %v", line, err)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Errorf("%v, want exit 7 from the trap", err)
	}
}
