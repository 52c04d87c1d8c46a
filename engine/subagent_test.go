//go:build unix

package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/engine"
	"github.com/baton-engine/baton/hub"
	"github.com/baton-engine/baton/provider/scripted"
	"github.com/baton-engine/baton/store"
)

// hostSandbox is a SandboxDriver whose sandboxes are the host: Exec runs
// `sh -c command` as a subprocess in its own process group, feeds it
// opt.Stdin, cuts each stream at opt.Limit on a UTF-8 boundary, and kills
// the whole group when ctx ends. It reports every exec's start and end.
// As a real driver's, Stop kills the sandbox's commands, whose execs fail
// with errStopped, and returns once they have. With fail set, Exec fails
// with it at once, as when a command cannot be started.
type hostSandbox struct {
	started chan string // command, when its process runs
	ended   chan error  // the exec's error (nil for a result)

	mu     sync.Mutex
	limits []int
	stdins [][]byte
	stops  []string
	n      int
	fail   error
	execs  map[string][]*hostExec // running, by sandbox id
}

// hostExec is one running exec: abort kills it, done is closed when its
// Exec returns.
type hostExec struct {
	abort context.CancelFunc
	done  chan struct{}
}

var errStopped = errors.New("sandbox runtime error: the sandbox was stopped")

func newHostSandbox() *hostSandbox {
	return &hostSandbox{started: make(chan string, 64), ended: make(chan error, 64), execs: map[string][]*hostExec{}}
}

func (h *hostSandbox) EnsureImage(context.Context, string) error { return nil }

func (h *hostSandbox) Start(_ context.Context, image string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n++
	return fmt.Sprintf("host-%s-%d", image, h.n), nil
}

func (h *hostSandbox) Stop(_ context.Context, id string) error {
	h.mu.Lock()
	h.stops = append(h.stops, id)
	running := h.execs[id]
	delete(h.execs, id)
	h.mu.Unlock()
	for _, x := range running {
		x.abort()
		<-x.done
	}
	return nil
}

func (h *hostSandbox) Exec(ctx context.Context, id, command string, opt baton.ExecOptions) (baton.ExecResult, error) {
	h.mu.Lock()
	h.limits = append(h.limits, opt.Limit)
	h.stdins = append(h.stdins, opt.Stdin)
	fail := h.fail
	x := &hostExec{done: make(chan struct{})}
	var sbCtx context.Context
	sbCtx, x.abort = context.WithCancel(ctx)
	defer x.abort()
	defer close(x.done)
	h.execs[id] = append(h.execs[id], x)
	h.mu.Unlock()
	if fail != nil {
		h.ended <- fail
		return baton.ExecResult{}, fail
	}
	cmd := exec.CommandContext(sbCtx, "sh", "-c", command)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	if opt.Stdin != nil {
		cmd.Stdin = bytes.NewReader(opt.Stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		h.ended <- err
		return baton.ExecResult{}, err
	}
	h.started <- command
	err := cmd.Wait()
	switch {
	case ctx.Err() != nil:
		h.ended <- ctx.Err()
		return baton.ExecResult{}, ctx.Err()
	case sbCtx.Err() != nil:
		h.ended <- errStopped
		return baton.ExecResult{}, errStopped
	}
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode() // -1 when killed by a signal
	} else if err != nil {
		h.ended <- err
		return baton.ExecResult{}, err
	}
	out, cut1 := capUTF8(stdout.Bytes(), opt.Limit)
	errOut, cut2 := capUTF8(stderr.Bytes(), opt.Limit)
	h.ended <- nil
	return baton.ExecResult{Stdout: out, Stderr: errOut, ExitCode: code, Truncated: cut1 || cut2}, nil
}

// capUTF8 keeps at most limit bytes of b, backing off to a whole rune.
func capUTF8(b []byte, limit int) (string, bool) {
	if limit <= 0 || len(b) <= limit {
		return string(b), false
	}
	b = b[:limit]
	for len(b) > 0 && !utf8.Valid(b) {
		b = b[:len(b)-1]
	}
	return string(b), true
}

// agentScript is the fake CLI the harnesses run: its first argument picks
// a behaviour.
const agentScript = `mode=$1; shift
case $mode in
echo) printf 'model=%s\n' "$1"; printf 'prompt=%s\n' "$(cat)"; echo note >&2 ;;
args) for a in "$@"; do printf '[%s]\n' "$a"; done ;;
fail) echo partial; echo boom >&2; exit 3 ;;
late) sleep 0.3; echo late ;;
hang) sleep 30 ;;
big) cat "$1" ;;
esac
`

