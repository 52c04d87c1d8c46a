package client

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// agentScript writes a fake CLI agent into a temp dir and returns the
// shell word that runs it.
func agentScript(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return "sh " + shellQuote(p)
}

// agentSession connects a harness with launch_subagent configured by cfg.
func agentSession(t *testing.T, f *toolFake, cfg SubagentConfig) *Session {
	t.Helper()
	h := f.harness()
	if err := h.AddSubagentTool(cfg); err != nil {
		t.Fatal(err)
	}
	return f.connect(t, h)
}

type started struct {
	SubagentID string `json:"subagent_id"`
	Harness    string `json:"harness"`
	Model      string `json:"model"`
	Status     string `json:"status"`
}

func launch(t *testing.T, s *Session, harness, model, prompt string) started {
	t.Helper()
	in, _ := json.Marshal(map[string]string{"harness": harness, "model": model, "prompt": prompt})
	text := callText(t, s, LaunchSubagentTool, string(in))
	var st started
	if err := json.Unmarshal([]byte(text), &st); err != nil || st.Status != "started" || !strings.HasPrefix(st.SubagentID, "sba_") || len(st.SubagentID) != 36 {
		t.Fatalf("launch result %s (%v)", text, err)
	}
	if want := `{"subagent_id":"` + st.SubagentID + `","harness":"` + harness + `","model":` + quote(model) + `,"status":"started"}`; text != want {
		t.Errorf("launch result %s, want %s", text, want)
	}
	return st
}

// status calls local_subagent_status and decodes its entries.
func status(t *testing.T, s *Session, input string) []subagentEntry {
	t.Helper()
	text := callText(t, s, LocalSubagentStatusTool, input)
	var out struct {
		Subagents []subagentEntry `json:"subagents"`
	}
	if err := json.Unmarshal([]byte(text), &out); err != nil || out.Subagents == nil {
		t.Fatalf("status result %s (%v)", text, err)
	}
	return out.Subagents
}

func ptr[T any](v T) *T { return &v }

