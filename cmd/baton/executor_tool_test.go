//go:build unix

package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-engine/baton/client/executor"
	"github.com/baton-engine/baton/machine"
)

// testTool is a command-backed tool as `baton executor` serves it.
type testTool struct{ executor.Tool }

// run calls the tool with input.
func (r testTool) run(ctx context.Context, input json.RawMessage) (executor.Result, error) {
	return r.Handle(ctx, executor.Call{Name: r.Def.Name, Input: input})
}

// toolRunnerFor parses one [[tools]] entry and returns its tool in dir.
func toolRunnerFor(t *testing.T, dir, entry string) testTool {
	t.Helper()
	c, err := parseExecConfig("t.toml", []byte("[[tools]]\nname = \"t\"\n"+entry))
	if err != nil {
		t.Fatal(err)
	}
	return testTool{machine.NewTool(c.Tools[0], dir, childEnv())}
}

// singleText returns the one text block of r.
func singleText(t *testing.T, r executor.Result) string {
	t.Helper()
	var blocks []struct{ Type, Text string }
	if err := json.Unmarshal(r.Content, &blocks); err != nil || len(blocks) != 1 || blocks[0].Type != "text" {
		t.Fatalf("content %s is not one text block", r.Content)
	}
	return blocks[0].Text
}

const textSchema = `input_schema = '{"type":"object","properties":{"text":{"type":"string"},"n":{"type":"integer"},"obj":{"type":"object"},"gone":{}}}'` + "\n"

// TestExecutorCmdToolStdinJSON: the input reaches the command as JSON on stdin and
// its stdout is the result; it runs in the work directory.
func TestExecutorCmdToolStdinJSON(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := toolRunnerFor(t, dir, `command = ["sh", "-c", "cat; echo; pwd"]`)
	res, err := r.run(context.Background(), json.RawMessage(`{"text":"hi","n":2}`))
	if err != nil || res.IsError {
		t.Fatalf("run: %v %+v", err, res)
	}
	if got, want := singleText(t, res), `{"text":"hi","n":2}`+"\n"+dir+"\n"; got != want {
		t.Errorf("output %q, want %q", got, want)
	}
	res, _ = r.run(context.Background(), nil) // no input is {}
	if got := singleText(t, res); !strings.HasPrefix(got, "{}\n") {
		t.Errorf("output for no input %q", got)
	}
	res, _ = r.run(context.Background(), json.RawMessage(`[1]`))
	if !res.IsError || singleText(t, res) != "the tool input must be a JSON object" {
		t.Errorf("array input: %+v", res)
	}
}

// TestExecutorCmdToolTemplates substitutes placeholders without letting their
// values reach a shell as code.
func TestExecutorCmdToolTemplates(t *testing.T) {
	t.Parallel()
	const evil = `'; touch pwned1; $(touch pwned2) ` + "`touch pwned3`" + ` "a b" \ {text} & | > pwned4`
	input, _ := json.Marshal(map[string]any{"text": evil, "n": 7, "obj": map[string]int{"a": 1}, "gone": nil})
	cases := []struct {
		name, command, want string
	}{
		{"script", `command = "printf '%s|%s|%s|%s' {text} {n} {obj} {gone}"`, evil + `|7|{"a":1}|`},
		{"script keeps shell variables", `command = "X=1; printf %s ${X}{n}"`, "17"},
		{"argv", `command = ["printf", "%s|%s|%s", "{text}", "{n}", "{gone}"]`, evil + "|7|"},
		{"argv keeps shell variables", `command = ["printf", "%s", "${text}"]`, "${text}"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			r := toolRunnerFor(t, dir, textSchema+tc.command)
			res, err := r.run(context.Background(), input)
			if err != nil || res.IsError {
				t.Fatalf("run: %v %s", err, res.Content)
			}
			if got := singleText(t, res); got != tc.want {
				t.Errorf("output\n  %q\nwant\n  %q", got, tc.want)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("the input ran as code: the work dir holds %v", entries)
			}
		})
	}
}

// TestExecutorCmdToolFailure: a non-zero exit is an is_error result with stderr; a
// missing program too.
func TestExecutorCmdToolFailure(t *testing.T) {
	t.Parallel()
	r := toolRunnerFor(t, t.TempDir(), `command = "echo partial; echo broken >&2; exit 3"`)
	res, err := r.run(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "t failed with exit status 3:\nbroken\n"; !res.IsError || singleText(t, res) != want {
		t.Errorf("result %+v %q, want is_error %q", res, singleText(t, res), want)
	}
	r = toolRunnerFor(t, t.TempDir(), `command = ["/no/such/program"]`)
	res, err = r.run(context.Background(), nil)
	if err != nil || !res.IsError || !strings.HasPrefix(singleText(t, res), "t: cannot run /no/such/program:") {
		t.Errorf("missing program: %v %+v", err, res)
	}
}

// TestExecutorCmdToolTimeout stops a command at its timeout with an is_error result
// that keeps its output so far.
func TestExecutorCmdToolTimeout(t *testing.T) {
	t.Parallel()
	r := toolRunnerFor(t, t.TempDir(), "command = \"echo started; exec sleep 60\"\ntimeout = \"200ms\"\n")
	start := time.Now()
	res, err := r.run(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "t timed out after 200ms:\nstarted\n"; !res.IsError || singleText(t, res) != want {
		t.Errorf("result %q, want is_error %q", singleText(t, res), want)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the command outlived its timeout: %s", d)
	}
}

// TestExecutorCmdToolOutputCap keeps max_output bytes of stdout and says so.
func TestExecutorCmdToolOutputCap(t *testing.T) {
	t.Parallel()
	r := toolRunnerFor(t, t.TempDir(), "command = \"head -c 100000 /dev/zero | tr '\\\\0' a\"\nmax_output = 10\n")
	res, err := r.run(context.Background(), nil)
	if err != nil || res.IsError {
		t.Fatalf("run: %v %+v", err, res)
	}
	if got, want := singleText(t, res), "aaaaaaaaaa\n[output truncated at 10 bytes]"; got != want {
		t.Errorf("output %q, want %q", got, want)
	}
}

// TestExecutorCmdToolCancel returns the context's error when the call is cancelled.
func TestExecutorCmdToolCancel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "started")
	makeFIFO(t, fifo)
	r := toolRunnerFor(t, dir, `command = "echo > started; exec sleep 60"`)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := r.run(ctx, nil)
		done <- err
	}()
	readFIFO(t, fifo) // the command is running
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("run: %v, want context.Canceled", err)
	}
}

// BenchmarkExecutorCmdToolRun runs a command-backed tool end to end:
// the process group, stdin, capture and the result.
func BenchmarkExecutorCmdToolRun(b *testing.B) {
	c, err := parseExecConfig("b.toml", []byte("[[tools]]\nname = \"t\"\ncommand = [\"cat\"]\n"))
	if err != nil {
		b.Fatal(err)
	}
	r := testTool{machine.NewTool(c.Tools[0], b.TempDir(), nil)}
	input := json.RawMessage(`{"text":"hello"}`)
	b.ReportAllocs()
	for b.Loop() {
		if res, err := r.run(context.Background(), input); err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
}