// rig is an engine on a real SQLite store with the scripted model and a
// host sandbox, and one open session driven by its creator.
type rig struct {
	t   *testing.T
	ctx context.Context
	db  *store.DB
	e   *engine.Engine
	sb  *hostSandbox
	dir string
	sid string
	key *baton.Key // the session key
	obs baton.Subscription
}

func secs(n uint64) *uint64 { return &n }

func newRig(t *testing.T, opts engine.Options) *rig {
	t.Helper()
	t.Cleanup(func() { goleak.VerifyNone(t) }) // runs last
	ctx := context.Background()
	feed := hub.New(0)
	db, err := store.Open(ctx, store.Options{URL: filepath.Join(t.TempDir(), "b.db"), OnCommit: func(evs []*baton.Event) {
		ns := make([]baton.Notice, len(evs))
		for i, ev := range evs {
			ns[i] = baton.Notice{Event: ev}
		}
		feed.Publish(ns...)
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	dir := t.TempDir()
	script := filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(script, []byte(agentScript), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &baton.Profile{Name: "p", PrimaryProvider: "script", AvailableSandboxes: []string{"img", "other"}}
	if err := db.CreateProfile(ctx, p); err != nil {
		t.Fatal(err)
	}
	ck, _ := baton.MintKey(baton.RoleClient, "c", p.ID, "")
	if err := db.CreateKey(ctx, ck); err != nil {
		t.Fatal(err)
	}
	sb := newHostSandbox()
	opts.Store, opts.Hub, opts.Sandboxes = db, feed, sb
	opts.Registry = &baton.Registry{Providers: []baton.ProviderEntry{{Name: "script", Provider: baton.ProviderScripted, Model: "s", MaxTokens: 100}}}
	opts.Providers = map[string]baton.Provider{baton.ProviderScripted: scripted.New()}
	e := engine.New(opts)
	t.Cleanup(func() { e.Close() })

	run := "sh " + script + " "
	harness := func(name, tmpl, via string, timeout *uint64) baton.SubagentDef {
		return baton.SubagentDef{Harness: name, CommandTemplate: run + tmpl, PromptVia: via, TimeoutSecs: timeout}
	}
	decls := []baton.SubagentToolDef{{
		Name: "launch_subagent", Image: "img",
		Subagents: []baton.SubagentDef{
			harness("echo", "echo {model}", "stdin", secs(60)),
			harness("args", "args {model} {prompt}", "arg", secs(60)),
			harness("fail", "fail", "stdin", secs(60)),
			harness("late", "late", "stdin", secs(60)),
			harness("hang", "hang", "stdin", secs(60)),
			harness("stuck", "hang", "stdin", nil), // the engine's default timeout
			harness("big", "big "+filepath.Join(dir, "big.txt"), "stdin", secs(60)),
		},
	}, {
		Name: "launch_other", Image: "other",
		Subagents: []baton.SubagentDef{harness("echo", "echo {model}", "stdin", nil)},
	}}
	res, err := e.Open(ctx, ck, &baton.OpenRequest{SubagentTools: decls})
	if err != nil {
		t.Fatal(err)
	}
	key := &baton.Key{Name: res.SessionID, ClientID: ck.ID, Role: baton.RoleSession, ProfileID: p.ID}
	if err := e.RegisterDriver(ctx, key); err != nil {
		t.Fatal(err)
	}
	obs := feed.Subscribe(res.SessionID, baton.SubObserver)
	t.Cleanup(obs.Close)
	return &rig{t: t, ctx: ctx, db: db, e: e, sb: sb, dir: dir, sid: res.SessionID, key: key, obs: obs}
}

func (r *rig) startSandbox(image string) string {
	r.t.Helper()
	out, err := r.e.StartRemoteSandbox(r.ctx, r.key, json.RawMessage(`{"image":"`+image+`"}`))
	if err != nil {
		r.t.Fatal(err)
	}
	return out.(map[string]any)["sandbox_id"].(string)
}

// send runs one turn to its end.
func (r *rig) send(text string) *baton.TurnResult {
	r.t.Helper()
	msg, _ := json.Marshal(map[string]any{"role": "user", "content": text})
	turn, err := r.e.SendMessage(r.ctx, r.key, msg, baton.SendOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	select {
	case <-turn.Done:
	case <-time.After(30 * time.Second):
		r.t.Fatal("turn did not end")
	}
	if sub := turn.Sub(); sub != nil {
		sub.Close()
	}
	res := turn.Result()
	if res.Err != nil {
		r.t.Fatal(res.Err)
	}
	return res
}

// call makes the model call tool with input and returns the turn and the
// tool's result text and error flag.
func (r *rig) call(tool, input string) (res *baton.TurnResult, text string, isErr bool) {
	r.t.Helper()
	res = r.send("call " + tool + " " + input)
	for _, ev := range res.Events {
		if ev.Type != baton.EventToolResult {
			continue
		}
		var p struct {
			Dispatch string `json:"dispatch"`
			IsError  bool   `json:"is_error"`
			Content  []struct {
				Type, Text string
			} `json:"content"`
		}
		if err := json.Unmarshal(ev.Payload, &p); err != nil || p.Dispatch != "subagent" || len(p.Content) != 1 {
			r.t.Fatalf("tool.result %s", ev.Payload)
		}
		return res, p.Content[0].Text, p.IsError
	}
	r.t.Fatalf("no tool.result in %v", types(res.Events))
	return nil, "", false
}

// launch launches a harness and returns the new subagent's id.
func (r *rig) launch(harness, model, prompt string) string {
	r.t.Helper()
	in, _ := json.Marshal(map[string]string{"harness": harness, "model": model, "prompt": prompt})
	_, text, isErr := r.call("launch_subagent", string(in))
	var out map[string]string
	if err := json.Unmarshal([]byte(text), &out); err != nil || isErr {
		r.t.Fatalf("launch %s: %s (error %v)", harness, text, isErr)
	}
	want := map[string]string{"subagent_id": out["subagent_id"], "harness": harness, "model": model, "status": "started"}
	if diff := cmp.Diff(want, out); diff != "" || !strings.HasPrefix(out["subagent_id"], "sba_") || len(out["subagent_id"]) != 36 {
		r.t.Fatalf("launch result %s (-want +got):\n%s", text, diff)
	}
	return out["subagent_id"]
}

// wait reads the live feed until an event of type typ for subagent id.
func (r *rig) wait(typ, id string) *baton.Event {
	r.t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case n, ok := <-r.obs.C():
			if !ok {
				r.t.Fatalf("feed ended waiting for %s: %v", typ, r.obs.Err())
			}
			if n.Event != nil && n.Event.Type == typ && strings.Contains(string(n.Event.Payload), id) {
				return n.Event
			}
		case <-timeout:
			r.t.Fatalf("no %s for %s", typ, id)
		}
	}
}

// agentEvents returns the session's subagent lifecycle events as
// "type payload" lines, in log order.
func (r *rig) agentEvents() []string {
	r.t.Helper()
	evs, err := r.db.EventsAfter(r.ctx, r.sid, 0, 1000)
	if err != nil {
		r.t.Fatal(err)
	}
	var out []string
	for _, ev := range evs {
		if strings.HasPrefix(ev.Type, "session.subagent.") {
			out = append(out, ev.Type+" "+string(ev.Payload))
		}
	}
	return out
}

func types(evs []*baton.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}

// advertised returns the tool names of each provider.request in evs.
func advertised(t *testing.T, evs []*baton.Event) [][]string {
	t.Helper()
	var out [][]string
	for _, ev := range evs {
		if ev.Type != baton.EventProviderReq {
			continue
		}
		var p struct {
			Tools []struct{ Name string } `json:"tools"`
		}
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			t.Fatal(err)
		}
		names := []string{}
		for _, tl := range p.Tools {
			names = append(names, tl.Name)
		}
		out = append(out, names)
	}
	return out
}

// lifecycle is a start or running event of a subagent as the log holds it.
func lifecycle(typ, id, harness, model string) string {
	return fmt.Sprintf(`session.subagent.%s {"detail":null,"dispatch":"remote","harness":%q,"model":%q,"subagent_id":%q}`, typ, harness, model, id)
}

// TestSubagentCompleted launches a harness with the prompt on stdin: the
// turn goes on at once with the started acknowledgement, the command's
// end is logged later, and the status tool reports it exactly once, then
// disappears.
func TestSubagentCompleted(t *testing.T) {
	r := newRig(t, engine.Options{})
	r.startSandbox("img")
	res, text, isErr := r.call("launch_subagent", `{"harness":"echo","model":"m'1","prompt":"say hi"}`)
	if isErr {
		t.Fatalf("launch failed: %s", text)
	}
	var started map[string]string
	_ = json.Unmarshal([]byte(text), &started)
	id := started["subagent_id"]
	if want := fmt.Sprintf(`{"harness":"echo","model":"m'1","status":"started","subagent_id":%q}`, id); text != want {
		t.Errorf("started = %s, want %s", text, want)
	}
	wantTypes := []string{
		baton.EventClientMessage, baton.EventProviderReq, baton.EventProviderResp, baton.EventToolCall,
		"session.subagent.start", "session.subagent.running", baton.EventToolResult,
		baton.EventProviderReq, baton.EventProviderResp, baton.EventServerMessage,
	}
	if diff := cmp.Diff(wantTypes, types(res.Events)); diff != "" {
		t.Errorf("turn events (-want +got):\n%s", diff)
	}
	for _, ev := range res.Events {
		if strings.HasPrefix(ev.Type, "session.subagent.") && ev.ClientKeyID != r.key.ClientID {
			t.Errorf("%s attributed to %q", ev.Type, ev.ClientKeyID)
		}
	}
	if diff := cmp.Diff([][]string{{"launch_subagent", "launch_other"}, {"launch_subagent", "launch_other", "remote_subagent_status"}},
		advertised(t, res.Events)); diff != "" {
		t.Errorf("advertised tools (-want +got):\n%s", diff)
	}
	done := r.wait("session.subagent.completed", id)
	if done.ClientKeyID != r.key.ClientID {
		t.Errorf("completed attributed to %q", done.ClientKeyID)
	}
	want := []string{
		lifecycle("start", id, "echo", "m'1"),
		lifecycle("running", id, "echo", "m'1"),
		fmt.Sprintf(`session.subagent.completed {"detail":null,"dispatch":"remote","exit_code":0,"harness":"echo","model":"m'1","subagent_id":%q}`, id),
	}
	if diff := cmp.Diff(want, r.agentEvents()); diff != "" {
		t.Errorf("subagent events (-want +got):\n%s", diff)
	}
	r.sb.mu.Lock()
	stdin, limit := string(r.sb.stdins[0]), r.sb.limits[0]
	r.sb.mu.Unlock()
	if stdin != "say hi" || limit != 65536 {
		t.Errorf("exec stdin %q limit %d, want the prompt and 65536", stdin, limit)
	}

	res, text, isErr = r.call("remote_subagent_status", `{}`)
	entry := fmt.Sprintf(`{"detail":null,"exit_code":0,"harness":"echo","model":"m'1","reason":null,"status":"completed","stderr":"note\n","stdout":"model=m'1\nprompt=say hi\n","subagent_id":%q,"truncated":false}`, id)
	if isErr || text != `{"subagents":[`+entry+`]}` {
		t.Errorf("status = %s (error %v), want the completed entry", text, isErr)
	}
	if diff := cmp.Diff([][]string{{"launch_subagent", "launch_other", "remote_subagent_status"}, {"launch_subagent", "launch_other"}},
		advertised(t, res.Events)); diff != "" {
		t.Errorf("advertised tools around the report (-want +got):\n%s", diff)
	}
	res = r.send("call remote_subagent_status {}")
	if got := string(res.Message.Content); !strings.Contains(got, "I don't have a tool named remote_subagent_status.") {
		t.Errorf("after the report the status tool is still offered: %s", got)
	}
}

// TestSubagentArgPrompt substitutes the shell-quoted model and prompt into
// the template once: quotes and placeholders in them stay data.
func TestSubagentArgPrompt(t *testing.T) {
	r := newRig(t, engine.Options{})
	r.startSandbox("img")
	pwned := filepath.Join(r.dir, "pwned")
	prompt := "it's '; touch " + pwned + "; '"
	id := r.launch("args", "x'{prompt}", prompt)
	r.wait("session.subagent.completed", id)
	_, text, _ := r.call("remote_subagent_status", fmt.Sprintf(`{"subagent_id":%q}`, id))
	var got struct{ Subagents []struct{ Stdout string } }
	_ = json.Unmarshal([]byte(text), &got)
	if len(got.Subagents) != 1 || got.Subagents[0].Stdout != "[x'{prompt}]\n["+prompt+"]\n" {
		t.Errorf("status = %s", text)
	}
	if _, err := os.Stat(pwned); err == nil {
		t.Error("the prompt ran as shell code")
	}
	r.sb.mu.Lock()
	defer r.sb.mu.Unlock()
	if r.sb.stdins[0] != nil {
		t.Errorf("arg mode fed stdin %q", r.sb.stdins[0])
	}
}

// TestSubagentFailed records a non-zero exit with its outputs.
func TestSubagentFailed(t *testing.T) {
	r := newRig(t, engine.Options{})
	r.startSandbox("img")
	id := r.launch("fail", "m", "p")
	ev := r.wait("session.subagent.failed", id)
	want := fmt.Sprintf(`{"detail":null,"dispatch":"remote","exit_code":3,"harness":"fail","model":"m","reason":"nonzero_exit","subagent_id":%q}`, id)
	if string(ev.Payload) != want {
		t.Errorf("failed = %s, want %s", ev.Payload, want)
	}
	_, text, _ := r.call("remote_subagent_status", `{}`)
	entry := fmt.Sprintf(`{"detail":null,"exit_code":3,"harness":"fail","model":"m","reason":"nonzero_exit","status":"failed","stderr":"boom\n","stdout":"partial\n","subagent_id":%q,"truncated":false}`, id)
	if text != `{"subagents":[`+entry+`]}` {
		t.Errorf("status = %s", text)
	}
}

// TestSubagentTimeout: a harness without timeout_secs gets the engine's
// default and times out (its process group killed); one with timeout_secs
// outlives that default.
func TestSubagentTimeout(t *testing.T) {
	r := newRig(t, engine.Options{SubagentTimeout: 100 * time.Millisecond})
	r.startSandbox("img")
	stuck := r.launch("stuck", "m", "p")
	late := r.launch("late", "m", "p")
	ev := r.wait("session.subagent.failed", stuck)
	want := fmt.Sprintf(`{"detail":null,"dispatch":"remote","exit_code":null,"harness":"stuck","model":"m","reason":"timeout","subagent_id":%q}`, stuck)
	if string(ev.Payload) != want {
		t.Errorf("failed = %s, want %s", ev.Payload, want)
	}
	r.wait("session.subagent.completed", late)
	_, text, _ := r.call("remote_subagent_status", `{}`)
	want = fmt.Sprintf(`{"subagents":[{"detail":null,"exit_code":null,"harness":"stuck","model":"m","reason":"timeout","status":"timed_out","stderr":null,"stdout":null,"subagent_id":%q,"truncated":false},`+
		`{"detail":null,"exit_code":0,"harness":"late","model":"m","reason":null,"status":"completed","stderr":"","stdout":"late\n","subagent_id":%q,"truncated":false}]}`, stuck, late)
	if text != want {
		t.Errorf("status = %s\nwant %s", text, want)
	}
	var ends []error
	for range 2 {
		ends = append(ends, <-r.sb.ended)
	}
	if !errors.Is(ends[0], context.DeadlineExceeded) && !errors.Is(ends[1], context.DeadlineExceeded) {
		t.Errorf("exec ends %v: the stuck command was not stopped by its deadline", ends)
	}
}

// TestSubagentTruncated cuts a large output at 65 536 bytes without
// splitting a character and says so.
func TestSubagentTruncated(t *testing.T) {
	r := newRig(t, engine.Options{})
	big := strings.Repeat("a", 65535) + "é" + strings.Repeat("b", 100)
	if err := os.WriteFile(filepath.Join(r.dir, "big.txt"), []byte(big), 0o600); err != nil {
		t.Fatal(err)
	}
	r.startSandbox("img")
	id := r.launch("big", "m", "p")
	r.wait("session.subagent.completed", id)
	_, text, _ := r.call("remote_subagent_status", `{}`)
	var got struct {
		Subagents []struct {
			Stdout    string
			Truncated bool
		}
	}
	if err := json.Unmarshal([]byte(text), &got); err != nil || len(got.Subagents) != 1 {
		t.Fatalf("status = %.200s", text)
	}
	if s := got.Subagents[0]; s.Stdout != strings.Repeat("a", 65535) || !s.Truncated {
		t.Errorf("stdout of %d bytes, truncated %v; want 65535 bytes, truncated", len(s.Stdout), s.Truncated)
	}
}

// TestSubagentCancel cancels a running subagent: its process is killed,
// one cancellation is logged, a second cancel reports it was not running,
// and after the status tool reported it the id is unknown.
func TestSubagentCancel(t *testing.T) {
	r := newRig(t, engine.Options{})
	r.startSandbox("img")
	id := r.launch("hang", "m", "p")
	<-r.sb.started
	cancel := func(id string) (any, error) {
		return r.e.CancelSubagent(r.ctx, r.key, json.RawMessage(fmt.Sprintf(`{"subagent_id":%q}`, id)))
	}
	out, err := cancel(id)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"cancelled": true, "subagent_id": id, "was_running": true}, out); diff != "" {
		t.Errorf("cancel (-want +got):\n%s", diff)
	}
	if err := <-r.sb.ended; !errors.Is(err, context.Canceled) {
		t.Errorf("exec ended with %v, want it killed", err)
	}
	out, err = cancel(id)
	if err != nil || out.(map[string]any)["was_running"] != false {
		t.Errorf("second cancel = %v, %v", out, err)
	}
	want := []string{
		lifecycle("start", id, "hang", "m"),
		lifecycle("running", id, "hang", "m"),
		fmt.Sprintf(`session.subagent.cancelled {"detail":null,"dispatch":"remote","harness":"hang","model":"m","reason":"explicit","subagent_id":%q}`, id),
	}
	if diff := cmp.Diff(want, r.agentEvents()); diff != "" {
		t.Errorf("subagent events (-want +got):\n%s", diff)
	}
	_, text, _ := r.call("remote_subagent_status", fmt.Sprintf(`{"subagent_id":%q}`, id))
	entry := fmt.Sprintf(`{"detail":null,"exit_code":null,"harness":"hang","model":"m","reason":"explicit","status":"cancelled","stderr":null,"stdout":null,"subagent_id":%q,"truncated":false}`, id)
	if text != `{"subagents":[`+entry+`]}` {
		t.Errorf("status = %s", text)
	}
	_, err = cancel(id)
	var be *baton.Error
	if !errors.As(err, &be) || be.Code != baton.ECodeNoSubagent || be.Message != fmt.Sprintf("subagent_not_found: no tracked subagent %q for this session", id) {
		t.Errorf("cancel after the report = %v", err)
	}
	if _, err := r.e.CancelSubagent(r.ctx, r.key, json.RawMessage(`{"subagent_id":"  "}`)); baton.ErrorCode(err) != baton.ECodeInvalidParams {
		t.Errorf("blank id = %v", err)
	}
}

