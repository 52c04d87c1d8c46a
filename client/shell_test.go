package client

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// toolFake is the fake server answering the sandbox and subagent methods.
// Terminal subagent reports are also sent on terminal, in order.
type toolFake struct {
	*fake
	terminal chan SubagentReport
}

func newToolFake(t *testing.T) *toolFake {
	f := &toolFake{fake: newFake(t), terminal: make(chan SubagentReport, 64)}
	f.on("session.reportLocalSandbox", func(n *ndjson, c rpcCall) { n.result(`{"reported":true}`) })
	f.on("session.updateClientTools", func(n *ndjson, c rpcCall) { n.result(`{"updated":true}`) })
	f.on("session.reportLocalSubagent", func(n *ndjson, c rpcCall) {
		// Queued before the answer, so the queue keeps the call order.
		defer n.result(`{"reported":true}`)
		var r SubagentReport
		if err := json.Unmarshal(c.Params, &r); err != nil {
			f.t.Errorf("report params %s: %v", c.Params, err)
		}
		switch r.State {
		case "completed", "failed", "cancelled":
			f.terminal <- r
		}
	})
	return f
}

// connect opens a session through h and closes it when the test ends.
func (f *toolFake) connect(t *testing.T, h *Harness) *Session {
	t.Helper()
	s := f.fake.connect(h)
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// next returns the next terminal subagent report.
func (f *toolFake) next(t *testing.T) SubagentReport {
	t.Helper()
	select {
	case r := <-f.terminal:
		return r
	case <-time.After(failsafe):
		t.Fatal("no terminal subagent report")
		return SubagentReport{}
	}
}

// params returns the decoded params of every call of method.
func (f *toolFake) params(t *testing.T, method string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, c := range f.callsOf(method) {
		var m map[string]any
		if err := json.Unmarshal(c.Params, &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// callTool runs the handler of tool name as Send would, on session s.
func callTool(t *testing.T, s *Session, name, input string) (any, error) {
	t.Helper()
	fn, ok := s.h.handler(name)
	if !ok {
		t.Fatalf("no handler for %q", name)
	}
	return fn(context.WithValue(context.Background(), sessionKey{}, s), json.RawMessage(input))
}

// callText runs a tool that must succeed with JSON text.
func callText(t *testing.T, s *Session, name, input string) string {
	t.Helper()
	v, err := callTool(t, s, name, input)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	text, ok := v.(string)
	if !ok {
		t.Fatalf("%s returned %T", name, v)
	}
	return text
}

func decodeExec(t *testing.T, text string) ExecResult {
	t.Helper()
	var r ExecResult
	if err := json.Unmarshal([]byte(text), &r); err != nil {
		t.Fatalf("exec result %s: %v", text, err)
	}
	return r
}

func TestTemplateParams(t *testing.T) {
	tests := []struct {
		tmpl string
		want []string
		err  string
	}{
		{"ls", []string{}, ""},
		{"grep {pattern} {file} {pattern}", []string{"pattern", "file"}, ""},
		{"echo }{a}", []string{"a"}, ""},
		{"echo {a{b}", []string{"a{b"}, ""},
		{"echo {}", nil, "empty `{}` placeholder in command template"},
		{"echo {a} {", nil, "unterminated `{` in command template"},
		{"echo {a", nil, "unterminated `{` in command template"},
	}
	for _, tt := range tests {
		got, err := templateParams(tt.tmpl)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("%q: err %v, want %q", tt.tmpl, err, tt.err)
			}
			continue
		}
		if err != nil || !cmp.Equal(got, tt.want) {
			t.Errorf("%q: %q, %v; want %q", tt.tmpl, got, err, tt.want)
		}
	}
}

// injection is BAE's payload list with the quoted forms it expects.
var injection = [][2]string{
	{"a'; rm -rf / #", `echo 'a'\''; rm -rf / #'`},
	{"`whoami`", "echo '`whoami`'"},
	{"$(whoami)", "echo '$(whoami)'"},
	{"x && y", "echo 'x && y'"},
	{`he said "hi"`, `echo 'he said "hi"'`},
}

func TestInterpolateQuotes(t *testing.T) {
	for _, c := range injection {
		got, err := interpolate("echo {x}", map[string]string{"x": c[0]})
		if err != nil || got != c[1] {
			t.Errorf("interpolate %q = %q, %v; want %q", c[0], got, err, c[1])
		}
		// The shell reads the quoted value back as one literal word.
		cmd, _ := interpolate("printf %s {x}", map[string]string{"x": c[0]})
		out, err := exec.Command("/bin/sh", "-c", cmd).Output()
		if err != nil || string(out) != c[0] {
			t.Errorf("sh -c %q printed %q, %v", cmd, out, err)
		}
	}
	got, err := interpolate("{a} {b}", map[string]string{"a": "{b}", "b": "x"})
	if want := `'{b}' 'x'`; err != nil || got != want {
		t.Errorf("substituted text was rescanned: %q, %v", got, err)
	}
	if _, err := interpolate("{a} {b}", map[string]string{"a": "1"}); err == nil || err.Error() != "missing required string parameter `b`" {
		t.Errorf("missing parameter: %v", err)
	}
}

func TestAddShellToolConfig(t *testing.T) {
	bad := map[string]ShellConfig{
		"local without image":   {Target: TargetLocal},
		"name without template": {Name: "ls"},
		"template without name": {Template: "ls {dir}"},
		"bad template":          {Name: "ls", Template: "ls {}"},
		"unknown target":        {Target: 7},
	}
	for name, cfg := range bad {
		if err := NewHarness(Config{}).AddShellTool(cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}

	f := newToolFake(t)
	h := f.harness()
	for _, cfg := range []ShellConfig{
		{Target: TargetRemote}, // Auto: declared as a sandbox tool
		{Target: TargetRemote, Name: "grep", Description: "grep a file", Template: "grep {pattern} {file}"},
		{Name: "count", Description: "count lines", Template: "wc -l {file}", Target: TargetRemote, Mode: RemoteManual},
	} {
		if err := h.AddShellTool(cfg); err != nil {
			t.Fatal(err)
		}
	}
	f.connect(t, h)
	var body struct {
		Tools        []ToolDef `json:"tools"`
		SandboxTools []ToolDef `json:"sandbox_tools"`
	}
	if err := json.Unmarshal(f.opens[0], &body); err != nil {
		t.Fatal(err)
	}
	if len(body.Tools) != 1 || body.Tools[0].Name != "count" {
		t.Errorf("client tools %+v", body.Tools)
	}
	if len(body.SandboxTools) != 2 || body.SandboxTools[0].Name != ShellCommandTool || body.SandboxTools[1].Name != "grep" {
		t.Fatalf("sandbox tools %+v", body.SandboxTools)
	}
	want := `{"type":"object","properties":{"file":{"type":"string","description":"Value substituted for {file} (shell-escaped before use)."},` +
		`"pattern":{"type":"string","description":"Value substituted for {pattern} (shell-escaped before use)."}},` +
		`"required":["pattern","file"],"additionalProperties":false}`
	if got := string(body.SandboxTools[1].InputSchema); got != want {
		t.Errorf("named schema\n got %s\nwant %s", got, want)
	}
	if !strings.Contains(string(body.SandboxTools[0].InputSchema), `"required":["command"]`) {
		t.Errorf("run_shell_command schema %s", body.SandboxTools[0].InputSchema)
	}
}

func TestShellHost(t *testing.T) {
	f := newToolFake(t)
	h := f.harness()
	if err := h.AddShellTool(ShellConfig{}); err != nil {
		t.Fatal(err)
	}
	if err := h.AddShellTool(ShellConfig{Name: "greet", Description: "greet", Template: "printf 'hi %s|' {who} {who}"}); err != nil {
		t.Fatal(err)
	}
	s := f.connect(t, h)

	got := decodeExec(t, callText(t, s, ShellCommandTool, `{"command":"echo out; echo err >&2; exit 3"}`))
	if d := cmp.Diff(ExecResult{Stdout: "out\n", Stderr: "err\n", ExitCode: 3}, got); d != "" {
		t.Errorf("result (-want +got):\n%s", d)
	}
	if got := decodeExec(t, callText(t, s, "greet", `{"who":"a'b"}`)); got.Stdout != "hi a'b|hi a'b|" {
		t.Errorf("named tool printed %q", got.Stdout)
	}
	if _, err := callTool(t, s, ShellCommandTool, `{"command":1}`); err == nil || err.Error() != "run_shell_command requires a string `command`" {
		t.Errorf("bad input: %v", err)
	}
	if _, err := callTool(t, s, "greet", `{}`); err == nil || err.Error() != "missing required string parameter `who`" {
		t.Errorf("missing parameter: %v", err)
	}
	run := map[string]any{"state": "running", "image": nil, "unsandboxed": true, "container_id": nil, "detail": nil}
	stop := map[string]any{"state": "stopped", "image": nil, "unsandboxed": true, "container_id": nil, "detail": nil}
	if d := cmp.Diff([]map[string]any{run, stop, run, stop}, f.params(t, "session.reportLocalSandbox")); d != "" {
		t.Errorf("reports (-want +got):\n%s", d)
	}
	// Outside a session the tool refuses to run.
	fn, _ := h.handler(ShellCommandTool)
	if _, err := fn(context.Background(), json.RawMessage(`{"command":"true"}`)); !errors.Is(err, errNoSession) {
		t.Errorf("no session: %v", err)
	}
}

func TestShellTimeoutAndCap(t *testing.T) {
	f := newToolFake(t)
	h := f.harness()
	if err := h.AddShellTool(ShellConfig{Timeout: 100 * time.Millisecond, MaxOutput: 101}); err != nil {
		t.Fatal(err)
	}
	s := f.connect(t, h)
	_, err := callTool(t, s, ShellCommandTool, `{"command":"sleep 30"}`)
	if err == nil || err.Error() != "command timed out after 100ms" {
		t.Fatalf("timeout: %v", err)
	}
	reports := f.params(t, "session.reportLocalSandbox")
	if last := reports[len(reports)-1]; last["state"] != "error" || last["detail"] != "command timed out after 100ms" {
		t.Errorf("last report %v", last)
	}

	// 200 two-byte runes: cut to 100 bytes (101 would split one).
	got := decodeExec(t, callText(t, s, ShellCommandTool, `{"command":"i=0; while [ $i -lt 200 ]; do printf é; i=$((i+1)); done; echo small >&2"}`))
	if want := strings.Repeat("é", 50) + truncNote; got.Stdout != want || got.Stderr != "small\n" {
		t.Errorf("capped result %q / %q", got.Stdout, got.Stderr)
	}
}

func TestCutUTF8(t *testing.T) {
	tests := []struct {
		in   string
		max  int
		want string
		cut  bool
	}{
		{"abc", 3, "abc", false},
		{"abcd", 3, "abc", true},
		{"aé", 2, "a", true},   // é is 2 bytes: not split
		{"aé", 3, "aé", false}, // fits
		{"a€b", 3, "a", true},  // € is 3 bytes
		{"a€b", 4, "a€", true}, // cut falls after €
		{"😀x", 3, "", true},    // 4-byte rune
		{"\xff\xffab", 2, "\xff\xff", true},
		{"ab\x80\x80\x80\x80c", 5, "ab\x80\x80\x80", true}, // invalid bytes are cut where they are
	}
	for _, tt := range tests {
		got, cut := cutUTF8([]byte(tt.in), tt.max)
		if string(got) != tt.want || cut != tt.cut {
			t.Errorf("cutUTF8(%q, %d) = %q, %v; want %q, %v", tt.in, tt.max, got, cut, tt.want, tt.cut)
		}
		if utf8.ValidString(tt.in) && !utf8.Valid(got) {
			t.Errorf("cutUTF8(%q, %d) split a rune", tt.in, tt.max)
		}
	}
	// A stream longer than the cap is cut at OutputCap.
	out, err := runProc(context.Background(), procSpec{prog: "/bin/sh", args: []string{"-c", "head -c 100000 /dev/zero"}})
	if err != nil || len(out.stdout) != OutputCap || !out.cutOut || out.cutErr {
		t.Errorf("default cap: %d bytes, cut %v/%v, %v", len(out.stdout), out.cutOut, out.cutErr, err)
	}
}

// fakeDocker writes a docker CLI stand-in that logs its arguments and runs
// exec'd commands on the host, and returns its path and log.
func fakeDocker(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	script := `#!/bin/sh
echo "$*" >> '` + log + `'
case "$1" in
image) exit 1 ;;
pull) echo pulled; exit 0 ;;
run) echo cid123; exit 0 ;;
exec) shift; [ "$1" = "-i" ] && shift; shift; exec "$@" ;;
stop) echo "Error: No such container: $2" >&2; exit 1 ;;
esac
exit 2
`
	p := filepath.Join(dir, "docker")
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p, log
}

func readLines(t *testing.T, p string) []string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

func TestShellLocalContainer(t *testing.T) {
	docker, log := fakeDocker(t)
	f := newToolFake(t)
	h := f.harness()
	if err := h.AddShellTool(ShellConfig{Target: TargetLocal, Image: "alpine:3", Engine: docker}); err != nil {
		t.Fatal(err)
	}
	s := f.fake.connect(h)
	for _, word := range []string{"one", "two"} {
		if got := decodeExec(t, callText(t, s, ShellCommandTool, `{"command":"echo `+word+`"}`)); got.Stdout != word+"\n" {
			t.Errorf("exec printed %q", got.Stdout)
		}
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"image inspect alpine:3", "pull alpine:3", "run -d --rm alpine:3 sleep infinity",
		"exec cid123 sh -c echo one", "exec cid123 sh -c echo two", "stop cid123",
	}
	if d := cmp.Diff(want, readLines(t, log)); d != "" {
		t.Errorf("docker calls (-want +got):\n%s", d)
	}
	rep := func(state string) map[string]any {
		return map[string]any{"state": state, "image": "alpine:3", "unsandboxed": false, "container_id": "cid123", "detail": nil}
	}
	if d := cmp.Diff([]map[string]any{rep("running"), rep("stopped")}, f.params(t, "session.reportLocalSandbox")); d != "" {
		t.Errorf("reports (-want +got):\n%s", d)
	}

	// A CLI that cannot run fails the call and reports the error.
	h2 := f.harness()
	if err := h2.AddShellTool(ShellConfig{Target: TargetLocal, Image: "alpine:3", Engine: filepath.Join(t.TempDir(), "nope")}); err != nil {
		t.Fatal(err)
	}
	s2 := f.fake.connect(h2)
	_, err := callTool(t, s2, ShellCommandTool, `{"command":"true"}`)
	if err == nil || !strings.HasPrefix(err.Error(), `failed to run "`) {
		t.Errorf("missing CLI: %v", err)
	}
	reports := f.params(t, "session.reportLocalSandbox")
	if last := reports[len(reports)-1]; last["state"] != "error" || last["image"] != "alpine:3" || last["container_id"] != nil {
		t.Errorf("error report %v", last)
	}
}

func TestShellRemoteManual(t *testing.T) {
	f := newToolFake(t)
	f.on("session.execRemoteSandbox", func(n *ndjson, c rpcCall) {
		var p struct{ Command string }
		json.Unmarshal(c.Params, &p)
		if p.Command == "fail" {
			n.error(-32013, "sandbox_not_running: no remote sandbox is running for this session")
			return
		}
		n.result(`{"stdout":` + quote("ran "+p.Command) + `,"stderr":"","exit_code":0}`)
	})
	h := f.harness()
	err := h.AddShellTool(ShellConfig{Target: TargetRemote, Mode: RemoteManual, Transform: func(r ExecResult) (any, error) {
		return "transformed: " + r.Stdout, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	s := f.connect(t, h)
	if got := callText(t, s, ShellCommandTool, `{"command":"ls /"}`); got != "transformed: ran ls /" {
		t.Errorf("result %q", got)
	}
	_, err = callTool(t, s, ShellCommandTool, `{"command":"fail"}`)
	var rpcErr *RPCError
	if !errors.As(err, &rpcErr) || rpcErr.Code != -32013 {
		t.Errorf("exec failure: %v", err)
	}
	if n := len(f.callsOf("session.reportLocalSandbox")); n != 0 {
		t.Errorf("remote runs reported %d local sandbox states", n)
	}
}

// TestShellThroughSend runs a shell tool from Send: the handler finds its
// session and the model gets the JSON result.
func TestShellThroughSend(t *testing.T) {
	f := newToolFake(t)
	f.on("session.sendMessage", func(n *ndjson, c rpcCall) {
		if len(f.callsOf("session.sendMessage")) == 1 {
			n.result(resultJSON(`[{"type":"tool_use","id":"tu_1","name":"run_shell_command","input":{"command":"printf hi"},"dispatch":"client"}]`))
			return
		}
		n.result(resultJSON(`[{"type":"text","text":"done"}]`))
	})
	h := f.harness()
	if err := h.AddShellTool(ShellConfig{}); err != nil {
		t.Fatal(err)
	}
	s := f.connect(t, h)
	if _, err := s.Send(context.Background(), "run it"); err != nil {
		t.Fatal(err)
	}
	want := `[{"type":"tool_result","tool_use_id":"tu_1","content":"{\"stdout\":\"hi\",\"stderr\":\"\",\"exit_code\":0}"}]`
	if got := sentContent(t, f.fake, 1); got != want {
		t.Errorf("tool result\n got %s\nwant %s", got, want)
	}
}

func TestRemoteSandboxMethods(t *testing.T) {
	f := newToolFake(t)
	f.on("session.startRemoteSandbox", func(n *ndjson, c rpcCall) {
		n.result(`{"sandbox_id":"c1","image":"alpine:3","started_at":"2026-07-06T18:26:10.000Z"}`)
	})
	f.on("session.stopRemoteSandbox", func(n *ndjson, c rpcCall) {
		n.result(`{"stopped":true,"image":"alpine:3","sandbox_id":"c1"}`)
	})
	s := f.connect(t, f.harness())
	ctx := context.Background()
	started, err := s.StartRemoteSandbox(ctx, "alpine:3")
	if err != nil {
		t.Fatal(err)
	}
	if want := (&RemoteSandbox{SandboxID: "c1", Image: "alpine:3", StartedAt: time.Date(2026, 7, 6, 18, 26, 10, 0, time.UTC)}); !cmp.Equal(want, started) {
		t.Errorf("started %+v", started)
	}
	stopped, err := s.StopRemoteSandbox(ctx)
	if err != nil || stopped.SandboxID != "c1" || stopped.Image != "alpine:3" {
		t.Errorf("stopped %+v, %v", stopped, err)
	}
	if _, err := s.ExecRemoteSandbox(ctx, "ls"); err == nil {
		t.Error("exec without a handler succeeded")
	}
	if err := s.ReportLocalSandbox(ctx, SandboxReport{State: "error", Image: "img", ContainerID: "c9", Detail: "boom"}); err != nil {
		t.Fatal(err)
	}
	want := []map[string]any{
		{"image": "alpine:3"},
		{},
		{"command": "ls"},
		{"state": "error", "image": "img", "unsandboxed": false, "container_id": "c9", "detail": "boom"},
	}
	var got []map[string]any
	for _, m := range []string{"session.startRemoteSandbox", "session.stopRemoteSandbox", "session.execRemoteSandbox", "session.reportLocalSandbox"} {
		got = append(got, f.params(t, m)...)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("params (-want +got):\n%s", d)
	}
}
