package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/sandbox/sandboxtest"
)

// fakeStdinShell answers the commands of TestDockerExecStdin the way sh in
// an alpine container does, given the exec's input.
func fakeStdinShell(cmd []string, stdin []byte) sandboxtest.Script {
	switch cmd[len(cmd)-1] {
	case "cat":
		return sandboxtest.Script{Frames: []sandboxtest.Frame{{Stream: 1, Data: string(stdin)}}, Chunk: 1000}
	case "wc -c":
		return sandboxtest.Script{Frames: []sandboxtest.Frame{{Stream: 1, Data: fmt.Sprintf("%d\n", len(stdin))}}}
	case "cat >&2; exit 4":
		return sandboxtest.Script{Frames: []sandboxtest.Frame{{Stream: 2, Data: string(stdin)}}, ExitCode: 4}
	}
	return sandboxtest.Script{Frames: []sandboxtest.Frame{{Stream: 2, Data: "sh: unknown\n"}}, ExitCode: 127}
}

func TestDockerExecStdin(t *testing.T) {
	onEngines(t, func(t *testing.T, d *Docker, fake *sandboxtest.Engine) {
		if fake != nil {
			fake.ExecStdin = fakeStdinShell
		}
		ctx := context.Background()
		id, err := d.Start(ctx, "alpine:3")
		if err != nil {
			t.Fatal(err)
		}
		defer d.Stop(ctx, id)
		big := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB: more than any socket buffer
		tests := []struct {
			cmd   string
			stdin string
			limit int
			want  baton.ExecResult
		}{
			{cmd: "cat", stdin: "hello\nworld", want: baton.ExecResult{Stdout: "hello\nworld"}},
			{cmd: "cat", stdin: "", want: baton.ExecResult{}}, // empty, not absent: still attached and closed
			{cmd: "wc -c", stdin: big, want: baton.ExecResult{Stdout: "1048576\n"}},
			{cmd: "cat", stdin: big, limit: 10, want: baton.ExecResult{Stdout: "0123456789", Truncated: true}},
			{cmd: "cat >&2; exit 4", stdin: "oops", want: baton.ExecResult{Stderr: "oops", ExitCode: 4}},
		}
		for _, tc := range tests {
			got, err := d.Exec(ctx, id, tc.cmd, baton.ExecOptions{Stdin: []byte(tc.stdin), Limit: tc.limit})
			if err != nil {
				t.Fatalf("%s: %v", tc.cmd, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s (-want +got):\n%s", tc.cmd, diff)
			}
		}
		if fake == nil {
			return
		}
		// Exec with input is created attached and started on an upgraded
		// connection; without input, neither.
		if _, err := d.Exec(ctx, id, "echo plain", baton.ExecOptions{}); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range fake.Requests() {
			switch {
			case strings.HasSuffix(r.Path, "/exec"):
				var body map[string]any
				json.Unmarshal([]byte(r.Body), &body)
				got = append(got, fmt.Sprintf("create stdin=%v", body["AttachStdin"]))
			case strings.HasSuffix(r.Path, "/start") && strings.HasPrefix(r.Path, "/exec/"):
				got = append(got, "start upgrade="+r.Upgrade)
			}
		}
		want := []string{
			"create stdin=true", "start upgrade=tcp", "create stdin=true", "start upgrade=tcp",
			"create stdin=true", "start upgrade=tcp", "create stdin=true", "start upgrade=tcp",
			"create stdin=true", "start upgrade=tcp", "create stdin=<nil>", "start upgrade=",
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("engine calls (-want +got):\n%s", diff)
		}
	})
}

func TestDockerExecStdinCancel(t *testing.T) {
	e := &sandboxtest.Engine{Images: []string{"alpine:3"}}
	started := make(chan []byte, 1)
	e.ExecStdin = func(_ []string, stdin []byte) sandboxtest.Script {
		started <- stdin
		return sandboxtest.Script{Block: true}
	}
	d := NewDocker(e.Start(t))
	id, err := d.Start(context.Background(), "alpine:3")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		if got := <-started; string(got) != "in" {
			t.Errorf("stdin %q", got)
		}
		cancel()
	}()
	_, err = d.Exec(ctx, id, "sleep 30", baton.ExecOptions{Stdin: []byte("in")})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestDockerExecStdinUnknownContainer(t *testing.T) {
	e := &sandboxtest.Engine{}
	d := NewDocker(e.Start(t))
	_, err := d.Exec(context.Background(), "gone", "cat", baton.ExecOptions{Stdin: []byte("x")})
	want := `sandbox runtime error: docker exec "gone" failed: No such container: gone`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v", err)
	}
}