// TestSubagentLaunchErrors covers the in-band launch refusals in their
// order of precedence; none logs a lifecycle event.
func TestSubagentLaunchErrors(t *testing.T) {
	check := func(r *rig, tool, input, want string) {
		r.t.Helper()
		res, text, isErr := r.call(tool, input)
		if !isErr || text != `{"error":`+want+`}` {
			r.t.Errorf("%s %s = %s (error %v), want {\"error\":%s}", tool, input, text, isErr, want)
		}
		for _, ev := range res.Events {
			if strings.HasPrefix(ev.Type, "session.subagent.") {
				r.t.Errorf("%s %s logged %s", tool, input, ev.Type)
			}
		}
	}
	launch := func(harness string) string {
		return `{"harness":"` + harness + `","model":"m","prompt":"p"}`
	}
	t.Run("input", func(t *testing.T) {
		r := newRig(t, engine.Options{MaxSubagents: -1}) // none allowed, no sandbox
		required := `"launch_subagent requires string \"harness\", \"model\", and \"prompt\""`
		check(r, "launch_subagent", `{"harness":"echo","model":"m"}`, required)
		check(r, "launch_subagent", `{"harness":"echo","model":"m","prompt":"  "}`, required)
		check(r, "launch_subagent", `{"harness":"echo","model":"m","prompt":7}`, required)
		check(r, "launch_subagent", launch("nope"), `"unknown harness \"nope\""`)
		check(r, "launch_subagent", launch("echo"), `"subagent limit reached (max 0 per session)"`)
		if got := r.agentEvents(); len(got) != 0 {
			t.Errorf("events %v", got)
		}
	})
	t.Run("sandbox", func(t *testing.T) {
		r := newRig(t, engine.Options{})
		check(r, "launch_subagent", launch("echo"),
			`"no remote sandbox is running for tool 'launch_subagent'; call session.startRemoteSandbox first"`)
		r.startSandbox("img")
		check(r, "launch_other", launch("echo"),
			`"remote sandbox image mismatch: subagent declared \"other\" but the running sandbox uses \"img\""`)
		id := r.launch("echo", "m", "p")
		check(r, "remote_subagent_status", `{"subagent_id":"sba_nope"}`, `"unknown subagent_id"`)
		r.wait("session.subagent.completed", id)
	})
}