func TestAddSubagentToolConfig(t *testing.T) {
	ok := SubagentDef{Harness: "a", Command: "agent --model {model}"}
	bad := map[string]SubagentConfig{
		"no defs":             {},
		"blank harness":       {Subagents: []SubagentDef{{Command: "x"}}},
		"duplicate harness":   {Subagents: []SubagentDef{ok, ok}},
		"empty command":       {Subagents: []SubagentDef{{Harness: "a"}}},
		"unknown placeholder": {Subagents: []SubagentDef{{Harness: "a", Command: "x {file}"}}},
		"bad template":        {Subagents: []SubagentDef{{Harness: "a", Command: "x {model"}}},
		"arg without prompt":  {Subagents: []SubagentDef{{Harness: "a", Command: "x {model}", PromptVia: PromptArg}}},
		"stdin with prompt":   {Subagents: []SubagentDef{{Harness: "a", Command: "x {prompt}"}}},
		"bad prompt via":      {Subagents: []SubagentDef{{Harness: "a", Command: "x", PromptVia: "file"}}},
		"remote target stdin": {Subagents: []SubagentDef{ok}, Target: TargetRemote},
		"local without image": {Subagents: []SubagentDef{ok}, Target: TargetLocal},
	}
	for name, cfg := range bad {
		if err := NewHarness(Config{}).AddSubagentTool(cfg); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestSubagentRemoteDecl(t *testing.T) {
	f := newToolFake(t)
	agentSession(t, f, SubagentConfig{RemoteImage: "agents:1", Subagents: []SubagentDef{
		{Harness: "claude", Command: "claude -p --model {model}"},
		{Harness: "codex", Command: "codex exec -m {model} {prompt}", PromptVia: PromptArg, Timeout: 1500 * time.Millisecond},
	}})
	var body struct {
		Tools         []ToolDef      `json:"tools"`
		SubagentTools []subagentDecl `json:"subagent_tools"`
	}
	if err := json.Unmarshal(f.opens[0], &body); err != nil {
		t.Fatal(err)
	}
	if len(body.Tools) != 0 || len(body.SubagentTools) != 1 {
		t.Fatalf("open body %s", f.opens[0])
	}
	d := body.SubagentTools[0]
	want := []subagentWire{{"claude", "claude -p --model {model}", PromptStdin, 600}, {"codex", "codex exec -m {model} {prompt}", PromptArg, 2}}
	if d.Name != LaunchSubagentTool || d.Image != "agents:1" || !cmp.Equal(want, d.Subagents) {
		t.Errorf("declaration %+v", d)
	}
	if !strings.HasPrefix(d.Description, "Launch a CLI subagent (claude, codex) to work on a task in the background. This tool is ASYNCHRONOUS") {
		t.Errorf("description %q", d.Description)
	}
	if !strings.Contains(string(d.InputSchema), `"enum":["claude","codex"]`) || !strings.Contains(string(d.InputSchema), `"required":["harness","model","prompt"]`) {
		t.Errorf("schema %s", d.InputSchema)
	}
}

func TestSubagentLifecycle(t *testing.T) {
	f := newToolFake(t)
	s := agentSession(t, f, SubagentConfig{Subagents: []SubagentDef{
		{Harness: "echo", Command: agentScript(t, `echo "model=$1"; cat`) + " {model}"},
	}})
	var body struct{ Tools []ToolDef }
	json.Unmarshal(f.opens[0], &body)
	if len(body.Tools) != 1 || body.Tools[0].Name != LaunchSubagentTool {
		t.Errorf("declared at open: %+v (local_subagent_status must wait for a launch)", body.Tools)
	}

	st := launch(t, s, "echo", "m 1", "the prompt; $(rm -rf /)")
	end := f.next(t)
	want := []SubagentReport{
		{State: "start", SubagentID: st.SubagentID, Harness: "echo", Model: "m 1"},
		{State: "running", SubagentID: st.SubagentID, Harness: "echo", Model: "m 1"},
		{State: "completed", SubagentID: st.SubagentID, Harness: "echo", Model: "m 1", ExitCode: ptr(0)},
	}
	var got []SubagentReport
	for _, c := range f.callsOf("session.reportLocalSubagent") {
		var r SubagentReport
		json.Unmarshal(c.Params, &r)
		got = append(got, r)
	}
	if d := cmp.Diff(want, got); d != "" || end.State != "completed" {
		t.Errorf("reports (-want +got):\n%s", d)
	}
	if raw := string(f.callsOf("session.reportLocalSubagent")[0].Params); strings.Contains(raw, "exit_code") || strings.Contains(raw, "reason") {
		t.Errorf("start report carries extra members: %s", raw)
	}

	entries := status(t, s, `{"subagent_id":"`+st.SubagentID+`"}`)
	wantEntry := subagentEntry{SubagentID: st.SubagentID, Harness: "echo", Model: "m 1", Status: "completed",
		ExitCode: ptr(0), Stdout: ptr("model=m 1\nthe prompt; $(rm -rf /)"), Stderr: ptr("")}
	if d := cmp.Diff([]subagentEntry{wantEntry}, entries); d != "" {
		t.Errorf("status (-want +got):\n%s", d)
	}
	// Reported once: then forgotten, and the status tool is withdrawn.
	if got := callText(t, s, LocalSubagentStatusTool, `{"subagent_id":"`+st.SubagentID+`"}`); got != `{"error":"unknown subagent_id"}` {
		t.Errorf("second read %s", got)
	}
	if got := status(t, s, `{}`); len(got) != 0 {
		t.Errorf("listing after eviction %+v", got)
	}
	var updates [][]string
	for _, p := range f.params(t, "session.updateClientTools") {
		var names []string
		for _, tl := range p["tools"].([]any) {
			names = append(names, tl.(map[string]any)["name"].(string))
		}
		updates = append(updates, names)
	}
	if d := cmp.Diff([][]string{{LaunchSubagentTool, LocalSubagentStatusTool}, {LaunchSubagentTool}}, updates); d != "" {
		t.Errorf("updateClientTools (-want +got):\n%s", d)
	}
}

func TestSubagentArgQuoting(t *testing.T) {
	f := newToolFake(t)
	s := agentSession(t, f, SubagentConfig{Subagents: []SubagentDef{
		{Harness: "p", Command: agentScript(t, `printf '%s|%s' "$1" "$2"`) + " {model} {prompt}", PromptVia: PromptArg},
	}})
	for _, c := range injection {
		st := launch(t, s, "p", c[0], c[0])
		if r := f.next(t); r.State != "completed" {
			t.Fatalf("report %+v", r)
		}
		e := status(t, s, `{"subagent_id":"`+st.SubagentID+`"}`)[0]
		if want := c[0] + "|" + c[0]; *e.Stdout != want {
			t.Errorf("argv %q, want %q", *e.Stdout, want)
		}
	}
}

func TestSubagentEnds(t *testing.T) {
	f := newToolFake(t)
	s := agentSession(t, f, SubagentConfig{Subagents: []SubagentDef{
		{Harness: "fail", Command: agentScript(t, "echo partial; echo oops >&2; exit 3") + " {model}"},
		{Harness: "slow", Command: "sleep 30", Timeout: 100 * time.Millisecond},
		{Harness: "big", Command: agentScript(t, `yes é | head -n 70000 | tr -d '\n'`)},
	}})

	tests := []struct {
		harness string
		report  SubagentReport
		entry   subagentEntry
	}{
		{"fail", SubagentReport{State: "failed", Reason: "nonzero_exit", ExitCode: ptr(3)},
			subagentEntry{Status: "failed", ExitCode: ptr(3), Stdout: ptr("partial\n"), Stderr: ptr("oops\n"), Reason: ptr("nonzero_exit")}},
		{"slow", SubagentReport{State: "failed", Reason: "timeout"},
			subagentEntry{Status: "timed_out", Reason: ptr("timeout")}},
	}
	for _, tt := range tests {
		st := launch(t, s, tt.harness, "m", "p")
		r := f.next(t)
		tt.report.SubagentID, tt.report.Harness, tt.report.Model = st.SubagentID, tt.harness, "m"
		if d := cmp.Diff(tt.report, r); d != "" {
			t.Errorf("%s report (-want +got):\n%s", tt.harness, d)
		}
		tt.entry.SubagentID, tt.entry.Harness, tt.entry.Model = st.SubagentID, tt.harness, "m"
		if d := cmp.Diff([]subagentEntry{tt.entry}, status(t, s, `{"subagent_id":"`+st.SubagentID+`"}`)); d != "" {
			t.Errorf("%s entry (-want +got):\n%s", tt.harness, d)
		}
	}

	// 70 000 two-byte runes: each stream keeps OutputCap bytes, whole runes.
	st := launch(t, s, "big", "m", "p")
	if r := f.next(t); r.State != "completed" {
		t.Fatalf("big report %+v", r)
	}
	e := status(t, s, `{"subagent_id":"`+st.SubagentID+`"}`)[0]
	if !e.Truncated || len(*e.Stdout) != OutputCap || !utf8.ValidString(*e.Stdout) || *e.Stdout != strings.Repeat("é", OutputCap/2) {
		t.Errorf("big output: %d bytes, truncated %v, valid %v", len(*e.Stdout), e.Truncated, utf8.ValidString(*e.Stdout))
	}

	// A launch that cannot start its process fails with spawn_failed.
	f2 := newToolFake(t)
	s2 := agentSession(t, f2, SubagentConfig{Target: TargetLocal, Image: "agents:1", Engine: filepath.Join(t.TempDir(), "nope"),
		Subagents: []SubagentDef{{Harness: "a", Command: "agent"}}})
	launch(t, s2, "a", "m", "p")
	r := f2.next(t)
	if r.State != "failed" || r.Reason != "spawn_failed" || r.ExitCode != nil || !strings.HasPrefix(r.Detail, `failed to run "`) {
		t.Errorf("spawn failure report %+v", r)
	}
}

func TestSubagentLocalContainer(t *testing.T) {
	docker, log := fakeDocker(t)
	f := newToolFake(t)
	s := agentSession(t, f, SubagentConfig{Target: TargetLocal, Image: "agents:1", Engine: docker,
		Subagents: []SubagentDef{{Harness: "cat", Command: "cat; echo {model}"}}})
	st := launch(t, s, "cat", "m", "hello")
	if r := f.next(t); r.State != "completed" {
		t.Fatalf("report %+v", r)
	}
	if e := status(t, s, `{}`); len(e) != 1 || e[0].SubagentID != st.SubagentID || *e[0].Stdout != "hellom\n" {
		t.Errorf("entries %+v", e)
	}
	lines := readLines(t, log)
	if want := "exec -i cid123 sh -c cat; echo 'm'"; len(lines) != 4 || lines[3] != want {
		t.Errorf("docker calls %q", lines)
	}
}

func TestSubagentRemoteTarget(t *testing.T) {
	f := newToolFake(t)
	f.on("session.execRemoteSandbox", func(n *ndjson, c rpcCall) {
		var p struct{ Command string }
		json.Unmarshal(c.Params, &p)
		n.result(`{"stdout":` + quote("ran: "+p.Command) + `,"stderr":"","exit_code":0}`)
	})
	s := agentSession(t, f, SubagentConfig{Target: TargetRemote,
		Subagents: []SubagentDef{{Harness: "r", Command: "agent -m {model} {prompt}", PromptVia: PromptArg}}})
	st := launch(t, s, "r", "m", "it's")
	if r := f.next(t); r.State != "completed" {
		t.Fatalf("report %+v", r)
	}
	e := status(t, s, `{"subagent_id":"`+st.SubagentID+`"}`)[0]
	if want := `ran: agent -m 'm' 'it'\''s'`; *e.Stdout != want {
		t.Errorf("stdout %q, want %q", *e.Stdout, want)
	}
}

func TestSubagentCancelAndLimit(t *testing.T) {
	f := newToolFake(t)
	h := f.harness()
	if err := h.AddSubagentTool(SubagentConfig{Subagents: []SubagentDef{{Harness: "sleep", Command: "sleep 300"}}}); err != nil {
		t.Fatal(err)
	}
	s := f.fake.connect(h)
	ctx := context.Background()

	first := launch(t, s, "sleep", "m", "p")
	if !s.CancelLocalSubagent(ctx, first.SubagentID) {
		t.Fatal("cancel of a running subagent returned false")
	}
	want := SubagentReport{State: "cancelled", SubagentID: first.SubagentID, Harness: "sleep", Model: "m", Reason: "explicit"}
	if r := f.next(t); !cmp.Equal(want, r) {
		t.Errorf("cancel report %+v", r)
	}
	if s.CancelLocalSubagent(ctx, first.SubagentID) || s.CancelLocalSubagent(ctx, "sba_unknown") {
		t.Error("cancel of an ended or unknown subagent returned true")
	}

	// The cancelled entry still counts until read, but not as running.
	var ids []string
	for range MaxLocalSubagents {
		ids = append(ids, launch(t, s, "sleep", "m", "p").SubagentID)
	}
	in := `{"harness":"sleep","model":"m","prompt":"p"}`
	if got := callText(t, s, LaunchSubagentTool, in); got != `{"error":"subagent limit reached (max 8 per session)"}` {
		t.Errorf("ninth launch %s", got)
	}
	entries := status(t, s, `{}`)
	if len(entries) != 9 || entries[0].Status != "cancelled" || *entries[0].Reason != "explicit" || entries[1].SubagentID != ids[0] {
		t.Errorf("entries %+v", entries)
	}
	for _, e := range entries[1:] {
		if e.Status != "running" || e.Stdout != nil || e.ExitCode != nil {
			t.Errorf("running entry %+v", e)
		}
	}

	// Close cancels the eight in launch order and withdraws the status
	// tool; the watchers are gone when it returns (goleak checks).
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		want := SubagentReport{State: "cancelled", SubagentID: id, Harness: "sleep", Model: "m", Reason: "session_close"}
		if r := f.next(t); !cmp.Equal(want, r) {
			t.Errorf("close report %+v, want %+v", r, want)
		}
	}
	updates := f.params(t, "session.updateClientTools")
	if n := len(updates[len(updates)-1]["tools"].([]any)); n != 1 {
		t.Errorf("last tool update has %d tools, want launch_subagent only", n)
	}
}

func TestSubagentInputErrors(t *testing.T) {
	f := newToolFake(t)
	s := agentSession(t, f, SubagentConfig{Subagents: []SubagentDef{{Harness: "a", Command: "true"}}})
	cases := map[string]string{
		`{}`: `launch_subagent requires string "harness", "model", and "prompt"`,
		`{"harness":"a","model":" ","prompt":"p"}`: `launch_subagent requires string "harness", "model", and "prompt"`,
		`{"harness":"a","model":"m","prompt":7}`:   `launch_subagent requires string "harness", "model", and "prompt"`,
		`{"harness":"b","model":"m","prompt":"p"}`: `unknown harness "b"`,
	}
	for in, want := range cases {
		if got := callText(t, s, LaunchSubagentTool, in); got != errorText(want) {
			t.Errorf("%s: %s, want %s", in, got, errorText(want))
		}
	}
	if got := callText(t, s, LocalSubagentStatusTool, `{"subagent_id":"sba_x"}`); got != `{"error":"unknown subagent_id"}` {
		t.Errorf("unknown id: %s", got)
	}
	if got := callText(t, s, LocalSubagentStatusTool, `{}`); got != `{"subagents":[]}` {
		t.Errorf("empty listing: %s", got)
	}
	if n := len(f.callsOf("session.reportLocalSubagent")) + len(f.callsOf("session.updateClientTools")); n != 0 {
		t.Errorf("%d calls for refused launches", n)
	}
}

// TestSubagentThroughSend launches from Send and reads the result with
// the status tool, which the server dispatches to the client once
// declared.
func TestSubagentThroughSend(t *testing.T) {
	f := newToolFake(t)
	f.on("session.sendMessage", func(n *ndjson, c rpcCall) {
		switch len(f.callsOf("session.sendMessage")) {
		case 1:
			n.result(resultJSON(`[{"type":"tool_use","id":"tu_1","name":"launch_subagent","input":{"harness":"a","model":"m","prompt":"hi"},"dispatch":"client"}]`))
		case 3:
			n.result(resultJSON(`[{"type":"tool_use","id":"tu_2","name":"local_subagent_status","input":{},"dispatch":"client"}]`))
		default:
			n.result(resultJSON(`[{"type":"text","text":"ok"}]`))
		}
	})
	s := agentSession(t, f, SubagentConfig{Subagents: []SubagentDef{{Harness: "a", Command: "cat"}}})
	ctx := context.Background()
	if _, err := s.Send(ctx, "launch"); err != nil {
		t.Fatal(err)
	}
	if r := f.next(t); r.State != "completed" {
		t.Fatalf("report %+v", r)
	}
	if _, err := s.Send(ctx, "status"); err != nil {
		t.Fatal(err)
	}
	var blocks []Block
	json.Unmarshal([]byte(sentContent(t, f.fake, 3)), &blocks)
	if len(blocks) != 1 || blocks[0].IsError || !strings.Contains(string(blocks[0].Content), `\"stdout\":\"hi\"`) {
		t.Errorf("status result %s", sentContent(t, f.fake, 3))
	}
}