// TestSubagentCap refuses launches past the session's cap, also when the
// model launches several at once, and counts only running subagents.
func TestSubagentCap(t *testing.T) {
	r := newRig(t, engine.Options{MaxSubagents: 1})
	r.startSandbox("img")
	in := `{"harness":"hang","model":"m","prompt":"p"}`
	res := r.send("call launch_subagent " + in + "\ncall launch_subagent " + in)
	var started, refused int
	for _, ev := range res.Events {
		if ev.Type != baton.EventToolResult {
			continue
		}
		switch s := string(ev.Payload); {
		case strings.Contains(s, `\"status\":\"started\"`):
			started++
		case strings.Contains(s, `subagent limit reached (max 1 per session)`):
			refused++
		}
	}
	if started != 1 || refused != 1 {
		t.Fatalf("parallel launches: %d started, %d refused; want 1 and 1", started, refused)
	}
	<-r.sb.started
	_, text, _ := r.call("launch_subagent", `{"harness":"echo","model":"m","prompt":"p"}`)
	if text != `{"error":"subagent limit reached (max 1 per session)"}` {
		t.Errorf("launch at the cap = %s", text)
	}
	var st struct {
		Subagents []struct {
			ID string `json:"subagent_id"`
		}
	}
	_, text, _ = r.call("remote_subagent_status", `{}`)
	_ = json.Unmarshal([]byte(text), &st)
	if len(st.Subagents) != 1 {
		t.Fatalf("status = %s", text)
	}
	if _, err := r.e.CancelSubagent(r.ctx, r.key, json.RawMessage(`{"subagent_id":"`+st.Subagents[0].ID+`"}`)); err != nil {
		t.Fatal(err)
	}
	id := r.launch("echo", "m", "p") // a cancelled subagent frees its slot
	r.wait("session.subagent.completed", id)
}

// TestSubagentSessionClose cancels running subagents when the session
// closes, after session.close and before the sandbox stops, attributed to
// the creator.
func TestSubagentSessionClose(t *testing.T) {
	r := newRig(t, engine.Options{})
	sbID := r.startSandbox("img")
	a := r.launch("hang", "m", "p1")
	b := r.launch("hang", "m", "p2")
	done := r.launch("echo", "m", "p3")
	r.wait("session.subagent.completed", done)
	for range 3 {
		<-r.sb.started
	}
	if err := r.e.CloseSession(r.ctx, r.key); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := <-r.sb.ended; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("exec ended with %v", err)
		}
	}
	evs, err := r.db.EventsAfter(r.ctx, r.sid, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var tail []string
	for i, ev := range evs {
		if ev.Type == baton.EventSessionClose {
			for _, ev := range evs[i:] {
				tail = append(tail, ev.Type+" "+string(ev.Payload))
				if ev.ClientKeyID != r.key.ClientID {
					t.Errorf("%s attributed to %q", ev.Type, ev.ClientKeyID)
				}
			}
		}
	}
	cancelled := func(id string) string {
		return fmt.Sprintf(`session.subagent.cancelled {"detail":null,"dispatch":"remote","harness":"hang","model":"m","reason":"session_close","subagent_id":%q}`, id)
	}
	stop := fmt.Sprintf(`"dispatch":"remote","image":"img","reason":"session_close","sandbox_id":%q`, sbID)
	want := []string{
		`session.close {"reason":"client_close"}`,
		cancelled(a), cancelled(b),
		"session.sandbox.stop {" + stop + "}",
		"session.sandbox.stopped {" + stop + `,"unsandboxed":false}`,
	}
	if diff := cmp.Diff(want, tail); diff != "" {
		t.Errorf("close events (-want +got):\n%s", diff)
	}
}

// TestSubagentSandboxStop ends a subagent whose sandbox was stopped under
// it as a killed command: at once for the status tool and the session's
// cap, and with one failed event. The driver's stop kills the command as
// a real one does, failing its exec.
func TestSubagentSandboxStop(t *testing.T) {
	r := newRig(t, engine.Options{MaxSubagents: 1})
	r.startSandbox("img")
	id := r.launch("hang", "m", "p")
	<-r.sb.started
	if _, err := r.e.StopRemoteSandbox(r.ctx, r.key); err != nil {
		t.Fatal(err)
	}
	_, text, _ := r.call("remote_subagent_status", `{}`)
	entry := fmt.Sprintf(`{"detail":null,"exit_code":-1,"harness":"hang","model":"m","reason":"nonzero_exit","status":"failed","stderr":"","stdout":"","subagent_id":%q,"truncated":false}`, id)
	if text != `{"subagents":[`+entry+`]}` {
		t.Errorf("status after the stop = %s\nwant the failed entry", text)
	}
	r.startSandbox("img")
	next := r.launch("echo", "m", "p") // the stopped subagent freed its slot

	ev := r.wait("session.subagent.failed", id)
	want := fmt.Sprintf(`{"detail":null,"dispatch":"remote","exit_code":-1,"harness":"hang","model":"m","reason":"nonzero_exit","subagent_id":%q}`, id)
	if string(ev.Payload) != want {
		t.Errorf("failed = %s, want %s", ev.Payload, want)
	}
	if ev.ClientKeyID != r.key.ClientID {
		t.Errorf("failed attributed to %q", ev.ClientKeyID)
	}
	if err := <-r.sb.ended; !errors.Is(err, context.Canceled) {
		t.Errorf("exec ended with %v, want it aborted before the driver's stop", err)
	}
	r.wait("session.subagent.completed", next)
	var got []string
	for _, line := range r.agentEvents() {
		if strings.Contains(line, id) {
			got = append(got, line)
		}
	}
	wantEvents := []string{lifecycle("start", id, "hang", "m"), lifecycle("running", id, "hang", "m"), "session.subagent.failed " + want}
	if diff := cmp.Diff(wantEvents, got); diff != "" {
		t.Errorf("events of the stopped subagent (-want +got):\n%s", diff)
	}
}

// TestSubagentSpawnFailed records an exec that could not run the command
// as failed (spawn_failed, with the error as detail) and frees its slot.
func TestSubagentSpawnFailed(t *testing.T) {
	r := newRig(t, engine.Options{MaxSubagents: 1})
	r.startSandbox("img")
	r.sb.mu.Lock()
	r.sb.fail = errors.New("exec: sh: no such file or directory")
	r.sb.mu.Unlock()
	id := r.launch("echo", "m", "p")
	ev := r.wait("session.subagent.failed", id)
	want := fmt.Sprintf(`{"detail":"exec: sh: no such file or directory","dispatch":"remote","exit_code":null,"harness":"echo","model":"m","reason":"spawn_failed","subagent_id":%q}`, id)
	if string(ev.Payload) != want {
		t.Errorf("failed = %s, want %s", ev.Payload, want)
	}
	r.sb.mu.Lock()
	r.sb.fail = nil
	r.sb.mu.Unlock()
	next := r.launch("echo", "m", "p") // the failed subagent freed its slot
	r.wait("session.subagent.completed", next)
	_, text, _ := r.call("remote_subagent_status", `{}`)
	entry := fmt.Sprintf(`{"detail":"exec: sh: no such file or directory","exit_code":null,"harness":"echo","model":"m","reason":"spawn_failed","status":"failed","stderr":null,"stdout":null,"subagent_id":%q,"truncated":false}`, id)
	if !strings.HasPrefix(text, `{"subagents":[`+entry+`,`) {
		t.Errorf("status = %s\nwant first %s", text, entry)
	}
	if n := strings.Count(strings.Join(r.agentEvents(), "\n"), "session.subagent.failed"); n != 1 {
		t.Errorf("%d failed events, want 1", n)
	}
}

// TestSubagentEngineClose stops running subagents without recording an
// end; goleak proves their goroutines are gone.
func TestSubagentEngineClose(t *testing.T) {
	r := newRig(t, engine.Options{})
	r.startSandbox("img")
	id := r.launch("hang", "m", "p")
	<-r.sb.started
	if err := r.e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-r.sb.ended; !errors.Is(err, context.Canceled) {
		t.Errorf("exec ended with %v", err)
	}
	if got := r.agentEvents(); len(got) != 2 {
		t.Errorf("events after shutdown: %v (want start and running of %s)", got, id)
	}
}
